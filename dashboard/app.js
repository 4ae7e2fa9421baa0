/* The Job Runner dashboard: vanilla JS, no build step, no dependencies.
 *
 * Every call goes to the API that served this page, with the bearer token the user pasted (kept in
 * localStorage). Data is only ever put into the page as text (textContent), never as HTML.
 * Views are chosen by the URL fragment: #/jobs, #/jobs/<id>, #/submit, #/segments, #/api (api.js).
 */
(() => {
  'use strict';

  // --- basics -------------------------------------------------------------------------------------

  const TOKEN_KEY = 'jobrunner.token';
  // The page is served at <base>/ui; the API routes live under <base> (empty on one origin, or a prefix).
  const BASE = location.pathname.replace(/\/ui\/?$/, '');
  const DEFAULT_MAX_PAYLOAD = 65536;
  const POLL_MS = { jobs: 5000, job: 2000, segments: 5000 };

  const { $, $$, el } = window.JobDom;

  let token = localStorage.getItem(TOKEN_KEY) || '';

  class ApiError extends Error {
    constructor(status, code, message, errors) {
      super(message);
      this.status = status;
      this.code = code;
      this.errors = errors || [];
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = `Bearer ${token}`;
    const init = { method, headers };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(BASE + path, init);
    } catch (err) {
      setConnection('down', 'API unreachable');
      throw new ApiError(0, 'unreachable', `cannot reach the API (${err.message})`);
    }
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (response.status === 401) {
      setConnection('down', token ? 'token rejected' : 'no token');
      showBanner(token ? 'The API rejected this token. Paste a valid one above.' : null);
    } else {
      setConnection('up', 'connected');
    }
    if (!response.ok) {
      const message = (data && data.message) || `${response.status} ${response.statusText}`;
      throw new ApiError(response.status, data && data.error, message, data && data.errors);
    }
    return data;
  }

  const enc = encodeURIComponent;

  // --- formatting ---------------------------------------------------------------------------------

  const ms = (iso) => (iso ? Date.parse(iso) : NaN);

  function fmtTime(iso) {
    if (!iso) return '—';
    const t = typeof iso === 'number' ? new Date(iso) : new Date(iso);
    if (Number.isNaN(t.getTime())) return String(iso);
    return t.toISOString().replace('T', ' ').replace(/\.(\d{3})Z$/, (_, f) => (f === '000' ? 'Z' : `.${f}Z`));
  }

  // Each unit is rounded before it is split, so that 29 min 59.6 s reads 30 min 0 s, never 29 min 60 s.
  function fmtDuration(milliseconds) {
    if (milliseconds === null || milliseconds === undefined || Number.isNaN(milliseconds)) return '—';
    const abs = Math.abs(milliseconds);
    const sign = milliseconds < 0 ? '-' : '';
    if (abs < 999.5) return `${sign}${Math.round(abs)} ms`;
    if (abs < 9995) return `${sign}${(abs / 1000).toFixed(2)} s`;
    if (abs < 59950) return `${sign}${(abs / 1000).toFixed(1)} s`;
    const seconds = Math.round(abs / 1000);
    if (seconds < 3600) return `${sign}${Math.floor(seconds / 60)} min ${seconds % 60} s`;
    const minutes = Math.round(abs / 60000);
    if (minutes < 1440) return `${sign}${Math.floor(minutes / 60)} h ${minutes % 60} min`;
    return `${sign}${(abs / 86400000).toFixed(1)} d`;
  }

  function relative(iso, now = Date.now()) {
    const t = ms(iso);
    if (Number.isNaN(t)) return '';
    const delta = t - now;
    const seconds = Math.round(Math.abs(delta) / 1000);
    if (seconds === 0) return 'now';
    const text = seconds < 60 ? `${seconds} s` : fmtDuration(seconds * 1000);
    return delta > 0 ? `in ${text}` : `${text} ago`;
  }

  function timeCell(iso) {
    if (!iso) return el('td', { class: 'muted' }, '—');
    return el('td', { title: iso }, el('span', { class: 'time' }, fmtTime(iso)),
      el('span', { class: 'rel' }, relative(iso)));
  }

  const kindOf = (schedule) => ['at', 'every', 'cron', 'iso8601'].find((k) => schedule && schedule[k]) || '?';

  function scheduleSummary(schedule) {
    switch (kindOf(schedule)) {
      case 'at': return `once at ${fmtTime(schedule.at)}`;
      case 'every': {
        let text = `every ${schedule.every}`;
        if (schedule.start) text += ` from ${fmtTime(schedule.start)}`;
        if (schedule.end) text += ` until ${fmtTime(schedule.end)}`;
        return text;
      }
      case 'cron': {
        const zone = schedule.timezone || 'UTC';
        const dst = schedule.dst ? `, at a clock change: gap ${schedule.dst.gap}, fold ${schedule.dst.fold}` : '';
        return `cron ${schedule.cron} (${zone}${dst})`;
      }
      case 'iso8601': return schedule.iso8601;
      default: return JSON.stringify(schedule);
    }
  }

  const badge = (status) => el('span', { class: `badge s-${String(status || 'none').toLowerCase()}` },
    status || '—');

  // --- chrome: connection, banner, toast -----------------------------------------------------------

  function setConnection(state, text) {
    const conn = $('#conn');
    conn.textContent = text;
    conn.className = `conn ${state}`;
  }

  function showBanner(text) {
    const banner = $('#banner');
    banner.hidden = !text;
    banner.textContent = text || '';
  }

  let toastTimer = 0;
  function toast(text, kind = 'ok') {
    const box = $('#toast');
    box.textContent = text;
    box.className = `toast ${kind}`;
    box.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { box.hidden = true; }, 5000);
  }

  function reportError(err) {
    toast(err instanceof ApiError ? err.message : String(err), 'bad');
  }

  function setupToken() {
    const input = $('#token');
    input.value = token;
    $('#token-form').addEventListener('submit', (event) => {
      event.preventDefault();
      token = input.value.trim().replace(/^Bearer\s+/i, '');
      if (token) localStorage.setItem(TOKEN_KEY, token);
      else localStorage.removeItem(TOKEN_KEY);
      input.value = token;
      showBanner(null);
      checkConnection();
      refresh(true);
    });
    $('#token-forget').addEventListener('click', () => {
      token = '';
      input.value = '';
      localStorage.removeItem(TOKEN_KEY);
      setConnection('down', 'no token');
      showBanner(NO_TOKEN);
    });
  }

  /** Ask the API whether this token works (the answer sets the connection badge). */
  function checkConnection() {
    if (!token) return;
    api('GET', '/jobs?limit=1').catch((err) => {
      if (!(err instanceof ApiError && err.status === 401)) reportError(err);
    });
  }

  const NO_TOKEN = 'Paste a bearer token above to see your jobs. Locally, `make run` prints one '
    + '(it is JOBRUNNER_TOKEN in .local/env).';

  // --- routing and polling -------------------------------------------------------------------------

  let route = { view: 'jobs', id: null };
  let pollTimer = 0;
  let inFlight = false;
  let pending = false; // a refresh asked for while one was running: run it right after

  function parseRoute() {
    const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
    if (parts[0] === 'jobs' && parts[1]) return { view: 'job', id: parts[1] };
    if (['jobs', 'submit', 'calendars', 'segments', 'api'].includes(parts[0])) return { view: parts[0], id: null };
    return { view: 'jobs', id: null };
  }

  function onRoute() {
    route = parseRoute();
    for (const section of $$('.view')) section.hidden = section.id !== `view-${route.view}`;
    for (const link of $$('[data-nav]')) {
      const active = link.dataset.nav === route.view || (route.view === 'job' && link.dataset.nav === 'jobs');
      link.classList.toggle('active', active);
    }
    if (route.view === 'submit') updatePreview();
    if (route.view === 'api') window.JobApiReference.show();
    if (route.view === 'job' && (!currentJob || currentJob.job_id !== route.id)) clearJob();
    refresh(true);
  }

  const loaders = {
    jobs: () => loadJobs(),
    job: () => loadJob(route.id),
    segments: () => loadSegments(),
    calendars: () => loadCalendars(),
    submit: () => loadCalendarNames(),
    api: null, // api.js loads the public /openapi.json itself
  };

  async function refresh(now = false) {
    clearTimeout(pollTimer);
    if (inFlight) {
      pending = true;
      return;
    }
    const load = loaders[route.view];
    if (load && token && (now || !document.hidden)) {
      inFlight = true;
      try {
        await load();
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 401)) reportError(err);
      } finally {
        inFlight = false;
      }
      if (pending) {
        pending = false;
        await refresh(true);
        return;
      }
    }
    if (!token) showBanner(NO_TOKEN);
    const every = POLL_MS[route.view];
    if (every) pollTimer = setTimeout(refresh, every);
  }

  // --- jobs list ----------------------------------------------------------------------------------

  const jobs = { items: [], cursor: null, status: '', tag: '' };

  async function loadJobs(more = false) {
    const status = $('#f-status').value;
    const tag = $('#f-tag').value.trim();
    const reset = !more || status !== jobs.status || tag !== jobs.tag;
    const params = new URLSearchParams();
    // A refresh reloads as many jobs as are shown, so that paging on does not lose its place.
    params.set('limit', String(reset ? Math.min(500, Math.max(50, jobs.items.length)) : 50));
    if (status) params.set('status', status);
    if (tag) params.set('tag', tag);  // filtered by the API, within the tenant's jobs
    if (!reset && jobs.cursor) params.set('cursor', jobs.cursor);
    const data = await api('GET', `/jobs?${params}`);
    jobs.items = reset ? data.items : jobs.items.concat(data.items);
    jobs.cursor = data.next_cursor;
    jobs.status = status;
    jobs.tag = tag;
    renderJobs();
  }

  function nextRunMatches(job, filter) {
    if (!filter) return true;
    const next = ms(job.next_run_at);
    if (filter === 'none') return Number.isNaN(next);
    if (Number.isNaN(next)) return false;
    const ahead = next - Date.now();
    if (filter === '1h') return ahead <= 3600000;
    if (filter === '24h') return ahead <= 86400000;
    return ahead > 86400000;
  }

  function renderJobs() {
    const kind = $('#f-kind').value;
    const next = $('#f-next').value;
    const shown = jobs.items.filter((j) => (!kind || kindOf(j.schedule) === kind) && nextRunMatches(j, next));
    const rows = shown.map((job) => el('tr', { class: 'link', dataset: { jobId: job.job_id },
      onclick: () => { location.hash = `#/jobs/${enc(job.job_id)}`; } },
    el('td', {}, el('a', { href: `#/jobs/${enc(job.job_id)}`, class: 'mono' }, job.job_id)),
    el('td', {}, badge(job.status)),
    el('td', {}, el('span', { class: `kind k-${kindOf(job.schedule)}` }, kindOf(job.schedule)), ' ',
      scheduleSummary(job.schedule)),
    timeCell(job.next_run_at),
    timeCell(job.last_run_at),
    el('td', {}, job.last_status ? badge(job.last_status) : el('span', { class: 'muted' }, '—')),
    el('td', { class: 'mono' }, job.target ? `${Object.keys(job.target)[0]} target` : job.topic)));
    $('#jobs-table tbody').replaceChildren(...rows);
    $('#jobs-empty').hidden = shown.length > 0;
    $('#jobs-more').hidden = !jobs.cursor;
    const filtered = shown.length === jobs.items.length ? '' : ` (${jobs.items.length} loaded)`;
    $('#jobs-count').textContent = `${shown.length} shown${filtered}${jobs.cursor ? '; more on the server' : ''}`;
  }

  function setupJobs() {
    $('#f-status').addEventListener('change', () => { jobs.items = []; refresh(true); });
    $('#f-kind').addEventListener('change', renderJobs);
    $('#f-tag').addEventListener('change', () => { jobs.items = []; refresh(true); });
    $('#f-next').addEventListener('change', renderJobs);
    $('#jobs-refresh').addEventListener('click', () => refresh(true));
    $('#jobs-more').addEventListener('click', () => loadJobs(true).catch(reportError));
  }

  // --- one job ------------------------------------------------------------------------------------

  let currentJob = null;
  // The firing ledger shown: its range (from, to) and pages; a poll reloads it unless later pages were loaded.
  const fires = { id: null, hours: 0, items: [], cursor: null, paged: false, from: '', to: '' };

  async function loadJob(id) {
    let gone = false; // deleted after its last fire: its history and change log are still there
    const [job, executions, changes] = await Promise.all([
      api('GET', `/jobs/${enc(id)}?preview=5`).catch((err) => {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
        gone = true;
        return null;
      }),
      api('GET', `/jobs/${enc(id)}/executions?limit=100`),
      api('GET', `/jobs/${enc(id)}/changes?limit=50`),
      loadFires(id).catch((err) => {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
      }),
    ]);
    if (route.view !== 'job' || route.id !== id) return; // the user moved on meanwhile
    if (gone) {
      renderGone(id, changes.items);
    } else {
      currentJob = job;
      renderJob(job);
      renderFires();
    }
    renderExecutions(executions.items);
    renderChanges(changes.items);
  }

  /** A job deleted after its last fire (delete_after_last): what is left of it is its history. */
  function renderGone(id, changes) {
    currentJob = null;
    $('#job-title').textContent = `Job ${id}`;
    $('#job-status').replaceWith(Object.assign(badge('DELETED'), { id: 'job-status' }));
    const deleted = changes.find((c) => c.action === 'delete');
    $('#job-fields').replaceChildren(...field('State', deleted
      ? `deleted after its last fire, at ${fmtTime(deleted.changed_at)}; its history is kept` : 'deleted'));
    $('#job-next').replaceChildren(el('li', { class: 'muted none' }, 'none planned'));
    for (const button of ['#act-run', '#act-pause', '#act-resume', '#act-catchup', '#act-cancel', '#bf-dry', '#bf-run']) {
      $(button).disabled = true;
    }
    $('#fires-table tbody').replaceChildren();
    $('#fires-verdict').textContent = 'The ledger needs the job; its executions and changes are below.';
  }

  /** The ledger from `hours` ago to an hour ahead; a later page continues it (`more`). */
  async function loadFires(id, more = false) {
    const hours = Number($('#fires-range').value);
    if (!more && fires.id === id && fires.hours === hours && fires.paged) return;
    if (!more) {
      const now = Date.now();
      Object.assign(fires, { id, hours, items: [], cursor: null, paged: false,
        from: new Date(now - hours * 3600000).toISOString(), to: new Date(now + 3600000).toISOString() });
    }
    const params = new URLSearchParams({ from: fires.from, to: fires.to, limit: '200' });
    if (more && fires.cursor) params.set('cursor', fires.cursor);
    const page = await api('GET', `/jobs/${enc(id)}/fires?${params}`);
    fires.items = more ? fires.items.concat(page.items) : page.items;
    fires.cursor = page.next_cursor;
    fires.paged = fires.paged || more;
    fires.summary = more ? mergeCounts(fires.summary, page.summary) : page.summary;
    fires.notes = page.notes;
  }

  function mergeCounts(a, b) {
    const out = { ...a };
    for (const [k, v] of Object.entries(b)) out[k] = (out[k] || 0) + v;
    return out;
  }

  function renderFires() {
    const rows = fires.items.map((f) => el('tr', { dataset: { outcome: f.outcome, at: f.at } },
      timeCell(f.at),
      el('td', {}, el('span', { class: `outcome o-${f.outcome}` }, f.outcome)),
      el('td', { class: 'num', title: `due ${f.due_at}` },
        f.lateness_ms === null || f.lateness_ms === undefined ? '—' : fmtDuration(f.lateness_ms)),
      el('td', { class: 'num' }, String(f.executions.length)),
      el('td', {}, [f.detail, f.dst].filter(Boolean).join('; '))));
    $('#fires-table tbody').replaceChildren(...rows);
    const summary = fires.summary || {};
    const counts = Object.entries(summary).map(([k, v]) => `${v} ${k}`).join(', ') || 'no fires in this range';
    const missing = summary.missing || 0;
    const verdict = $('#fires-verdict');
    verdict.textContent = missing
      ? `${counts}: ${missing} fire${missing > 1 ? 's' : ''} nothing explains`
      : `${counts}: every past fire ran once, or was not run for a stated reason`;
    verdict.className = missing ? 'bad-text' : 'muted';
    if (fires.notes && fires.notes.length) verdict.textContent += ` (${fires.notes.join('; ')})`;
    $('#fires-more').hidden = !fires.cursor;
  }

  function renderChanges(items) {
    $('#changes-table tbody').replaceChildren(...items.map((c) => el('tr', { dataset: { action: c.action } },
      el('td', {}, fmtTime(c.changed_at)), el('td', {}, c.action), el('td', {}, String(c.version)),
      el('td', { class: 'mono' }, c.actor), el('td', { class: 'mono' }, JSON.stringify(c.details)))));
  }

  function clearJob() {
    currentJob = null;
    $('#job-title').textContent = `Job ${route.id}`;
    for (const id of ['#job-fields', '#job-next', '#exec-table tbody', '#exec-chart', '#changes-table tbody',
      '#fires-table tbody']) {
      $(id).replaceChildren();
    }
    Object.assign(fires, { id: null, items: [], cursor: null, paged: false });
    $('#fires-verdict').textContent = '';
    $('#bf-status').textContent = '';
    $('#bf-fires').replaceChildren();
    for (const slot of $$('[data-bf-error-for]')) slot.textContent = '';
    $('#job-payload').textContent = '';
    $('#exec-count').textContent = '';
  }

  function field(name, ...value) {
    return [el('dt', {}, name), el('dd', {}, ...value)];
  }

  /** The job's end conditions in words: its end, its count, the fires left, and whether it is then deleted. */
  function endsText(job) {
    const s = job.schedule || {};
    const parts = [];
    if (s.count) parts.push(`after ${s.count} fire${s.count === 1 ? '' : 's'}`);
    if (s.end) parts.push(`${s.count ? 'the last at' : 'at'} ${fmtTime(s.end)}`);
    if (job.remaining_fires !== null && job.remaining_fires !== undefined) parts.push(`${job.remaining_fires} left`);
    if (!parts.length) parts.push(kindOf(s) === 'at' ? 'after its one fire' : 'never');
    if (job.delete_after_last) parts.push('then the job is deleted (its history is kept)');
    return parts.join('; ');
  }

  /** Where a job's executions are delivered, in one line (an https target's headers by name: values may be secrets). */
  function targetSummary(target) {
    const [kind, f] = Object.entries(target)[0];
    if (kind === 'https') {
      const names = Object.keys(f.headers || {}).sort();
      return `HTTPS ${f.method || 'POST'} ${f.url} (timeout ${f.timeout_s} s${names.length ? `; headers ${names.join(', ')}` : ''})`;
    }
    if (kind === 'lambda') return `Lambda ${f.function_arn}`;
    return `SQS ${f.queue_url}${f.message_group_id ? ` (group ${f.message_group_id})` : ''}`;
  }

  function renderJob(job) {
    $('#job-title').textContent = `Job ${job.job_id}`;
    $('#job-status').replaceWith(Object.assign(badge(job.status), { id: 'job-status' }));
    const backoff = job.backoff || {};
    $('#job-fields').replaceChildren(
      // the user's note on the job, when it has one: shown as written (its line breaks kept)
      ...(job.description ? field('Description', el('span', { class: 'description' }, job.description)) : []),
      ...field('Schedule', scheduleSummary(job.schedule)),
      ...field('State', `${job.state} (version ${job.version})`),
      ...field('Next run', fmtTime(job.next_run_at), ' ', el('span', { class: 'rel' }, relative(job.next_run_at))),
      ...field('Last run', fmtTime(job.last_run_at), ' ', job.last_status ? badge(job.last_status) : ''),
      // a job with a target has no topic: where its executions go is the target
      ...(job.target ? field('Target', el('span', { class: 'mono' }, targetSummary(job.target)))
        : field('Topic', el('span', { class: 'mono' }, job.topic))),
      ...field('Retries', `${job.max_retries}; backoff ${backoff.initial_delay_s} s × ${backoff.multiplier}, `
        + `at most ${backoff.max_delay_s} s`),
      ...field('Timeout', job.timeout_s ? `${job.timeout_s} s` : 'none'),
      ...field('Jitter', job.jitter_s ? `up to ${job.jitter_s} s after each fire` : 'none'),
      ...field('Tags', Object.entries(job.tags || {}).map(([k, v]) => `${k}=${v}`).join(', ') || 'none'),
      ...field('Ends', endsText(job)),
      ...field('Overlap', job.overlap && job.overlap !== 'allow_all' ? job.overlap : 'allow all (runs may overlap)'),
      ...field('Catch-up', Object.entries(job.catch_up || {}).map(([k, v]) => `${k} ${v}`).join(', ')
        || 'every missed fire'),
      ...field('Calendar', job.calendar ? el('a', { href: '#/calendars', class: 'mono' }, job.calendar) : 'none'),
      ...field('Created', fmtTime(job.created_at)),
      ...field('Updated', fmtTime(job.updated_at)),
    );
    const next = job.next_runs || [];
    const excluded = new Map((job.excluded_runs || []).map((e) => [e.at, e.reason]));
    $('#job-next').replaceChildren(...(next.length
      ? next.map((t) => el('li', { title: excluded.get(t) || t, class: excluded.has(t) ? 'excluded' : '' },
        fmtTime(t), ' ', el('span', { class: 'rel' }, excluded.has(t) ? 'excluded by its calendar' : relative(t))))
      : [el('li', { class: 'muted none' }, 'none planned')]));
    $('#job-payload').textContent = JSON.stringify(job.payload, null, 2);
    const cancelled = job.state === 'CANCELLED';
    $('#act-run').disabled = cancelled;
    $('#act-pause').disabled = job.state !== 'ACTIVE';
    $('#act-resume').disabled = job.state !== 'PAUSED';
    $('#act-catchup').disabled = job.state !== 'PAUSED';
    $('#act-cancel').disabled = cancelled;
    $('#bf-dry').disabled = cancelled;
    $('#bf-run').disabled = cancelled;
  }

  function renderExecutions(items) {
    $('#exec-count').textContent = items.length ? `(${items.length})` : '';
    $('#exec-empty').hidden = items.length > 0;
    const rows = items.map((e) => {
      const lateness = ms(e.published_at) - ms(e.due_at);
      const took = ms(e.finished_at) - ms(e.published_at);
      return el('tr', { class: 'exec', dataset: { executionId: e.execution_id, status: e.status } },
        el('td', { class: 'num' }, e.attempt),
        el('td', {}, el('span', { class: `trigger t-${e.trigger.toLowerCase()}` }, e.trigger)),
        el('td', {}, badge(e.status)),
        timeCell(e.scheduled_at),
        timeCell(e.published_at),
        el('td', { class: `num ${lateness > 5000 ? 'late' : ''}`, title: `due ${e.due_at}` }, fmtDuration(lateness)),
        timeCell(e.finished_at),
        el('td', { class: 'num' }, fmtDuration(took)),
        el('td', { class: 'error-text' }, e.error || ''));
    });
    $('#exec-table tbody').replaceChildren(...rows);
    renderChart(items.slice().reverse());
  }

  /** Lateness of each execution, oldest on the left: a bar per execution, coloured by its status. */
  function renderChart(items) {
    const chart = $('#exec-chart');
    if (!items.length) {
      chart.replaceChildren();
      chart.hidden = true;
      return;
    }
    chart.hidden = false;
    const lateness = items.map((e) => Math.max(0, ms(e.published_at) - ms(e.due_at)));
    const worst = Math.max(1, ...lateness.filter((v) => !Number.isNaN(v)));
    const bars = items.map((e, i) => {
      const value = lateness[i];
      const bar = el('span', {
        class: `bar s-${e.status.toLowerCase()}`,
        title: `attempt ${e.attempt} ${e.trigger} ${e.status}; due ${fmtTime(e.due_at)}; `
          + `lateness ${Number.isNaN(value) ? 'not published yet' : fmtDuration(value)}`,
      });
      // sqrt keeps a 20 ms fire visible next to a minute-late one; CSSOM, so the CSP allows it.
      bar.style.height = Number.isNaN(value) ? '4px' : `${Math.max(4, Math.sqrt(value / worst) * 56)}px`;
      return bar;
    });
    chart.replaceChildren(el('div', { class: 'bars' }, ...bars),
      el('div', { class: 'axis' }, el('span', {}, 'lateness, oldest → newest'),
        el('span', {}, `max ${fmtDuration(worst)}`)));
  }

  // --- backfill (on the job page) -----------------------------------------------------------------

  /** An instant as the API takes it: RFC 3339 as typed, or now / -2h / +30s / -1d made absolute. */
  function instantInput(text, fallback) {
    const value = (text || '').trim() || fallback;
    if (value === 'now') return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const match = /^([+-])(\d+)\s*(s|m|h|d)$/.exec(value);
    if (!match) return value;
    const unit = { s: 1000, m: 60000, h: 3600000, d: 86400000 }[match[3]];
    const delta = (match[1] === '-' ? -1 : 1) * Number(match[2]) * unit;
    return new Date(Date.now() + delta).toISOString().replace(/\.\d{3}Z$/, 'Z');
  }

  async function backfill(dryRun) {
    const slots = $$('[data-bf-error-for]');
    for (const slot of slots) slot.textContent = '';
    const body = { from: instantInput($('#bf-from').value, '-2h'), to: instantInput($('#bf-to').value, 'now'),
      dry_run: dryRun };
    $('#bf-status').textContent = dryRun ? 'Listing…' : 'Queuing…';
    $('#bf-fires').replaceChildren();
    try {
      const result = await api('POST', `/jobs/${enc(route.id)}/backfill`, body);
      const n = result.fires.length;
      $('#bf-status').textContent = dryRun
        ? `${n} fire${n === 1 ? '' : 's'} would run (nothing queued yet)`
        : `Queued ${result.queued} execution${result.queued === 1 ? '' : 's'}, one per fire`;
      $('#bf-fires').replaceChildren(...result.fires.map((t) => el('li', { title: t }, fmtTime(t))));
      if (!dryRun) {
        toast(`Backfill queued: ${result.queued} fire${result.queued === 1 ? '' : 's'}`);
        await refresh(true);
      }
    } catch (err) {
      $('#bf-status').textContent = '';
      if (err instanceof ApiError && err.errors.length) {
        for (const e of err.errors) {
          const slot = $(`[data-bf-error-for="${e.field}"]`);
          if (slot) slot.textContent = e.reason;
          else $('#bf-status').textContent = `${e.field}: ${e.reason}`;
        }
      } else {
        reportError(err);
      }
    }
  }

  function setupBackfill() {
    $('#bf-dry').addEventListener('click', () => backfill(true));
    $('#backfill-form').addEventListener('submit', (event) => { event.preventDefault(); backfill(false); });
  }

  function setupFires() {
    $('#fires-range').addEventListener('change', () => { fires.paged = false; refresh(true); });
    $('#fires-more').addEventListener('click', () => loadFires(route.id, true).then(renderFires).catch(reportError));
  }

  function setupActions() {
    const act = async (button, work, done) => {
      button.disabled = true;
      try {
        const result = await work();
        toast(done(result));
      } catch (err) {
        reportError(err);
      } finally {
        await refresh(true);
      }
    };
    $('#act-run').addEventListener('click', (event) => act(event.target,
      () => api('POST', `/jobs/${enc(route.id)}/run`), (r) => `Run queued (execution ${r.execution_id.slice(0, 8)}…)`));
    $('#act-pause').addEventListener('click', (event) => act(event.target,
      () => api('POST', `/jobs/${enc(route.id)}/pause`), () => 'Paused'));
    $('#act-resume').addEventListener('click', (event) => act(event.target,
      () => api('POST', `/jobs/${enc(route.id)}/resume`, $('#act-catchup').checked ? { catch_up: true } : undefined),
      () => 'Resumed'));
    // Cancel asks once more, in place, instead of a modal dialog.
    const cancel = $('#act-cancel');
    let armed = 0;
    cancel.addEventListener('click', () => {
      if (!armed) {
        cancel.textContent = 'Really cancel?';
        cancel.classList.add('armed');
        armed = setTimeout(() => { armed = 0; cancel.textContent = 'Cancel job'; cancel.classList.remove('armed'); }, 5000);
        return;
      }
      clearTimeout(armed);
      armed = 0;
      cancel.textContent = 'Cancel job';
      cancel.classList.remove('armed');
      act(cancel, () => api('DELETE', `/jobs/${enc(route.id)}`), () => 'Cancelled: nothing further is published');
    });
  }

  // --- submit form: live validation and preview ---------------------------------------------------

  const {
    AT_PAST_TOLERANCE_MS, Invalid, parseInstant, fixedInterval, checkCron, checkTimezone, parseRepeating, localFires,
  } = window.JobSchedules;
  const form = () => $('#submit-form');
  const input = (name) => form().elements.namedItem(name);
  const valueOf = (name) => (input(name) ? input(name).value.trim() : '');
  const selectedKind = () => form().elements.namedItem('kind').value;
  const selectedTarget = () => form().elements.namedItem('target_kind').value;

  const touched = new Set();
  let submitted = false;

  /** Read the form: { body, errors: {field: reason} }, the body as POST /jobs takes it. */
  function readForm() {
    const errors = {};
    const body = { schedule: {} };
    const check = (name, fn) => {
      try {
        return fn();
      } catch (err) {
        if (!(err instanceof Invalid)) throw err;
        errors[name] = err.message;
        return undefined;
      }
    };
    const required = (name) => {
      const text = valueOf(name);
      if (!text) throw new Invalid('is required');
      return text;
    };
    const kind = selectedKind();
    if (kind === 'at') {
      const at = check('schedule.at', () => {
        const text = required('schedule.at');
        const t = parseInstant(text);
        if (t < Date.now() - AT_PAST_TOLERANCE_MS) throw new Invalid('is more than 5 minutes in the past');
        return text;
      });
      body.schedule.at = at ?? valueOf('schedule.at');
    } else if (kind === 'every') {
      body.schedule.every = valueOf('schedule.every');
      check('schedule.every', () => fixedInterval(required('schedule.every')));
      const start = valueOf('schedule.start');
      const end = valueOf('schedule.end');
      const startMs = start ? check('schedule.start', () => parseInstant(start)) : undefined;
      const endMs = end ? check('schedule.end', () => parseInstant(end)) : undefined;
      if (startMs !== undefined && endMs !== undefined && endMs < startMs) errors['schedule.end'] = 'is before start';
      if (start) body.schedule.start = start;
    } else if (kind === 'cron') {
      body.schedule.cron = valueOf('schedule.cron');
      check('schedule.cron', () => checkCron(required('schedule.cron')));
      const zone = valueOf('schedule.timezone');
      if (zone) {
        body.schedule.timezone = zone;
        check('schedule.timezone', () => checkTimezone(zone));
      }
    } else {
      body.schedule.iso8601 = valueOf('schedule.iso8601');
      check('schedule.iso8601', () => parseRepeating(required('schedule.iso8601')));
    }
    if (kind !== 'at') { // end conditions of a recurring schedule
      const end = valueOf('schedule.end');
      if (end) {
        body.schedule.end = end;
        if (kind !== 'every') check('schedule.end', () => parseInstant(end));
      }
      const fires = valueOf('schedule.count');
      if (fires && kind !== 'iso8601') {
        const n = Number(fires);
        body.schedule.count = n;
        if (!Number.isInteger(n) || n < 1 || n > 1000) errors['schedule.count'] = 'a whole number from 1 to 1000';
      } else if (fires) {
        errors['schedule.count'] = 'an ISO 8601 repeat states its own count: R<n>/...';
      }
      if (input('delete_after_last').checked) body.delete_after_last = true;
      if (valueOf('overlap') && valueOf('overlap') !== 'allow_all') body.overlap = valueOf('overlap');
    }

    const payloadText = input('payload').value.trim();
    body.payload = check('payload', () => {
      if (!payloadText) return {};
      let parsed;
      try {
        parsed = JSON.parse(payloadText);
      } catch (err) {
        throw new Invalid(`not valid JSON: ${err.message}`);
      }
      const size = new TextEncoder().encode(JSON.stringify(parsed)).length;
      if (size > DEFAULT_MAX_PAYLOAD) throw new Invalid(`is ${size} bytes; the API takes at most 64 KiB by default`);
      return parsed;
    }) ?? {};

    const targetKind = selectedTarget();
    const topic = valueOf('topic');
    if (targetKind !== 'topic') {
      // a job with a target has no topic; the API checks the target's rules (https, ARN, queue URL...)
      body.target = { [targetKind]: readTarget(targetKind, check, required) };
    } else if (topic) {
      body.topic = topic;
      check('topic', () => {
        if (!/^[A-Za-z0-9._-]{1,249}$/.test(topic)) throw new Invalid('a Kafka topic name: letters, digits, . _ - (at most 249)');
      });
    }
    const number = (name, { integer, min, max, above }) => {
      const text = valueOf(name);
      if (!text) return undefined;
      return check(name, () => {
        const n = Number(text);
        if (!Number.isFinite(n)) throw new Invalid('must be a number');
        if (integer && !Number.isInteger(n)) throw new Invalid('must be a whole number');
        if (above !== undefined && n <= above) throw new Invalid(`must be greater than ${above}`);
        if (min !== undefined && n < min) throw new Invalid(`must be at least ${min}`);
        if (max !== undefined && n > max) throw new Invalid(`must be at most ${max}`);
        return n;
      });
    };
    const retries = number('max_retries', { integer: true, min: 0, max: 20 });
    if (retries !== undefined) body.max_retries = retries;
    const timeout = number('timeout_s', { integer: true, min: 1, max: 86400 });
    if (timeout !== undefined) body.timeout_s = timeout;
    const jitter = number('jitter_s', { integer: true, min: 1, max: 3600 });
    if (jitter !== undefined) body.jitter_s = jitter;
    if (kind !== 'at') {
      const catchUp = {};
      const window = number('catch_up.window_s', { integer: true, min: 1, max: 31622400 });
      const most = number('catch_up.most', { integer: true, min: 1, max: 1000 });
      if (window !== undefined) catchUp.window_s = window;
      if (most !== undefined) catchUp.most = most;
      if (Object.keys(catchUp).length) body.catch_up = catchUp;
    }
    const backoff = {};
    const initial = number('backoff.initial_delay_s', { above: 0, max: 86400 });
    const multiplier = number('backoff.multiplier', { min: 1, max: 10 });
    const maxDelay = number('backoff.max_delay_s', { above: 0, max: 86400 });
    if (initial !== undefined) backoff.initial_delay_s = initial;
    if (multiplier !== undefined) backoff.multiplier = multiplier;
    if (maxDelay !== undefined) backoff.max_delay_s = maxDelay;
    if (Object.keys(backoff).length) body.backoff = backoff;
    const calendar = valueOf('calendar');
    if (calendar) {
      body.calendar = calendar;
      check('calendar', () => {
        if (!/^[A-Za-z0-9_.-]{1,64}$/.test(calendar)) throw new Invalid('a calendar name: letters, digits, _ . -');
      });
    }
    const key = valueOf('idempotency_key');
    if (key) {
      body.idempotency_key = key;
      if (key.length > 128) errors.idempotency_key = 'at most 128 characters';
    }
    return { body, errors };
  }

  /** The fields of a target of kind ``kind`` as POST /jobs takes them (its shape; the API holds its rules). */
  function readTarget(kind, check, required) {
    if (kind === 'lambda') {
      return { function_arn: check('target.lambda.function_arn', () => required('target.lambda.function_arn')) ?? '' };
    }
    if (kind === 'sqs') {
      const sqs = { queue_url: check('target.sqs.queue_url', () => required('target.sqs.queue_url')) ?? '' };
      const group = valueOf('target.sqs.message_group_id');
      if (group) sqs.message_group_id = group;
      return sqs;
    }
    const https = { url: check('target.https.url', () => {
      const url = required('target.https.url');
      if (!/^https:\/\//i.test(url)) throw new Invalid('must be an https URL');
      return url;
    }) ?? valueOf('target.https.url') };
    if (valueOf('target.https.method') && valueOf('target.https.method') !== 'POST') https.method = valueOf('target.https.method');
    const headers = check('target.https.headers', () => {
      const lines = input('target.https.headers').value.split('\n').map((line) => line.trim()).filter(Boolean);
      return Object.fromEntries(lines.map((line) => {
        const at = line.indexOf(':');
        if (at < 1) throw new Invalid(`"${line}" is not Name: value`);
        return [line.slice(0, at).trim(), line.slice(at + 1).trim()];
      }));
    });
    if (headers && Object.keys(headers).length) https.headers = headers;
    const timeout = valueOf('target.https.timeout_s');
    if (timeout) {
      https.timeout_s = Number(timeout);
      check('target.https.timeout_s', () => {
        if (!Number.isInteger(https.timeout_s) || https.timeout_s < 1 || https.timeout_s > 30) throw new Invalid('a whole number of seconds from 1 to 30');
      });
    }
    return https;
  }

  function showFieldErrors(errors, everyField) {
    for (const slot of $$('[data-error-for]', form())) {
      const name = slot.dataset.errorFor;
      const reason = errors[name];
      const shown = reason && (everyField || touched.has(name));
      slot.textContent = shown ? reason : '';
      const control = input(name);
      if (control && control.setAttribute) control.setAttribute('aria-invalid', shown ? 'true' : 'false');
    }
  }

  let serverPreview = null; // the API's own preview of the job just submitted

  function renderPreview(times, note) {
    $('#preview-list').replaceChildren(...times.map((t) => el('li', {}, fmtTime(t), ' ',
      el('span', { class: 'rel' }, relative(typeof t === 'number' ? new Date(t).toISOString() : t)))));
    $('#preview-note').textContent = note;
  }

  function updatePreview() {
    if (serverPreview) {
      renderPreview(serverPreview.times, serverPreview.note);
      return;
    }
    const { body, errors } = readForm();
    const scheduleErrors = Object.keys(errors).filter((k) => k.startsWith('schedule'));
    if (scheduleErrors.length) {
      renderPreview([], 'Fix the schedule to see its fire times.');
      return;
    }
    let fires = null;
    try {
      fires = localFires(body);
    } catch (err) {
      if (!(err instanceof Invalid)) throw err;
    }
    if (fires === null) {
      renderPreview([], 'Computed by the API: the fire times show here once the job is submitted.');
    } else if (!fires.length) {
      renderPreview([], 'No fire left after now.');
    } else {
      renderPreview(fires, 'Computed in the browser; the job page shows the API’s own preview.');
    }
  }

  function onFormInput(event) {
    if (event && event.target && event.target.name) touched.add(event.target.name);
    serverPreview = null;
    $('#submit-result').hidden = true;
    const { errors } = readForm();
    showFieldErrors(errors, submitted);
    updatePreview();
  }

  function showKind() {
    const kind = selectedKind();
    for (const group of $$('.kind-fields', form())) group.hidden = group.dataset.kind !== kind;
    $('#ends').hidden = kind === 'at';
  }

  function showTarget() {
    const kind = selectedTarget();
    for (const group of $$('.target-fields', form())) group.hidden = group.dataset.target !== kind;
  }

  async function onSubmit(event) {
    event.preventDefault();
    submitted = true;
    const { body, errors } = readForm();
    showFieldErrors(errors, true);
    $('#submit-error').textContent = '';
    if (Object.keys(errors).length) {
      const first = $$('[aria-invalid="true"]', form())[0];
      if (first) first.focus();
      $('#submit-status').textContent = 'Fix the fields marked in red.';
      return;
    }
    const button = $('#submit-button');
    button.disabled = true;
    $('#submit-status').textContent = 'Submitting…';
    try {
      const job = await api('POST', '/jobs', body);
      $('#submit-status').textContent = job.status === 'PENDING' || job.status === 'SCHEDULED'
        ? `Submitted: ${job.status}` : `Already submitted (idempotency key): ${job.status}`;
      const link = $('#submit-link');
      link.textContent = job.job_id;
      link.href = `#/jobs/${enc(job.job_id)}`;
      $('#submit-result').hidden = false;
      toast(`Job ${job.job_id.slice(0, 8)}… submitted`);
      try {
        const preview = await api('GET', `/jobs/${enc(job.job_id)}?preview=5`);
        serverPreview = { times: preview.next_runs || [], note: 'From the API, for the job just submitted.' };
        updatePreview();
      } catch (err) {
        reportError(err);
      }
      submitted = false;
      touched.clear();
    } catch (err) {
      if (err instanceof ApiError && err.errors.length) {
        const byField = {};
        for (const e of err.errors) byField[e.field] = e.reason;
        const known = new Set($$('[data-error-for]', form()).map((s) => s.dataset.errorFor));
        const unplaced = err.errors.filter((e) => !known.has(e.field));
        showFieldErrors(byField, true);
        if (unplaced.length) $('#submit-error').textContent = unplaced.map((e) => `${e.field}: ${e.reason}`).join('; ');
        $('#submit-status').textContent = 'The API rejected the job: see the fields marked in red.';
      } else {
        $('#submit-error').textContent = err.message;
        $('#submit-status').textContent = '';
      }
    } finally {
      button.disabled = false;
    }
  }

  function setupSubmit() {
    const f = form();
    f.addEventListener('input', onFormInput);
    f.addEventListener('change', (event) => {
      if (event.target.name === 'kind') showKind();
      if (event.target.name === 'target_kind') showTarget();
      onFormInput(event);
    });
    f.addEventListener('submit', onSubmit);
    for (const button of $$('[data-at-in]', f)) {
      button.addEventListener('click', () => {
        const at = new Date(Date.now() + Number(button.dataset.atIn) * 1000);
        at.setUTCMilliseconds(0);
        input('schedule.at').value = at.toISOString().replace('.000Z', 'Z');
        onFormInput({ target: input('schedule.at') });
      });
    }
    showKind();
    showTarget();
    setInterval(() => { if (route.view === 'submit' && !serverPreview) updatePreview(); }, 1000);
  }

  // --- calendars ----------------------------------------------------------------------------------

  /** One exclusion in words, as the form's lines are written. */
  function exclusionLine(e) {
    const range = e.date || `${e.from}..${e.to}`;
    return e.note ? `${range} ${e.note}` : range;
  }

  /** The form's lines as the API takes them: "<date or a..b> <note>" each; { exclude, errors }. */
  function parseExclusions(text) {
    const exclude = [];
    text.split('\n').map((line) => line.trim()).filter(Boolean).forEach((line) => {
      const [range, ...note] = line.split(/\s+/);
      const [low, high] = range.split('..');
      const entry = high === undefined ? { date: low } : { from: low, to: high };
      if (note.length) entry.note = note.join(' ');
      exclude.push(entry);
    });
    return exclude;
  }

  async function loadCalendars() {
    const data = await api('GET', '/calendars?limit=500');
    const rows = data.items.map((c) => el('tr', { dataset: { calendar: c.name } },
      el('td', { class: 'mono' }, c.name),
      el('td', {}, c.timezone),
      el('td', {}, c.exclude.map(exclusionLine).join('; ') || 'nothing'),
      timeCell(c.updated_at),
      el('td', {},
        el('button', { type: 'button', class: 'quiet', onclick: () => editCalendar(c) }, 'Edit'), ' ',
        el('button', { type: 'button', class: 'danger', onclick: () => deleteCalendar(c.name) }, 'Delete'))));
    $('#cal-table tbody').replaceChildren(...rows);
    $('#cal-empty').hidden = data.items.length > 0;
  }

  async function loadCalendarNames() {
    const data = await api('GET', '/calendars?limit=500');
    $('#calendar-names').replaceChildren(...data.items.map((c) => el('option', { value: c.name })));
  }

  function editCalendar(c) {
    $('#cal-name').value = c.name;
    $('#cal-timezone').value = c.timezone;
    $('#cal-exclude').value = c.exclude.map(exclusionLine).join('\n');
    $('#cal-description').value = c.description || '';
    $('#cal-name').focus();
  }

  async function deleteCalendar(name) {
    try {
      await api('DELETE', `/calendars/${enc(name)}`);
      toast(`Calendar ${name} deleted`);
    } catch (err) {
      reportError(err);
    } finally {
      await refresh(true);
    }
  }

  function setupCalendars() {
    $('#cal-refresh').addEventListener('click', () => refresh(true));
    $('#cal-form').addEventListener('submit', async (event) => {
      event.preventDefault();
      for (const slot of $$('[data-cal-error-for]')) slot.textContent = '';
      const name = $('#cal-name').value.trim();
      if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name)) {
        $('[data-cal-error-for="name"]').textContent = 'a calendar name: letters, digits, _ . -';
        return;
      }
      const body = { timezone: $('#cal-timezone').value.trim() || 'UTC',
        exclude: parseExclusions($('#cal-exclude').value) };
      const description = $('#cal-description').value.trim();
      if (description) body.description = description;
      $('#cal-status').textContent = 'Saving…';
      try {
        await api('PUT', `/calendars/${enc(name)}`, body);
        $('#cal-status').textContent = `Saved ${name}`;
        toast(`Calendar ${name} saved`);
        await refresh(true);
      } catch (err) {
        $('#cal-status').textContent = '';
        if (err instanceof ApiError && err.errors.length) {
          for (const e of err.errors) {
            // exclude.<n>.<field> is shown under the textarea, naming the line
            const line = /^exclude\.(\d+)/.exec(e.field);
            const slot = $(`[data-cal-error-for="${line ? 'exclude' : e.field}"]`) || $('#cal-status');
            slot.textContent = line ? `line ${Number(line[1]) + 1}: ${e.reason}` : e.reason;
          }
        } else {
          reportError(err);
        }
      }
    });
  }

  // --- segments -----------------------------------------------------------------------------------

  /** Lag is counted in whole minutes behind the running one. */
  const fmtLag = (lagS) => (lagS === null ? '—' : lagS === 0 ? 'none' : fmtDuration(lagS * 1000));

  async function loadSegments() {
    const data = await api('GET', '/segments');
    renderSegments(data.items);
  }

  function renderSegments(items) {
    const behind = items.filter((s) => !s.healthy);
    $('#seg-summary').textContent = `${items.length} segments, ${behind.length ? `${behind.length} behind` : 'all caught up'}`;
    $('#seg-summary').className = behind.length ? 'bad-text' : 'muted';
    const cells = items.map((s) => {
      const cell = el('div', {
        class: `cell ${s.healthy ? 'healthy' : 'behind'}`,
        dataset: { segment: String(s.segment), healthy: String(s.healthy) },
        title: `segment ${s.segment}: ${s.healthy ? 'caught up' : 'behind'}; lag ${s.lag_s === null ? 'unknown (never scanned)' : fmtLag(s.lag_s)}`,
      }, el('span', { class: 'seg' }, s.segment), el('span', { class: 'lag' }, s.lag_s === null ? 'never scanned' : s.lag_s === 0 ? 'caught up' : `${fmtLag(s.lag_s)} behind`));
      return cell;
    });
    $('#heat').replaceChildren(...cells);
    const rows = items.map((s) => el('tr', { class: s.healthy ? '' : 'behind', dataset: { segment: String(s.segment) } },
      el('td', { class: 'num' }, s.segment),
      el('td', {}, el('span', { class: `badge ${s.healthy ? 's-success' : 's-failed'}` }, s.healthy ? 'healthy' : 'behind')),
      timeCell(s.watermark),
      el('td', { class: 'num' }, fmtLag(s.lag_s)),
      timeCell(s.last_heartbeat),
      el('td', { class: 'mono' }, s.last_owner || '—'),
      el('td', { class: 'num' }, s.published_total.toLocaleString('en'))));
    $('#seg-table tbody').replaceChildren(...rows);
  }

  // --- start --------------------------------------------------------------------------------------

  function start() {
    setupToken();
    setupJobs();
    setupActions();
    setupFires();
    setupBackfill();
    setupCalendars();
    setupSubmit();
    $('#seg-refresh').addEventListener('click', () => refresh(true));
    document.addEventListener('visibilitychange', () => { if (!document.hidden) refresh(true); });
    window.addEventListener('hashchange', onRoute);
    if (!token) {
      setConnection('down', 'no token');
      showBanner(NO_TOKEN);
    } else if (parseRoute().view === 'submit') {
      checkConnection(); // the other views ask the API at once anyway
    }
    onRoute();
  }

  // The formatting, for the browser tests to check at its edges.
  window.JobFormat = Object.freeze({ fmtDuration, relative });

  start();
})();

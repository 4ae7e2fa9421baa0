/* The API reference view (#/api): renders the API's own OpenAPI document, with a "try it" form per operation.
 *
 * Written for this dashboard (no Swagger UI, no dependency). GET /openapi.json is public and generated from
 * the code, so this page is always the deployed API's own description. Requests sent from "try it" carry the
 * bearer token the dashboard keeps in localStorage. As in app.js, data only enters the page as text.
 * app.js calls window.JobApiReference.show() when the view opens.
 */
(() => {
  'use strict';

  const TOKEN_KEY = 'jobrunner.token';
  const BASE = location.pathname.replace(/\/ui\/?$/, '');
  const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
  const MAX_DEPTH = 6; // nested schemas deeper than this are named, not expanded

  const { $, el } = window.JobDom;

  // --- schemas ------------------------------------------------------------------------------------

  let doc = null;

  /** The component a local $ref names ("#/components/schemas/JobIn" -> its schema), or null. */
  function deref(ref) {
    const match = /^#\/components\/schemas\/(.+)$/.exec(ref || '');
    const schemas = (doc && doc.components && doc.components.schemas) || {};
    return match && schemas[match[1]] ? { name: match[1], schema: schemas[match[1]] } : null;
  }

  /** { schema, nullable, name }: a schema with `anyOf: [X, {type: null}]` and $ref unwrapped. */
  function unwrap(schema) {
    let nullable = false;
    let current = schema || {};
    if (Array.isArray(current.anyOf)) {
      const rest = current.anyOf.filter((s) => s.type !== 'null');
      nullable = rest.length < current.anyOf.length;
      if (rest.length === 1) current = { ...current, ...rest[0], anyOf: undefined };
    }
    let name = null;
    if (current.$ref) {
      const target = deref(current.$ref);
      name = target ? target.name : current.$ref;
      // Keep the description written on the field itself over the component's own.
      current = target ? { ...target.schema, description: current.description || target.schema.description } : {};
    }
    return { schema: current, nullable, name };
  }

  function typeText(schema) {
    const { schema: s, nullable, name } = unwrap(schema);
    let text;
    if (Array.isArray(s.anyOf)) text = s.anyOf.map(typeText).join(' | ');
    else if (s.enum) text = `${s.type || 'enum'}${name ? ` (${name})` : ''}`;
    else if (s.type === 'array') text = `array of ${typeText(s.items)}`;
    else if (s.type === 'object' && s.additionalProperties && typeof s.additionalProperties === 'object'
      && !s.properties) text = `object of ${typeText(s.additionalProperties)}`;
    else if (s.type) text = name ? `${s.type} (${name})` : s.type;
    else text = name ? `any JSON (${name})` : 'any JSON';
    return nullable ? `${text}, nullable` : text;
  }

  /** Descriptions come from Python docstrings: ``literal`` reads as literal. */
  const prose = (text) => (text ? String(text).replace(/``([^`]+)``/g, '$1') : '');

  const num = (n) => (Number.isInteger(n) ? String(n) : String(n).replace(/\.0$/, ''));

  function constraintsOf(schema) {
    const { schema: s } = unwrap(schema);
    const out = [];
    if (s.enum) out.push(`one of ${s.enum.join(', ')}`);
    if (s.minimum !== undefined) out.push(`≥ ${num(s.minimum)}`);
    if (s.exclusiveMinimum !== undefined) out.push(`> ${num(s.exclusiveMinimum)}`);
    if (s.maximum !== undefined) out.push(`≤ ${num(s.maximum)}`);
    if (s.exclusiveMaximum !== undefined) out.push(`< ${num(s.exclusiveMaximum)}`);
    if (s.minLength !== undefined) out.push(`length ≥ ${s.minLength}`);
    if (s.maxLength !== undefined) out.push(`length ≤ ${s.maxLength}`);
    if (s.pattern) out.push(`pattern ${s.pattern}`);
    if (s.additionalProperties === false) out.push('no other fields');
    if (s.default !== undefined) out.push(`default ${JSON.stringify(s.default)}`);
    return out.join('; ');
  }

  /** Rows of a fields table for an object schema, nested objects (and $ref) expanded below their field. */
  function fieldRows(schema, prefix = '', depth = 0, seen = []) {
    const { schema: s, name } = unwrap(schema);
    if (depth > MAX_DEPTH || (name && seen.includes(name))) return [];
    const within = name ? [...seen, name] : seen;
    const required = new Set(s.required || []);
    const rows = [];
    for (const [field, sub] of Object.entries(s.properties || {})) {
      const path = prefix ? `${prefix}.${field}` : field;
      const inner = unwrap(sub);
      const nameCell = el('td', { class: 'mono field-name' }, field);
      nameCell.style.paddingLeft = `${10 + depth * 18}px`; // CSSOM, which the CSP allows
      rows.push(el('tr', { dataset: { field: path } },
        nameCell,
        el('td', { class: 'mono' }, typeText(sub)),
        el('td', {}, required.has(field) ? el('span', { class: 'req' }, 'required') : el('span', { class: 'muted' }, 'optional')),
        el('td', {}, prose(inner.schema.description || sub.description),
          constraintsOf(sub) ? el('span', { class: 'constraints' }, constraintsOf(sub)) : null)));
      if (inner.schema.properties) rows.push(...fieldRows(sub, path, depth + 1, within));
      else if (inner.schema.type === 'array' && unwrap(inner.schema.items).schema.properties) {
        rows.push(...fieldRows(inner.schema.items, `${path}[]`, depth + 1, within));
      }
    }
    return rows;
  }

  function schemaBlock(schema) {
    const { schema: s, name } = unwrap(schema);
    const head = el('p', { class: 'schema-head' }, el('span', { class: 'mono' }, typeText(schema)),
      s.description ? ` — ${prose(s.description)}` : '');
    if (!s.properties) return [head];
    return [head, el('table', { class: 'grid fields-table', dataset: { schema: name || '' } },
      el('thead', {}, el('tr', {}, el('th', {}, 'Field'), el('th', {}, 'Type'), el('th', {}, 'Required'),
        el('th', {}, 'Description'))),
      el('tbody', {}, fieldRows(schema)))];
  }

  /** A JSON skeleton of a body: its required fields (recursively), with defaults where the schema has them. */
  function example(schema, depth = 0) {
    const { schema: s } = unwrap(schema);
    if (s.default !== undefined) return s.default;
    if (s.enum) return s.enum[0];
    if (depth > MAX_DEPTH) return null;
    if (s.properties) {
      const out = {};
      for (const field of s.required || []) out[field] = example(s.properties[field], depth + 1);
      return out;
    }
    return { string: '', integer: 0, number: 0, boolean: false, array: [] }[s.type] ?? {};
  }

  // --- operations ---------------------------------------------------------------------------------

  function operations() {
    const ops = [];
    for (const [path, item] of Object.entries(doc.paths || {})) {
      for (const method of METHODS) {
        if (item[method]) ops.push({ path, method, op: item[method], shared: item.parameters || [] });
      }
    }
    // By path, then in the usual order of methods: a stable, readable list.
    return ops.sort((a, b) => a.path.localeCompare(b.path) || METHODS.indexOf(a.method) - METHODS.indexOf(b.method));
  }

  function parametersTable(params) {
    if (!params.length) return el('p', { class: 'muted' }, 'No parameters.');
    return el('table', { class: 'grid params-table' },
      el('thead', {}, el('tr', {}, el('th', {}, 'Name'), el('th', {}, 'In'), el('th', {}, 'Type'),
        el('th', {}, 'Required'), el('th', {}, 'Constraints'))),
      el('tbody', {}, params.map((p) => el('tr', { dataset: { param: p.name } },
        el('td', { class: 'mono' }, p.name),
        el('td', {}, p.in),
        el('td', { class: 'mono' }, typeText(p.schema)),
        el('td', {}, p.required ? el('span', { class: 'req' }, 'required') : el('span', { class: 'muted' }, 'optional')),
        el('td', {}, [prose(p.description), constraintsOf(p.schema)].filter(Boolean).join('; '))))));
  }

  function responsesList(responses) {
    const codes = Object.keys(responses || {}).sort();
    return el('table', { class: 'grid responses-table' },
      el('thead', {}, el('tr', {}, el('th', {}, 'Status'), el('th', {}, 'Description'), el('th', {}, 'Body'))),
      el('tbody', {}, codes.map((code) => {
        const response = responses[code];
        const json = response.content && response.content['application/json'];
        return el('tr', { dataset: { status: code } },
          el('td', {}, el('span', { class: `status-code c${code[0]}` }, code)),
          el('td', {}, prose(response.description)),
          el('td', { class: 'mono' }, json ? typeText(json.schema) : '—'));
      })));
  }

  function tryIt({ path, method }, params, body) {
    const inputs = params.filter((p) => p.in === 'path' || p.in === 'query').map((p) => {
      const id = `try-${method}-${path}-${p.name}`.replace(/[^A-Za-z0-9_-]/g, '_');
      const placeholder = unwrap(p.schema).schema.default !== undefined ? `default ${unwrap(p.schema).schema.default}` : '';
      return { param: p, id, input: el('input', { id, name: p.name, placeholder, spellcheck: 'false' }) };
    });
    const bodyInput = body
      ? el('textarea', { name: 'body', rows: 6, spellcheck: 'false', 'aria-label': 'Request body (JSON)' },
        JSON.stringify(example(body.schema), null, 2))
      : null;
    const status = el('span', { class: 'try-status', role: 'status' });
    const output = el('pre', { class: 'json try-output', hidden: true });
    const send = el('button', { type: 'submit', class: 'primary' }, 'Send');
    const form = el('form', { class: 'try', novalidate: true },
      el('h3', {}, 'Try it'),
      inputs.map(({ param, id, input }) => el('div', { class: 'try-field' },
        el('label', { for: id }, param.name, ' ', el('span', { class: 'hint' }, param.in, param.required ? ', required' : '')),
        input)),
      bodyInput ? el('div', { class: 'try-field' }, el('label', {}, 'Body ', el('span', { class: 'hint' }, 'JSON')),
        bodyInput) : null,
      el('div', { class: 'form-actions' }, send, status),
      output);

    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      let url = path;
      const query = new URLSearchParams();
      for (const { param, input } of inputs) {
        const value = input.value.trim();
        if (param.in === 'path') {
          if (!value) {
            status.textContent = `${param.name} is required`;
            status.className = 'try-status bad-text';
            input.focus();
            return;
          }
          url = url.replace(`{${param.name}}`, encodeURIComponent(value));
        } else if (value) query.set(param.name, value);
      }
      if (String(query)) url += `?${query}`;
      const headers = { Accept: 'application/json' };
      const token = localStorage.getItem(TOKEN_KEY);
      if (token) headers.Authorization = `Bearer ${token}`;
      const init = { method: method.toUpperCase(), headers };
      if (bodyInput && bodyInput.value.trim()) {
        headers['Content-Type'] = 'application/json';
        init.body = bodyInput.value;
      }
      send.disabled = true;
      status.textContent = `${init.method} ${url} …`;
      status.className = 'try-status muted';
      const started = performance.now();
      try {
        const response = await fetch(BASE + url, init);
        const text = await response.text();
        let shown = text;
        try {
          shown = text ? JSON.stringify(JSON.parse(text), null, 2) : '(empty body)';
        } catch {
          // not JSON: shown as it came
        }
        const took = Math.round(performance.now() - started);
        status.textContent = `${response.status} ${response.statusText}`.trim() + ` · ${took} ms`;
        status.className = `try-status ${response.ok ? 'ok-text' : 'bad-text'}`;
        status.dataset.status = String(response.status);
        output.textContent = shown;
        output.hidden = false;
      } catch (err) {
        status.textContent = `cannot reach the API (${err.message})`;
        status.className = 'try-status bad-text';
      } finally {
        send.disabled = false;
      }
    });
    return form;
  }

  function operationCard(entry) {
    const { path, method, op, shared } = entry;
    const params = [...shared, ...(op.parameters || [])];
    const json = op.requestBody && op.requestBody.content && op.requestBody.content['application/json'];
    const key = `${method.toUpperCase()} ${path}`;
    const title = op.summary && op.summary !== key ? op.summary : '';
    return el('details', { class: 'op card', dataset: { op: key, method, path } },
      el('summary', {},
        el('span', { class: `method m-${method}` }, method.toUpperCase()),
        el('span', { class: 'mono op-path' }, path),
        title ? el('span', { class: 'muted op-summary' }, title) : null),
      el('div', { class: 'op-body' },
        op.description ? el('p', { class: 'op-description' }, prose(op.description)) : null,
        el('h3', {}, 'Parameters'), parametersTable(params),
        json ? [el('h3', {}, 'Request body', op.requestBody.required ? '' : el('span', { class: 'hint' }, 'optional')),
          el('div', { class: 'request-body' }, schemaBlock(json.schema))] : null,
        el('h3', {}, 'Responses'), responsesList(op.responses),
        tryIt(entry, params, json)));
  }

  function render() {
    const ops = operations();
    const info = doc.info || {};
    $('#api-title').textContent = `${info.title || 'API'} ${info.version ? `v${info.version}` : ''}`.trim();
    $('#api-summary').textContent = `OpenAPI ${doc.openapi || ''} · ${ops.length} operations`;
    const filter = $('#api-filter').value.trim().toLowerCase();
    const cards = ops.map(operationCard);
    for (const card of cards) {
      card.hidden = Boolean(filter) && !card.dataset.op.toLowerCase().includes(filter);
    }
    $('#api-ops').replaceChildren(...cards);
  }

  async function load() {
    $('#api-summary').textContent = 'Loading /openapi.json …';
    try {
      const response = await fetch(`${BASE}/openapi.json`, { headers: { Accept: 'application/json' } });
      if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
      doc = await response.json();
      render();
    } catch (err) {
      $('#api-summary').textContent = `Cannot load /openapi.json: ${err.message}`;
    }
  }

  let wired = false;

  /** Called by app.js whenever #/api opens: loads the document once, then keeps it. */
  function show() {
    if (!wired) {
      wired = true;
      $('#api-reload').addEventListener('click', load);
      $('#api-expand').addEventListener('click', () => {
        const cards = Array.from(document.querySelectorAll('#api-ops details.op'));
        const open = !cards.every((c) => c.open);
        for (const card of cards) card.open = open;
      });
      $('#api-filter').addEventListener('input', () => {
        const filter = $('#api-filter').value.trim().toLowerCase();
        for (const card of document.querySelectorAll('#api-ops details.op')) {
          card.hidden = Boolean(filter) && !card.dataset.op.toLowerCase().includes(filter);
        }
      });
    }
    if (!doc) load();
  }

  window.JobApiReference = { show };
})();

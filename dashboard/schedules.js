/* Schedules in the browser: the API's rules for instants, durations, cron and ISO 8601 repeating intervals,
 * so that the submit form can say what is wrong as the user types, and the fire times of the kinds that
 * are plain arithmetic (at, every, fixed-length repeating intervals). The API stays the judge: whatever
 * passes here is still checked there, and cron fire times (time zones, daylight saving) come from it.
 * Pure functions, no DOM: exposed as window.JobSchedules for app.js.
 */
(() => {
  'use strict';

  const MIN_INTERVAL_MS = 10000;
  // How far in the past an `at` may be (clock skew); the API runs it at once.
  const AT_PAST_TOLERANCE_MS = 5 * 60 * 1000;

  const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})$/;
  const DURATION = /^P(?!$)(?:(\d+(?:[.,]\d+)?)Y)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)W)?(?:(\d+(?:[.,]\d+)?)D)?(?:T(?=\d)(?:(\d+(?:[.,]\d+)?)H)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)S)?)?$/;

  class Invalid extends Error {}

  /** An RFC 3339 instant (offset required) -> epoch ms. */
  function parseInstant(text) {
    const m = RFC3339.exec(text.trim());
    if (!m) throw new Invalid(`not an RFC 3339 date-time with offset, e.g. ${new Date(Date.now() + 60000).toISOString().slice(0, 19)}Z`);
    const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] || 0));
    const probe = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
    if (probe.getUTCMonth() !== month - 1 || probe.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) {
      throw new Invalid('is not a real date and time');
    }
    const fraction = m[7] ? m[7].slice(0, 4) : '';
    const t = Date.parse(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6] || '00'}${fraction}${m[8].toUpperCase()}`);
    if (Number.isNaN(t)) throw new Invalid('is not a real date and time');
    return t;
  }

  /** An ISO 8601 duration -> { ms, calendar } (calendar: has years or months, no fixed length). */
  function parseDuration(text) {
    const m = DURATION.exec(text.trim());
    if (!m) throw new Invalid(`not an ISO 8601 duration: '${text}' (e.g. PT5M, PT1H, P1D)`);
    const n = (i) => (m[i] ? Number(m[i].replace(',', '.')) : 0);
    const calendar = Boolean(m[1] || m[2]);
    const milliseconds = (((n(3) * 7 + n(4)) * 24 + n(5)) * 60 + n(6)) * 60000 + n(7) * 1000;
    return { ms: milliseconds, calendar };
  }

  function fixedInterval(text) {
    const d = parseDuration(text);
    if (d.calendar) throw new Invalid('years and months have no fixed length; use a cron schedule');
    if (Math.abs(d.ms - Math.round(d.ms)) > 1e-6) throw new Invalid('must be a whole number of milliseconds');
    if (d.ms < MIN_INTERVAL_MS) throw new Invalid('must be at least 10 seconds');
    return Math.round(d.ms);
  }

  const CRON_FIELDS = [
    { name: 'minute', low: 0, high: 59, size: 60, names: null },
    { name: 'hour', low: 0, high: 23, size: 24, names: null },
    { name: 'day-of-month', low: 1, high: 31, size: 31, names: null },
    { name: 'month', low: 1, high: 12, size: 12,
      names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'], first: 1 },
    { name: 'day-of-week', low: 0, high: 7, size: 7, names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'], first: 0 },
  ];
  const CRON_ITEM = /^(?:(\*)|([0-9]+|[A-Za-z]+)(?:-([0-9]+|[A-Za-z]+))?)(?:\/([0-9]+))?$/;

  /** The same rules as the API's cron parser, so that most mistakes show before submitting. */
  function checkCron(text) {
    if (text.trim().startsWith('@')) throw new Invalid("macros such as @daily are not supported; use five fields, e.g. '0 0 * * *'");
    const fields = text.trim().split(/\s+/).filter(Boolean);
    if (fields.length === 6 || fields.length === 7) throw new Invalid(`has ${fields.length} fields; seconds and years are not supported`);
    if (fields.length !== 5) throw new Invalid(`needs five fields (minute hour day-of-month month day-of-week), got ${fields.length}`);
    fields.forEach((part, index) => {
      const spec = CRON_FIELDS[index];
      const value = (tokenText) => {
        if (/^[0-9]+$/.test(tokenText)) {
          const number = Number(tokenText);
          if (number < spec.low || number > spec.high) throw new Invalid(`${spec.name} ${number} is out of range ${spec.low}-${spec.high}`);
          return number;
        }
        const at = spec.names ? spec.names.indexOf(tokenText.toUpperCase()) : -1;
        if (at < 0) {
          throw new Invalid(spec.names ? `'${tokenText}' is not a ${spec.name} name (${spec.names[0]}-${spec.names[spec.names.length - 1]})`
            : `${spec.name} '${tokenText}' is not a number`);
        }
        return at + spec.first;
      };
      for (const item of part.split(',')) {
        const m = CRON_ITEM.exec(item);
        if (!m) throw new Invalid(`${spec.name} field '${part}' is not valid: use numbers, '*', ranges a-b, steps */n or a-b/n, and lists a,b`);
        if (!m[1]) {
          const low = value(m[2]);
          const high = m[3] ? value(m[3]) : low;
          if (m[4] && !m[3]) throw new Invalid(`${spec.name} step '${item}' needs a range: use */n or a-b/n`);
          if (high < low) throw new Invalid(`${spec.name} range '${item}' goes backwards`);
        }
        const step = m[4] ? Number(m[4]) : 1;
        if (step < 1 || step >= spec.size) throw new Invalid(`${spec.name} step in '${item}' must be from 1 to ${spec.size - 1}`);
      }
    });
  }

  function checkTimezone(text) {
    if (text === 'UTC') return;
    try {
      new Intl.DateTimeFormat('en', { timeZone: text }).format();
    } catch {
      throw new Invalid(`unknown time zone '${text}'; use an IANA name such as 'Europe/Paris' or 'UTC'`);
    }
  }

  /** ISO 8601 repeating interval -> { count, start, end, duration } (each part null when absent). */
  function parseRepeating(text) {
    const parts = text.trim().split('/');
    const forms = 'use R<n>/<start>/<duration>, R<n>/<duration>/<end> or R<n>/<start>/<end>';
    if (parts.length !== 3) throw new Invalid(forms);
    const r = /^R([0-9]*)$/.exec(parts[0]);
    if (!r) throw new Invalid(`must start with R or R<n>; ${forms}`);
    const count = r[1] === '' ? null : Number(r[1]);
    if (count === 0) throw new Invalid('R0 never fires: use R1 or more');
    const isDuration = (p) => p.startsWith('P');
    const out = { count, start: null, end: null, duration: null };
    if (isDuration(parts[1]) && isDuration(parts[2])) throw new Invalid(forms);
    if (isDuration(parts[1])) {
      out.duration = parseDuration(parts[1]);
      out.end = parseInstant(parts[2]);
    } else {
      out.start = parseInstant(parts[1]);
      if (isDuration(parts[2])) out.duration = parseDuration(parts[2]);
      else {
        out.end = parseInstant(parts[2]);
        if (out.end <= out.start) throw new Invalid('the end must be after the start');
      }
    }
    if (out.start === null && count === null) throw new Invalid('an unbounded repetition (R) needs a start');
    if (out.duration && !out.duration.calendar && out.duration.ms < MIN_INTERVAL_MS) {
      throw new Invalid('the duration must be at least 10 seconds');
    }
    return out;
  }


  /** The next `count` fire times (epoch ms) of a schedule body, or null when only the API can tell. */
  function localFires(body, count = 5) {
    const s = body.schedule;
    const now = Date.now();
    if (s.at) return [parseInstant(s.at)];
    if (s.every) {
      const step = fixedInterval(s.every);
      const start = s.start ? parseInstant(s.start) : now + step;
      const end = s.end ? parseInstant(s.end) : Infinity;
      let k = start >= now ? 0 : Math.floor((now - 1 - start) / step) + 1;
      const last = s.count ? k + s.count - 1 : Infinity; // a count is of fires from now on
      const out = [];
      for (; out.length < count && k <= last; k += 1) {
        const fire = start + k * step;
        if (fire > end) break;
        out.push(fire);
      }
      return out;
    }
    if (s.iso8601) {
      const r = parseRepeating(s.iso8601);
      if (r.duration && r.duration.calendar) return null;
      const total = r.count ?? Infinity;
      let fires = [];
      if (r.start !== null) {
        const step = r.duration ? r.duration.ms : r.end - r.start;
        let k = r.start >= now ? 0 : Math.ceil((now - r.start) / step);
        for (; k < total && fires.length < count; k += 1) fires.push(r.start + k * step);
        if (s.end) fires = fires.filter((t) => t <= parseInstant(s.end));
      } else {
        for (let j = 0; j < total && r.end - j * r.duration.ms >= now; j += 1) fires.push(r.end - j * r.duration.ms);
        fires = fires.reverse().slice(0, count);
        if (s.end) fires = fires.filter((t) => t <= parseInstant(s.end));
      }
      return fires;
    }
    return null;
  }


  window.JobSchedules = Object.freeze({
    AT_PAST_TOLERANCE_MS, Invalid, parseInstant, parseDuration, fixedInterval, checkCron, checkTimezone,
    parseRepeating, localFires,
  });
})();

// modelgate console: the page's only script (no framework, no network beyond this gateway's
// /console/api). The key lives in the variable `key` below, in this tab's memory only: never in
// localStorage, sessionStorage, a cookie or a URL. It is sent percent-encoded in one request
// header, x-modelgate-console-key. Everything shown is built with textContent, never as HTML.
(() => {
  'use strict';

  const KEY_HEADER = 'x-modelgate-console-key';
  const PLACEHOLDER = '<API_KEY>';
  let key = null;
  let info = null;
  let access = null;
  let setup = null;

  const $ = (id) => document.getElementById(id);

  /** An element with text children (strings become text nodes, never HTML). */
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) if (c !== undefined && c !== null) e.append(c);
    return e;
  }

  function setStatus(text) {
    $('status').textContent = text || '';
  }

  async function api(name, body) {
    const headers = {};
    if (key !== null) headers[KEY_HEADER] = encodeURIComponent(key);
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`api/${name}`, {
      method: name === 'info' ? 'GET' : 'POST',
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      credentials: 'omit',
      referrerPolicy: 'no-referrer',
    });
    let data = null;
    try {
      data = await res.json();
    } catch {
      data = null;
    }
    return { status: res.status, data };
  }

  function problemText(r) {
    const e = r.data && r.data.error;
    return e ? `${e.hint} (${e.reason})` : `the console answered ${r.status}`;
  }

  // ---- views

  const VIEWS = ['signin', 'access', 'setup', 'doctor'];

  function showView(name, focus = true) {
    for (const v of VIEWS) $(`${v}-view`).hidden = v !== name;
    for (const b of document.querySelectorAll('#views button')) {
      if (b.dataset.view === name) b.setAttribute('aria-current', 'page');
      else b.removeAttribute('aria-current');
    }
    if (focus) $(`${name}-title`).focus();
    if (name === 'setup' && setup === null) void loadSetup();
  }

  // ---- sign in and out

  $('signin').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const input = $('key');
    const hint = $('key-hint');
    hint.textContent = '';
    input.removeAttribute('aria-invalid');
    key = input.value;
    $('signin-button').disabled = true;
    setStatus('Signing in…');
    let r;
    try {
      r = await api('access');
    } catch {
      r = { status: 0, data: null };
    } finally {
      $('signin-button').disabled = false;
    }
    setStatus('');
    if (r.status !== 200) {
      key = null;
      hint.textContent =
        r.status === 0 ? 'the console cannot be reached: check the connection and retry' : problemText(r);
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    // The key now lives only in `key`; the field lets go of it.
    input.value = '';
    access = r.data;
    renderAccess();
    $('who').textContent = access.key.id;
    $('session').hidden = false;
    $('views').hidden = false;
    showView('access');
  });

  $('signout').addEventListener('click', () => {
    key = null;
    access = null;
    setup = null;
    $('reveal').checked = false;
    $('snippets').replaceChildren();
    $('report').hidden = true;
    $('session').hidden = true;
    $('views').hidden = true;
    showView('signin');
  });

  for (const b of document.querySelectorAll('#views button'))
    b.addEventListener('click', () => showView(b.dataset.view));

  // ---- my access

  function badge(yes, textYes, textNo) {
    return el('span', { class: `badge ${yes ? 'yes' : 'no'}` }, yes ? textYes : textNo);
  }

  // Rate limits (docs/rate-limits.md): {rpm, tpm, rpd, tpd, inFlight} as words.
  function limitsText(l) {
    const names = {
      rpm: 'requests per minute',
      tpm: 'tokens per minute',
      rpd: 'requests per day',
      tpd: 'tokens per day',
      inFlight: 'requests in flight (per gateway replica)',
    };
    const parts = Object.keys(names)
      .filter((k) => l && typeof l[k] === 'number')
      .map((k) => `${l[k].toLocaleString('en-US')} ${names[k]}`);
    return parts.length === 0 ? 'none' : parts.join(', ');
  }

  // What is left of each key-wide window, as the rate limit engine counts it now.
  function leftText(left) {
    const names = {
      rpm: 'requests this minute',
      tpm: 'tokens this minute',
      rpd: 'requests today (UTC)',
      tpd: 'tokens today (UTC)',
    };
    return Object.keys(names)
      .filter((k) => typeof left[k] === 'number')
      .map((k) => `${left[k].toLocaleString('en-US')} ${names[k]}`)
      .join(', ');
  }

  function renderAccess() {
    const a = access;
    const facts = $('key-facts');
    const balance = a.key.balance === null ? 'unlimited' : String(a.key.balance);
    facts.replaceChildren(
      el('dt', {}, 'Key id'),
      el('dd', {}, el('code', {}, a.key.id)),
      el('dt', {}, 'Group'),
      el(
        'dd',
        {},
        el('code', {}, a.group.name),
        badge(a.group.available, 'available', a.group.exists ? 'unavailable' : 'no longer exists'),
      ),
      el('dt', {}, 'Balance'),
      el('dd', {}, balance, a.key.balance !== null && a.key.balance <= 0 ? badge(false, '', 'insufficient') : null),
      el('dt', {}, 'Expires'),
      el('dd', {}, a.key.expiresAt === null ? 'never' : a.key.expiresAt),
      el('dt', {}, 'Rate limits'),
      el('dd', {}, limitsText(a.key.limits)),
      ...(a.key.left ? [el('dt', {}, 'Left now'), el('dd', {}, leftText(a.key.left))] : []),
    );
    const warnings = [];
    if (!a.group.available)
      warnings.push(
        `Group ${a.group.name} is marked unavailable: every request with this key is refused (403 group_unavailable) until it is available again.`,
      );
    if (a.key.balance !== null && a.key.balance <= 0)
      warnings.push(
        `The balance is ${a.key.balance}: model requests are refused (403 balance_insufficient) until it is topped up.`,
      );
    $('access-warning').textContent = warnings.join(' ');
    $('access-warning').hidden = warnings.length === 0;
    $('models-title').textContent = `Models of group ${a.group.name}`;
    $('models-base').textContent = a.baseUrl;
    const rows = a.models.map((m) =>
      el(
        'tr',
        {},
        el(
          'th',
          { scope: 'row' },
          el('code', {}, m.name),
          m.limits ? el('div', { class: 'limits' }, `limits: ${limitsText(m.limits)}`) : null,
        ),
        el('td', {}, m.protocols === null ? 'any' : m.protocols.join(', ')),
        el('td', {}, m.available ? badge(true, 'yes', '') : badge(false, '', 'no: channel down')),
        el(
          'td',
          {},
          el(
            'ul',
            {},
            m.endpoints.map((e) => el('li', {}, el('code', {}, e))),
          ),
        ),
        el(
          'td',
          {},
          m.listedOn.length
            ? el(
                'ul',
                {},
                m.listedOn.map((l) => el('li', {}, el('code', {}, l))),
              )
            : 'not listed (unavailable)',
        ),
      ),
    );
    if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 5 }, 'This group has no models.')));
    $('models').tBodies[0].replaceChildren(...rows);
    renderUsage(a);
    $('d-models').replaceChildren(...a.models.map((m) => el('option', { value: m.name })));
  }

  // The usage slot: present only when the service has a usage provider (the meter).
  function renderUsage(a) {
    const section = $('usage');
    if (!('usage' in a)) {
      section.hidden = true;
      return;
    }
    section.hidden = false;
    const empty = $('usage-empty');
    const table = $('usage-table');
    if (a.usage === null || a.usage.length === 0) {
      empty.textContent =
        a.usage === null ? 'Recent usage cannot be shown right now.' : 'No requests with this key yet.';
      empty.hidden = false;
      table.hidden = true;
      return;
    }
    empty.hidden = true;
    table.hidden = false;
    table.tBodies[0].replaceChildren(
      ...a.usage.map((u) =>
        el(
          'tr',
          {},
          el('td', {}, u.time),
          el('td', {}, el('code', {}, u.model)),
          el('td', {}, String(u.inputTokens)),
          el('td', {}, String(u.outputTokens)),
          el('td', {}, u.cost === null ? 'unknown' : String(u.cost)),
        ),
      ),
    );
  }

  // ---- set up a client

  async function loadSetup() {
    setStatus('Loading the set-up table…');
    const r = await api('setup');
    setStatus('');
    if (r.status !== 200) {
      setStatus(problemText(r));
      return;
    }
    setup = r.data;
    $('setup-base').textContent = setup.baseUrl;
    $('setup-alt').textContent = setup.altPrefix;
    $('setup-table').tBodies[0].replaceChildren(
      ...setup.rows.map((row) =>
        el(
          'tr',
          { 'data-kind': row.id },
          el('th', { scope: 'row' }, row.label, el('span', { class: 'help' }, row.note)),
          el('td', {}, el('code', {}, row.baseUrl)),
          el('td', {}, el('code', {}, row.endpoint)),
          el('td', {}, el('code', {}, row.header)),
        ),
      ),
    );
    const select = $('snippet-kind');
    select.replaceChildren(...setup.rows.map((row) => el('option', { value: row.id }, row.label)));
    renderSnippets();
  }

  function shown(code) {
    return $('reveal').checked && key !== null ? code.split(PLACEHOLDER).join(key) : code;
  }

  function renderSnippets() {
    if (!setup) return;
    const row = setup.rows.find((r) => r.id === $('snippet-kind').value) || setup.rows[0];
    $('snippets').replaceChildren(
      ...row.snippets.map((s) => {
        const id = `snippet-${s.id}`;
        const copy = el('button', { type: 'button', class: 'copy', 'aria-describedby': `${id}-title` }, 'Copy');
        copy.addEventListener('click', async () => {
          try {
            await navigator.clipboard.writeText(shown(s.code));
            setStatus(`Copied: ${s.label}`);
          } catch {
            setStatus('Copying is not allowed here: select the text and copy it.');
          }
        });
        return el(
          'section',
          { class: 'snippet', 'aria-labelledby': `${id}-title` },
          el('div', { class: 'snippet-head' }, el('h3', { id: `${id}-title` }, s.label), copy),
          el('pre', {}, el('code', { id, 'data-language': s.language }, shown(s.code))),
        );
      }),
    );
  }

  $('snippet-kind').addEventListener('change', renderSnippets);
  $('reveal').addEventListener('change', renderSnippets);

  // ---- check my setup (the doctor)

  $('doctor-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const hint = $('doctor-hint');
    hint.textContent = '';
    const body = {
      baseUrl: $('d-base').value,
      clientKind: $('d-kind').value,
      model: $('d-model').value || undefined,
      failingUrl: $('d-url').value || undefined,
      status: $('d-status').value ? Number($('d-status').value) : undefined,
    };
    setStatus('Checking…');
    const r = await api('doctor', body);
    setStatus('');
    if (r.status !== 200) {
      hint.textContent = problemText(r);
      return;
    }
    renderReport(r.data);
  });

  const OUTCOME = { pass: 'ok', fail: 'change', note: 'note', skip: 'later' };

  function renderReport(rep) {
    $('report').hidden = false;
    $('report-title').textContent = rep.failing ? `One thing to change: ${rep.failing.ref}` : 'Nothing to change';
    $('report-change').textContent = rep.failing ? `Change: ${rep.failing.change}` : '';
    $('report-steps').replaceChildren(
      ...rep.steps.map((s) =>
        el(
          'li',
          { class: s.outcome, 'data-rule': s.id },
          el('span', { class: `outcome ${s.outcome}` }, OUTCOME[s.outcome]),
          el('span', { class: 'ref' }, s.ref),
          el('strong', {}, s.title),
          el('p', {}, s.detail),
          s.change ? el('p', {}, el('strong', {}, 'Change: '), s.change) : null,
          s.gatewayAnswers
            ? el('p', {}, `The gateway answers this with ${s.gatewayAnswers.status} ${s.gatewayAnswers.reason}.`)
            : null,
        ),
      ),
    );
    $('report-expected').replaceChildren(
      el('dt', {}, 'Base URL'),
      el('dd', {}, el('code', {}, rep.expected.baseUrl)),
      el('dt', {}, 'Full endpoint'),
      el('dd', {}, el('code', {}, rep.expected.endpoint)),
      el('dt', {}, 'Header'),
      el('dd', {}, el('code', {}, rep.expected.header)),
    );
    $('report-next').textContent = rep.next;
    $('report-title').focus();
  }

  // ---- start

  async function start() {
    try {
      const r = await api('info');
      if (r.status === 200) {
        info = r.data;
        $('gateway-base').textContent = info.baseUrl;
        $('d-base').placeholder = info.baseUrl;
        $('d-kind').replaceChildren(...info.clientKinds.map((k) => el('option', { value: k.id }, k.label)));
      } else setStatus(problemText(r));
    } catch {
      setStatus('the console cannot be reached: check the connection and reload');
    }
  }
  void start();
})();

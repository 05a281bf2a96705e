/**
 * The console's HTTP API on a real modelgate HTTP listener (port 0): sign-in answers and hints for
 * every demo key, the same models as the model lists, only the key's own group, security headers on
 * every answer, rate limits per client address and per key, the usage slot, and the doctor.
 */
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { HEADER } from '../../src/contract/headers';
import { SECURITY_HEADERS } from '../../src/console/http-handler';
import type { UsageProvider, UsageRow } from '../../src/console/usage';
import { DEMO_KEYS } from '../support/demo-keys';
import { DEMO_CONFIG, startHarness, tempConfig, type Harness } from '../support/service-harness';

interface Answer {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** With a Host of our choosing (fetch would not send one): as Envoy forwards the client's Host. */
function callWithHost(h: Harness, path: string, key: string, headers: Record<string, string>): Promise<Answer> {
  const [host, port] = h.service.httpAddress.split(':');
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host,
        port: Number(port),
        path,
        method: 'POST',
        headers: { ...headers, [HEADER.consoleKey]: encodeURIComponent(key) },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString('utf8')));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: new Headers(res.headers as Record<string, string>),
            body: JSON.parse(text),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function call(
  h: Harness,
  path: string,
  opts: { key?: string; raw?: string; body?: unknown; method?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key !== undefined) headers[HEADER.consoleKey] = encodeURIComponent(opts.key);
  if (opts.raw !== undefined) headers[HEADER.consoleKey] = opts.raw;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`http://${h.service.httpAddress}${path}`, {
    method: opts.method ?? (path.startsWith('/console/api/') && !path.endsWith('/info') ? 'POST' : 'GET'),
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    redirect: 'manual',
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // the page and its files are not JSON
  }
  return { status: res.status, headers: res.headers, body };
}

function expectSecurityHeaders(a: Answer): void {
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) expect(a.headers.get(k), k).toBe(v);
  expect(a.headers.get('content-security-policy')).toMatch(/default-src 'self'.*frame-ancestors 'none'/);
  expect(a.headers.get('content-security-policy')).not.toMatch(/unsafe-inline|unsafe-eval/);
}

let h: Harness;
let usageCalls: string[] = [];
const USAGE: UsageRow[] = [
  { time: '2026-11-20T10:00:00Z', model: 'gpt-4o-mini', inputTokens: 12, outputTokens: 3, cost: 0.0001 },
];
const usage: UsageProvider = {
  async recent(keyId, limit) {
    usageCalls.push(`${keyId}:${limit}`);
    if (keyId === 'bob') throw new Error('meter down');
    return USAGE;
  },
};

beforeAll(async () => {
  h = await startHarness({ usage });
});
afterAll(async () => {
  await h?.close();
});

describe('sign in with each demo key', () => {
  test("grace: the key's rate limits in force", async () => {
    const a = await call(h, '/console/api/access', { key: DEMO_KEYS.grace });
    expect(a.status).toBe(200);
    expect(a.body.key.limits).toEqual({ rpm: 3, tpm: 2000, inFlight: 2 });
    // What is left, as the engine counts it (nothing used yet in this test's service).
    expect(a.body.key.left).toEqual({ rpm: 3, tpm: 2000 });
  });

  test("alice: group basic (available), balance 12.5, the group's models with their styles and availability", async () => {
    const a = await call(h, '/console/api/access', { key: DEMO_KEYS.alice });
    expect(a.status).toBe(200);
    expect(a.body.key).toEqual({ id: 'alice', balance: 12.5, expiresAt: null, limits: {} });
    expect(a.body.group).toEqual({ name: 'basic', available: true, exists: true });
    const byName = Object.fromEntries(a.body.models.map((m: any) => [m.name, m]));
    expect(Object.keys(byName)).toEqual([
      'gpt-4o-mini',
      'text-embedding-3-small',
      'claude-3-5-haiku-latest',
      'gemini-2.5-flash',
      'gemini-2.0-flash',
      'gpt-4.1-nano',
      'gpt-6.1-sol',
      'gpt-6.2-sol',
      'gpt-5.5',
      'claude-opus-5-5',
      'gemini-3.1-pro-preview',
      'gemini-3.8-flash',
      'gemini-3.5-flash-lite',
    ]);
    expect(byName['gemini-2.0-flash']).toMatchObject({ protocols: ['generative'], available: false, listedOn: [] });
    expect(byName['claude-3-5-haiku-latest'].endpoints).toEqual(['POST /v1/messages']);
    expect(a.body.baseUrl).toBe(`http://${h.service.httpAddress}`);
    expect(byName['gpt-4o-mini'].protocols).toBeNull();
  });

  test('bob: group pro, unlimited; carol: balance 0; frank: group paused shown as unavailable', async () => {
    const bob = await call(h, '/console/api/access', { key: DEMO_KEYS.bob });
    expect(bob.body.key.balance).toBeNull();
    expect(bob.body.group).toEqual({ name: 'pro', available: true, exists: true });
    const carol = await call(h, '/console/api/access', { key: DEMO_KEYS.carol });
    expect(carol.body.key.balance).toBe(0);
    const frank = await call(h, '/console/api/access', { key: DEMO_KEYS.frank });
    expect(frank.status).toBe(200);
    expect(frank.body.group).toEqual({ name: 'paused', available: false, exists: true });
    expect(frank.body.models.map((m: any) => m.name)).toEqual(['gpt-4o-mini']);
  });

  test("dave (disabled) and erin (expired) get the Check path's 401 and hint", async () => {
    const dave = await call(h, '/console/api/access', { key: DEMO_KEYS.dave });
    expect(dave.status).toBe(401);
    expect(dave.body.error).toMatchObject({
      reason: 'key_disabled',
      field: 'key',
      hint: expect.stringContaining('"dave" is disabled'),
    });
    const erin = await call(h, '/console/api/access', { key: DEMO_KEYS.erin });
    expect(erin.body.error).toMatchObject({
      reason: 'key_expired',
      hint: expect.stringContaining('expired at 2025-01-01T00:00:00.000Z'),
    });
  });
});

describe('key hygiene first, with hints for the key field', () => {
  test.each([
    ['a quoted key', `"${DEMO_KEYS.alice}"`, 'key_malformed', /without quotes/],
    [
      'curly quotes (sent percent-encoded, so they reach the check)',
      `\u201c${DEMO_KEYS.alice}\u201d`,
      'key_malformed',
      /without quotes/,
    ],
    ['"Bearer " pasted in', `Bearer ${DEMO_KEYS.alice}`, 'key_malformed', /without "Bearer "/],
    ['a cut key', DEMO_KEYS.alice.slice(0, 38), 'key_incomplete', /38 characters; a sk-mg- key has 46: it was cut/],
    ['a space inside', `${DEMO_KEYS.alice.slice(0, 20)} ${DEMO_KEYS.alice.slice(20)}`, 'key_malformed', /space/],
    [
      'a mistyped character',
      `${DEMO_KEYS.alice.slice(0, -1)}${DEMO_KEYS.alice.endsWith('A') ? 'B' : 'A'}`,
      'key_incomplete',
      /checksum/,
    ],
    ['an empty field', '', 'key_missing', /paste the whole key/],
    [
      'a key of another gateway',
      'sk-live-0123456789abcdefghij',
      'key_unknown',
      /copied from the console \(http:\/\/127\.0\.0\.1:\d+\/console\/\)/,
    ],
  ])('%s', async (_name, key, reason, hint) => {
    const a = await call(h, '/console/api/access', { key });
    expect(a.status).toBe(401);
    expect(a.body.error.reason).toBe(reason);
    expect(a.body.error.hint).toMatch(hint);
    expect(a.body.error.field).toBe('key');
    expect(JSON.stringify(a.body)).not.toContain(DEMO_KEYS.alice.slice(6, 20));
    expectSecurityHeaders(a);
  });

  test('no key header at all, and a header that is not valid percent-encoding', async () => {
    expect((await call(h, '/console/api/access')).body.error.reason).toBe('key_missing');
    expect((await call(h, '/console/api/access', { raw: '%E0%A4%A' })).body.error.reason).toBe('key_malformed');
  });
});

test("the console's models are the model lists' models, for every key (one function)", async () => {
  for (const who of ['alice', 'bob', 'carol'] as const) {
    const key = DEMO_KEYS[who];
    const access = await call(h, '/console/api/access', { key });
    const listed = (family: string) =>
      access.body.models
        .filter((m: any) =>
          m.listedOn.some((l: string) =>
            family === 'anthropic'
              ? l.includes('anthropic-version')
              : family === 'gemini'
                ? l.includes('/v1beta/models')
                : l.endsWith('/v1/models'),
          ),
        )
        .map((m: any) => m.name)
        .sort();
    const get = async (path: string, headers: Record<string, string>) =>
      (await (await fetch(`http://${h.service.httpAddress}${path}`, { headers })).json()) as any;
    const openai = await get('/v1/models', { authorization: `Bearer ${key}` });
    const anthropic = await get('/v1/models', { 'x-api-key': key, 'anthropic-version': '2023-06-01' });
    const gemini = await get('/v1beta/models', { 'x-goog-api-key': key });
    expect(listed('openai'), who).toEqual(openai.data.map((m: any) => m.id).sort());
    expect(listed('anthropic'), who).toEqual(anthropic.data.map((m: any) => m.id).sort());
    expect(listed('gemini'), who).toEqual(gemini.models.map((m: any) => m.name.replace('models/', '')).sort());
  }
});

test("answers only about the presenting key's own group", async () => {
  const alice = JSON.stringify((await call(h, '/console/api/access', { key: DEMO_KEYS.alice })).body);
  const setup = JSON.stringify((await call(h, '/console/api/setup', { key: DEMO_KEYS.alice })).body);
  for (const proOnly of ['o3', 'claude-sonnet-4-5', 'gemini-2.5-pro', 'text-embedding-3-large', '"pro"', 'bob']) {
    expect(alice).not.toContain(proOnly);
    expect(setup).not.toContain(proOnly);
  }
});

describe('every console answer is no-store, framed by nobody, with a strict policy', () => {
  test.each([
    ['the page', '/console/', 200, 'text/html'],
    ['its script', '/console/app.js', 200, 'text/javascript'],
    ['its styles', '/console/app.css', 200, 'text/css'],
    ['its icon', '/console/icon.svg', 200, 'image/svg+xml'],
    ['info', '/console/api/info', 200, 'application/json'],
    ['an unknown page', '/console/nope', 404, 'application/json'],
    ['an unknown API', '/console/api/nope', 404, 'application/json'],
  ])('%s', async (_name, path, status, type) => {
    const a = await call(h, path);
    expect(a.status).toBe(status);
    expect(a.headers.get('content-type')).toContain(type);
    expectSecurityHeaders(a);
  });

  test('/console redirects to /console/ (relative, so it works under any public path)', async () => {
    const a = await call(h, '/console');
    expect(a.status).toBe(308);
    expect(a.headers.get('location')).toBe('console/');
    expectSecurityHeaders(a);
  });

  test('a wrong method is 405 with allow', async () => {
    const a = await call(h, '/console/api/access', { method: 'GET' });
    expect(a.status).toBe(405);
    expect(a.headers.get('allow')).toBe('POST');
    expect(a.body.error.reason).toBe('method_not_allowed');
    expect((await call(h, '/console/', { method: 'POST' })).status).toBe(405);
  });

  test('the page has no inline script or style, and loads nothing from elsewhere', async () => {
    const html = (await call(h, '/console/')).body as string;
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)/);
    expect(html).not.toMatch(/\sstyle=|<style/);
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    const js = (await call(h, '/console/app.js')).body as string;
    expect(js).not.toMatch(/\b(localStorage|sessionStorage)\s*[.[]|document\.cookie|\.innerHTML\s*=|\beval\(/);
  });

  test("the page's script sends the key in the header the server reads (contract/headers.ts), and in no other", async () => {
    const js = (await call(h, '/console/app.js')).body as string;
    expect(js).toContain(`const KEY_HEADER = '${HEADER.consoleKey}';`);
    expect(js.match(/x-modelgate-[a-z-]+/g)!.filter((name) => name !== HEADER.consoleKey)).toEqual([]);
  });
});

describe('set up a client', () => {
  test('fills the Base URL table with the address the request reached, root and alternate prefix', async () => {
    const a = await callWithHost(h, '/console/api/setup', DEMO_KEYS.alice, {
      host: 'gw.example.test:8443',
      'x-forwarded-proto': 'https',
    });
    expect(a.status).toBe(200);
    const base = 'https://gw.example.test:8443';
    const rows = Object.fromEntries(a.body.rows.map((r: any) => [r.id, r]));
    expect(rows['coding-agent'].baseUrl).toBe(base);
    expect(rows['chat-sdk']).toMatchObject({
      baseUrl: `${base}/v1`,
      endpoint: `${base}/v1/chat/completions`,
      header: 'Authorization: Bearer <API_KEY>',
    });
    expect(rows['generative-http']).toMatchObject({
      baseUrl: `${base}/v1beta`,
      header: 'x-vendor-api-key: <API_KEY>',
      endpoint: `${base}/v1beta/models/gemini-2.5-flash:generateContent`,
    });
    expect(rows['alt-messages'].baseUrl).toBe(`${base}/alt`);
    expect(rows['alt-chat'].baseUrl).toBe(`${base}/alt/v1`);
    expect(rows['alt-generative-http'].baseUrl).toBe(`${base}/alt/v1beta`);
    expect(rows['messages-client'].model).toBe('claude-3-5-haiku-latest');
    for (const r of a.body.rows) for (const s of r.snippets) expect(s.code).not.toContain('sk-mg-');
  });

  test('never uses a Host that is not a plain host[:port] (it would be written into the page)', async () => {
    const a = await callWithHost(h, '/console/api/setup', DEMO_KEYS.alice, { host: 'evil"><img src=x>' });
    expect(a.body.baseUrl).toBe('{base_url}');
  });

  test('uses gateway.publicBaseUrl when configured, in the table and in the hints that name the console', async () => {
    const yaml = readFileSync(DEMO_CONFIG, 'utf8').replace(
      '# publicBaseUrl: https://llm.example.com',
      'publicBaseUrl: https://llm.example.com',
    );
    const other = await startHarness({ configPath: tempConfig(yaml) });
    try {
      const a = await callWithHost(other, '/console/api/setup', DEMO_KEYS.bob, { host: 'ignored.test' });
      expect(a.body.baseUrl).toBe('https://llm.example.com');
      expect(a.body.rows[2].baseUrl).toBe('https://llm.example.com/v1');
      const unknown = await call(other, '/console/api/access', { key: 'sk-live-0123456789abcdefghij' });
      expect(unknown.body.error.hint).toContain('copied from the console (https://llm.example.com/console/)');
    } finally {
      await other.close();
    }
  });
});

describe('the doctor over the API', () => {
  test('names the failing rule and the change', async () => {
    const a = await call(h, '/console/api/doctor', {
      key: DEMO_KEYS.alice,
      body: { baseUrl: `http://${h.service.httpAddress}/v1`, clientKind: 'messages-client' },
    });
    expect(a.status).toBe(200);
    expect(a.body.failing).toMatchObject({
      id: 'path',
      ref: '§4.1 rule 4, §7 404',
      gatewayAnswers: { status: 404, reason: 'path_repeated' },
    });
    expect(a.body.failing.change).toBe(`set the Base URL to http://${h.service.httpAddress}`);
  });

  test('recognises a key pasted into the model field, and never echoes it', async () => {
    const a = await call(h, '/console/api/doctor', {
      key: DEMO_KEYS.alice,
      body: { baseUrl: `http://${h.service.httpAddress}/v1`, clientKind: 'chat-sdk', model: DEMO_KEYS.bob },
    });
    expect(a.body.failing).toMatchObject({ id: 'model-in-group', detail: 'the model field holds an API key' });
    expect(JSON.stringify(a.body)).not.toContain(DEMO_KEYS.bob.slice(6, 18));
  });

  test.each([
    ['not JSON', '{', /JSON object/],
    ['no client kind', { baseUrl: 'http://x' }, /clientKind is required/],
    [
      'an unknown client kind',
      { baseUrl: 'http://x', clientKind: 'vscode' },
      /clientKind must be one of: coding-agent, chat-app/,
    ],
    [
      'a status that is not one',
      { baseUrl: 'http://x', clientKind: 'chat-sdk', status: 'teapot' },
      /status must be an HTTP status/,
    ],
    ['a field that is not a string', { baseUrl: 42, clientKind: 'chat-sdk' }, /baseUrl must be a string/],
  ])('refuses %s with 400 body_invalid', async (_name, body, hint) => {
    const res = await fetch(`http://${h.service.httpAddress}/console/api/doctor`, {
      method: 'POST',
      headers: { [HEADER.consoleKey]: DEMO_KEYS.alice },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    const a = (await res.json()) as any;
    expect(res.status).toBe(400);
    expect(a.error.reason).toBe('body_invalid');
    expect(a.error.hint).toMatch(hint);
  });
});

describe('the usage slot', () => {
  test("shows the presenting key's recent usage when the service has a provider, asking only for that key", async () => {
    usageCalls = [];
    const a = await call(h, '/console/api/access', { key: DEMO_KEYS.alice });
    expect(a.body.usage).toEqual(USAGE);
    expect(usageCalls).toEqual(['alice:10']);
  });

  test('a failing provider leaves the access view working, with usage null', async () => {
    const a = await call(h, '/console/api/access', { key: DEMO_KEYS.bob });
    expect(a.status).toBe(200);
    expect(a.body.usage).toBeNull();
  });

  test("by default it is the meter's ledger: the key's own debited responses, newest first, cost null where the model had no price", async () => {
    const metered = await startHarness();
    try {
      const ledger = metered.service.store.meter!;
      const price = { input: 0.15, output: 0.6, cachedInput: null };
      await ledger.debit({
        requestId: 'r-1',
        keyId: 'alice',
        group: 'basic',
        model: 'gpt-4o-mini',
        protocol: 'chat',
        inputTokens: 10,
        outputTokens: 20,
        cachedInputTokens: 0,
        price,
      });
      await ledger.debit({
        requestId: 'r-2',
        keyId: 'alice',
        group: 'basic',
        model: 'gpt-4o-mini',
        protocol: 'chat',
        inputTokens: 1,
        outputTokens: 2,
        cachedInputTokens: 0,
        price: null,
      });
      await ledger.debit({
        requestId: 'r-3',
        keyId: 'bob',
        group: 'pro',
        model: 'gpt-4o',
        protocol: 'chat',
        inputTokens: 5,
        outputTokens: 5,
        cachedInputTokens: 0,
        price: null,
      });
      const a = await call(metered, '/console/api/access', { key: DEMO_KEYS.alice });
      expect(a.status).toBe(200);
      expect(a.body.usage.map((u: UsageRow) => [u.model, u.inputTokens, u.outputTokens, u.cost])).toEqual([
        ['gpt-4o-mini', 1, 2, null],
        ['gpt-4o-mini', 10, 20, 0.0000135],
      ]);
    } finally {
      await metered.close();
    }
  });

  test('without a provider (a store that keeps no ledger) there is no usage field at all', async () => {
    const plain = await startHarness({
      configPath: tempConfig(
        readFileSync(DEMO_CONFIG, 'utf8').replace(/^meter:\n  enabled: true/m, 'meter:\n  enabled: false'),
      ),
    });
    try {
      const a = await call(plain, '/console/api/access', { key: DEMO_KEYS.alice });
      expect(a.status).toBe(200);
      expect('usage' in a.body).toBe(false);
    } finally {
      await plain.close();
    }
  });
});

describe('rate limits', () => {
  const limited = (perAddress: number, perKey: number) =>
    readFileSync(DEMO_CONFIG, 'utf8') +
    `\nconsole:\n  rateLimit:\n    perAddressPerMinute: ${perAddress}\n    perKeyPerMinute: ${perKey}\n`;
  let clock = 1_800_000_000_000;

  test('per client address (the last x-forwarded-for hop, which Envoy appends), with retry-after, until the minute is over', async () => {
    const r = await startHarness({ configPath: tempConfig(limited(3, 100)), now: () => clock });
    try {
      const from = (xff: string) =>
        call(r, '/console/api/access', { key: DEMO_KEYS.alice, headers: { 'x-forwarded-for': xff } });
      expect((await from('1.1.1.1, 10.9.9.9')).status).toBe(200);
      expect((await from('2.2.2.2, 10.9.9.9')).status).toBe(200);
      expect((await from('10.9.9.9')).status).toBe(200);
      const over = await from('3.3.3.3, 10.9.9.9');
      expect(over.status).toBe(429);
      expect(over.body.error).toMatchObject({
        reason: 'console_rate_limited',
        hint: expect.stringContaining('this address'),
      });
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
      expectSecurityHeaders(over);
      expect((await from('10.8.8.8')).status).toBe(200);
      clock += 61_000;
      expect((await from('10.9.9.9')).status).toBe(200);
    } finally {
      await r.close();
    }
  });

  test('per key, whatever the address', async () => {
    const r = await startHarness({ configPath: tempConfig(limited(100, 2)), now: () => clock });
    try {
      const as = (ip: string, key: string) =>
        call(r, '/console/api/access', { key, headers: { 'x-forwarded-for': ip } });
      expect((await as('10.0.0.1', DEMO_KEYS.alice)).status).toBe(200);
      expect((await as('10.0.0.2', DEMO_KEYS.alice)).status).toBe(200);
      const over = await as('10.0.0.3', DEMO_KEYS.alice);
      expect(over.status).toBe(429);
      expect(over.body.error.hint).toContain('with this key');
      expect((await as('10.0.0.3', DEMO_KEYS.bob)).status).toBe(200);
    } finally {
      await r.close();
    }
  });
});

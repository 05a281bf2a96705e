/**
 * No piece of a key in any log, through the real Envoy: keys (valid, unknown, imported without the
 * prefix) are sent in every header, in the path (routed and not), in the query, as the model, as the
 * HTTP/2 method, whole, percent-encoded, cut and split by stray characters; then Envoy's whole
 * output (access log and its own log) and every modelgate log line are searched for every
 * 8-character piece of every key, as written and percent-decoded.
 */
import * as http2 from 'node:http2';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { hashKey, KEY_PREFIX } from '../../src/contract/key-format';
import { lenientDecode } from '../../src/contract/safe-text';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

/** An imported key: nothing in its shape says it is one. */
const IMPORTED = 'legacyKey0123456789abcdefXYZ';
/** A well-formed key no store knows (fixed, so that the test is the same every run). */
const UNKNOWN = 'sk-mg-ef5sAY7BcoDYnpOLYuNoJgHQUQDHBO8GKd0R6uiC';
const KEYS = [...Object.values(DEMO_KEYS), UNKNOWN, IMPORTED];
const ALICE = DEMO_KEYS.alice;
const enc = (s: string) => [...s].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`).join('');

interface Line {
  method: string;
  path: string;
  headers?: Array<[string, string]>;
  body?: string;
  http2?: boolean;
}

function placements(k: string): Line[] {
  const body = (model: string) => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] });
  const bare = k.startsWith(KEY_PREFIX) ? k.slice(KEY_PREFIX.length) : k;
  const split = `${k.slice(0, 12)}"${k.slice(12, 25)}/${k.slice(25)}`;
  return [
    ...[
      'authorization',
      'x-api-key',
      'api-key',
      'cookie',
      'proxy-authorization',
      'x_api_key',
      'x-request-id',
      'user-agent',
      'referer',
      'host',
    ].map((h): Line => ({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [
        [h, h === 'authorization' || h === 'proxy-authorization' ? `Bearer ${k}` : k],
        ...(h === 'authorization' ? [] : [['authorization', `Bearer ${ALICE}`] as [string, string]]),
      ],
      body: body('gpt-4o-mini'),
    })),
    ...['x-goog-api-key', 'x-vendor-api-key'].map((h): Line => ({
      method: 'POST',
      path: '/v1beta/models/gemini-2.5-flash:generateContent',
      headers: [[h, k]],
      body: '{}',
    })),
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer "${k}"`]],
      body: body('gpt-4o-mini'),
    },
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${k.slice(0, -3)}`]],
      body: body('gpt-4o-mini'),
    },
    { method: 'POST', path: '/v1/chat/completions', headers: [['authorization', `Bearer ${ALICE}`]], body: body(k) },
    { method: 'POST', path: '/v1/chat/completions', headers: [['authorization', `Bearer ${ALICE}`]], body: body(bare) },
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${ALICE}`]],
      body: body(split),
    },
    { method: 'POST', path: `/v1beta/models/${k}:generateContent`, headers: [['x-goog-api-key', ALICE]], body: '{}' },
    {
      method: 'POST',
      path: `/v1beta/models/${bare}:generateContent`,
      headers: [['x-goog-api-key', ALICE]],
      body: '{}',
    },
    {
      method: 'POST',
      path: `/v1beta/models/${enc(bare)}:generateContent`,
      headers: [['x-goog-api-key', ALICE]],
      body: '{}',
    },
    {
      method: 'POST',
      path: `/v1beta/models/${encodeURIComponent(split)}:generateContent`,
      headers: [['x-goog-api-key', ALICE]],
      body: '{}',
    },
    { method: 'GET', path: `/v1/models/${bare}`, headers: [['authorization', `Bearer ${ALICE}`]] },
    { method: 'POST', path: `/v1/chat/${k}`, headers: [['authorization', `Bearer ${k}`]], body: '{}' },
    { method: 'GET', path: `/${bare}/${k}` },
    {
      method: 'POST',
      path: `/v1/chat/completions?key=${k}`,
      headers: [['authorization', `Bearer ${ALICE}`]],
      body: body('gpt-4o-mini'),
    },
    {
      method: 'POST',
      path: `/v1/chat/completions?x=${enc(k)}%zz`,
      headers: [['authorization', `Bearer ${ALICE}`]],
      body: body('gpt-4o-mini'),
    },
    {
      method: 'POST',
      path: `/v1/chat/completions?${bare}`,
      headers: [['authorization', `Bearer ${ALICE}`]],
      body: body('gpt-4o-mini'),
    },
    { method: k, path: '/v1/models', http2: true },
    // The decision line logs the user agent: a key there escaped, bare or split, beside an agent's name.
    ...[enc(k), bare, split, `ops-probe/1.0 ${enc(bare)}`].map((ua): Line => ({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [
        ['user-agent', ua],
        ['authorization', `Bearer ${k}`],
      ],
      body: body('gpt-4o-mini'),
    })),
  ];
}

describeE2E("keys never reach a log line, Envoy's or modelgate's", () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({
      config: (demo) => `${demo}  - id: imported-1\n    sha256: ${hashKey(IMPORTED)}\n    group: basic\n`,
    });
  });
  afterAll(async () => gw?.close());

  it('after every key was sent in every position (over 200 requests through Envoy)', async () => {
    const lines = KEYS.flatMap(placements);
    expect(lines.length).toBeGreaterThan(200);
    const statuses = new Map<number, number>();
    for (const l of lines) {
      let status: number;
      try {
        status = (await gw.send(l.method, l.path, { headers: l.headers, body: l.body, http2: l.http2 })).status;
      } catch {
        status = -1; // a request Envoy refused at the protocol level (an HTTP/2 reset)
      }
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
    // The run exercised allows and denials of every kind, Envoy's own answers included.
    for (const s of [200, 400, 401, 403, 404]) expect(statuses.get(s) ?? 0, `status ${s}`).toBeGreaterThan(0);
    // Every line Envoy will write, before the logs are read (it flushes every 20 ms, later when busy).
    await gw.accessLogWhen((log) => log.length >= lines.length - (statuses.get(-1) ?? 0));
    await new Promise<void>((resolve) => gw.modelgate.service!.logger.flush(() => resolve()));
    const envoyText = gw.envoyOutput();
    const modelgateText = gw.modelgate.logLines().join('\n');
    expect(gw.accessLog().length).toBeGreaterThanOrEqual(lines.length - (statuses.get(-1) ?? 0));
    expect(modelgateText.split('\n').length).toBeGreaterThan(150);
    for (const [who, text] of [
      ['envoy', envoyText],
      ['modelgate', modelgateText],
    ] as const) {
      const decoded = lenientDecode(text);
      for (const k of KEYS) {
        const secret = k.startsWith(KEY_PREFIX) ? k.slice(KEY_PREFIX.length) : k;
        for (let i = 0; i + 8 <= secret.length; i++) {
          const piece = secret.slice(i, i + 8);
          expect(text.includes(piece) || decoded.includes(piece), `${who} log holds ${piece} (a piece of a key)`).toBe(
            false,
          );
        }
      }
    }
    // Ops still see who and what: key ids and routes, the client's address and agent, never keys.
    const decisions = modelgateText
      .split('\n')
      .filter((l) => l.includes('"msg":"decision"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(
      decisions.some(
        (d) => d.client === '127.0.0.1' && typeof d.userAgent === 'string' && d.userAgent.startsWith('ops-probe/1.0 '),
      ),
    ).toBe(true);
    expect(
      gw
        .accessLog()
        .some((l) => l.key_id === 'alice' && l.route === 'chat_completions' && l.path === '/v1/chat/completions'),
    ).toBe(true);
    expect(gw.accessLog().some((l) => l.key_id === 'imported-1')).toBe(true);
  }, 120_000);
});

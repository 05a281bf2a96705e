/**
 * Regression table for the security review of issue 14 (§0), service side: each row is a request
 * that was allowed (or leaked) before and is refused (or cleaned) now, through a real server with
 * CheckRequests built as Envoy builds them. The Envoy side of the same findings (headers nobody
 * reads, underscores, trailers, escaped slashes, the access log) is in test/e2e/review-findings.test.ts.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { KEY_PREFIX, hashKey } from '../../src/check/key-format';
import { DEMO_KEYS } from '../support/demo-keys';
import { DEMO_CONFIG, deniedHeader, reasonOf, startHarness, tempConfig, type Harness } from '../support/service-harness';

/** An imported key (no prefix): nothing in its shape says it is one. */
const IMPORTED = 'legacyKey0123456789abcdefXYZ';
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ configPath: tempConfig(`${readFileSync(DEMO_CONFIG, 'utf8')}  - id: imported-1\n    sha256: ${hashKey(IMPORTED)}\n    group: basic\n`) });
});
afterAll(async () => { await h?.close(); });

const ALICE = DEMO_KEYS.alice;
const BOB = DEMO_KEYS.bob;
const BEARER: [string, string] = ['authorization', `Bearer ${ALICE}`];
const CHAT = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
const everyChar = (s: string) => [...s].map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`).join('');

interface Row {
  readonly why: string;
  readonly path: string;
  readonly headers?: ReadonlyArray<[string, string]>;
  readonly body?: string;
  readonly reason: string;
}

describe('a key in the URL is found whatever the encoding around it', () => {
  const rows: Row[] = [
    { why: 'percent-encoded key plus an invalid escape (decodeURIComponent failed as a whole)', path: `/v1/chat/completions?key=${encodeURIComponent(BOB)}%zz`, reason: 'key_in_url' },
    { why: 'every character escaped, and a stray % after it', path: `/v1/chat/completions?x=${everyChar(BOB)}%`, reason: 'key_in_url' },
    { why: 'double-encoded prefix', path: `/v1/chat/completions?x=sk%252Dmg%252D${BOB.slice(6)}`, reason: 'key_in_url' },
    { why: 'the key without its prefix in an innocent parameter', path: `/v1/chat/completions?x=${BOB.slice(KEY_PREFIX.length)}`, reason: 'key_in_url' },
    { why: 'the key without its prefix, upper-cased prefix', path: `/v1/chat/completions?x=SK-MG-${BOB.slice(KEY_PREFIX.length)}`, reason: 'key_in_url' },
    { why: 'split over two parameters by an encoded &', path: `/v1/chat/completions?x=sk-%26mg-${BOB.slice(6)}`, reason: 'key_in_url' },
    { why: 'the key without its prefix in the generative path', path: `/v1beta/models/${BOB.slice(6)}:generateContent`, headers: [['x-goog-api-key', ALICE]], reason: 'key_in_url' },
    { why: 'an escaped key in the generative path', path: `/v1beta/models/${everyChar(BOB)}:generateContent`, headers: [['x-goog-api-key', ALICE]], reason: 'key_in_url' },
    { why: 'the same with an invalid escape: no valid model segment', path: `/v1beta/models/${everyChar(BOB)}%zz:generateContent`, headers: [['x-goog-api-key', ALICE]], reason: 'path_unknown' },
    { why: 'an imported key (no prefix) in an innocent parameter: a key of the store (fuzzer, seed 15)', path: `/v1/chat/completions?token=${IMPORTED}`, reason: 'key_in_url' },
    { why: 'an imported key as a parameter name', path: `/v1/chat/completions?${encodeURIComponent(IMPORTED)}`, reason: 'key_in_url' },
    { why: 'an imported key, every character escaped, an invalid escape after it (fuzzer)', path: `/v1/chat/completions?token=${everyChar(IMPORTED)}%zz&alt=sse`, reason: 'key_in_url' },
    { why: 'a long query value that is no key stays allowed', path: '/v1/chat/completions?trace=0123456789abcdef0123', reason: 'allowed' },
    { why: 'more long values than are looked up (each costs a lookup)', path: `/v1/chat/completions?${Array.from({ length: 17 }, (_, i) => `p${i}=0123456789abcdef${i}`).join('&')}`, reason: 'key_in_url' },
    { why: 'an empty key parameter is allowed (and removed by Envoy)', path: '/v1/chat/completions?key=', reason: 'allowed' },
    { why: 'an ordinary query stays allowed', path: '/v1/chat/completions?api-version=2024-10-21&flag', reason: 'allowed' },
  ];
  test.each(rows)('$why: $reason', async ({ path, headers, body, reason }) => {
    const res = await h.check({ method: 'POST', path, headers: headers ?? [BEARER], body: body ?? CHAT });
    expect(reasonOf(res)).toBe(reason);
    const hint = deniedHeader(res, 'x-modelgate-hint') ?? '';
    expect(hint).not.toContain(BOB.slice(6, 18));
    expect(hint).not.toContain(IMPORTED.slice(4, 16));
  });
});

describe('the query is re-serialised by Envoy only when a parameter must go', () => {
  test.each([
    ['/v1/chat/completions', []],
    ['/v1/chat/completions?flag&a=1', []],
    ['/v1/chat/completions?key=&a=1', ['key']],
    ['/v1/chat/completions?KEY&api_key=', ['KEY', 'api_key']],
  ] as const)('%s removes %j', async (path, removed) => {
    const res = await h.check({ method: 'POST', path, headers: [BEARER], body: CHAT });
    expect(reasonOf(res)).toBe('allowed');
    expect(res.ok_response!.query_parameters_to_remove ?? []).toEqual(removed);
  });
});

describe('the body is read only as the provider would read it', () => {
  const rows: Row[] = [
    { why: 'form content type', path: '/v1/chat/completions', headers: [BEARER, ['content-type', 'application/x-www-form-urlencoded']], reason: 'content_type_unsupported' },
    { why: 'UTF-7 charset', path: '/v1/chat/completions', headers: [BEARER, ['content-type', 'application/json; charset=utf-7']], reason: 'content_type_unsupported' },
    { why: 'UTF-16 charset', path: '/v1/messages', headers: [BEARER, ['content-type', 'application/json;charset=UTF-16']], reason: 'content_type_unsupported' },
    { why: 'text/plain', path: '/v1/embeddings', headers: [BEARER, ['content-type', 'text/plain']], reason: 'content_type_unsupported' },
    { why: 'two content types', path: '/v1/responses', headers: [BEARER, ['content-type', 'application/json'], ['content-type', 'text/plain']], reason: 'content_type_unsupported' },
    { why: 'an unknown parameter', path: '/v1/chat/completions', headers: [BEARER, ['content-type', 'application/json; profile=x']], reason: 'content_type_unsupported' },
    { why: 'application/json', path: '/v1/chat/completions', headers: [BEARER, ['content-type', 'application/json']], reason: 'allowed' },
    { why: 'application/json with charset utf-8, any case and quoting', path: '/v1/chat/completions', headers: [BEARER, ['content-type', 'Application/JSON; Charset="UTF-8"']], reason: 'allowed' },
    { why: 'no content type (read as JSON, as providers do)', path: '/v1/chat/completions', reason: 'allowed' },
    { why: 'a generative call: the model is in the path, the body type is the provider\'s business', path: '/v1beta/models/gemini-2.5-flash:generateContent', headers: [['x-goog-api-key', ALICE], ['content-type', 'text/plain']], body: '{}', reason: 'allowed' },
    { why: '"MODEL" beside "model" (Go binds the last one)', path: '/v1/chat/completions', body: '{"model":"gpt-4o-mini","MODEL":"gpt-4o"}', reason: 'body_invalid' },
    { why: '"Model" before "model"', path: '/v1/chat/completions', body: '{"Model":"gpt-4o","model":"gpt-4o-mini"}', reason: 'body_invalid' },
    { why: 'an escaped "MODEL"', path: '/v1/chat/completions', body: '{"model":"gpt-4o-mini","\\u004dODEL":"gpt-4o"}', reason: 'body_invalid' },
    { why: 'a byte order mark (JSON.parse refuses it; some parsers skip it)', path: '/v1/chat/completions', body: `\ufeff${CHAT}`, reason: 'body_invalid' },
  ];
  test.each(rows)('$why: $reason', async ({ path, headers, body, reason }) => {
    const res = await h.check({ method: 'POST', path, headers: headers ?? [BEARER], body: body ?? CHAT });
    expect(reasonOf(res)).toBe(reason);
    if (reason !== 'allowed') expect(deniedHeader(res, 'x-modelgate-hint')!.length).toBeGreaterThan(30);
  });
});

describe('a key pasted as the model never comes back', () => {
  test.each([
    ['whole', BOB],
    ['without its prefix', BOB.slice(6)],
    ['with a stray quote inside', `${BOB.slice(0, 12)}"${BOB.slice(12)}`],
    ['with a space inside', `${BOB.slice(0, 20)} ${BOB.slice(20)}`],
    ['with a slash inside', `${BOB.slice(0, 9)}/${BOB.slice(9)}`],
    ['cut, without its prefix', BOB.slice(6, 30)],
  ])('%s', async (_why, model) => {
    const res = await h.check({ method: 'POST', path: '/v1/chat/completions', headers: [BEARER], body: JSON.stringify({ model }) });
    expect(reasonOf(res)).toBe('model_not_in_group');
    const hint = deniedHeader(res, 'x-modelgate-hint')!;
    const body = JSON.stringify(res.denied_response);
    for (let i = 6; i + 8 <= BOB.length; i++) {
      expect(hint).not.toContain(BOB.slice(i, i + 8));
      expect(body).not.toContain(BOB.slice(i, i + 8));
    }
  });
});

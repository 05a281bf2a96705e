/**
 * A key in the URL (401 key_in_url) is found whatever the encoding around it, and the query is
 * changed (re-serialised by Envoy) only when a key parameter must go. Each row is a request that
 * was allowed (or leaked) once and is refused (or cleaned) now, through a real server with
 * CheckRequests built as Envoy builds them; the Envoy side (the query as the upstream receives it)
 * is in test/e2e/request-line.test.ts.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { KEY_PREFIX, hashKey } from '../../src/contract/key-format';
import { DEMO_KEYS } from '../support/demo-keys';
import {
  DEMO_CONFIG,
  deniedHeader,
  reasonOf,
  startHarness,
  tempConfig,
  type Harness,
} from '../support/service-harness';

/** An imported key (no prefix): nothing in its shape says it is one. */
const IMPORTED = 'legacyKey0123456789abcdefXYZ';
let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    configPath: tempConfig(
      `${readFileSync(DEMO_CONFIG, 'utf8')}  - id: imported-1\n    sha256: ${hashKey(IMPORTED)}\n    group: basic\n`,
    ),
  });
});
afterAll(async () => {
  await h?.close();
});

const ALICE = DEMO_KEYS.alice;
const BOB = DEMO_KEYS.bob;
const BEARER: [string, string] = ['authorization', `Bearer ${ALICE}`];
const CHAT = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
const everyChar = (s: string) =>
  [...s].map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`).join('');

interface Row {
  readonly why: string;
  readonly path: string;
  readonly headers?: ReadonlyArray<[string, string]>;
  readonly body?: string;
  readonly reason: string;
}

describe('a key in the URL is found whatever the encoding around it', () => {
  const rows: Row[] = [
    {
      why: 'percent-encoded key plus an invalid escape (decodeURIComponent failed as a whole)',
      path: `/v1/chat/completions?key=${encodeURIComponent(BOB)}%zz`,
      reason: 'key_in_url',
    },
    {
      why: 'every character escaped, and a stray % after it',
      path: `/v1/chat/completions?x=${everyChar(BOB)}%`,
      reason: 'key_in_url',
    },
    {
      why: 'double-encoded prefix',
      path: `/v1/chat/completions?x=sk%252Dmg%252D${BOB.slice(6)}`,
      reason: 'key_in_url',
    },
    {
      why: 'the key without its prefix in an innocent parameter',
      path: `/v1/chat/completions?x=${BOB.slice(KEY_PREFIX.length)}`,
      reason: 'key_in_url',
    },
    {
      why: 'the key without its prefix, upper-cased prefix',
      path: `/v1/chat/completions?x=SK-MG-${BOB.slice(KEY_PREFIX.length)}`,
      reason: 'key_in_url',
    },
    {
      why: 'split over two parameters by an encoded &',
      path: `/v1/chat/completions?x=sk-%26mg-${BOB.slice(6)}`,
      reason: 'key_in_url',
    },
    {
      why: 'the key without its prefix in the generative path',
      path: `/v1beta/models/${BOB.slice(6)}:generateContent`,
      headers: [['x-goog-api-key', ALICE]],
      reason: 'key_in_url',
    },
    {
      why: 'an escaped key in the generative path',
      path: `/v1beta/models/${everyChar(BOB)}:generateContent`,
      headers: [['x-goog-api-key', ALICE]],
      reason: 'key_in_url',
    },
    {
      why: 'the same with an invalid escape: no valid model segment',
      path: `/v1beta/models/${everyChar(BOB)}%zz:generateContent`,
      headers: [['x-goog-api-key', ALICE]],
      reason: 'path_unknown',
    },
    {
      why: 'an imported key (no prefix) in an innocent parameter: a key of the store (fuzzer, seed 15)',
      path: `/v1/chat/completions?token=${IMPORTED}`,
      reason: 'key_in_url',
    },
    {
      why: 'an imported key as a parameter name',
      path: `/v1/chat/completions?${encodeURIComponent(IMPORTED)}`,
      reason: 'key_in_url',
    },
    {
      why: 'an imported key, every character escaped, an invalid escape after it (fuzzer)',
      path: `/v1/chat/completions?token=${everyChar(IMPORTED)}%zz&alt=sse`,
      reason: 'key_in_url',
    },
    {
      why: 'a long query value that is no key stays allowed',
      path: '/v1/chat/completions?trace=0123456789abcdef0123',
      reason: 'allowed',
    },
    {
      why: 'more long values than are looked up (each costs a lookup)',
      path: `/v1/chat/completions?${Array.from({ length: 17 }, (_, i) => `p${i}=0123456789abcdef${i}`).join('&')}`,
      reason: 'key_in_url',
    },
    {
      why: 'an empty key parameter is allowed (and removed by Envoy)',
      path: '/v1/chat/completions?key=',
      reason: 'allowed',
    },
    {
      why: 'an ordinary query stays allowed',
      path: '/v1/chat/completions?api-version=2024-10-21&flag',
      reason: 'allowed',
    },
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

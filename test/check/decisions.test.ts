/**
 * Every row of the reason table on every route style, under the root and the alternate prefix,
 * through a real server on port 0 with CheckRequests built as Envoy builds them (lowercase header
 * names, pseudo-headers, `:path` with its query, `raw_body`, repeated headers joined with ',').
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { CheckResponse__Output } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import { generateKey } from '../../src/contract/key-format';
import { REASONS } from '../../src/contract/reasons';
import { DEMO_KEYS } from '../support/demo-keys';
import { deniedHeader, okHeader, reasonOf, startHarness, type Harness } from '../support/service-harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

type Family = 'openai' | 'anthropic' | 'gemini';
interface Style {
  name: string;
  method: 'GET' | 'POST';
  /** Path for a model (generative puts it in the path). */
  path(model: string): string;
  /** Body for a model, or undefined for bodiless requests. */
  body?(model: string): string;
  keyHeader: 'authorization' | 'x-vendor-api-key';
  family: Family;
  /** A model of the demo group basic served on this style (alice may use it). */
  ok: string;
  /** A model of basic declared for another protocol style. */
  wrongProtocol?: string;
  hasModel: boolean;
}

const chatBody = (model: string) => JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], model });
const STYLES: Style[] = [
  {
    name: 'chat',
    method: 'POST',
    path: () => '/v1/chat/completions',
    body: chatBody,
    keyHeader: 'authorization',
    family: 'openai',
    ok: 'gpt-4o-mini',
    wrongProtocol: 'gemini-2.5-flash',
    hasModel: true,
  },
  {
    name: 'responses',
    method: 'POST',
    path: () => '/v1/responses',
    body: (m) => JSON.stringify({ input: 'hi', model: m }),
    keyHeader: 'authorization',
    family: 'openai',
    ok: 'gpt-4o-mini',
    wrongProtocol: 'text-embedding-3-small',
    hasModel: true,
  },
  {
    name: 'embeddings',
    method: 'POST',
    path: () => '/v1/embeddings',
    body: (m) => JSON.stringify({ input: 'hi', model: m }),
    keyHeader: 'authorization',
    family: 'openai',
    ok: 'text-embedding-3-small',
    wrongProtocol: 'claude-3-5-haiku-latest',
    hasModel: true,
  },
  {
    name: 'messages',
    method: 'POST',
    path: () => '/v1/messages',
    body: (m) => JSON.stringify({ max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], model: m }),
    keyHeader: 'authorization',
    family: 'anthropic',
    ok: 'claude-3-5-haiku-latest',
    wrongProtocol: 'gemini-2.5-flash',
    hasModel: true,
  },
  {
    name: 'generative',
    method: 'POST',
    path: (m) => `/v1beta/models/${m}:generateContent`,
    body: () => JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    keyHeader: 'x-vendor-api-key',
    family: 'gemini',
    ok: 'gemini-2.5-flash',
    wrongProtocol: 'claude-3-5-haiku-latest',
    hasModel: true,
  },
  {
    name: 'models (OpenAI list)',
    method: 'GET',
    path: () => '/v1/models',
    keyHeader: 'authorization',
    family: 'openai',
    ok: '',
    hasModel: false,
  },
  {
    name: 'models (Gemini list)',
    method: 'GET',
    path: () => '/v1beta/models',
    keyHeader: 'x-vendor-api-key',
    family: 'gemini',
    ok: '',
    hasModel: false,
  },
];

function keyHeaderValue(style: Style, key: string): string {
  return style.keyHeader === 'authorization' ? `Bearer ${key}` : key;
}

interface Case {
  reason: keyof typeof REASONS;
  key?: string;
  model?: string;
  query?: string;
  headers?: [string, string][];
  rawBody?: string;
  noKey?: boolean;
  maxRequestBytes?: number;
  applies?(s: Style): boolean;
}

const CASES: Case[] = [
  { reason: 'allowed', key: DEMO_KEYS.alice },
  { reason: 'key_in_url', key: DEMO_KEYS.alice, query: `?key=${DEMO_KEYS.alice}` },
  { reason: 'key_missing', noKey: true },
  { reason: 'key_malformed', key: `"${DEMO_KEYS.alice}"` },
  { reason: 'key_incomplete', key: DEMO_KEYS.alice.slice(0, -1) },
  { reason: 'key_unknown', key: generateKey() },
  { reason: 'key_disabled', key: DEMO_KEYS.dave },
  { reason: 'key_expired', key: DEMO_KEYS.erin },
  {
    reason: 'key_conflict',
    key: DEMO_KEYS.alice,
    headers: [
      ['x-api-key', DEMO_KEYS.bob],
      ['x-goog-api-key', DEMO_KEYS.bob],
    ],
  },
  { reason: 'group_unavailable', key: DEMO_KEYS.frank },
  {
    reason: 'body_invalid',
    key: DEMO_KEYS.alice,
    rawBody: '{"model": "gpt-4o-mini",',
    applies: (s) => s.hasModel && s.name !== 'generative',
  },
  { reason: 'body_too_large', key: DEMO_KEYS.alice, maxRequestBytes: 8, applies: (s) => s.hasModel },
  {
    reason: 'model_missing',
    key: DEMO_KEYS.alice,
    rawBody: '{"messages": [{"role": "user", "content": "hi", "model": "gpt-4o-mini"}]}',
    applies: (s) => s.hasModel && s.name !== 'generative',
  },
  { reason: 'model_not_in_group', key: DEMO_KEYS.alice, model: 'gemini-2.5-pro', applies: (s) => s.hasModel },
  { reason: 'model_wrong_protocol', key: DEMO_KEYS.alice, model: 'WRONG', applies: (s) => s.hasModel },
  { reason: 'model_unavailable', key: DEMO_KEYS.alice, model: 'gpt-4.1-nano', applies: (s) => s.hasModel },
  { reason: 'balance_insufficient', key: DEMO_KEYS.carol, applies: (s) => s.hasModel },
];

function request(style: Style, c: Case, prefix: string) {
  const model = c.model === 'WRONG' ? style.wrongProtocol! : (c.model ?? style.ok);
  const headers: [string, string][] = [['Content-Type', 'application/json'], ...(c.headers ?? [])];
  if (!c.noKey)
    headers.unshift([
      style.keyHeader === 'authorization' ? 'Authorization' : 'X-Vendor-Api-Key',
      keyHeaderValue(style, c.key!),
    ]);
  return {
    method: style.method,
    path: prefix + style.path(model) + (c.query ?? ''),
    headers,
    body: c.rawBody ?? style.body?.(model),
    maxRequestBytes: c.maxRequestBytes,
  };
}

function expectBodyShape(res: CheckResponse__Output, family: Family, reason: string): void {
  const body = JSON.parse(res.denied_response?.body ?? 'null');
  const hint = deniedHeader(res, 'x-modelgate-hint')!;
  const status = REASONS[reason as keyof typeof REASONS].status;
  if (family === 'openai') {
    expect(body.error.code).toBe(reason);
    expect(body.error.message).toContain(hint);
    expect(typeof body.error.type).toBe('string');
  } else if (family === 'anthropic') {
    expect(body.type).toBe('error');
    expect(body.error.message).toContain(hint);
    expect(typeof body.error.type).toBe('string');
  } else {
    expect(body.error.code).toBe(status);
    expect(body.error.message).toContain(hint);
    expect(body.error.status).toMatch(/^[A-Z_]+$/);
  }
}

for (const prefix of ['', '/alt']) {
  describe(`routes under ${prefix || 'the root'}`, () => {
    for (const style of STYLES) {
      for (const c of CASES.filter((x) => x.applies?.(STYLES.find((s) => s === style)!) ?? true)) {
        test(`${style.name}: ${c.reason === 'allowed' ? 'allows a valid request' : `denies with ${c.reason}`}`, async () => {
          const res = await h.check(request(style, c, prefix));
          expect(reasonOf(res)).toBe(c.reason);
          if (c.reason === 'allowed') {
            expect(res.status?.code ?? 0).toBe(0);
            expect(okHeader(res, 'x-modelgate-key-id')).toBe('alice');
            expect(okHeader(res, 'x-modelgate-group')).toBe('basic');
            if (style.hasModel) expect(okHeader(res, 'x-modelgate-model')).toBe(style.ok);
            return;
          }
          expect(res.status?.code).not.toBe(0);
          expect(res.denied_response?.status?.code).toBeDefined();
          expectBodyShape(res, prefix && style.family === 'gemini' ? 'gemini' : style.family, c.reason);
          const hint = deniedHeader(res, 'x-modelgate-hint')!;
          expect(hint.length).toBeGreaterThan(10);
          for (const k of Object.values(DEMO_KEYS)) expect(res.denied_response?.body).not.toContain(k.slice(6, 20));
          expect(deniedHeader(res, 'www-authenticate') !== undefined).toBe(REASONS[c.reason].status === 401);
        });
      }
    }
  });
}

describe('Envoy request details', () => {
  test('reads :path with its query and denies a key in it, even when the header also carries the key', async () => {
    const res = await h.check({
      method: 'POST',
      path: `/v1beta/models/gemini-2.5-flash:generateContent?alt=sse&key=${DEMO_KEYS.alice}`,
      headers: [['x-goog-api-key', DEMO_KEYS.alice]],
      body: '{}',
    });
    expect(reasonOf(res)).toBe('key_in_url');
  });

  test('allows ?alt=sse (a query that carries no key) on a streaming generative call', async () => {
    const res = await h.check({
      method: 'POST',
      path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
      headers: [['x-goog-api-key', DEMO_KEYS.alice]],
      body: '{}',
    });
    expect(reasonOf(res)).toBe('allowed');
  });

  test('denies a repeated Authorization header (joined with a comma by Envoy) with key_malformed', async () => {
    const res = await h.check({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [
        ['Authorization', `Bearer ${DEMO_KEYS.alice}`],
        ['Authorization', `Bearer ${DEMO_KEYS.alice}`],
      ],
      body: chatBody('gpt-4o-mini'),
    });
    expect(reasonOf(res)).toBe('key_malformed');
    expect(deniedHeader(res, 'x-modelgate-hint')).toContain('more than once');
  });

  test('accepts the stock SDK headers: x-api-key on messages and x-goog-api-key on generative', async () => {
    const anthropic = await h.check({
      method: 'POST',
      path: '/v1/messages',
      headers: [
        ['x-api-key', DEMO_KEYS.alice],
        ['anthropic-version', '2023-06-01'],
      ],
      body: JSON.stringify({ model: 'claude-3-5-haiku-latest', messages: [] }),
    });
    expect(reasonOf(anthropic)).toBe('allowed');
    const gemini = await h.check({
      method: 'POST',
      path: '/v1beta/models/gemini-2.5-flash:countTokens',
      headers: [['x-goog-api-key', DEMO_KEYS.alice]],
      body: '{}',
    });
    expect(reasonOf(gemini)).toBe('allowed');
  });

  test('accepts both header kinds on /alt/v1beta but only the vendor headers on /v1beta', async () => {
    const alt = await h.check({
      method: 'POST',
      path: '/alt/v1beta/models/gemini-2.5-flash:generateContent',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
      body: '{}',
    });
    expect(reasonOf(alt)).toBe('allowed');
    const root = await h.check({
      method: 'POST',
      path: '/v1beta/models/gemini-2.5-flash:generateContent',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
      body: '{}',
    });
    expect(reasonOf(root)).toBe('key_missing');
    expect(deniedHeader(root, 'x-modelgate-hint')).toContain('authorization');
  });

  test('removes every key header and the key query parameter from an allowed request, and overwrites spoofed identity headers', async () => {
    const res = await h.check({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [
        ['authorization', `Bearer ${DEMO_KEYS.alice}`],
        ['x-modelgate-group', 'pro'],
        ['x-modelgate-key-id', 'bob'],
      ],
      body: chatBody('gpt-4o-mini'),
    });
    const ok = res.ok_response!;
    expect(ok.headers_to_remove).toEqual(
      expect.arrayContaining(['authorization', 'x-api-key', 'x-vendor-api-key', 'x-goog-api-key']),
    );
    expect(ok.query_parameters_to_remove).toBeUndefined();
    for (const h of ok.headers ?? []) expect(h.append_action).toBe('OVERWRITE_IF_EXISTS_OR_ADD');
    expect(okHeader(res, 'x-modelgate-group')).toBe('basic');
    expect(okHeader(res, 'x-modelgate-key-id')).toBe('alice');
    const meta = res.dynamic_metadata?.fields ?? {};
    expect(meta.keyId?.stringValue).toBe('alice');
    expect(meta.group?.stringValue).toBe('basic');
    expect(meta.model?.stringValue).toBe('gpt-4o-mini');
    expect(meta.reason?.stringValue).toBe('allowed');
  });

  test('denies unknown paths with path_unknown and wrong methods with method_not_allowed and an allow header', async () => {
    const unknown = await h.check({
      method: 'POST',
      path: '/v1/chat/complete',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
      body: chatBody('gpt-4o-mini'),
    });
    expect(reasonOf(unknown)).toBe('path_unknown');
    const wrong = await h.check({
      method: 'GET',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
    });
    expect(reasonOf(wrong)).toBe('method_not_allowed');
    expect(deniedHeader(wrong, 'allow')).toBe('POST');
  });

  test('lists models for an Anthropic client (anthropic-version) with an Anthropic-shaped denial', async () => {
    const res = await h.check({
      method: 'GET',
      path: '/v1/models',
      headers: [
        ['x-api-key', DEMO_KEYS.dave],
        ['anthropic-version', '2023-06-01'],
      ],
    });
    expect(reasonOf(res)).toBe('key_disabled');
    expect(JSON.parse(res.denied_response!.body!).type).toBe('error');
  });

  test('denies a compressed body with body_invalid', async () => {
    const res = await h.check({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [
        ['authorization', `Bearer ${DEMO_KEYS.alice}`],
        ['content-encoding', 'gzip'],
      ],
      body: Buffer.from([0x1f, 0x8b, 8, 0]),
    });
    expect(reasonOf(res)).toBe('body_invalid');
  });

  test('denies duplicate different model fields with body_invalid (no parser differential)', async () => {
    const res = await h.check({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
      body: '{"model":"gpt-4o-mini","messages":[],"model":"gpt-4o"}',
    });
    expect(reasonOf(res)).toBe('body_invalid');
  });

  test('reads an escaped model key and value exactly', async () => {
    const res = await h.check({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
      body: '{"messages":[{"model":"gpt-4o"}],"mod\\u0065l":"gpt\\u002d4o-mini"}',
    });
    expect(reasonOf(res)).toBe('allowed');
    expect(okHeader(res, 'x-modelgate-model')).toBe('gpt-4o-mini');
  });

  test('names the right endpoint when a model is used on the wrong protocol', async () => {
    const res = await h.check({
      method: 'POST',
      path: '/alt/v1/chat/completions',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
      body: chatBody('gemini-2.5-flash'),
    });
    expect(reasonOf(res)).toBe('model_wrong_protocol');
    expect(deniedHeader(res, 'x-modelgate-hint')).toContain('/alt/v1beta/models/gemini-2.5-flash:generateContent');
  });

  test("suggests the near name from the key's own group for a typo and for extra spaces", async () => {
    const typo = await h.check({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
      body: chatBody('gpt-4o-mnii'),
    });
    expect(deniedHeader(typo, 'x-modelgate-hint')).toContain('did you mean "gpt-4o-mini"');
    const spaced = await h.check({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
      body: chatBody(' gpt-4o-mini '),
    });
    expect(deniedHeader(spaced, 'x-modelgate-hint')).toContain('leading or trailing spaces');
    const cased = await h.check({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
      body: chatBody('GPT-4o-mini'),
    });
    expect(deniedHeader(cased, 'x-modelgate-hint')).toContain('case-sensitive');
  });

  test('never echoes a key pasted into the model field', async () => {
    const res = await h.check({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
      body: chatBody(DEMO_KEYS.bob),
    });
    expect(reasonOf(res)).toBe('model_not_in_group');
    expect(JSON.stringify(res)).not.toContain(DEMO_KEYS.bob);
  });
});

/**
 * The body is read only as the provider would read it: a Content-Type other than JSON in UTF-8 is
 * 415 content_type_unsupported, a re-cased "model" key beside or instead of "model" and a byte order
 * mark are 400 body_invalid (parsers disagree on them), through a real server with CheckRequests built
 * as Envoy builds them. Each row is a request that was allowed once and is refused now.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { deniedHeader, reasonOf, startHarness, type Harness } from '../support/service-harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

const ALICE = DEMO_KEYS.alice;
const BEARER: [string, string] = ['authorization', `Bearer ${ALICE}`];
const CHAT = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });

interface Row {
  readonly why: string;
  readonly path: string;
  readonly headers?: ReadonlyArray<[string, string]>;
  readonly body?: string;
  readonly reason: string;
}

describe('the body is read only as the provider would read it', () => {
  const rows: Row[] = [
    {
      why: 'form content type',
      path: '/v1/chat/completions',
      headers: [BEARER, ['content-type', 'application/x-www-form-urlencoded']],
      reason: 'content_type_unsupported',
    },
    {
      why: 'UTF-7 charset',
      path: '/v1/chat/completions',
      headers: [BEARER, ['content-type', 'application/json; charset=utf-7']],
      reason: 'content_type_unsupported',
    },
    {
      why: 'UTF-16 charset',
      path: '/v1/messages',
      headers: [BEARER, ['content-type', 'application/json;charset=UTF-16']],
      reason: 'content_type_unsupported',
    },
    {
      why: 'text/plain',
      path: '/v1/embeddings',
      headers: [BEARER, ['content-type', 'text/plain']],
      reason: 'content_type_unsupported',
    },
    {
      why: 'two content types',
      path: '/v1/responses',
      headers: [BEARER, ['content-type', 'application/json'], ['content-type', 'text/plain']],
      reason: 'content_type_unsupported',
    },
    {
      why: 'an unknown parameter',
      path: '/v1/chat/completions',
      headers: [BEARER, ['content-type', 'application/json; profile=x']],
      reason: 'content_type_unsupported',
    },
    {
      why: 'application/json',
      path: '/v1/chat/completions',
      headers: [BEARER, ['content-type', 'application/json']],
      reason: 'allowed',
    },
    {
      why: 'application/json with charset utf-8, any case and quoting',
      path: '/v1/chat/completions',
      headers: [BEARER, ['content-type', 'Application/JSON; Charset="UTF-8"']],
      reason: 'allowed',
    },
    { why: 'no content type (read as JSON, as providers do)', path: '/v1/chat/completions', reason: 'allowed' },
    {
      why: "a generative call: the model is in the path, the body type is the provider's business",
      path: '/v1beta/models/gemini-2.5-flash:generateContent',
      headers: [
        ['x-goog-api-key', ALICE],
        ['content-type', 'text/plain'],
      ],
      body: '{}',
      reason: 'allowed',
    },
    {
      why: '"MODEL" beside "model" (Go binds the last one)',
      path: '/v1/chat/completions',
      body: '{"model":"gpt-4o-mini","MODEL":"gpt-4o"}',
      reason: 'body_invalid',
    },
    {
      why: '"Model" before "model"',
      path: '/v1/chat/completions',
      body: '{"Model":"gpt-4o","model":"gpt-4o-mini"}',
      reason: 'body_invalid',
    },
    {
      why: 'an escaped "MODEL"',
      path: '/v1/chat/completions',
      body: '{"model":"gpt-4o-mini","\\u004dODEL":"gpt-4o"}',
      reason: 'body_invalid',
    },
    {
      why: 'a byte order mark (JSON.parse refuses it; some parsers skip it)',
      path: '/v1/chat/completions',
      body: `\ufeff${CHAT}`,
      reason: 'body_invalid',
    },
  ];
  test.each(rows)('$why: $reason', async ({ path, headers, body, reason }) => {
    const res = await h.check({ method: 'POST', path, headers: headers ?? [BEARER], body: body ?? CHAT });
    expect(reasonOf(res)).toBe(reason);
    if (reason !== 'allowed') expect(deniedHeader(res, 'x-modelgate-hint')!.length).toBeGreaterThan(30);
  });
});

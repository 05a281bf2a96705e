/**
 * A stream of real keys — valid, invalid, in every header, in the URL, in the path, in the model
 * field, quoted, cut, doubled, split by stray characters, without their prefix — goes through the
 * service; no 8-character piece of any key may appear in any log line. (Through Envoy, with Envoy's
 * own log searched too: test/e2e/log-safety.test.ts.)
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { hashKey } from '../../src/contract/key-format';
import { DEMO_KEYS } from '../support/demo-keys';
import { DEMO_CONFIG, reasonOf, startHarness, tempConfig, type Harness } from '../support/service-harness';

/** An imported key (no sk-mg- prefix): nothing in its shape says it is a key. */
const IMPORTED = 'legacyKey0123456789abcdefXYZ';
let h: Harness;

beforeAll(async () => {
  const yaml =
    readFileSync(DEMO_CONFIG, 'utf8') + `  - id: imported-1\n    sha256: ${hashKey(IMPORTED)}\n    group: basic\n`;
  h = await startHarness({ configPath: tempConfig(yaml) });
});
afterAll(async () => {
  await h?.close();
});

test('no key string reaches any log line, whatever the client does with it', async () => {
  // Fixed, so that the test is the same every run.
  const unknown = 'sk-mg-ef5sAY7BcoDYnpOLYuNoJgHQUQDHBO8GKd0R6uiC';
  const keys = [...Object.values(DEMO_KEYS), unknown, IMPORTED];
  const placements = (k: string) => [
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${k}`]] as [string, string][],
      body: '{"model":"gpt-4o-mini"}',
    },
    {
      method: 'POST',
      path: '/v1/messages',
      headers: [['x-api-key', k]] as [string, string][],
      body: '{"model":"claude-3-5-haiku-latest"}',
    },
    {
      method: 'POST',
      path: '/v1beta/models/gemini-2.5-flash:generateContent',
      headers: [['x-vendor-api-key', k]] as [string, string][],
      body: '{}',
    },
    {
      method: 'POST',
      path: '/alt/v1beta/models/gemini-2.5-flash:generateContent',
      headers: [['x-goog-api-key', k]] as [string, string][],
      body: '{}',
    },
    { method: 'POST', path: `/v1beta/models/gemini-2.5-flash:generateContent?key=${k}`, body: '{}' },
    { method: 'GET', path: `/v1/models?api_key=${encodeURIComponent(k)}` },
    {
      method: 'POST',
      path: `/v1beta/models/${k}:generateContent`,
      headers: [['x-goog-api-key', DEMO_KEYS.alice]] as [string, string][],
      body: '{}',
    },
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]] as [string, string][],
      body: JSON.stringify({ model: k }),
    },
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer "${k}"`]] as [string, string][],
      body: '{"model":"gpt-4o-mini"}',
    },
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer Bearer ${k}`]] as [string, string][],
      body: '{"model":"gpt-4o-mini"}',
    },
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${k.slice(0, -2)}`]] as [string, string][],
      body: '{"model":"gpt-4o-mini"}',
    },
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', k]] as [string, string][],
      body: '{"model":"gpt-4o-mini"}',
    },
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [
        ['authorization', `Bearer ${k}`],
        ['x-api-key', DEMO_KEYS.bob],
      ] as [string, string][],
      body: '{"model":"gpt-4o-mini"}',
    },
    {
      method: 'POST',
      path: `/v1/chat/${k}`,
      headers: [['authorization', `Bearer ${k}`]] as [string, string][],
      body: '{}',
    },
    // Split by a quote, a space or a slash (the redaction used to stop there), and without the prefix.
    ...['"', ' ', '/'].map((c) => ({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]] as [string, string][],
      body: JSON.stringify({ model: `${k.slice(0, 9)}${c}${k.slice(9)}` }),
    })),
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]] as [string, string][],
      body: JSON.stringify({ model: k.replace('sk-mg-', '') }),
    },
    {
      method: 'POST',
      path: `/v1beta/models/${encodeURIComponent(`${k.slice(0, 20)}"${k.slice(20)}`)}:generateContent`,
      headers: [['x-goog-api-key', DEMO_KEYS.alice]] as [string, string][],
      body: '{}',
    },
    {
      method: 'POST',
      path: `/v1/chat/completions?x=${encodeURIComponent(k)}%zz`,
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]] as [string, string][],
      body: '{"model":"gpt-4o-mini"}',
    },
    // The user agent and the client address are logged: a key there, as it is, escaped, split, without its prefix.
    ...[
      k,
      `agent/1.0 (${k})`,
      `agent/1.0 ${[...k].map((ch) => `%${ch.charCodeAt(0).toString(16)}`).join('')}`,
      `agent/1.0 ${k.slice(0, 12)} ${k.slice(12)}`,
      k.replace('sk-mg-', ''),
      `${'a'.repeat(120)}${k}`,
    ].map((ua) => ({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [
        ['authorization', `Bearer ${DEMO_KEYS.alice}`],
        ['user-agent', ua],
      ] as [string, string][],
      body: '{"model":"gpt-4o-mini"}',
    })),
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [
        ['authorization', `Bearer ${k}`],
        ['user-agent', k],
      ] as [string, string][],
      body: '{"model":"gpt-4o-mini"}',
    },
    {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [
        ['authorization', `Bearer ${DEMO_KEYS.alice}`],
        ['x-forwarded-for', `198.51.100.1, ${k}`],
      ] as [string, string][],
      body: '{"model":"gpt-4o-mini"}',
    },
    {
      method: 'POST',
      path: '/v1/chat/completions',
      client: k,
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]] as [string, string][],
      body: '{"model":"gpt-4o-mini"}',
    },
  ];
  const reasons = new Set<string>();
  for (const k of keys) for (const line of placements(k)) reasons.add(reasonOf(await h.check(line)));
  // The stream exercised allows and many kinds of denial.
  for (const r of [
    'allowed',
    'key_in_url',
    'key_malformed',
    'key_incomplete',
    'key_unknown',
    'key_conflict',
    'model_not_in_group',
    'path_unknown',
  ])
    expect(reasons).toContain(r);

  await new Promise<void>((resolve) => h.service.logger.flush(() => resolve()));
  const decisions = h.logs.decisions();
  expect(decisions.length).toBeGreaterThanOrEqual(keys.length * 20);
  const all = h.logs.raw.join('\n');
  for (const k of keys) {
    // Neither the key nor any piece of 8 characters of it (after its public prefix).
    const secret = k.replace(/^sk-mg-/, '');
    for (let i = 0; i + 8 <= secret.length; i++)
      expect(all, `a piece of a key at ${i}`).not.toContain(secret.slice(i, i + 8));
  }
  expect(decisions.filter((d) => typeof d.userAgent === 'string').length).toBeGreaterThanOrEqual(keys.length * 7);
  // Ops still see who: key ids, never keys.
  expect(decisions.some((d) => d.keyId === 'imported-1')).toBe(true);
  expect(decisions.some((d) => d.keyId === 'alice' && d.model === 'gpt-4o-mini')).toBe(true);
});

test('a decision line carries the fields ops need', async () => {
  await h.check({
    method: 'POST',
    path: '/v1/chat/completions?x=1',
    client: '2001:db8::7',
    headers: [
      ['authorization', `Bearer ${DEMO_KEYS.alice}`],
      ['x-request-id', 'req-123'],
      ['user-agent', 'OpenAI/Python 1.99.1\u0007'],
    ],
    body: '{"model":"gpt-4o"}',
  });
  await new Promise<void>((resolve) => h.service.logger.flush(() => resolve()));
  const line = h.logs.decisions().find((d) => d.requestId === 'req-123')!;
  expect(line).toMatchObject({
    decision: 'deny',
    status: 403,
    reason: 'model_not_in_group',
    keyId: 'alice',
    group: 'basic',
    model: 'gpt-4o',
    style: 'chat',
    method: 'POST',
    path: '/v1/chat/completions',
    client: '2001:db8::7',
    userAgent: 'OpenAI/Python 1.99.1?',
  });
  expect(typeof line.durUs).toBe('number');
  expect(typeof line.hint).toBe('string');
});

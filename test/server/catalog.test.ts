/**
 * The model lists over real HTTP: each protocol's own shape, only the caller's group, only
 * available models whose protocols fit the endpoint, and no trust in identity headers.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { startHarness, type Harness } from '../support/service-harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

async function get(path: string, headers: Record<string, string>) {
  const res = await fetch(`http://${h.service.httpAddress}${path}`, { headers });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

test("lists the group's available chat-side models in the OpenAI shape on /v1/models", async () => {
  const r = await get('/v1/models', { authorization: `Bearer ${DEMO_KEYS.alice}` });
  expect(r.status).toBe(200);
  expect(r.body.object).toBe('list');
  expect(r.body.data.map((m: any) => m.id).sort()).toEqual([
    'gpt-4o-mini',
    'gpt-5.5',
    'gpt-6.1-sol',
    'gpt-6.2-sol',
    'text-embedding-3-small',
  ]);
  for (const m of r.body.data) expect(m).toMatchObject({ object: 'model', owned_by: 'modelgate' });
});

test('uses the Anthropic shape when the request carries anthropic-version', async () => {
  const r = await get('/v1/models', { 'x-api-key': DEMO_KEYS.alice, 'anthropic-version': '2023-06-01' });
  expect(r.status).toBe(200);
  expect(r.body.data.map((m: any) => m.id).sort()).toEqual([
    'claude-3-5-haiku-latest',
    'claude-opus-5-5',
    'gpt-4o-mini',
  ]);
  expect(r.body.data[0]).toMatchObject({ type: 'model' });
  expect(r.body).toMatchObject({ has_more: false });
  expect(r.body.first_id).toBe(r.body.data[0].id);
});

test('lists generative models in the Gemini shape on /v1beta/models, hiding unavailable ones', async () => {
  const r = await get('/v1beta/models', { 'x-goog-api-key': DEMO_KEYS.alice });
  expect(r.status).toBe(200);
  const names = r.body.models.map((m: any) => m.name).sort();
  expect(names).toEqual([
    'models/gemini-2.5-flash',
    'models/gemini-3.1-pro-preview',
    'models/gemini-3.5-flash-lite',
    'models/gemini-3.8-flash',
    'models/gpt-4o-mini',
  ]);
  expect(names).not.toContain('models/gemini-2.0-flash');
});

test("serves the alternate prefix and another group's models for another key", async () => {
  const r = await get('/alt/v1/models', { authorization: `Bearer ${DEMO_KEYS.bob}` });
  expect(r.status).toBe(200);
  expect(r.body.data.map((m: any) => m.id)).toEqual(expect.arrayContaining(['gpt-4o', 'o3', 'text-embedding-3-large']));
});

test('answers one model on /v1/models/{id} and denies one outside the group', async () => {
  const one = await get('/v1/models/gpt-4o-mini', { authorization: `Bearer ${DEMO_KEYS.alice}` });
  expect(one.body).toMatchObject({ id: 'gpt-4o-mini', object: 'model' });
  const other = await get('/v1/models/gpt-4o', { authorization: `Bearer ${DEMO_KEYS.alice}` });
  expect(other.status).toBe(403);
  expect(other.headers.get('x-modelgate-reason')).toBe('model_not_in_group');
});

test('rejects a spoofed identity header without a key, and ignores it next to a real key', async () => {
  const spoof = await get('/v1/models', { 'x-modelgate-group': 'pro', 'x-modelgate-key-id': 'bob' });
  expect(spoof.status).toBe(401);
  expect(spoof.headers.get('x-modelgate-reason')).toBe('key_missing');
  expect(spoof.body.error.code).toBe('key_missing');
  const mixed = await get('/v1/models', { authorization: `Bearer ${DEMO_KEYS.alice}`, 'x-modelgate-group': 'pro' });
  expect(mixed.body.data.map((m: any) => m.id)).not.toContain('gpt-4o');
});

test('denies a disabled key with the same reason and hint as the Check path', async () => {
  const r = await get('/v1beta/models', { 'x-goog-api-key': DEMO_KEYS.dave });
  expect(r.status).toBe(401);
  expect(r.headers.get('x-modelgate-reason')).toBe('key_disabled');
  expect(r.body.error.status).toBe('UNAUTHENTICATED');
  expect(r.headers.get('www-authenticate')).toMatch(/^Bearer realm="modelgate"/);
});

test('serves /healthz, /readyz and Prometheus /metrics with decision counts', async () => {
  expect((await fetch(`http://${h.service.httpAddress}/healthz`)).status).toBe(200);
  expect((await fetch(`http://${h.service.httpAddress}/readyz`)).status).toBe(200);
  await h.check({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
    body: '{"model":"gpt-4o-mini"}',
  });
  const text = await (await fetch(`http://${h.service.httpAddress}/metrics`)).text();
  expect(text).toMatch(/modelgate_decisions_total\{status="200",reason="allowed"\} [1-9]/);
  expect(text).toContain('modelgate_check_duration_seconds_bucket');
  expect(text).toMatch(/modelgate_cache_events_total\{kind="key",event="(hit|miss)"\}/);
  expect(text).toContain('modelgate_store_ready 1');
});

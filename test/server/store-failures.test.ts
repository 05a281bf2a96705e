/**
 * When the store cannot answer, the service fails closed: a bounded stale answer for keys it saw
 * recently, 503 store_unavailable for the rest, never an allow on a guess; an unexpected failure
 * while deciding is a 503 internal_error denial. Time is an injected clock.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, test, vi } from 'vitest';
import { parseConfig } from '../../src/config/load';
import { generateKey, hashKey } from '../../src/contract/key-format';
import { DEMO_KEYS } from '../support/demo-keys';
import { FakeStore } from '../support/fake-store';
import { DEMO_CONFIG, reasonOf, startHarness, tempConfig, type Harness } from '../support/service-harness';

let h: Harness;
let store: FakeStore;
let now = Date.parse('2026-06-01T00:00:00Z');
const chat = (key: string) => ({
  method: 'POST',
  path: '/v1/chat/completions',
  headers: [['authorization', `Bearer ${key}`]] as [string, string][],
  body: '{"model":"gpt-4o-mini"}',
});

beforeAll(async () => {
  // ttl 5 s, stale window 300 s (the demo's cache settings).
  const config = parseConfig(readFileSync(DEMO_CONFIG, 'utf8'));
  store = new FakeStore(new Map(config.keys.map((k) => [k.sha256, k])), new Map(config.groups));
  h = await startHarness({ configPath: tempConfig(), store, now: () => now });
});
afterAll(async () => {
  await h?.close();
});

test('keeps answering a recently seen key from cache while the store is down, within the stale window', async () => {
  store.mode = 'ok';
  expect(reasonOf(await h.check(chat(DEMO_KEYS.alice)))).toBe('allowed');
  store.mode = 'down';
  now += 60_000; // past the 5 s TTL, inside ttl + 300 s
  expect(reasonOf(await h.check(chat(DEMO_KEYS.alice)))).toBe('allowed');
  await new Promise<void>((resolve) => h.service.logger.flush(() => resolve()));
  expect(h.logs.decisions().at(-1)).toMatchObject({ keyId: 'alice', stale: true });
});

test('denies a key never seen with 503 store_unavailable while the store is down', async () => {
  store.mode = 'down';
  const r = await h.check(chat(generateKey()));
  expect(reasonOf(r)).toBe('store_unavailable');
  expect(r.denied_response?.status?.code).toBe('ServiceUnavailable');
});

test('stops using the cached answer once the stale window has passed', async () => {
  store.mode = 'down';
  now += 400_000;
  expect(reasonOf(await h.check(chat(DEMO_KEYS.alice)))).toBe('store_unavailable');
});

test('recovers by itself when the store answers again', async () => {
  store.mode = 'ok';
  expect(reasonOf(await h.check(chat(DEMO_KEYS.alice)))).toBe('allowed');
});

test('turns an unexpected failure while deciding into a 503 internal_error denial', async () => {
  store.mode = 'corrupt';
  h.service.cache.invalidate({ kind: 'all' });
  const r = await h.check(chat(DEMO_KEYS.bob));
  expect(reasonOf(r)).toBe('internal_error');
  expect(r.status?.code).not.toBe(0);
  store.mode = 'ok';
  h.service.cache.invalidate({ kind: 'all' });
});

test('an invalidation from the store takes effect on the next check', async () => {
  store.mode = 'ok';
  expect(reasonOf(await h.check(chat(DEMO_KEYS.bob)))).toBe('allowed');
  const bob = [...store.keys.values()].find((k) => k.id === 'bob')!;
  store.keys.set(bob.sha256, { ...bob, disabled: true });
  expect(reasonOf(await h.check(chat(DEMO_KEYS.bob)))).toBe('allowed'); // cached within TTL
  store.emit({ kind: 'key', sha256: hashKey(DEMO_KEYS.bob) });
  expect(reasonOf(await h.check(chat(DEMO_KEYS.bob)))).toBe('key_disabled');
});

test('/readyz stays ready while the store is down (the cache answers), and /healthz/store and the gauge say it is down', async () => {
  store.mode = 'down';
  const down = await fetch(`http://${h.service.httpAddress}/readyz`);
  expect(down.status).toBe(200);
  expect(await down.text()).toMatch(/^ready \(the store cannot answer/);
  expect((await fetch(`http://${h.service.httpAddress}/healthz/store`)).status).toBe(503);
  await vi.waitFor(
    async () =>
      expect(await (await fetch(`http://${h.service.httpAddress}/metrics`)).text()).toMatch(
        /^modelgate_store_ready 0$/m,
      ),
    { timeout: 5000, interval: 100 },
  );
  store.mode = 'ok';
  const up = await fetch(`http://${h.service.httpAddress}/readyz`);
  expect(up.status).toBe(200);
  expect(await up.text()).toBe('ready\n');
  expect((await fetch(`http://${h.service.httpAddress}/healthz/store`)).status).toBe(200);
});

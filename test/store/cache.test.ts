/**
 * StoreCache in front of a fake in-memory Store that counts its calls and can fail or hang on
 * demand, with a fake clock (no sleeps): hits, cached "not found", shared misses, TTL, the bounded
 * stale window, "unavailable" never confused with "not found", invalidation and the LRU bound.
 */
import { beforeEach, describe, expect, test } from 'vitest';
import { StoreCache, type CacheOptions, type Lookup } from '../../src/store/cache';
import type { GroupRecord, InvalidationEvent, KeyRecord, Store } from '../../src/store/store';

type Mode = 'ok' | 'fail' | 'hang' | 'throw';

interface Held {
  readonly name: string;
  release(): void;
  fail(): void;
}

/** An in-memory Store whose every answer can be made to fail, throw synchronously, or wait. */
class FakeStore implements Store {
  readonly kind = 'fake';
  readonly keys = new Map<string, KeyRecord>();
  readonly groups = new Map<string, GroupRecord>();
  readonly calls = { key: [] as string[], group: [] as string[] };
  readonly held: Held[] = [];
  readonly listeners = new Set<(e: InvalidationEvent) => void>();
  mode: Mode = 'ok';

  findKey(sha256: string): Promise<KeyRecord | null> {
    this.calls.key.push(sha256);
    return this.#answer(sha256, this.keys.get(sha256) ?? null);
  }

  findGroup(name: string): Promise<GroupRecord | null> {
    this.calls.group.push(name);
    return this.#answer(name, this.groups.get(name) ?? null);
  }

  /** The answer is read when the call is made (like a query's snapshot), then delivered per mode. */
  #answer<T>(name: string, value: T): Promise<T> {
    switch (this.mode) {
      case 'ok':
        return Promise.resolve(value);
      case 'fail':
        return Promise.reject(new Error('store down'));
      case 'throw':
        throw new Error('store threw synchronously');
      case 'hang':
        return new Promise<T>((resolve, reject) => {
          this.held.push({ name, release: () => resolve(value), fail: () => reject(new Error('store timed out')) });
        });
    }
  }

  emit(e: InvalidationEvent): void {
    for (const l of this.listeners) l(e);
  }

  onInvalidate(listener: (e: InvalidationEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  ready(): boolean {
    return true;
  }

  async close(): Promise<void> {}
}

const TTL = 5_000;
const STALE = 60_000;

function key(id: string, extra: Partial<KeyRecord> = {}): KeyRecord {
  return { id, sha256: `sha-${id}`, group: 'g', balance: null, disabled: false, expiresAt: null, ...extra };
}
function group(name: string, available = true): GroupRecord {
  return { name, available, models: new Map() };
}

let store: FakeStore;
let clock: number;
let events: string[];
let cache: StoreCache;

function makeCache(opts: Partial<CacheOptions> = {}): StoreCache {
  return new StoreCache(store, {
    maxEntries: 1000,
    ttlMs: TTL,
    staleMs: STALE,
    now: () => clock,
    onEvent: (e, kind) => events.push(`${kind}:${e}`),
    ...opts,
  });
}

beforeEach(() => {
  store = new FakeStore();
  store.keys.set('sha-alice', key('alice'));
  store.keys.set('sha-bob', key('bob'));
  store.groups.set('g', group('g'));
  store.groups.set('h', group('h'));
  clock = 1_000_000;
  events = [];
  cache = makeCache();
});

const found = (value: unknown, stale = false): Lookup<unknown> => ({ status: 'found', value, stale });
const notFound = (stale = false): Lookup<unknown> => ({ status: 'not_found', stale });

describe('StoreCache hits and misses', () => {
  test('answers a repeated lookup within the TTL without reaching the store', async () => {
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice')));
    clock += TTL - 1;
    // A hit is answered synchronously: no promise, no store call.
    expect(cache.keys.get('sha-alice')).toEqual(found(key('alice')));
    expect(store.calls.key).toEqual(['sha-alice']);
    expect(events).toEqual(['key:miss', 'key:hit']);
  });

  test('caches "not found" as an answer of its own', async () => {
    expect(await cache.keys.get('sha-nobody')).toEqual(notFound());
    expect(await cache.keys.get('sha-nobody')).toEqual(notFound());
    expect(store.calls.key).toEqual(['sha-nobody']);
  });

  test('costs one store call per distinct unknown key', async () => {
    const names = Array.from({ length: 500 }, (_, i) => `sha-random-${i}`);
    for (const n of [...names, ...names]) expect(await cache.keys.get(n)).toEqual(notFound());
    expect(store.calls.key).toHaveLength(500);
  });

  test('shares one store call among 1,000 concurrent misses for one key', async () => {
    const answers = await Promise.all(Array.from({ length: 1000 }, () => cache.keys.get('sha-alice')));
    expect(store.calls.key).toEqual(['sha-alice']);
    for (const a of answers) expect(a).toEqual(found(key('alice')));
  });

  test('shares one hanging store call among 1,000 concurrent misses, and answers them all when it returns', async () => {
    store.mode = 'hang';
    const pending = Promise.all(Array.from({ length: 1000 }, () => cache.keys.get('sha-bob')));
    expect(store.calls.key).toEqual(['sha-bob']);
    expect(store.held).toHaveLength(1);
    store.held[0].release();
    const answers = await pending;
    expect(answers.every((a) => a.status === 'found')).toBe(true);
    expect(store.calls.key).toHaveLength(1);
  });

  test('keeps keys and groups apart even under the same name', async () => {
    store.groups.set('sha-alice', group('sha-alice'));
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice')));
    expect(await cache.groups.get('sha-alice')).toEqual(found(group('sha-alice')));
    expect(store.calls).toEqual({ key: ['sha-alice'], group: ['sha-alice'] });
  });

  test.each([
    ['just before the TTL', TTL - 1, 1],
    ['at the TTL', TTL, 2],
    ['well after the TTL', TTL * 10, 2],
  ])('refetches %s only once the TTL has passed', async (_name, advance, calls) => {
    await cache.groups.get('g');
    clock += advance;
    expect(await cache.groups.get('g')).toEqual(found(group('g')));
    expect(store.calls.group).toHaveLength(calls);
  });

  test('serves the refetched answer after the TTL, not the old one', async () => {
    await cache.keys.get('sha-alice');
    store.keys.set('sha-alice', key('alice', { balance: 0 }));
    clock += TTL;
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice', { balance: 0 })));
  });

  test('with a TTL of 0 asks the store every time', async () => {
    cache = makeCache({ ttlMs: 0 });
    for (let i = 0; i < 3; i++) await cache.keys.get('sha-alice');
    expect(store.calls.key).toHaveLength(3);
  });
});

describe('StoreCache when the store cannot answer', () => {
  test.each([
    ['fails', 'fail'],
    ['throws synchronously', 'throw'],
  ] as const)('answers unavailable, never not_found, when the store %s and nothing is cached', async (_name, mode) => {
    store.mode = mode;
    const a = await cache.keys.get('sha-alice');
    expect(a.status).toBe('unavailable');
    expect(a).toMatchObject({ error: expect.stringMatching(/store/) });
    expect(await cache.keys.get('sha-nobody')).toMatchObject({ status: 'unavailable' });
    expect(events).toContain('key:unavailable');
  });

  test('does not cache a failure: the next lookup asks the store again', async () => {
    store.mode = 'fail';
    await cache.keys.get('sha-alice');
    store.mode = 'ok';
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice')));
    expect(store.calls.key).toHaveLength(2);
  });

  test.each([
    ['right after the TTL', TTL],
    ['at the last millisecond of the stale window', TTL + STALE - 1],
  ])('serves the old answer marked stale when the store fails %s', async (_name, advance) => {
    await cache.keys.get('sha-alice');
    clock += advance;
    store.mode = 'fail';
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice'), true));
    expect(events).toEqual(['key:miss', 'key:miss', 'key:stale']);
  });

  test('serves a cached "not found" marked stale within the window', async () => {
    await cache.keys.get('sha-nobody');
    clock += TTL + 1;
    store.mode = 'fail';
    expect(await cache.keys.get('sha-nobody')).toEqual(notFound(true));
  });

  test.each([
    ['at the end of the stale window', TTL + STALE],
    ['long after it', TTL + STALE + 3_600_000],
  ])('answers unavailable when the store fails %s', async (_name, advance) => {
    await cache.keys.get('sha-alice');
    clock += advance;
    store.mode = 'fail';
    expect(await cache.keys.get('sha-alice')).toMatchObject({ status: 'unavailable', error: 'store down' });
  });

  test('keeps the stale window measured from the last successful answer', async () => {
    await cache.keys.get('sha-alice');
    store.mode = 'fail';
    clock += TTL + STALE / 2;
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice'), true));
    clock += STALE / 2;
    expect(await cache.keys.get('sha-alice')).toMatchObject({ status: 'unavailable' });
  });

  test('shares one failing store call among concurrent misses, each getting the stale answer', async () => {
    await cache.keys.get('sha-alice');
    clock += TTL;
    store.mode = 'hang';
    const pending = Promise.all(Array.from({ length: 100 }, () => cache.keys.get('sha-alice')));
    expect(store.held).toHaveLength(1);
    store.held[0].fail();
    const answers = await pending;
    expect(answers.every((a) => a.status === 'found' && a.stale)).toBe(true);
    expect(store.calls.key).toHaveLength(2);
  });

  test('returns to fresh answers once the store is back', async () => {
    await cache.keys.get('sha-alice');
    clock += TTL;
    store.mode = 'fail';
    expect(await cache.keys.get('sha-alice')).toMatchObject({ stale: true });
    store.mode = 'ok';
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice')));
    expect(cache.keys.get('sha-alice')).toEqual(found(key('alice')));
  });
});

describe('StoreCache when the store hangs (a black-holed connection waits for its query timeout)', () => {
  // Found by the PostgreSQL drill (test/e2e/drills.test.ts): every Check of a cached key waited
  // for the store's query timeout (1.1 s), past Envoy's 1 s ext_authz timeout, so cached keys
  // failed with 503 although the stale window should have answered them.
  test('answers the cached answer once the refresh is late, and the refresh still updates the cache', async () => {
    cache = makeCache({ staleAfterMs: 20 });
    await cache.keys.get('sha-alice');
    clock += TTL;
    store.mode = 'hang';
    const t0 = performance.now();
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice'), true));
    expect(performance.now() - t0).toBeLessThan(1000);
    // Others asking meanwhile get it at once: the refresh under way is late already.
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice'), true));
    expect(store.calls.key).toHaveLength(2);
    store.held[0].release();
    await new Promise((r) => setTimeout(r, 0));
    // The late answer was stored: a fresh hit now, no new store call.
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice')));
    expect(store.calls.key).toHaveLength(2);
  });

  test('waits for the store when nothing usable is cached (nothing else could answer)', async () => {
    cache = makeCache({ staleAfterMs: 0 });
    store.mode = 'hang';
    let settled = false;
    const pending = cache.keys.get('sha-bob');
    void Promise.resolve(pending).then(() => (settled = true));
    await new Promise((r) => setTimeout(r, 30));
    expect(settled).toBe(false);
    store.held[0].release();
    expect(await pending).toEqual(found(key('bob')));
  });

  test('never stands in past the stale window, nor after an invalidation', async () => {
    cache = makeCache({ staleAfterMs: 0 });
    await cache.keys.get('sha-alice');
    clock += TTL + STALE;
    store.mode = 'hang';
    const pending = cache.keys.get('sha-alice');
    await new Promise((r) => setTimeout(r, 20));
    store.held[0].fail();
    expect(await pending).toMatchObject({ status: 'unavailable' });
    store.mode = 'ok';
    await cache.keys.get('sha-bob');
    clock += TTL;
    store.mode = 'hang';
    cache.invalidate({ kind: 'key', sha256: 'sha-bob' });
    const after = cache.keys.get('sha-bob');
    await new Promise((r) => setTimeout(r, 20));
    store.held[store.held.length - 1].release();
    expect(await after).toEqual(found(key('bob')));
  });
});

describe('StoreCache invalidation', () => {
  async function warm(): Promise<void> {
    for (const k of ['sha-alice', 'sha-bob', 'sha-nobody']) await cache.keys.get(k);
    for (const g of ['g', 'h']) await cache.groups.get(g);
    store.calls.key.length = 0;
    store.calls.group.length = 0;
  }
  async function lookAll(): Promise<void> {
    for (const k of ['sha-alice', 'sha-bob', 'sha-nobody']) await cache.keys.get(k);
    for (const g of ['g', 'h']) await cache.groups.get(g);
  }

  test.each<[string, InvalidationEvent, { key: string[]; group: string[] }]>([
    ['one key', { kind: 'key', sha256: 'sha-alice' }, { key: ['sha-alice'], group: [] }],
    ['a cached "not found" key', { kind: 'key', sha256: 'sha-nobody' }, { key: ['sha-nobody'], group: [] }],
    ['one group', { kind: 'group', name: 'h' }, { key: [], group: ['h'] }],
    ['everything', { kind: 'all' }, { key: ['sha-alice', 'sha-bob', 'sha-nobody'], group: ['g', 'h'] }],
    ['a key that is not cached', { kind: 'key', sha256: 'sha-zed' }, { key: [], group: [] }],
  ])('drops exactly %s when the store says so', async (_name, event, refetched) => {
    await warm();
    store.emit(event);
    await lookAll();
    expect(store.calls).toEqual(refetched);
  });

  test("takes a new balance from the event, with no lookup, and keeps the entry's age", async () => {
    await warm();
    store.emit({ kind: 'key', sha256: 'sha-alice', balance: 0.5 });
    store.emit({ kind: 'key', sha256: 'sha-bob', balance: null });
    expect(await cache.keys.get('sha-alice')).toEqual(found({ ...key('alice'), balance: 0.5 }));
    expect(await cache.keys.get('sha-bob')).toEqual(found({ ...key('bob'), balance: null }));
    expect(store.calls).toEqual({ key: [], group: [] });
    // Still refreshed when its TTL runs out, as before the change.
    clock += TTL;
    await cache.keys.get('sha-alice');
    expect(store.calls.key).toEqual(['sha-alice']);
  });

  test('looks a key up again when a balance event finds no usable entry (not cached, or cached "not found")', async () => {
    await warm();
    store.emit({ kind: 'key', sha256: 'sha-nobody', balance: 3 });
    store.emit({ kind: 'key', sha256: 'sha-zed', balance: 3 });
    await lookAll();
    expect(store.calls).toEqual({ key: ['sha-nobody'], group: [] });
  });

  test('applies a balance event that arrives during a lookup to its answer, which is cached', async () => {
    await cache.keys.get('sha-alice');
    clock += TTL;
    store.mode = 'hang';
    const refreshing = cache.keys.get('sha-alice');
    store.emit({ kind: 'key', sha256: 'sha-alice', balance: 0.5 });
    store.emit({ kind: 'key', sha256: 'sha-alice', balance: 0.25 });
    store.held[0].release();
    expect(await refreshing).toEqual(found({ ...key('alice'), balance: 0.25 }));
    store.mode = 'ok';
    expect(await cache.keys.get('sha-alice')).toEqual(found({ ...key('alice'), balance: 0.25 }));
    expect(store.calls.key).toEqual(['sha-alice', 'sha-alice']);
  });

  test('lets the patched answer stand in while a slow store is asked, and when it fails', async () => {
    cache = makeCache({ staleAfterMs: 0 });
    await cache.keys.get('sha-alice');
    store.emit({ kind: 'key', sha256: 'sha-alice', balance: 0.5 });
    clock += TTL;
    store.mode = 'hang';
    // Late at once (staleAfterMs 0): the patched answer stands in, flagged stale.
    expect(await cache.keys.get('sha-alice')).toEqual(found({ ...key('alice'), balance: 0.5 }, true));
    store.emit({ kind: 'key', sha256: 'sha-alice', balance: 0.4 });
    expect(await cache.keys.get('sha-alice')).toEqual(found({ ...key('alice'), balance: 0.4 }, true));
    for (const h of store.held) h.fail();
    await new Promise((r) => setTimeout(r, 10));
    store.mode = 'fail';
    expect(await cache.keys.get('sha-alice')).toEqual(found({ ...key('alice'), balance: 0.4 }, true));
  });

  test('a plain invalidation still drops a patched answer: it never stands in after a revocation', async () => {
    cache = makeCache({ staleAfterMs: 0 });
    await cache.keys.get('sha-alice');
    store.emit({ kind: 'key', sha256: 'sha-alice', balance: 0.5 });
    store.emit({ kind: 'key', sha256: 'sha-alice' });
    store.mode = 'fail';
    expect(await cache.keys.get('sha-alice')).toMatchObject({ status: 'unavailable' });
  });

  test('drops the same entries when invalidated directly', async () => {
    await warm();
    cache.invalidate({ kind: 'key', sha256: 'sha-bob' });
    await lookAll();
    expect(store.calls).toEqual({ key: ['sha-bob'], group: [] });
  });

  test('serves the changed record right after its invalidation, within the TTL', async () => {
    await cache.keys.get('sha-alice');
    store.keys.set('sha-alice', key('alice', { disabled: true }));
    store.emit({ kind: 'key', sha256: 'sha-alice' });
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice', { disabled: true })));
  });

  test('does not write back the old answer of a lookup in flight when its key is invalidated', async () => {
    store.mode = 'hang';
    const first = cache.keys.get('sha-alice');
    store.keys.set('sha-alice', key('alice', { disabled: true }));
    store.emit({ kind: 'key', sha256: 'sha-alice' });
    store.held[0].release();
    // The caller already waiting gets the answer it asked for...
    expect(await first).toEqual(found(key('alice')));
    // ...but it is not cached: the next lookup asks the store again and sees the change.
    store.mode = 'ok';
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice', { disabled: true })));
    expect(store.calls.key).toHaveLength(2);
  });

  test('keeps the newer answer when an invalidated lookup returns after the lookup that replaced it', async () => {
    store.mode = 'hang';
    const first = cache.keys.get('sha-alice');
    store.keys.set('sha-alice', key('alice', { balance: 0 }));
    store.emit({ kind: 'key', sha256: 'sha-alice' });
    const second = cache.keys.get('sha-alice');
    expect(store.held).toHaveLength(2);
    store.held[1].release();
    expect(await second).toEqual(found(key('alice', { balance: 0 })));
    store.held[0].release();
    await first;
    expect(cache.keys.get('sha-alice')).toEqual(found(key('alice', { balance: 0 })));
    expect(store.calls.key).toHaveLength(2);
  });

  test('does not write back a lookup in flight during an invalidation of everything', async () => {
    store.mode = 'hang';
    const pending = cache.groups.get('g');
    store.groups.set('g', group('g', false));
    store.emit({ kind: 'all' });
    store.held[0].release();
    await pending;
    store.mode = 'ok';
    expect(await cache.groups.get('g')).toEqual(found(group('g', false)));
  });

  test('does not serve an invalidated answer as stale when the refetch fails', async () => {
    await cache.keys.get('sha-alice');
    clock += TTL;
    store.mode = 'hang';
    const pending = cache.keys.get('sha-alice');
    store.emit({ kind: 'key', sha256: 'sha-alice' });
    store.held[0].fail();
    expect(await pending).toMatchObject({ status: 'unavailable' });
  });

  test('does not serve an invalidated answer as stale later either', async () => {
    await cache.keys.get('sha-alice');
    store.emit({ kind: 'key', sha256: 'sha-alice' });
    store.mode = 'fail';
    expect(await cache.keys.get('sha-alice')).toMatchObject({ status: 'unavailable' });
  });

  test('revalidates every answer after an invalidation of everything, within the TTL', async () => {
    await cache.keys.get('sha-alice');
    store.keys.set('sha-alice', key('alice', { disabled: true }));
    store.emit({ kind: 'all' });
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice', { disabled: true })));
    expect(cache.keys.get('sha-alice')).toEqual(found(key('alice', { disabled: true })));
    expect(store.calls.key).toHaveLength(2);
  });

  test('keeps answers as a stale fallback after an invalidation of everything (a dropped LISTEN connection)', async () => {
    await cache.keys.get('sha-alice');
    store.emit({ kind: 'all' });
    store.mode = 'fail';
    expect(await cache.keys.get('sha-alice')).toEqual(found(key('alice'), true));
    clock += TTL + STALE;
    expect(await cache.keys.get('sha-alice')).toMatchObject({ status: 'unavailable' });
  });

  test('stops listening to the store once closed', async () => {
    await warm();
    cache.close();
    expect(store.listeners.size).toBe(0);
    store.emit({ kind: 'all' });
    await lookAll();
    expect(store.calls).toEqual({ key: [], group: [] });
  });
});

describe('StoreCache bound', () => {
  test('holds at most maxEntries answers per kind', async () => {
    cache = makeCache({ maxEntries: 3 });
    for (let i = 0; i < 50; i++) {
      await cache.keys.get(`sha-${i}`);
      await cache.groups.get(`group-${i}`);
      expect(cache.keys.size).toBeLessThanOrEqual(3);
      expect(cache.groups.size).toBeLessThanOrEqual(3);
    }
    expect(cache.keys.size).toBe(3);
  });

  test('evicts the least recently used answer first', async () => {
    store.keys.set('sha-carol', key('carol'));
    cache = makeCache({ maxEntries: 2 });
    await cache.keys.get('sha-alice');
    await cache.keys.get('sha-bob');
    cache.keys.get('sha-alice');
    await cache.keys.get('sha-carol');
    store.calls.key.length = 0;
    expect(cache.keys.get('sha-alice')).toEqual(found(key('alice')));
    expect(store.calls.key).toEqual([]);
    await cache.keys.get('sha-bob');
    expect(store.calls.key).toEqual(['sha-bob']);
  });

  test('a flood of random keys does not push out more than maxEntries', async () => {
    cache = makeCache({ maxEntries: 100 });
    await Promise.all(Array.from({ length: 10_000 }, (_, i) => cache.keys.get(`sha-flood-${i}`)));
    expect(cache.keys.size).toBe(100);
    expect(store.calls.key).toHaveLength(10_000);
  });
});

describe('StoreCache under a flood of random keys', () => {
  test('keeps "not found" answers in their own bound, so real keys stay cached', async () => {
    cache = makeCache({ maxEntries: 10, maxNotFound: 50 });
    expect(await cache.keys.get('sha-alice')).toEqual(found(store.keys.get('sha-alice')));
    for (let i = 0; i < 1000; i++) expect(await cache.keys.get(`random-${i}`)).toEqual(notFound());
    expect(cache.keys.size).toBe(1 + 50);
    const callsBefore = store.calls.key.length;
    expect(await cache.keys.get('sha-alice')).toEqual(found(store.keys.get('sha-alice')));
    expect(store.calls.key.length).toBe(callsBefore);
    // The most recent not-found answers are still cached; the oldest were evicted.
    await cache.keys.get('random-999');
    await cache.keys.get('random-0');
    expect(store.calls.key.slice(callsBefore)).toEqual(['random-0']);
  });

  test('moves a key between the two bounds when it starts or stops existing', async () => {
    cache = makeCache({ maxEntries: 10, maxNotFound: 10 });
    expect(await cache.keys.get('sha-carol')).toEqual(notFound());
    store.keys.set('sha-carol', key('carol'));
    cache.invalidate({ kind: 'key', sha256: 'sha-carol' });
    expect(await cache.keys.get('sha-carol')).toEqual(found(store.keys.get('sha-carol')));
    expect(cache.keys.size).toBe(1);
  });
});

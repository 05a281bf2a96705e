/**
 * The bounded cache in front of any Store (STYLE.md "Every cache is bounded"):
 * - lru-cache holds at most `maxEntries` answers per kind (keys, groups);
 * - "not found" is cached as an explicit answer, so a flood of random keys costs one lookup each;
 * - concurrent misses for one name share one store call;
 * - a store failure is never confused with "not found": it yields `unavailable`, unless an answer
 *   fetched less than ttl + stale ago exists, which is then used (bounded stale window);
 * - an invalidation drops exactly the touched entries, and a lookup already in flight when it
 *   arrives does not write its (possibly old) answer back;
 * - an `all` invalidation (a reload, or a dropped LISTEN connection that may have missed changes)
 *   does not delete answers but makes every one revalidate: if the store answers, nothing missed
 *   survives; if it cannot (the usual reason the connection dropped), the stale window applies.
 */
import { LRUCache } from 'lru-cache';
import type { GroupRecord, InvalidationEvent, KeyRecord, Store } from './store';

export type Lookup<T> =
  | { readonly status: 'found'; readonly value: T; readonly stale: boolean }
  | { readonly status: 'not_found'; readonly stale: boolean }
  | { readonly status: 'unavailable'; readonly error: string };

export interface CacheOptions {
  /** Bound on found answers per kind. */
  readonly maxEntries: number;
  /** Bound on "not found" answers per kind (default: maxEntries). */
  readonly maxNotFound?: number;
  readonly ttlMs: number;
  readonly staleMs: number;
  /**
   * How long a refresh may take while a usable (stale-window) answer is cached before that answer
   * is given instead (the refresh goes on in the background). Default 250 ms: below Envoy's
   * ext_authz timeout, which a store that hangs (a black-holed connection waits for its query
   * timeout) would otherwise exceed on every Check. 0: at once.
   */
  readonly staleAfterMs?: number;
  /** Injected clock (milliseconds). */
  readonly now?: () => number;
  readonly onEvent?: (event: 'hit' | 'miss' | 'stale' | 'unavailable', kind: 'key' | 'group') => void;
}

interface Entry<T> {
  readonly value: T | null;
  readonly at: number;
  /** Which fetch it comes from: a patched entry keeps it (it may still stand in for that answer). */
  readonly gen: number;
  /** The cache epoch it was fetched in; an older one must revalidate before use. */
  readonly epoch: number;
  /** The fresh answer, built once: a cache hit allocates nothing. */
  readonly fresh: Lookup<T>;
}

/**
 * Found answers and "not found" answers live in two LRUs: a flood of random keys fills only the
 * smaller not-found one, so it can neither grow memory past that bound nor evict the entries of
 * real keys (which would push their traffic onto the store).
 */
class CachedLookup<T extends object> {
  readonly #found: LRUCache<string, Entry<T>>;
  readonly #missing: LRUCache<string, Entry<T>>;
  readonly #inflight = new Map<string, Promise<Entry<T>>>();
  /** The latest patch that arrived while a lookup was under way: applied to its answer. */
  readonly #patches = new Map<string, (value: T) => T>();
  #epoch = 0;
  #gen = 0;

  constructor(
    readonly kind: 'key' | 'group',
    readonly load: (name: string) => Promise<T | null>,
    readonly opts: CacheOptions,
    readonly now: () => number,
  ) {
    this.#found = new LRUCache<string, Entry<T>>({ max: opts.maxEntries });
    this.#missing = new LRUCache<string, Entry<T>>({ max: opts.maxNotFound ?? opts.maxEntries });
  }

  #peek(name: string): Entry<T> | undefined {
    return this.#found.peek(name) ?? this.#missing.peek(name);
  }

  get(name: string): Lookup<T> | Promise<Lookup<T>> {
    const entry = this.#found.get(name) ?? this.#missing.get(name);
    if (entry && entry.epoch === this.#epoch && this.now() - entry.at < this.opts.ttlMs) {
      this.opts.onEvent?.('hit', this.kind);
      return entry.fresh;
    }
    this.opts.onEvent?.('miss', this.kind);
    return this.#refresh(name, entry);
  }

  async #refresh(name: string, old: Entry<T> | undefined): Promise<Lookup<T>> {
    const underWay = this.#inflight.has(name);
    let fetching: Promise<Entry<T>>;
    try {
      fetching = this.#fetch(name);
    } catch (err) {
      fetching = Promise.reject(err); // a store that throws instead of rejecting
    }
    if (old && this.#standIn(name, old)) {
      // A slow store must not hold the Check past Envoy's timeout while a usable answer is cached:
      // once the refresh is late (at once if one was already under way and so is late already), the
      // cached answer stands in and the refresh goes on; its answer updates the cache when it comes.
      const late = await lateOrDone(fetching, underWay ? 0 : (this.opts.staleAfterMs ?? 250));
      const standIn = late ? this.#standIn(name, old) : undefined;
      if (standIn) {
        this.opts.onEvent?.('stale', this.kind);
        return answer(standIn, true);
      }
    }
    try {
      return (await fetching).fresh;
    } catch (err) {
      // A bounded stale window: only an answer younger than ttl + stale may stand in for the store,
      // and only while it is still cached (an invalidation during the failed refetch dropped it).
      const standIn = old && this.#standIn(name, old);
      if (standIn) {
        this.opts.onEvent?.('stale', this.kind);
        return answer(standIn, true);
      }
      this.opts.onEvent?.('unavailable', this.kind);
      return { status: 'unavailable', error: err instanceof Error ? err.message : String(err) };
    }
  }

  /**
   * The cached answer that may stand in for `old`: still cached (no invalidation dropped it; a patch,
   * such as a new balance, keeps it, patched) and within ttl + stale.
   */
  #standIn(name: string, old: Entry<T>): Entry<T> | undefined {
    const cur = this.#peek(name);
    return cur !== undefined && cur.gen === old.gen && this.now() - cur.at < this.opts.ttlMs + this.opts.staleMs
      ? cur
      : undefined;
  }

  #fetch(name: string): Promise<Entry<T>> {
    const pending = this.#inflight.get(name);
    if (pending) return pending;
    const epoch = this.#epoch;
    const p = this.load(name).then(
      (loaded) => {
        // A patch that arrived meanwhile (a new balance) is applied: the answer may predate it.
        const patch = this.#inflight.get(name) === p ? this.#patches.get(name) : undefined;
        const value = patch && loaded !== null ? patch(loaded) : loaded;
        const entry: Entry<T> = {
          value,
          at: this.now(),
          epoch,
          gen: ++this.#gen,
          fresh: value === null ? NOT_FOUND : { status: 'found', value, stale: false },
        };
        // If an invalidation removed us from #inflight meanwhile, the answer may predate the change.
        if (this.#inflight.get(name) === p) {
          this.#inflight.delete(name);
          this.#patches.delete(name);
          (value === null ? this.#found : this.#missing).delete(name);
          (value === null ? this.#missing : this.#found).set(name, entry);
        }
        return entry;
      },
      (err: unknown) => {
        if (this.#inflight.get(name) === p) {
          this.#inflight.delete(name);
          this.#patches.delete(name);
        }
        throw err;
      },
    );
    this.#inflight.set(name, p);
    return p;
  }

  /**
   * A change the store describes in full (only a key's balance, to a given value): a found entry takes
   * it with no lookup (its age unchanged), and so does the answer of a lookup under way, which may
   * predate it. Patches replace each other (the latest wins: they arrive in commit order). A key
   * that is neither cached as found nor being looked up is invalidated.
   */
  patch(name: string, update: (value: T) => T): void {
    const underWay = this.#inflight.has(name);
    if (underWay) this.#patches.set(name, update);
    const entry = this.#found.peek(name);
    if (entry && entry.value !== null) {
      const value = update(entry.value);
      this.#found.set(name, { ...entry, value, fresh: { status: 'found', value, stale: false } });
    } else if (!underWay) this.invalidate(name);
  }

  invalidate(name: string): void {
    this.#found.delete(name);
    this.#missing.delete(name);
    this.#inflight.delete(name);
    this.#patches.delete(name);
  }

  /** Every answer must revalidate before its next use (kept only as a stale fallback). */
  expireAll(): void {
    this.#epoch++;
    this.#inflight.clear();
    this.#patches.clear();
  }

  get size(): number {
    return this.#found.size + this.#missing.size;
  }
}

const NOT_FOUND = Object.freeze({ status: 'not_found', stale: false } as const);

/** true when `p` has not settled within `ms` (it is then left to settle on its own, its failure handled). */
function lateOrDone(p: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      p.catch(() => {});
      resolve(true);
    }, ms);
    const done = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    p.then(done, done);
  });
}

function answer<T>(entry: Entry<T>, stale: boolean): Lookup<T> {
  return entry.value === null ? { status: 'not_found', stale } : { status: 'found', value: entry.value, stale };
}

/** Keys (by SHA-256) and groups (by name) in front of a Store, invalidated by the store's events. */
export class StoreCache {
  readonly keys: CachedLookup<KeyRecord>;
  readonly groups: CachedLookup<GroupRecord>;
  readonly #unsubscribe: () => void;

  constructor(
    readonly store: Store,
    opts: CacheOptions,
  ) {
    const now = opts.now ?? Date.now;
    this.keys = new CachedLookup('key', (h) => store.findKey(h), opts, now);
    this.groups = new CachedLookup('group', (n) => store.findGroup(n), opts, now);
    this.#unsubscribe = store.onInvalidate((e) => this.invalidate(e));
  }

  invalidate(e: InvalidationEvent): void {
    if (e.kind === 'key' && e.balance !== undefined) {
      const balance = e.balance;
      this.keys.patch(e.sha256, (k) => ({ ...k, balance }));
    } else if (e.kind === 'key') this.keys.invalidate(e.sha256);
    else if (e.kind === 'group') this.groups.invalidate(e.name);
    else if (e.kind === 'webhooks') return;
    else {
      this.keys.expireAll();
      this.groups.expireAll();
    }
  }

  close(): void {
    this.#unsubscribe();
  }
}

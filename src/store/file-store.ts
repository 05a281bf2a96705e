/**
 * The embedded default store: groups and keys from the config file, held in memory. A reload
 * replaces the whole snapshot atomically and tells caches to drop everything.
 *
 * With metering (docs/metering.md), a key's balance is its configured balance minus what it spent
 * (file-meter.ts, kept in a state file beside the config); a debit replaces that key's record and
 * invalidates exactly its cache entry, so the next request sees the new balance.
 *
 * Keys created through the admin API live in modelgate's own state (admin/file-backend.ts), never
 * in the operator's YAML: setManaged() serves them beside the config's (a config key wins an id
 * both hold), and setManagedGroups() its groups beside the config's (a config group wins a name).
 * A rotated key's previous secret is served until its grace ends, as a record of the same id that
 * expires then (so a cached answer cannot outlive the grace either).
 */
import { FileMeter, type FileMeterOptions } from './file-meter';
import type { GroupRecord, InvalidationEvent, KeyRecord, Store } from './store';

export interface FileStoreOptions extends Omit<FileMeterOptions, 'onSpent'> {
  /** Keep balances that move (default: only when a state path is given, or `meter: true`). */
  readonly meter?: boolean;
}

/** A key kept in modelgate's own state; `previous`: a rotated-out secret and when it stops working (epoch ms). */
export interface ManagedKeyRecord extends KeyRecord {
  readonly previous?: { readonly sha256: string; readonly until: number } | null;
}

export class FileStore implements Store {
  readonly kind = 'file';
  /** By SHA-256: the records as served (balances net of spending). */
  #keys = new Map<string, KeyRecord>();
  /** By id: the records as configured. */
  #configured = new Map<string, KeyRecord>();
  /** By id: the previous secrets of rotated keys, as served until their grace ends. */
  #previous = new Map<string, KeyRecord>();
  /** The config's groups, then those of modelgate's own state (a config group wins a name both hold). */
  #groups: ReadonlyMap<string, GroupRecord> = new Map();
  #configGroups: ReadonlyMap<string, GroupRecord> = new Map();
  #managedGroups: ReadonlyMap<string, GroupRecord> = new Map();
  #fromConfig: readonly KeyRecord[] = [];
  #managed: readonly ManagedKeyRecord[] = [];
  readonly #listeners = new Set<(e: InvalidationEvent) => void>();
  readonly meter: FileMeter | undefined;

  constructor(groups: ReadonlyMap<string, GroupRecord>, keys: readonly KeyRecord[], options?: FileStoreOptions) {
    if (options && (options.meter || options.path)) {
      this.meter = new FileMeter(
        (id) => {
          const k = this.#configured.get(id);
          return k === undefined ? undefined : k.balance;
        },
        { ...options, onSpent: (id) => this.#spent(id) },
      );
    }
    this.replace(groups, keys);
  }

  /** Swaps in a new snapshot (a validated reload) and invalidates every cached entry. */
  replace(groups: ReadonlyMap<string, GroupRecord>, keys: readonly KeyRecord[]): void {
    this.#fromConfig = keys;
    this.#configGroups = groups;
    this.#mergeGroups();
    this.#rebuild();
  }

  /** Swaps in the groups of modelgate's own state (the admin API's) and invalidates every cached entry. */
  setManagedGroups(groups: ReadonlyMap<string, GroupRecord>): void {
    this.#managedGroups = groups;
    this.#mergeGroups();
    this.#rebuild();
  }

  #mergeGroups(): void {
    const all = new Map(this.#managedGroups);
    for (const [name, g] of this.#configGroups) all.set(name, g);
    this.#groups = all;
  }

  /** The names of the groups defined in the config file (the admin API refuses to change them). */
  configGroupNames(): ReadonlySet<string> {
    return new Set(this.#configGroups.keys());
  }

  /** Swaps in the keys of modelgate's own state (the admin API's) and invalidates every cached entry. */
  setManaged(keys: readonly ManagedKeyRecord[]): void {
    this.#managed = keys;
    this.#rebuild();
  }

  /** The ids of the keys defined in the config file (the admin API refuses to change them). */
  configKeyIds(): ReadonlySet<string> {
    return new Set(this.#fromConfig.map((k) => k.id));
  }

  /** The groups served: the config's and those of modelgate's own state. */
  groups(): ReadonlyMap<string, GroupRecord> {
    return this.#groups;
  }

  #rebuild(): void {
    const configured = new Map(this.#fromConfig.map((k) => [k.id, k]));
    const previous = new Map<string, KeyRecord>();
    for (const m of this.#managed) {
      if (configured.has(m.id)) continue;
      const { previous: old, ...k } = m;
      configured.set(k.id, k);
      if (old)
        previous.set(k.id, { ...k, sha256: old.sha256, expiresAt: Math.min(k.expiresAt ?? Infinity, old.until) });
    }
    this.#configured = configured;
    this.#previous = previous;
    const served = new Map<string, KeyRecord>();
    for (const k of previous.values()) served.set(k.sha256, this.#served(k));
    for (const k of configured.values()) served.set(k.sha256, this.#served(k));
    this.#keys = served;
    for (const l of this.#listeners) l({ kind: 'all' });
  }

  /** The record with the balance net of what the key spent. */
  #served(k: KeyRecord): KeyRecord {
    const spent = this.meter && k.balance !== null ? this.meter.spent(k.id) : 0;
    return spent === 0 ? k : { ...k, balance: Math.round(((k.balance as number) - spent) * 1e12) / 1e12 };
  }

  #spent(id: string): void {
    const k = this.#configured.get(id);
    if (!k) return;
    const old = this.#previous.get(id);
    for (const r of old && this.#keys.get(old.sha256)?.id === id ? [k, old] : [k]) {
      const served = this.#served(r);
      this.#keys.set(r.sha256, served);
      // Only the balance changed: caches take it as is (no lookup on the next Check).
      for (const l of this.#listeners) l({ kind: 'key', sha256: r.sha256, balance: served.balance });
    }
  }

  // Lookup is by SHA-256 of the key, so a timing difference could at most reveal a hash
  // prefix, never the key (the "constant-time where a comparison happens" rule is about keys).
  async findKey(sha256: string): Promise<KeyRecord | null> {
    return this.#keys.get(sha256) ?? null;
  }

  async findGroup(name: string): Promise<GroupRecord | null> {
    return this.#groups.get(name) ?? null;
  }

  async findKeyById(id: string): Promise<KeyRecord | null> {
    return this.#configured.get(id) ?? null;
  }

  onInvalidate(listener: (e: InvalidationEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  ready(): boolean {
    return true;
  }

  async close(): Promise<void> {
    await this.meter?.close();
    this.#listeners.clear();
  }
}

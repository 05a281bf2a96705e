/**
 * The embedded default store: groups and keys from the config file, held in memory. A reload
 * replaces the whole snapshot atomically and tells caches to drop everything.
 *
 * With metering (docs/metering.md), a key's balance is its configured balance minus what it spent
 * (file-meter.ts, kept in a state file beside the config); a debit replaces that key's record and
 * invalidates exactly its cache entry, so the next request sees the new balance.
 */
import { FileMeter, type FileMeterOptions } from './file-meter';
import type { GroupRecord, InvalidationEvent, KeyRecord, Store } from './store';

export interface FileStoreOptions extends Omit<FileMeterOptions, 'onSpent'> {
  /** Keep balances that move (default: only when a state path is given, or `meter: true`). */
  readonly meter?: boolean;
}

export class FileStore implements Store {
  readonly kind = 'file';
  /** By SHA-256: the records as served (balances net of spending). */
  #keys = new Map<string, KeyRecord>();
  /** By id: the records as configured. */
  #configured = new Map<string, KeyRecord>();
  #groups: ReadonlyMap<string, GroupRecord> = new Map();
  readonly #listeners = new Set<(e: InvalidationEvent) => void>();
  readonly meter: FileMeter | undefined;

  constructor(groups: ReadonlyMap<string, GroupRecord>, keys: readonly KeyRecord[], options?: FileStoreOptions) {
    if (options && (options.meter || options.path)) {
      this.meter = new FileMeter((id) => {
        const k = this.#configured.get(id);
        return k === undefined ? undefined : k.balance;
      }, { ...options, onSpent: (id) => this.#spent(id) });
    }
    this.replace(groups, keys);
  }

  /** Swaps in a new snapshot (a validated reload) and invalidates every cached entry. */
  replace(groups: ReadonlyMap<string, GroupRecord>, keys: readonly KeyRecord[]): void {
    this.#configured = new Map(keys.map((k) => [k.id, k]));
    this.#keys = new Map(keys.map((k) => [k.sha256, this.#served(k)]));
    this.#groups = groups;
    for (const l of this.#listeners) l({ kind: 'all' });
  }

  /** The record with the balance net of what the key spent. */
  #served(k: KeyRecord): KeyRecord {
    const spent = this.meter && k.balance !== null ? this.meter.spent(k.id) : 0;
    return spent === 0 ? k : { ...k, balance: Math.round((k.balance as number - spent) * 1e12) / 1e12 };
  }

  #spent(id: string): void {
    const k = this.#configured.get(id);
    if (!k) return;
    const served = this.#served(k);
    this.#keys.set(k.sha256, served);
    // Only the balance changed: caches take it as is (no lookup on the next Check).
    for (const l of this.#listeners) l({ kind: 'key', sha256: k.sha256, balance: served.balance });
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

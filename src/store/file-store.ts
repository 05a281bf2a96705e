/**
 * The embedded default store: groups and keys from the config file, held in memory. A reload
 * replaces the whole snapshot atomically and tells caches to drop everything.
 */
import type { GroupRecord, InvalidationEvent, KeyRecord, Store } from './store';

export class FileStore implements Store {
  readonly kind = 'file';
  #keys = new Map<string, KeyRecord>();
  #groups: ReadonlyMap<string, GroupRecord> = new Map();
  readonly #listeners = new Set<(e: InvalidationEvent) => void>();

  constructor(groups: ReadonlyMap<string, GroupRecord>, keys: readonly KeyRecord[]) {
    this.replace(groups, keys);
  }

  /** Swaps in a new snapshot (a validated reload) and invalidates every cached entry. */
  replace(groups: ReadonlyMap<string, GroupRecord>, keys: readonly KeyRecord[]): void {
    this.#keys = new Map(keys.map((k) => [k.sha256, k]));
    this.#groups = groups;
    for (const l of this.#listeners) l({ kind: 'all' });
  }

  // Lookup is by SHA-256 of the key, so a timing difference could at most reveal a hash
  // prefix, never the key (the "constant-time where a comparison happens" rule is about keys).
  async findKey(sha256: string): Promise<KeyRecord | null> {
    return this.#keys.get(sha256) ?? null;
  }

  async findGroup(name: string): Promise<GroupRecord | null> {
    return this.#groups.get(name) ?? null;
  }

  onInvalidate(listener: (e: InvalidationEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  ready(): boolean {
    return true;
  }

  async close(): Promise<void> {
    this.#listeners.clear();
  }
}

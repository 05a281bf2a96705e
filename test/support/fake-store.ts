/**
 * An in-memory Store for service-level tests of failure handling: it can be switched to fail
 * (reject) or to return a corrupt record, and counts lookups.
 */
import type { GroupRecord, InvalidationEvent, KeyRecord, Store } from '../../src/store/store';

export class FakeStore implements Store {
  readonly kind = 'fake';
  mode: 'ok' | 'down' | 'corrupt' = 'ok';
  keyLookups = 0;
  /** When set, key lookups wait for this promise (a lookup held "in flight"). */
  gate: Promise<void> | undefined;
  readonly #listeners = new Set<(e: InvalidationEvent) => void>();

  constructor(
    readonly keys: Map<string, KeyRecord>,
    readonly groups: Map<string, GroupRecord>,
  ) {}

  async findKey(sha256: string): Promise<KeyRecord | null> {
    this.keyLookups++;
    if (this.gate) await this.gate;
    if (this.mode === 'down') throw new Error('connection refused');
    return this.keys.get(sha256) ?? null;
  }

  async findGroup(name: string): Promise<GroupRecord | null> {
    if (this.mode === 'down') throw new Error('connection refused');
    if (this.mode === 'corrupt') return { name, available: true, models: null } as unknown as GroupRecord;
    return this.groups.get(name) ?? null;
  }

  emit(e: InvalidationEvent): void {
    for (const l of this.#listeners) l(e);
  }

  onInvalidate(listener: (e: InvalidationEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  ready(): boolean {
    return this.mode !== 'down';
  }

  async close(): Promise<void> {}
}

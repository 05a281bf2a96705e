/**
 * The store contract shared by the file store (embedded default) and the PostgreSQL store.
 * Keys are looked up only by the SHA-256 of the full key string (hex, lowercase); the key itself
 * never reaches a store.
 */

/** Protocol styles of the spec (seed §1, §4.2). */
export const PROTOCOLS = ['chat', 'responses', 'embeddings', 'messages', 'generative'] as const;
export type Protocol = (typeof PROTOCOLS)[number];

export interface ModelRecord {
  readonly name: string;
  /** Protocol styles this model is served on; `null` means any. */
  readonly protocols: readonly Protocol[] | null;
  /** false: 403 model_unavailable (its channel is down). */
  readonly available: boolean;
}

export interface GroupRecord {
  readonly name: string;
  /** false: every key of the group gets 403 group_unavailable. */
  readonly available: boolean;
  /** By exact name (case and spaces matter, seed §2). */
  readonly models: ReadonlyMap<string, ModelRecord>;
}

export interface KeyRecord {
  /** Shown in logs and headers; never the key itself. */
  readonly id: string;
  /** Lowercase hex SHA-256 of the full key string. */
  readonly sha256: string;
  readonly group: string;
  /** `null` = unlimited; <= 0 denies with balance_insufficient. */
  readonly balance: number | null;
  readonly disabled: boolean;
  /** Epoch milliseconds, or `null` for never. */
  readonly expiresAt: number | null;
}

/**
 * What every store implements. `null` means "definitely not found". A thrown error or rejected
 * promise means "could not decide" (store down or slow): callers fail closed with store_unavailable
 * unless a fresh-enough cached answer exists. Never confuse the two.
 */
export interface Store {
  readonly kind: string;
  findKey(sha256: string): Promise<KeyRecord | null>;
  findGroup(name: string): Promise<GroupRecord | null>;
  /** Subscribe to invalidations; returns an unsubscribe function. */
  onInvalidate(listener: (event: InvalidationEvent) => void): () => void;
  /** true once the store has loaded and can answer. */
  ready(): boolean;
  close(): Promise<void>;
}

/**
 * An invalidation tells caches exactly which entries a change touched.
 * `all` is sent when a store cannot know what it missed (reload of a file, a dropped LISTEN connection).
 */
export type InvalidationEvent =
  | { readonly kind: 'key'; readonly sha256: string }
  | { readonly kind: 'group'; readonly name: string }
  | { readonly kind: 'all' };

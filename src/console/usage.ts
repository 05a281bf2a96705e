/**
 * The slot for "recent usage" in the console's "My access" view. The service passes the meter's
 * ledger (server/service.ts, from `meter/recent-usage.ts`) whenever the store keeps one; without a
 * provider the view has no usage section at all, rather than an empty or made-up one.
 *
 * The console asks only for the presenting key's own id, never another key's.
 */

/** One recent request of a key. `cost` is null when the meter has no price for it. */
export interface UsageRow {
  readonly time: string;
  readonly model: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cost: number | null;
}

/** What the meter provides: the latest `limit` requests of one key, newest first. */
export interface UsageProvider {
  recent(keyId: string, limit: number): Promise<UsageRow[]>;
}

/** How many rows the access view shows. */
export const RECENT_USAGE_ROWS = 10;

/**
 * A key's recent usage, for the console ("recent usage" on a key's page) and `modelgate usage`:
 * newest first, from the store's usage ledger (PostgreSQL's modelgate.usage, or the file store's
 * state file). Read-only; an empty list when the store keeps no ledger.
 */
import type { MeterStore, UsageEntry } from '../store/store';

/** Totals over some ledger entries. */
export interface UsageTotals {
  readonly responses: number;
  readonly inputTokens: number;
  readonly cachedInputTokens: number;
  readonly outputTokens: number;
  readonly cost: number;
}

/** The last `limit` (default 20, at most 1000) metered responses of a key, newest first. */
export async function recentUsage(store: MeterStore | undefined, keyId: string, limit = 20): Promise<UsageEntry[]> {
  if (!store) return [];
  return store.usage({ keyId, limit: Math.max(1, Math.min(1000, Math.floor(limit))) });
}

export function usageTotals(entries: readonly UsageEntry[]): UsageTotals {
  let inputTokens = 0;
  let cachedInputTokens = 0;
  let outputTokens = 0;
  let cost = 0;
  for (const e of entries) {
    inputTokens += e.inputTokens;
    cachedInputTokens += e.cachedInputTokens;
    outputTokens += e.outputTokens;
    cost += e.cost;
  }
  return {
    responses: entries.length,
    inputTokens,
    cachedInputTokens,
    outputTokens,
    cost: Math.round(cost * 1e12) / 1e12,
  };
}

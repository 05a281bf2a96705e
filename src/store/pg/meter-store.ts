/**
 * The meter's side of the PostgreSQL store (issue 11): debits, strict-mode reservations and the
 * usage ledger. Each operation is one statement (the functions of schema.ts migration 2), so it
 * is atomic, and a debit is applied at most once per request id. The keys table's triggers send
 * the invalidation, so every replica's cache forgets the balance within a round trip.
 */
import type pg from 'pg';
import { SCHEMA } from './schema';
import type { DebitRequest, DebitResult, MeterStore, ModelPrice, ReserveResult, UsageEntry, UsageQuery } from '../store';

/** The store's bounded query (store.ts): rejects with a one-line reason. */
export type PgQuery = <R extends pg.QueryResultRow>(what: string, text: string, values: unknown[]) => Promise<R[]>;

interface UsageRow {
  time: Date;
  request_id: string;
  key_id: string;
  group_name: string;
  model: string;
  protocol: string;
  input_tokens: string;
  output_tokens: string;
  cached_input_tokens: string;
  cost: number;
  priced: boolean;
}

/**
 * A number as PostgreSQL numeric text. String(n) is the shortest text that reads back as n
 * ("0.15", not 0.1499999...), so prices written in the config are charged exactly as written.
 */
function numeric(n: number | null): string | null {
  if (n === null) return null;
  if (!Number.isFinite(n)) throw new Error(`not a finite number: ${n}`);
  return String(n);
}

const tokens = (n: number): string => String(Math.max(0, Math.floor(n)));

function priceArgs(price: ModelPrice | null): (string | null)[] {
  return price === null ? [null, null, null] : [numeric(price.input), numeric(price.output), numeric(price.cachedInput)];
}

export class PgMeterStore implements MeterStore {
  constructor(private readonly query: PgQuery) {}

  async debit(r: DebitRequest): Promise<DebitResult> {
    const cached = Math.min(r.cachedInputTokens, r.inputTokens);
    const rows = await this.query<{ applied: boolean; cost: number; balance: number | null }>('debit',
      `SELECT applied, cost::float8 AS cost, balance::float8 AS balance FROM ${SCHEMA}.debit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [r.requestId, r.keyId, r.group, r.model, r.protocol, tokens(r.inputTokens), tokens(r.outputTokens), tokens(cached), ...priceArgs(r.price)]);
    const row = rows[0];
    return { applied: row.applied, cost: row.cost, balance: row.balance };
  }

  async reserve(requestId: string, keyId: string, amount: number, ttlSeconds: number): Promise<ReserveResult> {
    const rows = await this.query<{ ok: boolean; available: number | null }>('reserve',
      `SELECT ok, available::float8 AS available FROM ${SCHEMA}.reserve($1, $2, $3, $4)`,
      [requestId, keyId, numeric(amount), Math.max(1, Math.ceil(ttlSeconds))]);
    return { ok: rows[0].ok, available: rows[0].available };
  }

  async release(requestId: string): Promise<void> {
    await this.query('release', `DELETE FROM ${SCHEMA}.reservations WHERE request_id = $1`, [requestId]);
  }

  async usage(q: UsageQuery): Promise<UsageEntry[]> {
    const rows = await this.query<UsageRow>('usage',
      `SELECT time, request_id, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens,
          cost::float8 AS cost, priced
        FROM ${SCHEMA}.usage
        WHERE ($1::text IS NULL OR key_id = $1) AND ($2::text IS NULL OR group_name = $2) AND ($3::timestamptz IS NULL OR time >= $3)
        ORDER BY time DESC, request_id LIMIT $4`,
      [q.keyId ?? null, q.group ?? null, q.since === undefined ? null : new Date(q.since), q.limit ?? 100]);
    return rows.map((r) => ({
      time: r.time.getTime(), requestId: r.request_id, keyId: r.key_id, group: r.group_name, model: r.model, protocol: r.protocol,
      inputTokens: Number(r.input_tokens), outputTokens: Number(r.output_tokens), cachedInputTokens: Number(r.cached_input_tokens),
      cost: r.cost, priced: r.priced,
    }));
  }
}

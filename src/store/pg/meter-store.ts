/**
 * The meter's side of the PostgreSQL store: debits, strict-mode reservations and the usage ledger.
 * Each operation is one statement (the functions of schema.ts), so it is atomic, and a debit is
 * applied at most once per request id (a final settlement replaces a provisional one).
 *
 * Debits are batched without waiting: the first goes at once; those that arrive while batches are
 * in flight are sent together when one comes back (debit_many: one statement, one balance update
 * and one notification per key). Under load a debit costs PostgreSQL a share of a statement;
 * alone it costs what it did before. A row the batch finds already in the ledger is settled alone
 * (debit): a duplicate, or the replacement of a provisional settlement; so is the second of two
 * settlements of one request in a batch (a provisional one at its deadline and its report, together).
 */
import type pg from 'pg';
import { SCHEMA, SETTLED_CHANNEL } from './schema';
import {
  priceAt,
  type DebitRequest,
  type DebitResult,
  type MeterStore,
  type ModelPrice,
  type ReservedRequest,
  type ReserveResult,
  type SettledRequest,
  type SpentQuery,
  type UsageEntry,
  type UsageQuery,
} from '../store';

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
  estimated: string | null;
  provisional: boolean;
  tool_calls: number;
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

const tokens = (n: number): string => {
  if (!Number.isFinite(n)) throw new Error(`not a finite token count: ${n}`);
  return String(Math.max(0, Math.floor(n)));
};

/**
 * A debit's price as debit() and debit_many() take it: the flat price its input tokens are charged
 * at (priceAt: a request over a long-context threshold pays that price for every token).
 */
function priceArgs(price: ModelPrice | null, inputTokens: number): (string | null)[] {
  if (price === null) return [null, null, null];
  const p = priceAt(price, inputTokens);
  return [numeric(p.input), numeric(p.output), numeric(p.cachedInput)];
}

/** A debit's calls of hosted tools (an integer >= 0). */
const toolCalls = (r: DebitRequest): number => {
  const n = r.toolCalls ?? 0;
  if (!Number.isFinite(n) || n < 0) throw new Error(`not a count of tool calls: ${n}`);
  return Math.floor(n);
};

/** What they cost (0 without a price: the debit functions charge nothing then). */
const toolCost = (r: DebitRequest): number => {
  const c = r.toolCost ?? 0;
  if (!Number.isFinite(c) || c < 0) throw new Error(`not a cost of tool calls: ${c}`);
  return c;
};

/** Debits per statement at most. */
const BATCH_MAX = 500;
/** Batches in flight at once (each holds a pool connection). */
const BATCHES_IN_FLIGHT = 2;

/** Released request ids per announcement: a NOTIFY payload holds under 8,000 bytes. */
const ANNOUNCE_BYTES = 6000;
/** Ids waiting to be announced at most; past it the rest settle at their deadline (never free). */
const ANNOUNCE_QUEUE_MAX = 10_000;
/** How long ids gather before an announcement (one statement per this at most). */
const ANNOUNCE_MS = 50;

interface Waiting {
  readonly r: DebitRequest;
  resolve(d: DebitResult): void;
  reject(e: unknown): void;
}

export class PgMeterStore implements MeterStore {
  readonly #queue: Waiting[] = [];
  #inFlight = 0;
  readonly #released = new Set<string>();
  #announcing: NodeJS.Timeout | undefined;

  constructor(private readonly query: PgQuery) {}

  debit(r: DebitRequest): Promise<DebitResult> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ r, resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < BATCHES_IN_FLIGHT && this.#queue.length > 0) {
      const batch = this.#queue.splice(0, BATCH_MAX);
      this.#inFlight++;
      void this.#send(batch).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  async #send(batch: Waiting[]): Promise<void> {
    if (batch.length === 1) {
      const w = batch[0];
      await this.#debitOne(w.r).then(w.resolve, w.reject);
      return;
    }
    let rows: { request_id: string; applied: boolean; conflict: boolean; cost: number; balance: number | null }[];
    // Each request id once: debit_many debited a key for every copy of an id in its input (its ledger
    // row once). The copies settle alone after it (below).
    const ids = new Set<string>();
    const unique = batch.filter(({ r }) => {
      if (ids.has(r.requestId)) return false;
      ids.add(r.requestId);
      return true;
    });
    try {
      const json = JSON.stringify(
        unique.map(({ r }) => {
          const cached = Math.min(r.cachedInputTokens, r.inputTokens);
          const [pi, po, pc] = priceArgs(r.price, r.inputTokens);
          return {
            request_id: r.requestId,
            key_id: r.keyId,
            group_name: r.group,
            model: r.model,
            protocol: r.protocol,
            input_tokens: tokens(r.inputTokens),
            output_tokens: tokens(r.outputTokens),
            cached_input_tokens: tokens(cached),
            price_in: pi,
            price_out: po,
            price_cached: pc,
            estimated: r.estimated ?? null,
            provisional: r.provisional === true,
            replica: r.replica ?? null,
            tool_calls: toolCalls(r),
            tool_cost: numeric(toolCost(r)),
          };
        }),
      );
      rows = await this.query(
        'debit',
        `SELECT request_id, applied, conflict, cost::float8 AS cost, balance::float8 AS balance FROM ${SCHEMA}.debit_many($1::jsonb)`,
        [json],
      );
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    }
    // A request id twice in one batch: the first answers it; the rest settle alone.
    const byId = new Map<string, (typeof rows)[number]>();
    for (const row of rows) byId.set(row.request_id, row);
    const seen = new Set<string>();
    for (const w of batch) {
      const row = byId.get(w.r.requestId);
      if (!row || row.conflict || seen.has(w.r.requestId)) {
        await this.#debitOne(w.r).then(w.resolve, w.reject);
        continue;
      }
      seen.add(w.r.requestId);
      w.resolve({ applied: row.applied, cost: row.cost, balance: row.balance });
    }
  }

  async #debitOne(r: DebitRequest): Promise<DebitResult> {
    const cached = Math.min(r.cachedInputTokens, r.inputTokens);
    const rows = await this.query<{ applied: boolean; cost: number; balance: number | null }>(
      'debit',
      `SELECT applied, cost::float8 AS cost, balance::float8 AS balance FROM ${SCHEMA}.debit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
      [
        r.requestId,
        r.keyId,
        r.group,
        r.model,
        r.protocol,
        tokens(r.inputTokens),
        tokens(r.outputTokens),
        tokens(cached),
        ...priceArgs(r.price, r.inputTokens),
        r.estimated ?? null,
        r.provisional === true,
        r.replica ?? null,
        toolCalls(r),
        numeric(toolCost(r)),
      ],
    );
    const row = rows[0];
    return { applied: row.applied, cost: row.cost, balance: row.balance };
  }

  async reserve(
    requestId: string,
    keyId: string,
    amount: number,
    ttlSeconds: number,
    held?: ReservedRequest,
  ): Promise<ReserveResult> {
    const rows = await this.query<{ ok: boolean; available: number | null }>(
      'reserve',
      `SELECT ok, available::float8 AS available FROM ${SCHEMA}.reserve($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        requestId,
        keyId,
        numeric(amount),
        Math.max(1, Math.ceil(ttlSeconds)),
        held?.group ?? null,
        held?.model ?? null,
        held?.protocol ?? null,
        held ? tokens(held.inputTokens) : null,
        held ? tokens(held.outputTokens) : null,
      ],
    );
    return { ok: rows[0].ok, available: rows[0].available };
  }

  async lease(
    replica: string,
    keyId: string,
    want: number,
    need: number,
    ttlSeconds: number,
  ): Promise<{ granted: number | null; balance: number | null }> {
    const rows = await this.query<{ granted: number | null; balance: number | null }>(
      'lease',
      `SELECT granted::float8 AS granted, balance::float8 AS balance FROM ${SCHEMA}.lease($1, $2, $3, $4, $5)`,
      [replica, keyId, numeric(Math.max(0, want)), numeric(Math.max(0, need)), Math.max(1, Math.ceil(ttlSeconds))],
    );
    return rows[0] ?? { granted: 0, balance: null };
  }

  /** Hands settlement notifications (SETTLED_CHANNEL) to the listeners; a payload it cannot read is ignored. */
  settledNotification(payload: string | undefined): void {
    let parsed: SettledRequest[] = [];
    try {
      const v = JSON.parse(payload ?? '') as { s?: unknown; r?: unknown };
      if (Array.isArray(v.s)) {
        parsed = v.s.flatMap((e): SettledRequest[] =>
          Array.isArray(e) && typeof e[0] === 'string'
            ? [{ requestId: e[0], replica: typeof e[1] === 'string' ? e[1] : null, cost: Number(e[2]) || 0 }]
            : [],
        );
      } else if (Array.isArray(v.r)) {
        parsed = v.r.flatMap((id): SettledRequest[] =>
          typeof id === 'string' ? [{ requestId: id, replica: null, cost: 0, released: true }] : [],
        );
      }
    } catch {
      /* nothing to hand on */
    }
    if (parsed.length === 0) return;
    for (const l of this.#settledListeners) l(parsed);
  }

  readonly #settledListeners = new Set<(s: readonly SettledRequest[]) => void>();

  onSettled(listener: (settled: readonly SettledRequest[]) => void): () => void {
    this.#settledListeners.add(listener);
    return () => this.#settledListeners.delete(listener);
  }

  /**
   * Requests that ended before a Check's answer reached them, announced on SETTLED_CHANNEL as
   * `{"r":[ids]}` (the replica that allowed one releases it: meter.ts) with their reservations
   * deleted, in one statement per ANNOUNCE_MS at most, whatever the rate of such reports.
   */
  announceReleased(requestId: string): void {
    if (this.#released.size >= ANNOUNCE_QUEUE_MAX || requestId.length > 200) return;
    this.#released.add(requestId);
    if (this.#announcing) return;
    this.#announcing = setTimeout(() => void this.#announce(), ANNOUNCE_MS);
    this.#announcing.unref();
  }

  async #announce(): Promise<void> {
    const ids: string[] = [];
    let bytes = 0;
    for (const id of this.#released) {
      if (bytes + id.length + 3 > ANNOUNCE_BYTES) break;
      ids.push(id);
      bytes += id.length + 3;
      this.#released.delete(id);
    }
    try {
      await this.query(
        'announce released',
        `WITH d AS (DELETE FROM ${SCHEMA}.reservations WHERE request_id = ANY($1::text[]))
        SELECT pg_notify('${SETTLED_CHANNEL}', json_build_object('r', $1::text[])::text)`,
        [ids],
      );
    } catch {
      /* not announced: those requests settle at their deadline, provisionally */
    }
    this.#announcing = undefined;
    if (this.#released.size > 0) {
      this.#announcing = setTimeout(() => void this.#announce(), ANNOUNCE_MS);
      this.#announcing.unref();
    }
  }

  async release(requestId: string): Promise<void> {
    await this.query('release', `DELETE FROM ${SCHEMA}.reservations WHERE request_id = $1`, [requestId]);
  }

  async expireReservations(): Promise<number> {
    const rows = await this.query<{ n: number }>(
      'expire reservations',
      `SELECT ${SCHEMA}.expire_reservations(1000) AS n`,
      [],
    );
    return rows[0].n;
  }

  /**
   * A window's debits of a key, a key on one model or a group, summed over the usage table's
   * (key_id, time) or (group_name, time) index (a model is a filter on the key's rows).
   */
  async spentIn(q: SpentQuery): Promise<number> {
    const column = q.keyId !== undefined ? 'key_id' : 'group_name';
    const byModel = q.keyId !== undefined && q.model !== undefined;
    const rows = await this.query<{ spent: string | null }>(
      byModel ? 'spent_in_model' : 'spent_in',
      `SELECT sum(cost)::text AS spent FROM ${SCHEMA}.usage WHERE ${column} = $1 AND time >= $2 AND time < $3${byModel ? ' AND model = $4' : ''}`,
      byModel
        ? [q.keyId, new Date(q.since), new Date(q.until), q.model]
        : [q.keyId ?? q.group ?? '', new Date(q.since), new Date(q.until)],
    );
    const spent = rows[0]?.spent == null ? 0 : Number(rows[0].spent);
    if (!Number.isFinite(spent)) throw new Error("the usage table's sum is not a finite number");
    return Math.max(0, spent);
  }

  async usage(q: UsageQuery): Promise<UsageEntry[]> {
    const rows = await this.query<UsageRow>(
      'usage',
      `SELECT time, request_id, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens,
          cost::float8 AS cost, priced, estimated, provisional, tool_calls
        FROM ${SCHEMA}.usage
        WHERE ($1::text IS NULL OR key_id = $1) AND ($2::text IS NULL OR group_name = $2) AND ($3::timestamptz IS NULL OR time >= $3)
        ORDER BY time DESC, request_id LIMIT $4`,
      [q.keyId ?? null, q.group ?? null, q.since === undefined ? null : new Date(q.since), q.limit ?? 100],
    );
    return rows.map((r) => ({
      time: r.time.getTime(),
      requestId: r.request_id,
      keyId: r.key_id,
      group: r.group_name,
      model: r.model,
      protocol: r.protocol,
      inputTokens: Number(r.input_tokens),
      outputTokens: Number(r.output_tokens),
      cachedInputTokens: Number(r.cached_input_tokens),
      cost: r.cost,
      priced: r.priced,
      ...(r.estimated ? { estimated: r.estimated as UsageEntry['estimated'] } : {}),
      ...(r.provisional ? { provisional: true } : {}),
      ...(r.tool_calls > 0 ? { toolCalls: r.tool_calls } : {}),
    }));
  }
}

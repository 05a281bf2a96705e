/**
 * The shared store: keys and groups in PostgreSQL, for many replicas at once.
 *
 * Lookups go through a small pool whose every wait is bounded (opening a connection, waiting for
 * a free one, the statement itself), so a dead, slow or exhausted database turns into a prompt
 * rejection, which the cache answers with a bounded stale answer or 503 store_unavailable, instead
 * of requests piling up behind it. Invalidations arrive through PgListener (see listener.ts).
 */
import pg from 'pg';
import { PgListener } from './listener';
import { PgMeterStore } from './meter-store';
import { INVALIDATION_CHANNEL, SCHEMA, SCHEMA_VERSION, SETTLED_CHANNEL, migrate, schemaVersion } from './schema';
import { modalPrices, PROTOCOLS, toLimits, toolPrices } from '../store';
import type { Budget } from '../budget-window';
import type {
  GroupRecord,
  InvalidationEvent,
  KeyRecord,
  Limits,
  ModelPrice,
  ModelRecord,
  Protocol,
  Store,
} from '../store';

export interface PgStoreOptions {
  /** Bound on one lookup, enforced by the server (statement_timeout) and the client. */
  readonly queryTimeoutMs?: number;
  /** Bound on opening a connection and on waiting for a free one in a full pool. */
  readonly connectTimeoutMs?: number;
  readonly poolSize?: number;
  /** Idle pooled connections are closed after this long. */
  readonly idleTimeoutMs?: number;
  /** Liveness check interval of the LISTEN connection: bounds how long a silently dead one goes unnoticed. */
  readonly heartbeatMs?: number;
  /**
   * How long a replica count is remembered after it falls (replicas() is the largest count seen over
   * it): requests a replica that left, or whose LISTEN connection dropped, admitted under its share
   * may run this long (meter.reservationSeconds).
   */
  readonly replicaMemoryMs?: number;
  readonly reconnectMinMs?: number;
  readonly reconnectMaxMs?: number;
  /** openPgStore applies migrations when true; when false it only checks the schema version. */
  readonly migrate?: boolean;
  /**
   * Where the URL came from (`--store`, `MODELGATE_STORE`, `DATABASE_URL`, the config file), named
   * in every connection error so that a variable exported for another application is recognised.
   */
  readonly source?: string;
  readonly applicationName?: string;
  /** Failures the store absorbs itself (dropped LISTEN connection, broken idle connection), for logs. */
  readonly onError?: (error: Error, where: 'pool' | 'listener') => void;
}

/** Defaults: small, so that a failure costs at most about a second per request. */
export const PG_STORE_DEFAULTS = {
  queryTimeoutMs: 1000,
  connectTimeoutMs: 1000,
  poolSize: 10,
  idleTimeoutMs: 30_000,
  heartbeatMs: 1000,
  replicaMemoryMs: 900_000,
  reconnectMinMs: 100,
  reconnectMaxMs: 5000,
  migrate: true,
  applicationName: 'modelgate',
  source: '',
} as const;

/** Counters for tests and metrics: how many lookups reached PostgreSQL, and how many failed. */
export interface PgStoreStats {
  readonly keyQueries: number;
  readonly groupQueries: number;
  readonly errors: number;
  /** Times the LISTEN connection was re-established after a drop. */
  readonly reconnects: number;
}

const KEY_COLUMNS =
  'id, sha256, group_name, balance::float8 AS balance, disabled, expires_at, limits, budget, model_budgets';
// A rotated key's previous secret (migration 10) matches too, as the same key expiring when its grace ends.
const KEY_SQL = `SELECT ${KEY_COLUMNS} FROM ${SCHEMA}.keys WHERE sha256 = $1
  UNION ALL SELECT id, previous_sha256, group_name, balance::float8, disabled,
    CASE WHEN expires_at IS NULL OR expires_at > previous_until THEN previous_until ELSE expires_at END, limits, budget, model_budgets
  FROM ${SCHEMA}.keys WHERE previous_sha256 = $1 LIMIT 1`;
const KEY_BY_ID_SQL = `SELECT ${KEY_COLUMNS} FROM ${SCHEMA}.keys WHERE id = $1`;

// One round trip for a group and its models; a group without models yields one row of NULLs.
const GROUP_SQL = `SELECT g.name, g.available, m.name AS model, m.protocols, m.available AS model_available,
    m.input_price::float8 AS input_price, m.output_price::float8 AS output_price,
    m.cached_input_price::float8 AS cached_input_price, m.max_output_tokens, g.limits AS group_limits, g.budget AS group_budget, m.limits AS model_limits,
    m.long_context_above::float8 AS long_context_above, m.long_context_input_price::float8 AS long_context_input_price,
    m.long_context_output_price::float8 AS long_context_output_price, m.long_context_cached_input_price::float8 AS long_context_cached_input_price,
    m.audio_input_price::float8 AS audio_input_price, m.audio_output_price::float8 AS audio_output_price, m.image_output_price::float8 AS image_output_price,
    m.tool_prices
  FROM ${SCHEMA}.groups g LEFT JOIN ${SCHEMA}.group_models m ON m.group_name = g.name
  WHERE g.name = $1 ORDER BY m.position, m.name`;

/** A row of modelgate_keys as the lookups select it. */
export interface KeyRow {
  id: string;
  sha256: string;
  group_name: string;
  balance: number | null;
  disabled: boolean;
  expires_at: Date | null;
  /** Rate limits (migration 4): a JSON object of LIMIT_NAMES, or null. */
  limits?: Limits | null;
  /** A budget per window (migration 11), or null. */
  budget?: Budget | null;
  /** Budgets per window by model name (migration 12), or null. */
  model_budgets?: Record<string, Budget> | null;
}

interface GroupRow {
  name: string;
  available: boolean;
  model: string | null;
  protocols: string[] | null;
  model_available: boolean | null;
  input_price: number | null;
  output_price: number | null;
  cached_input_price: number | null;
  /** Migration 6: prices of other modalities (meter/modal-cost.ts). */
  audio_input_price?: number | null;
  audio_output_price?: number | null;
  image_output_price?: number | null;
  /** Migration 9: hosted tools' prices per call (a JSON object), or null. */
  tool_prices?: Record<string, unknown> | null;
  max_output_tokens: number | null;
  group_limits: Limits | null;
  /** Migration 11. */
  group_budget?: Budget | null;
  model_limits: Limits | null;
  /** A long-context price (migration 6). */
  long_context_above: number | null;
  long_context_input_price: number | null;
  long_context_output_price: number | null;
  long_context_cached_input_price: number | null;
}

/**
 * A limits column as read: only positive integers of the known names (the CHECK admits nothing else; a newer schema's
 * extra names are dropped).
 */
const SHA256_HEX = /^[0-9a-f]{64}$/;

function toModel(row: GroupRow & { model: string }): ModelRecord {
  // The table's CHECK allows only known protocols; filtering keeps an unknown one (written by a
  // newer version) from matching anything, which fails closed.
  const protocols =
    row.protocols === null
      ? null
      : row.protocols.filter((p): p is Protocol => (PROTOCOLS as readonly string[]).includes(p));
  const limits = toLimits(row.model_limits);
  return {
    name: row.model,
    protocols,
    available: row.model_available ?? false,
    price: toPrice(row),
    maxOutputTokens: row.max_output_tokens,
    ...(limits ? { limits } : {}),
  };
}

/**
 * A model's price, or null. The table's CHECKs admit only finite prices >= 0; a number that is
 * not one anyway (a newer schema, a hand-made table) is no price at all, and the meter says so.
 */
function toPrice(row: GroupRow): ModelPrice | null {
  const ok = (n: number | null): n is number => n !== null && Number.isFinite(n) && n >= 0;
  if (!ok(row.input_price) || !ok(row.output_price)) return null;
  // A modality price that is not one is refused at admission as if absent (fail closed), never read as 0.
  const modal = (n: number | null | undefined): number | null => (n !== undefined && ok(n) ? n : null);
  const price = {
    input: row.input_price,
    output: row.output_price,
    cachedInput: ok(row.cached_input_price) ? row.cached_input_price : null,
    ...modalPrices({
      audioInput: modal(row.audio_input_price),
      audioOutput: modal(row.audio_output_price),
      imageOutput: modal(row.image_output_price),
    }),
    // A tool price that is not a number >= 0 is left out: a request declaring that tool is refused (fail closed).
    ...(row.tool_prices && typeof row.tool_prices === 'object' ? { tools: toolPrices(row.tool_prices) } : {}),
  };
  if (
    row.long_context_above === null &&
    row.long_context_input_price === null &&
    row.long_context_output_price === null
  )
    return price;
  // A long-context price that is not whole (a newer schema's row; the CHECK admits none): not guessed
  // as no tier at all; its NaNs make the meter refuse it (`price_invalid`, logged with every figure).
  const above = ok(row.long_context_above) ? row.long_context_above : Number.NaN;
  const input = ok(row.long_context_input_price) ? row.long_context_input_price : Number.NaN;
  const output = ok(row.long_context_output_price) ? row.long_context_output_price : Number.NaN;
  return {
    ...price,
    longContext: {
      above,
      input,
      output,
      cachedInput: ok(row.long_context_cached_input_price) ? row.long_context_cached_input_price : null,
    },
  };
}

function toKey(r: KeyRow): KeyRecord {
  const limits = toLimits(r.limits);
  return {
    id: r.id,
    sha256: r.sha256,
    group: r.group_name,
    balance: r.balance,
    disabled: r.disabled,
    expiresAt: r.expires_at === null ? null : r.expires_at.getTime(),
    ...(limits ? { limits } : {}),
    // Its shape is the column's CHECK; a zone this runtime does not know refuses at the Check (meter/budgets.ts).
    ...(r.budget ? { budget: r.budget } : {}),
    ...(r.model_budgets && Object.keys(r.model_budgets).length > 0
      ? { modelBudgets: modelBudgetsOf(r.model_budgets) }
      : {}),
  };
}

/** A key's budgets per model as a record without a prototype (a model may be named `__proto__`). */
export function modelBudgetsOf(m: Record<string, Budget>): Readonly<Record<string, Budget>> {
  const out = Object.create(null) as Record<string, Budget>;
  for (const [model, b] of Object.entries(m)) out[model] = b;
  return out;
}

/** A one-line reason, also for the message-less AggregateError of a refused `localhost` (::1 and 127.0.0.1). */
function errorMessage(err: unknown): string {
  const e = err as { message?: string; code?: string; errors?: { message?: string }[] } | null;
  return e?.message || e?.errors?.map((x) => x.message).join('; ') || e?.code || String(err);
}

/** How often the replicas sharing the database are counted (replicas()). */
export const REPLICA_COUNT_MS = 2000;
/** A replica that (re)connects is counted by the others within REPLICA_COUNT_MS; it waits three of them. */
export const REPLICA_GRACE_MS = 3 * REPLICA_COUNT_MS;
/**
 * Counts failing for this long while the LISTEN connection is up make a replica blind (replicas()):
 * one that joined meanwhile would wait REPLICA_GRACE_MS for this one to count it, and then hold its
 * share as if counted.
 */
export const REPLICA_COUNT_STALE_MS = REPLICA_GRACE_MS - REPLICA_COUNT_MS;
const REPLICAS_SQL =
  'SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1';

/** Store over PostgreSQL; build it with openPgStore(). */
export class PgStore implements Store {
  readonly kind = 'postgres';
  private readonly pool: pg.Pool;
  private readonly listener: PgListener;
  private readonly listeners = new Set<(event: InvalidationEvent) => void>();
  private readonly options: Required<Omit<PgStoreOptions, 'onError'>> & Pick<PgStoreOptions, 'onError'>;
  private counters = { keyQueries: 0, groupQueries: 0, errors: 0 };
  private schemaReady = false;
  /** Debits, reservations and the usage ledger (docs/metering.md). */
  readonly meter: PgMeterStore;
  private closed = false;
  private listeningWaiters: (() => void)[] = [];
  /** The largest count since peakAt (kept for replicaMemoryMs): what replicas() answers. */
  private peakCount = 1;
  private peakAt = 0;
  private replicaTimer: NodeJS.Timeout | undefined;
  /** Epoch ms of the LISTEN connection's last (re)connect. */
  private connectedAt = 0;
  /** Epoch ms until which every other replica counts this one (replicas()). */
  private countedUntil = 0;
  /** A count has succeeded (replicas() is blind before). */
  private counted = false;
  /** Epoch ms when the count that is failing now was sent (0: the last count succeeded). */
  private countFailingSince = 0;

  constructor(
    private readonly url: string,
    options: PgStoreOptions = {},
  ) {
    this.options = { ...PG_STORE_DEFAULTS, ...options };
    const o = this.options;
    this.pool = new pg.Pool({
      connectionString: url,
      max: o.poolSize,
      connectionTimeoutMillis: o.connectTimeoutMs,
      idleTimeoutMillis: o.idleTimeoutMs,
      // The server cancels the statement; the client gives up too, in case the server is unreachable.
      statement_timeout: o.queryTimeoutMs,
      query_timeout: o.queryTimeoutMs + 100,
      keepAlive: true,
      application_name: o.applicationName,
    });
    this.meter = new PgMeterStore((what, text, values) => this.query(what, text, values));
    // A pooled idle connection that breaks (server restart) is dropped by the pool; without a
    // listener, the 'error' event would crash the process.
    this.pool.on('error', (err) => this.options.onError?.(err, 'pool'));
    this.listener = new PgListener({
      connectionString: url,
      channel: INVALIDATION_CHANNEL,
      applicationName: `${o.applicationName}-listen`,
      connectTimeoutMs: o.connectTimeoutMs,
      heartbeatMs: o.heartbeatMs,
      reconnectMinMs: o.reconnectMinMs,
      reconnectMaxMs: o.reconnectMaxMs,
      onEvent: (event) => this.emit(event),
      settledChannel: SETTLED_CHANNEL,
      onSettled: (payload) => this.meter.settledNotification(payload),
      onState: (connected, error) => {
        if (error) this.options.onError?.(error, 'listener');
        if (connected) {
          this.connectedAt = Date.now();
          for (const wake of this.listeningWaiters.splice(0)) wake();
          void this.countReplicas();
        }
      },
    });
  }

  /** Applies (or checks) the schema, then starts listening. openPgStore() calls it. */
  async start(): Promise<void> {
    // Its own connection, without the pool's per-query timeout: waiting for another replica's
    // migration (or running a long one) is not a lookup.
    const client = new pg.Client({
      connectionString: this.url,
      connectionTimeoutMillis: this.options.connectTimeoutMs,
      application_name: `${this.options.applicationName}-migrate`,
    });
    try {
      await client.connect();
    } catch (err) {
      await client.end().catch(() => {});
      throw new Error(`cannot reach PostgreSQL at ${this.where()}: ${errorMessage(err)}`, { cause: err });
    }
    try {
      const version = this.options.migrate ? (await migrate(client)).to : await schemaVersion(client);
      if (version < SCHEMA_VERSION) {
        throw new Error(
          `PostgreSQL schema is at version ${version}, modelgate needs ${SCHEMA_VERSION}: run \`modelgate migrate\``,
        );
      }
    } catch (err) {
      if (err instanceof Error && /^(cannot reach|PostgreSQL schema)/.test(err.message)) throw err;
      throw new Error(`PostgreSQL at ${this.where()}: ${errorMessage(err)}`, { cause: err });
    } finally {
      await client.end().catch(() => {});
    }
    this.schemaReady = true;
    this.listener.start();
    this.replicaTimer = setInterval(() => void this.countReplicas(), REPLICA_COUNT_MS);
    this.replicaTimer.unref();
  }

  /**
   * modelgate processes on this database, this one included: each holds one LISTEN connection named
   * `<applicationName>-listen` (pg_stat_activity). Soft mode splits a key's balance among them
   * (meter/admission.ts). Each remembers the largest count it saw for replicaMemoryMs, so once every
   * other replica has counted this one (its LISTEN connection up for REPLICA_GRACE_MS) they count it
   * for that long, whatever happens to its connection or the database. 0 (blind: soft mode then holds
   * one request of a key at a time here) when it counted others and they may not count it: for
   * REPLICA_GRACE_MS after it starts, and once its LISTEN connection has been down for about
   * replicaMemoryMs. A replica that counted only itself keeps its count. openPgStore counts once
   * before it returns. Blind too, whatever it counted, before its first count succeeds, and while
   * its counts have failed for REPLICA_COUNT_STALE_MS with its LISTEN connection up: the database
   * then answers others, and a replica that joins would count this one and believe itself counted.
   * (With the LISTEN connection down as well, the rules above apply: the others keep counting this
   * one, and no replica can start without the database.)
   */
  replicas(): number {
    if (!this.counted) return 0;
    if (
      this.countFailingSince !== 0 &&
      this.listener.connected &&
      Date.now() - this.countFailingSince >= REPLICA_COUNT_STALE_MS
    )
      return 0;
    // The common case on every soft Check: one replica, its counts succeeding (no clock read).
    if (this.peakCount <= 1) return this.peakCount;
    const now = Date.now();
    if (this.listener.connected && now - this.connectedAt >= REPLICA_GRACE_MS)
      this.countedUntil = now + this.#memoryMs() - REPLICA_GRACE_MS;
    return now < this.countedUntil ? this.peakCount : 0;
  }

  /**
   * replicaMemoryMs, at least two graces (what replicas() relies on: others remember a count longer than it takes to be
   * counted).
   */
  #memoryMs(): number {
    return Math.max(this.options.replicaMemoryMs, 2 * REPLICA_GRACE_MS);
  }

  /** Counts the replicas now (replicas()); failures keep the last count. */
  async countReplicas(): Promise<void> {
    if (this.closed) return;
    const sentAt = Date.now();
    try {
      const rows = await this.query<{ n: string }>('countReplicas', REPLICAS_SQL, [
        `${this.options.applicationName}-listen`,
      ]);
      const n = Number(rows[0]?.n ?? 0);
      // This one's own LISTEN connection may have dropped since: it counts anyway.
      const counted = Math.max(1, (Number.isFinite(n) ? n : 0) + (this.listener.connected ? 0 : 1));
      const at = Date.now();
      // A count that falls is believed once what the larger one admitted may have settled: another
      // replica's LISTEN connection that drops, or a replica that stops, leaves its requests running.
      if (counted >= this.peakCount || at - this.peakAt > this.#memoryMs()) {
        this.peakCount = counted;
        this.peakAt = at;
      }
      this.counted = true;
      this.countFailingSince = 0;
    } catch {
      // The last count stands (the failure is in the store's error count), until it is too old.
      if (this.countFailingSince === 0) this.countFailingSince = sentAt;
    }
  }

  /** The URL without its password, and where it came from. */
  private where(): string {
    return `${redactUrl(this.url)}${this.options.source ? ` (from ${this.options.source})` : ''}`;
  }

  async findKey(sha256: string): Promise<KeyRecord | null> {
    // The CHECK constraint admits only lowercase hex, so anything else is certainly absent.
    if (!SHA256_HEX.test(sha256)) return null;
    this.counters.keyQueries++;
    const rows = await this.query<KeyRow>('findKey', KEY_SQL, [sha256]);
    return rows.length === 0 ? null : toKey(rows[0]);
  }

  async findKeyById(id: string): Promise<KeyRecord | null> {
    const rows = await this.query<KeyRow>('findKeyById', KEY_BY_ID_SQL, [id]);
    return rows.length === 0 ? null : toKey(rows[0]);
  }

  async findGroup(name: string): Promise<GroupRecord | null> {
    this.counters.groupQueries++;
    const rows = await this.query<GroupRow>('findGroup', GROUP_SQL, [name]);
    if (rows.length === 0) return null;
    const models = new Map<string, ModelRecord>();
    for (const row of rows) {
      if (row.model !== null) models.set(row.model, toModel(row as GroupRow & { model: string }));
    }
    const limits = toLimits(rows[0].group_limits);
    const budget = rows[0].group_budget;
    return {
      name: rows[0].name,
      available: rows[0].available,
      models,
      ...(limits ? { limits } : {}),
      ...(budget ? { budget } : {}),
    };
  }

  onInvalidate(listener: (event: InvalidationEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Connected (LISTEN active, so the cache hears about changes) and the schema is in place. */
  ready(): boolean {
    return !this.closed && this.schemaReady && this.listener.connected;
  }

  stats(): PgStoreStats {
    return { ...this.counters, reconnects: this.listener.reconnects };
  }

  /** Resolves once LISTEN is active (so no later change goes unheard); rejects after timeoutMs. */
  async whenListening(timeoutMs: number): Promise<void> {
    if (this.listener.connected) return;
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        this.listeningWaiters.push(resolve);
        timer = setTimeout(
          () => reject(new Error(`PostgreSQL LISTEN connection not open after ${timeoutMs} ms`)),
          timeoutMs,
        );
      });
    } finally {
      clearTimeout(timer);
    }
  }

  /** Backend pid of the LISTEN connection, or null while disconnected (diagnostics, tests). */
  listenerPid(): number | null {
    return this.listener.pid;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.replicaTimer);
    await this.listener.close();
    await this.pool.end();
  }

  /** One statement on the pool, every wait bounded; a failure rejects with a one-line reason. */
  private async query<R extends pg.QueryResultRow>(what: string, text: string, values: unknown[]): Promise<R[]> {
    try {
      return (await this.pool.query<R>(text, values)).rows;
    } catch (err) {
      this.counters.errors++;
      // A rejection, never null: "could not decide" must not read as "not found".
      throw new Error(`PostgreSQL ${what} failed: ${errorMessage(err)}`, { cause: err });
    }
  }

  private emit(event: InvalidationEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        // One faulty subscriber must not keep the others from hearing about a revocation.
        this.options.onError?.(err as Error, 'listener');
      }
    }
  }
}

/**
 * Opens the PostgreSQL store: migrates (or checks the schema), starts listening, and resolves
 * once it is ready. Rejects when the database cannot be reached at start, so a wrong URL or
 * password fails loudly; after that, outages are survived without a restart.
 */
export async function openPgStore(url: string, options: PgStoreOptions = {}): Promise<PgStore> {
  const store = new PgStore(url, options);
  try {
    await store.start();
    await store.whenListening((options.connectTimeoutMs ?? PG_STORE_DEFAULTS.connectTimeoutMs) * 2);
    // Soft mode's share is known before the first Check (else it would hold to the whole balance).
    await store.countReplicas();
  } catch (err) {
    await store.close().catch(() => {});
    throw err;
  }
  return store;
}

/**
 * Query parameters of a connection string that can hold a secret: libpq's `password` and
 * `sslpassword`, and anything named like a password, secret, token or key (a password
 * given as `?password=` was printed in connection errors).
 */
const SECRET_PARAM = /pass|secret|token|key/i;

/** A connection string with its password hidden (in the userinfo and in the query), for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    for (const name of new Set(u.searchParams.keys())) if (SECRET_PARAM.test(name)) u.searchParams.set(name, '***');
    return u.toString();
  } catch {
    return '<unparseable store URL>';
  }
}

/**
 * Balances that move in the file store (the demo): what each key has spent is kept in memory and in
 * a state file beside the config, so a restart keeps it. A key's balance is its `balance` in the
 * config minus what it spent: raising `balance` in the config tops it up.
 *
 * The state file is JSON, written atomically (a temporary file, then rename; mode 0600: it names
 * keys and requests) at most once a second (`flushMs`) and on close, in libuv's thread pool, one
 * write at a time. It also holds the requests still in flight when it was written (`pending`), so
 * that after a crash their reports, or their deadlines, still settle them. A state file that cannot
 * be read, or that holds a number that is not finite, stops the start: guessing would either forgive
 * spending or deny everyone.
 *
 * One process only: with `serve --workers N` every worker would keep its own copy; metering more
 * than one process needs the PostgreSQL store.
 */
import { readFileSync } from 'node:fs';
import { chmod, rename, writeFile } from 'node:fs/promises';
import {
  COST_GRAINS,
  costUp,
  priceAt,
  type DebitRequest,
  type DebitResult,
  type MeterStore,
  type PendingRequest,
  type ReserveResult,
  type SpentQuery,
  type UsageEntry,
  type UsageQuery,
} from './store';

/** Ledger entries kept in memory and in the state file, newest last. */
const LEDGER_MAX = 2000;
/**
 * The state file is written at most this often: each write serialises the whole ledger, so under
 * load it is the meter's largest cost on the file store; a crash loses at most this long of spending
 * (and the few milliseconds of a write in progress).
 */
const FLUSH_MS = 1000;
/** Entries the ledger may grow past LEDGER_MAX before it is trimmed back. */
const LEDGER_SLACK = 500;
/** Request ids remembered for idempotency (a settlement retried within this many requests debits once). */
const SEEN_MAX = 100_000;
/** Reservations outlive their request's deadline by this much, so the meter's provisional debit lands first. */
const RESERVATION_GRACE_MS = 60_000;

interface StateFile {
  readonly version: 1;
  readonly spent: Record<string, number>;
  readonly usage: UsageEntry[];
  /** Provisional settlements not replaced yet: request id -> what was debited. */
  readonly provisional?: Record<string, { keyId: string; cost: number }>;
  readonly pending?: PendingRequest[];
  /**
   * Debits per quarter hour of keys (`key:<id>`), groups (`group:<name>`) and keys on a model
   * (`model:["<id>","<model>"]`), for budget windows: [start ms, amount][].
   */
  readonly windows?: Record<string, [number, number][]>;
}

/** The bucket name of a key's debits on one model (a key id may hold `:`, a model name anything). */
const modelSubject = (keyId: string, model: string): string => `model:${JSON.stringify([keyId, model])}`;

/** Debits are summed per quarter hour: every IANA zone's offset today is a multiple of 15 minutes. */
const BUCKET_MS = 15 * 60_000;
/** Buckets older than this are dropped (a window is at most a month). */
const BUCKETS_KEPT_MS = 40 * 86_400_000;

export interface FileMeterOptions {
  /** The state file; absent: in memory only (tests). */
  readonly path?: string;
  readonly flushMs?: number;
  readonly now?: () => number;
  /** Called after a debit changed a key's balance (the store updates its cached record). */
  readonly onSpent: (keyId: string) => void;
  /** A failed write of the state file (kept in memory; retried at the next flush). */
  readonly onError?: (err: Error) => void;
}

/**
 * The cost of some usage at a price, in the balance's unit, rounded up to a grain (costUp). A
 * request over the price's long-context threshold pays its long-context price for every token (priceAt).
 */
export function costOf(
  r: Pick<DebitRequest, 'inputTokens' | 'outputTokens' | 'cachedInputTokens' | 'price' | 'toolCost'>,
): number {
  if (r.price === null) return 0;
  const p = priceAt(r.price, r.inputTokens);
  const cached = Math.min(r.cachedInputTokens, r.inputTokens);
  // Hosted tools' calls (toolsCost) on top, in grains, so a sum of two amounts on the grain stays on it.
  const tokens = costUp(
    ((r.inputTokens - cached) * p.input + cached * (p.cachedInput ?? p.input) + r.outputTokens * p.output) / 1e6,
  );
  const tools = r.toolCost ?? 0;
  return tools > 0 ? (Math.round(tokens * COST_GRAINS) + Math.round(tools * COST_GRAINS)) / COST_GRAINS : tokens;
}

const finite = (n: unknown): n is number => typeof n === 'number' && Number.isFinite(n);

function readState(path: string): StateFile | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const bad = (why: string): Error =>
    new Error(`the meter state file ${path} is not usable (${why}): fix it, or delete it to forget what keys spent`);
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw bad((err as Error).message);
  }
  const d = data as Partial<StateFile>;
  if (
    !d ||
    typeof d !== 'object' ||
    d.version !== 1 ||
    !d.spent ||
    typeof d.spent !== 'object' ||
    !Array.isArray(d.usage)
  )
    throw bad('not a version 1 state');
  for (const [id, n] of Object.entries(d.spent)) {
    if (!finite(n)) throw bad(`spent of ${JSON.stringify(id)} is not a finite number`);
  }
  for (const [id, p] of Object.entries(d.provisional ?? {})) {
    if (!p || typeof p.keyId !== 'string' || !finite(p.cost))
      throw bad(`the provisional settlement of ${JSON.stringify(id)} is not usable`);
  }
  if (d.pending !== undefined && !Array.isArray(d.pending)) throw bad('pending is not a list');
  for (const [subject, list] of Object.entries(d.windows ?? {})) {
    if (!Array.isArray(list) || !list.every((b) => Array.isArray(b) && finite(b[0]) && finite(b[1])))
      throw bad(`the window debits of ${JSON.stringify(subject)} are not usable`);
  }
  return d as StateFile;
}

/**
 * What the meter state file at `path` says key `keyId` has spent (0 when it has no file): read
 * only, for a process that writes no state of its own (the command line while a service runs).
 */
export function spentInStateFile(path: string, keyId: string): number {
  const state = readState(path);
  const n = state && Object.hasOwn(state.spent, keyId) ? state.spent[keyId] : 0;
  return finite(n) ? n : 0;
}

export class FileMeter implements MeterStore {
  readonly #spent = new Map<string, number>();
  readonly #ledger: UsageEntry[] = [];
  /**
   * Request ids settled recently, in two generations: a lookup checks both, and when the newer one
   * is full the older is dropped. (Evicting one id at a time from a single Set costs a scan past
   * every id evicted before it: quadratic under sustained load.)
   */
  #seen = new Set<string>();
  #seenBefore = new Set<string>();
  readonly #provisional = new Map<string, { keyId: string; cost: number }>();
  /** Debits per quarter hour of each key and group (`key:<id>`, `group:<name>`): bucket start -> amount. */
  readonly #buckets = new Map<string, Map<number, number>>();
  readonly #reservations = new Map<string, { keyId: string; amount: number; expiresAt: number }>();
  #pending: PendingRequest[] = [];
  readonly #restored: PendingRequest[] = [];
  readonly #now: () => number;
  #timer: NodeJS.Timeout | undefined;
  #dirty = false;
  /** The state file's writes, chained: one at a time, in order. */
  #writes: Promise<void> = Promise.resolve();

  /** @param balanceOf the key's configured balance (`undefined`: no such key; `null`: unlimited) */
  constructor(
    private readonly balanceOf: (keyId: string) => number | null | undefined,
    private readonly opts: FileMeterOptions,
  ) {
    this.#now = opts.now ?? Date.now;
    const state = opts.path ? readState(opts.path) : undefined;
    if (state) {
      for (const [id, n] of Object.entries(state.spent)) this.#spent.set(id, n);
      for (const e of state.usage.slice(-LEDGER_MAX)) {
        this.#ledger.push(e);
        this.#seen.add(e.requestId);
      }
      for (const [id, p] of Object.entries(state.provisional ?? {})) this.#provisional.set(id, p);
      for (const [subject, list] of Object.entries(state.windows ?? {})) this.#buckets.set(subject, new Map(list));
      this.#restored.push(...(state.pending ?? []));
      // Strict mode's reservations live in memory: those of the requests still in flight come back
      // with them, or a restart would free their room while they run (and be debited later).
      for (const p of state.pending ?? []) {
        if (p.limited && Number.isFinite(p.maxCost) && p.maxCost > 0 && !this.#seen.has(p.requestId)) {
          this.#reservations.set(p.requestId, {
            keyId: p.keyId,
            amount: p.maxCost,
            expiresAt: p.deadline + RESERVATION_GRACE_MS,
          });
        }
      }
    }
  }

  /** What a key has spent so far (0 when nothing). */
  spent(keyId: string): number {
    return this.#spent.get(keyId) ?? 0;
  }

  async debit(r: DebitRequest): Promise<DebitResult> {
    return this.debitNow(r);
  }

  /** debit(), synchronously (the meter's fast path: no promise per response). */
  debitNow(r: DebitRequest): DebitResult {
    this.#reservations.delete(r.requestId);
    const cost = costOf(r);
    if (!Number.isFinite(cost) || cost < 0)
      throw new Error(`the cost of request ${r.requestId} is not a finite amount`);
    const limit = this.balanceOf(r.keyId);
    const balanceAfter = (): number | null =>
      limit === null || limit === undefined
        ? null
        : Math.round((limit - this.spent(r.keyId)) * COST_GRAINS) / COST_GRAINS;
    const earlier = this.#provisional.get(r.requestId);
    // Settled before, and not provisionally (or this one is provisional too): nothing more to debit.
    if (this.#settled(r.requestId) && (!earlier || r.provisional))
      return { applied: false, cost, balance: balanceAfter() };
    const charge = earlier ? cost - earlier.cost : cost;
    // A key not in the config now (removed while its request ran) is charged too: put back, its
    // balance is its configured one minus all it spent, this request included.
    const counted = limit !== null;
    if (counted) {
      const next = Math.round((this.spent(r.keyId) + charge) * COST_GRAINS) / COST_GRAINS;
      if (!Number.isFinite(next)) throw new Error(`a debit would make what ${r.keyId} spent not a finite number`);
    }
    this.#remember(r.requestId);
    if (earlier) {
      this.#provisional.delete(r.requestId);
      const at = this.#ledger.findIndex((e) => e.requestId === r.requestId);
      if (at >= 0) this.#ledger.splice(at, 1);
    }
    if (r.provisional) this.#provisional.set(r.requestId, { keyId: r.keyId, cost });
    const entry: { -readonly [K in keyof UsageEntry]: UsageEntry[K] } = {
      time: this.#now(),
      requestId: r.requestId,
      keyId: r.keyId,
      group: r.group,
      model: r.model,
      protocol: r.protocol,
      inputTokens: r.inputTokens,
      outputTokens: r.outputTokens,
      cachedInputTokens: Math.min(r.cachedInputTokens, r.inputTokens),
      cost,
      priced: r.price !== null,
    };
    if (r.estimated) entry.estimated = r.estimated;
    if (r.toolCalls !== undefined && r.toolCalls > 0) entry.toolCalls = r.toolCalls;
    if (r.provisional) entry.provisional = true;
    this.#ledger.push(entry);
    // Trimmed in steps, not one entry per debit (a shift of the whole array each time).
    if (this.#ledger.length > LEDGER_MAX + LEDGER_SLACK) this.#ledger.splice(0, this.#ledger.length - LEDGER_MAX);
    if (charge !== 0) {
      this.#addToBucket(`key:${r.keyId}`, entry.time, charge);
      this.#addToBucket(`group:${r.group}`, entry.time, charge);
      this.#addToBucket(modelSubject(r.keyId, r.model), entry.time, charge);
    }
    if (charge !== 0 && counted) {
      this.#spent.set(r.keyId, Math.round((this.spent(r.keyId) + charge) * COST_GRAINS) / COST_GRAINS);
      this.opts.onSpent(r.keyId);
    }
    this.#schedule();
    return { applied: true, cost, balance: balanceAfter() };
  }

  async reserve(requestId: string, keyId: string, amount: number, ttlSeconds: number): Promise<ReserveResult> {
    const limit = this.balanceOf(keyId);
    if (limit === undefined) return { ok: false, available: null };
    if (limit === null) return { ok: true, available: null };
    const now = this.#now();
    let held = 0;
    for (const [id, r] of this.#reservations) {
      if (r.expiresAt <= now) this.#reservations.delete(id);
      else if (r.keyId === keyId && id !== requestId) held += r.amount;
    }
    const available = limit - this.spent(keyId) - held;
    if (available <= 0 || available < amount) return { ok: false, available };
    this.#reservations.set(requestId, { keyId, amount, expiresAt: now + ttlSeconds * 1000 + RESERVATION_GRACE_MS });
    return { ok: true, available: available - amount };
  }

  #addToBucket(subject: string, time: number, amount: number): void {
    let b = this.#buckets.get(subject);
    if (!b) this.#buckets.set(subject, (b = new Map()));
    const start = Math.floor(time / BUCKET_MS) * BUCKET_MS;
    b.set(start, Math.round(((b.get(start) ?? 0) + amount) * COST_GRAINS) / COST_GRAINS);
  }

  async spentIn(q: SpentQuery): Promise<number> {
    const b = this.#buckets.get(
      q.keyId !== undefined
        ? q.model !== undefined
          ? modelSubject(q.keyId, q.model)
          : `key:${q.keyId}`
        : `group:${q.group ?? ''}`,
    );
    let grains = 0;
    if (b)
      for (const [start, amount] of b)
        if (start >= q.since && start < q.until) grains += Math.round(amount * COST_GRAINS);
    return Math.max(0, grains / COST_GRAINS);
  }

  /** The buckets of the last BUCKETS_KEPT_MS, for the state file (older ones dropped). */
  #windows(): Record<string, [number, number][]> | undefined {
    const oldest = this.#now() - BUCKETS_KEPT_MS;
    const out: Record<string, [number, number][]> = {};
    for (const [subject, b] of this.#buckets) {
      for (const start of b.keys()) if (start < oldest) b.delete(start);
      if (b.size === 0) this.#buckets.delete(subject);
      else out[subject] = [...b];
    }
    return this.#buckets.size > 0 ? out : undefined;
  }

  async release(requestId: string): Promise<void> {
    this.#reservations.delete(requestId);
  }

  async usage(q: UsageQuery): Promise<UsageEntry[]> {
    const out: UsageEntry[] = [];
    const limit = q.limit ?? 100;
    const oldest = Math.max(0, this.#ledger.length - LEDGER_MAX);
    for (let i = this.#ledger.length - 1; i >= oldest && out.length < limit; i--) {
      const e = this.#ledger[i];
      if (q.keyId !== undefined && e.keyId !== q.keyId) continue;
      if (q.group !== undefined && e.group !== q.group) continue;
      if (q.since !== undefined && e.time < q.since) break;
      out.push(e);
    }
    return out;
  }

  /** The requests in flight, kept in the state file with the next write. */
  checkpointPending(requests: readonly PendingRequest[]): void {
    this.#pending = [...requests];
    this.#schedule();
  }

  /** The requests in flight when the state file was last written by an earlier process and not settled since (once). */
  restorePending(): PendingRequest[] {
    return this.#restored.splice(0).filter((p) => !this.#settled(p.requestId));
  }

  /**
   * Writes the state file now if anything changed, after any write in progress (one at a time, in
   * order, so an older state never replaces a newer one); resolves once it is written (or failed:
   * onError, kept in memory, retried at the next write).
   */
  flush(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#writes = this.#writes.then(() => this.#write());
    return this.#writes;
  }

  /**
   * One write: the state is serialised here, on the event loop, and the file written, chmod-ed and
   * renamed in libuv's thread pool. Under load a synchronous write and rename of the ledger (about
   * 500 KB) held the event loop, and every Check waiting on it, for 4 to 7 ms each second.
   */
  async #write(): Promise<void> {
    if (!this.#dirty || !this.opts.path) return;
    const tmp = `${this.opts.path}.${process.pid}.tmp`;
    // Never rejects: a rejected link would stop every later write of the chain.
    try {
      const state: StateFile = {
        version: 1,
        spent: Object.fromEntries(this.#spent),
        usage: this.#ledger.length > LEDGER_MAX ? this.#ledger.slice(-LEDGER_MAX) : this.#ledger,
        ...(this.#provisional.size > 0 ? { provisional: Object.fromEntries(this.#provisional) } : {}),
        ...(this.#pending.length > 0 ? { pending: this.#pending } : {}),
      };
      const windows = this.#windows();
      if (windows) (state as { windows?: StateFile['windows'] }).windows = windows;
      const text = `${JSON.stringify(state)}\n`;
      // What changes from here on is in the next write.
      this.#dirty = false;
      // Owner only: key ids, amounts and request ids. chmod too: a leftover temporary file keeps its mode on write.
      await writeFile(tmp, text, { mode: 0o600 });
      await chmod(tmp, 0o600);
      await rename(tmp, this.opts.path);
    } catch (err) {
      this.#dirty = true;
      this.opts.onError?.(err as Error);
    }
  }

  /** The last write, after any in progress. */
  close(): Promise<void> {
    return this.flush();
  }

  #settled(requestId: string): boolean {
    return this.#seen.has(requestId) || this.#seenBefore.has(requestId);
  }

  #remember(requestId: string): void {
    this.#seen.add(requestId);
    if (this.#seen.size >= SEEN_MAX / 2) {
      for (const id of this.#seenBefore) this.#provisional.delete(id);
      this.#seenBefore = this.#seen;
      this.#seen = new Set();
    }
  }

  #schedule(): void {
    this.#dirty = true;
    if (this.#timer || !this.opts.path) return;
    this.#timer = setTimeout(() => void this.flush(), this.opts.flushMs ?? FLUSH_MS);
    this.#timer.unref();
  }
}

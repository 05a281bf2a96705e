/**
 * Balances that move in the file store (the demo, issue 11): what each key has spent is kept in
 * memory and in a state file beside the config, so a restart keeps it. A key's balance is its
 * `balance` in the config minus what it spent: raising `balance` in the config tops it up.
 *
 * The state file is JSON, written atomically (a temporary file, then rename) at most every
 * `flushMs` and on close. A state file that cannot be read, or that holds a number that is not
 * finite, stops the start: guessing would either forgive spending or deny everyone.
 *
 * One process only: with `serve --workers N` every worker would keep its own copy; metering more
 * than one process needs the PostgreSQL store.
 */
import { chmodSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { DebitRequest, DebitResult, MeterStore, ReserveResult, UsageEntry, UsageQuery } from './store';

/** Ledger entries kept in memory and in the state file, newest last. */
const LEDGER_MAX = 2000;
/** Request ids remembered for idempotency (a settlement retried within this many requests debits once). */
const SEEN_MAX = 100_000;

interface StateFile {
  readonly version: 1;
  readonly spent: Record<string, number>;
  readonly usage: UsageEntry[];
}

export interface FileMeterOptions {
  /** The state file; absent: in memory only (tests). */
  readonly path?: string;
  readonly flushMs?: number;
  readonly now?: () => number;
  /** Called after a debit changed a key's balance (the store invalidates its cache entry). */
  readonly onSpent: (keyId: string) => void;
  /** A failed write of the state file (kept in memory; retried at the next flush). */
  readonly onError?: (err: Error) => void;
}

/** The cost of some usage at a price, in the balance's unit (rounded to 1e-12, as float sums drift). */
export function costOf(r: Pick<DebitRequest, 'inputTokens' | 'outputTokens' | 'cachedInputTokens' | 'price'>): number {
  if (r.price === null) return 0;
  const cached = Math.min(r.cachedInputTokens, r.inputTokens);
  const c = ((r.inputTokens - cached) * r.price.input + cached * (r.price.cachedInput ?? r.price.input) + r.outputTokens * r.price.output) / 1e6;
  return Math.round(c * 1e12) / 1e12;
}

function readState(path: string): StateFile | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const bad = (why: string): Error => new Error(`the meter state file ${path} is not usable (${why}): fix it, or delete it to forget what keys spent`);
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw bad((err as Error).message);
  }
  const d = data as Partial<StateFile>;
  if (!d || typeof d !== 'object' || d.version !== 1 || !d.spent || typeof d.spent !== 'object' || !Array.isArray(d.usage)) throw bad('not a version 1 state');
  for (const [id, n] of Object.entries(d.spent)) {
    if (typeof n !== 'number' || !Number.isFinite(n)) throw bad(`spent of ${JSON.stringify(id)} is not a finite number`);
  }
  return d as StateFile;
}

export class FileMeter implements MeterStore {
  readonly #spent = new Map<string, number>();
  readonly #ledger: UsageEntry[] = [];
  readonly #seen = new Set<string>();
  readonly #reservations = new Map<string, { keyId: string; amount: number; expiresAt: number }>();
  readonly #now: () => number;
  #timer: NodeJS.Timeout | undefined;
  #dirty = false;

  /** @param balanceOf the key's configured balance (`undefined`: no such key; `null`: unlimited) */
  constructor(private readonly balanceOf: (keyId: string) => number | null | undefined, private readonly opts: FileMeterOptions) {
    this.#now = opts.now ?? Date.now;
    const state = opts.path ? readState(opts.path) : undefined;
    if (state) {
      for (const [id, n] of Object.entries(state.spent)) this.#spent.set(id, n);
      for (const e of state.usage.slice(-LEDGER_MAX)) {
        this.#ledger.push(e);
        this.#seen.add(e.requestId);
      }
    }
  }

  /** What a key has spent so far (0 when nothing). */
  spent(keyId: string): number {
    return this.#spent.get(keyId) ?? 0;
  }

  async debit(r: DebitRequest): Promise<DebitResult> {
    this.#reservations.delete(r.requestId);
    const cost = costOf(r);
    const limit = this.balanceOf(r.keyId);
    const balanceAfter = (): number | null => (limit === null || limit === undefined ? null : limit - this.spent(r.keyId));
    if (this.#seen.has(r.requestId)) return { applied: false, cost, balance: balanceAfter() };
    this.#remember(r.requestId);
    this.#ledger.push({
      time: this.#now(), requestId: r.requestId, keyId: r.keyId, group: r.group, model: r.model, protocol: r.protocol,
      inputTokens: r.inputTokens, outputTokens: r.outputTokens, cachedInputTokens: Math.min(r.cachedInputTokens, r.inputTokens), cost, priced: r.price !== null,
    });
    if (this.#ledger.length > LEDGER_MAX) this.#ledger.splice(0, this.#ledger.length - LEDGER_MAX);
    if (cost > 0 && limit !== null && limit !== undefined) {
      this.#spent.set(r.keyId, Math.round((this.spent(r.keyId) + cost) * 1e12) / 1e12);
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
    this.#reservations.set(requestId, { keyId, amount, expiresAt: now + ttlSeconds * 1000 });
    return { ok: true, available: available - amount };
  }

  async release(requestId: string): Promise<void> {
    this.#reservations.delete(requestId);
  }

  async usage(q: UsageQuery): Promise<UsageEntry[]> {
    const out: UsageEntry[] = [];
    const limit = q.limit ?? 100;
    for (let i = this.#ledger.length - 1; i >= 0 && out.length < limit; i--) {
      const e = this.#ledger[i];
      if (q.keyId !== undefined && e.keyId !== q.keyId) continue;
      if (q.group !== undefined && e.group !== q.group) continue;
      if (q.since !== undefined && e.time < q.since) break;
      out.push(e);
    }
    return out;
  }

  /** Writes the state file now if anything changed. */
  flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (!this.#dirty || !this.opts.path) return;
    const state: StateFile = { version: 1, spent: Object.fromEntries(this.#spent), usage: this.#ledger };
    const tmp = `${this.opts.path}.${process.pid}.tmp`;
    try {
      // Owner only (issue 21): key ids, amounts and request ids. chmod too: a leftover temporary file keeps its mode on write.
      writeFileSync(tmp, `${JSON.stringify(state, null, 1)}\n`, { mode: 0o600 });
      chmodSync(tmp, 0o600);
      renameSync(tmp, this.opts.path);
      this.#dirty = false;
    } catch (err) {
      this.opts.onError?.(err as Error);
    }
  }

  close(): void {
    this.flush();
  }

  #remember(requestId: string): void {
    this.#seen.add(requestId);
    if (this.#seen.size > SEEN_MAX) this.#seen.delete(this.#seen.values().next().value as string);
  }

  #schedule(): void {
    this.#dirty = true;
    if (this.#timer || !this.opts.path) return;
    this.#timer = setTimeout(() => this.flush(), this.opts.flushMs ?? 200);
    this.#timer.unref();
  }
}

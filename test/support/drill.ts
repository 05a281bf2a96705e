/**
 * Fault drills under load, through the real Envoy (docs/security.md, "Fault drills"). Steady traffic (valid and invalid
 * keys, over HTTP/2 to Envoy) runs while a fault is injected; every request is numbered
 * (`x-drill-seq`), so what the upstream received can be matched with what was sent. Per drill:
 *
 * - allowed without a valid decision: requests that reached the upstream with a key that is not
 *   valid, or without the `x-modelgate-key-id` of the key sent (must be 0);
 * - failed: requests with a valid key that did not get 200 (keys the cache never saw, during a
 *   store outage, are expected to get 503 store_unavailable and are counted apart);
 * - the longest gap without a successful request;
 * - the time to recover: from the end of the fault (restart issued, SIGCONT, PostgreSQL back) to
 *   the first success after which no valid request failed.
 *
 * Used by test/e2e/drills.test.ts (a short version of each) and `npm run drill` (the full ones).
 */
import { readdirSync, readFileSync } from 'node:fs';
import * as http2 from 'node:http2';
import { generateKey } from '../../src/contract/key-format';
import type { Gateway } from './gateway';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A key the traffic sends, and what it should get. */
export interface DrillKey {
  readonly key: string;
  /** The key id that must reach the upstream, or null for a key that must never pass. */
  readonly id: string | null;
  /** Valid but never used before the fault: a store outage answers it 503 (expected). */
  readonly uncached?: boolean;
}

interface Sent {
  readonly seq: number;
  readonly k: DrillKey;
  readonly t0: number;
  t1: number;
  status: number;
  reason: string;
}

export interface DrillResult {
  readonly name: string;
  readonly sent: number;
  readonly valid: number;
  readonly allowedWithoutDecision: number;
  readonly failed: number;
  /**
   * Valid keys the cache never saw, answered 503 during a store outage (store_unavailable, or authz_unavailable past
   * Envoy's timeout).
   */
  readonly expectedUnavailable: number;
  readonly longestGapMs: number;
  /** null: nothing failed, nothing to recover from. */
  readonly recoveryMs: number | null;
  readonly notes: string[];
  readonly answers: Record<string, number>;
}

/** Steady traffic at `rate` requests per second over one HTTP/2 connection to Envoy. */
export class Traffic {
  readonly sent: Sent[] = [];
  #timer: NodeJS.Timeout | undefined;
  #session: http2.ClientHttp2Session | undefined;
  #seq = 0;
  #inflight = 0;

  constructor(
    readonly baseUrl: string,
    readonly keys: readonly DrillKey[],
    readonly rate: number,
  ) {}

  #connect(): http2.ClientHttp2Session {
    if (!this.#session || this.#session.closed || this.#session.destroyed) {
      this.#session = http2.connect(this.baseUrl);
      this.#session.on('error', () => {});
    }
    return this.#session;
  }

  /** Sends one request now (also used by the flood, with its own key). */
  send(k: DrillKey, record = true): Promise<Sent> {
    const seq = ++this.#seq;
    const s: Sent = { seq, k, t0: performance.now(), t1: 0, status: 0, reason: '' };
    if (record) this.sent.push(s);
    this.#inflight++;
    return new Promise((resolve) => {
      const done = (status: number, reason: string): void => {
        if (s.t1 !== 0) return;
        s.t1 = performance.now();
        s.status = status;
        s.reason = reason;
        this.#inflight--;
        resolve(s);
      };
      try {
        const req = this.#connect().request({
          ':method': 'POST',
          ':path': '/v1/chat/completions',
          authorization: `Bearer ${k.key}`,
          'content-type': 'application/json',
          'x-drill-seq': String(seq),
        });
        req.setTimeout(15_000, () => {
          req.close();
          done(0, 'client timeout');
        });
        let status = 0;
        let reason = '';
        req.on('response', (h) => {
          status = Number(h[':status']);
          reason = String(h['x-modelgate-reason'] ?? '');
        });
        req.on('data', () => {});
        req.on('end', () => done(status, reason));
        req.on('error', (e) => done(0, `error ${(e as NodeJS.ErrnoException).code ?? e.message}`));
        req.end('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}');
      } catch (e) {
        done(0, `error ${(e as Error).message}`);
      }
    });
  }

  start(): void {
    let i = 0;
    const perTick = this.rate / 100;
    let owed = 0;
    this.#timer = setInterval(() => {
      owed += perTick;
      while (owed >= 1) {
        owed -= 1;
        void this.send(this.keys[i++ % this.keys.length]);
      }
    }, 10);
  }

  /** Stops sending and waits for the answers still out. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    const until = Date.now() + 20_000;
    while (this.#inflight > 0 && Date.now() < until) await sleep(20);
    this.#session?.close();
  }
}

/** The resident set size of a process and its children (the workers), in MB. */
export function rssMb(pid: number): number {
  const pids = [pid, ...childrenOf(pid)];
  let kb = 0;
  for (const p of pids) {
    try {
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      /* gone */
    }
  }
  return Math.round(kb / 102.4) / 10;
}

/** The pids whose parent is `pid` (the workers of `serve --workers N`). */
export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Waits until a process no longer exists. */
export async function gone(pid: number, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    if (Date.now() > until) throw new Error(`process ${pid} still exists`);
    await sleep(10);
  }
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Latency percentiles (ms) of the successful valid requests sent in [from, to). */
export function latency(sent: readonly Sent[], from: number, to: number): { p50: number; p99: number; n: number } {
  const ms = sent
    .filter((s) => s.k.id !== null && s.status === 200 && s.t0 >= from && s.t0 < to)
    .map((s) => s.t1 - s.t0)
    .sort((a, b) => a - b);
  return { p50: percentile(ms, 50), p99: percentile(ms, 99), n: ms.length };
}

/**
 * Runs one drill: traffic for `warmupMs`, then `fault()` (which resolves when the fault is over,
 * returning the time it ended), then traffic for `settleMs`. Returns the figures.
 */
export async function runDrill(
  name: string,
  gw: Gateway,
  keys: readonly DrillKey[],
  opts: {
    rate: number;
    warmupMs: number;
    settleMs: number;
    fault: (t: Traffic) => Promise<number>;
    notes?: (
      t: Traffic,
      window: { start: number; faultStart: number; faultEnd: number; end: number },
    ) => string[] | Promise<string[]>;
  },
): Promise<DrillResult> {
  const received = gw.received;
  const before = received.length;
  const traffic = new Traffic(gw.baseUrl, keys, opts.rate);
  const start = performance.now();
  traffic.start();
  await sleep(opts.warmupMs);
  const faultStart = performance.now();
  const faultEnd = await opts.fault(traffic);
  await sleep(opts.settleMs);
  const end = performance.now();
  await traffic.stop();
  await sleep(100);

  const bySeq = new Map(traffic.sent.map((s) => [s.seq, s]));
  let allowedWithoutDecision = 0;
  for (const r of received.slice(before)) {
    const seq = Number(r.headers['x-drill-seq']);
    const s = bySeq.get(seq);
    const id = r.headers['x-modelgate-key-id'];
    if (!s || s.k.id === null || id !== s.k.id) allowedWithoutDecision++;
  }
  allowedWithoutDecision += traffic.sent.filter((s) => s.k.id === null && s.status === 200).length;

  const valid = traffic.sent.filter((s) => s.k.id !== null);
  const expected = valid.filter((s) => s.k.uncached && s.status === 503);
  const failures = valid.filter((s) => s.status !== 200 && !expected.includes(s));
  const okTimes = valid
    .filter((s) => s.status === 200)
    .map((s) => s.t1)
    .sort((a, b) => a - b);
  let longestGapMs = 0;
  let prev = start;
  for (const t of [...okTimes, end]) {
    longestGapMs = Math.max(longestGapMs, t - prev);
    prev = Math.max(prev, t);
  }
  let recoveryMs: number | null = null;
  if (failures.length > 0) {
    const lastFailure = Math.max(...failures.map((s) => s.t0));
    const firstOkAfter = okTimes.find((t) => t > lastFailure);
    recoveryMs = firstOkAfter === undefined ? Infinity : Math.max(0, firstOkAfter - faultEnd);
  }
  const answers: Record<string, number> = {};
  for (const s of traffic.sent) {
    const k = `${s.k.id === null ? 'invalid' : s.k.uncached ? 'uncached' : 'valid'} ${s.status} ${s.reason}`.trim();
    answers[k] = (answers[k] ?? 0) + 1;
  }
  const notes = opts.notes ? await opts.notes(traffic, { start, faultStart, faultEnd, end }) : [];
  return {
    name,
    sent: traffic.sent.length,
    valid: valid.length,
    allowedWithoutDecision,
    failed: failures.length,
    expectedUnavailable: expected.length,
    longestGapMs,
    recoveryMs,
    notes,
    answers,
  };
}

/** Keys for file-store drills: alice and bob (valid), dave (disabled), erin (expired), and unknown ones. */
export function demoDrillKeys(demo: Readonly<Record<string, string>>): DrillKey[] {
  return [
    { key: demo.alice, id: 'alice' },
    { key: demo.bob, id: 'bob' },
    { key: demo.alice, id: 'alice' },
    { key: demo.bob, id: 'bob' },
    { key: demo.dave, id: null },
    { key: demo.erin, id: null },
    { key: generateKey(), id: null },
    { key: demo.alice, id: 'alice' },
    { key: demo.bob, id: 'bob' },
    { key: generateKey(), id: null },
  ];
}

/** The figures as one row of docs/security.md's drill table. */
export function tableRow(r: DrillResult): string {
  const ms = (n: number): string =>
    n === Infinity ? 'never' : n < 1000 ? `${Math.round(n)} ms` : `${(n / 1000).toFixed(1)} s`;
  const failed = `${r.failed} of ${r.valid}${r.expectedUnavailable > 0 ? ` (+${r.expectedUnavailable} uncached keys 503, expected)` : ''}`;
  return `| ${r.name} | ${r.allowedWithoutDecision} | ${failed} | ${ms(r.longestGapMs)} | ${r.recoveryMs === null ? 'nothing failed' : ms(r.recoveryMs)} | ${r.notes.join('; ')} |`;
}

export const TABLE_HEADER =
  '| drill | allowed without a valid decision | valid requests failed | longest gap without a success | time to recover | notes |\n| --- | --- | --- | --- | --- | --- |';

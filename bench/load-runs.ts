/**
 * One load run against one server for one fixed mix, with its correctness checks around it:
 * decisions verified with a real grpc-js client before and after, h2load's failure counters
 * asserted zero, and modelgate's own decision counters (/metrics) compared with what the mix
 * must produce (h2load cannot see grpc-status or the CheckResponse, the server's counters can).
 */
import * as path from 'node:path';
import type { Mix } from './check-requests';
import { assertClean, runH2loadGroup } from './h2load';
import { summarize } from './latency';
import {
  childPids,
  coreBusySeconds,
  machineCpu,
  treeCpuSeconds,
  ownCpuSeconds,
  reapedChildrenCpuSeconds,
  waitForQuiet,
} from './proc-stats';
import { runRawLoad } from './raw-load';
import type { RunningServer } from './servers';
import { verifyDecisions, type VerifyCase } from './verify-decisions';
import { CHECK_PATH } from '../src/server/grpc-server';

export interface PreparedPart {
  readonly name: string;
  readonly frameFile: string;
  readonly message: Buffer;
  readonly clientShare: number;
  readonly expect: Mix['parts'][number]['expect'];
}

export interface PreparedMix {
  readonly mix: Mix;
  readonly parts: readonly PreparedPart[];
}

export interface Target {
  /**
   * `baseline`: the no-op on modelgate's own gRPC server (baseline-builtin-server.ts), what the
   * ratios are against; `baseline-grpcjs`: the same no-op on grpc-js's server (baseline-server.ts),
   * a second, labelled row; `modelgate`: modelgate itself.
   */
  readonly kind: 'baseline' | 'baseline-grpcjs' | 'modelgate';
  readonly server: RunningServer;
  /** The server's core (for the interference measurement), if pinned. */
  readonly core?: number;
}

export type RunMethod = 'h2load' | 'h2load-rps' | 'paced';

export interface RunRecord {
  readonly mix: Mix['id'];
  readonly target: Target['kind'];
  readonly method: RunMethod;
  readonly requestedRate?: number;
  readonly rps: number;
  readonly p50Us: number;
  readonly p99Us: number;
  /** Sparse latency histogram of the run (latency.ts), so repeated runs can be pooled. */
  readonly histogram?: readonly (readonly [number, number])[];
  readonly count: number;
  /** Requests completed per part (the achieved valid:denied ratio of the mixed case). */
  readonly byPart: Record<string, number>;
  /** modelgate's decisions_total delta by reason over the run (incl. warm-up). */
  readonly serverDecisions?: Record<string, number>;
  /** CPU time on the server's core not used by the server, % of wall time (other processes). */
  readonly interferencePct?: number;
  /** CPU used on the whole machine by anything but the server, the load generator and this process, in cores. */
  readonly foreignCores?: number;
  /** Attempts made (a run disturbed by other processes is repeated, up to 3 attempts; the least disturbed is kept). */
  readonly attempts?: number;
  readonly lateSends?: number;
  /** Paced runs: p99 of how late the client itself sent (its own lag, included in the latencies). */
  readonly sendLagP99Us?: number;
  readonly loadCommand?: string;
}

export interface LoadSettings {
  readonly outDir: string;
  readonly loadCpus?: string;
  readonly durationS: number;
  readonly warmupS: number;
  /** Total connections, split between parts by clientShare (10 = 9 + 1 for the mixed case). */
  readonly clients: number;
  /** Concurrent streams per connection for the max-throughput runs. */
  readonly streams: number;
  /**
   * false (--quick): each run starts at once and is kept, whatever else the machine does; true: it
   * waits for a quiet machine first and is repeated when disturbed (see guarded()).
   */
  readonly patient?: boolean;
}

/** What the target must answer: the baseline allows everything (it is a no-op). */
function casesFor(target: Target, pm: PreparedMix): VerifyCase[] {
  return pm.parts.map((p) => ({
    name: `${pm.mix.id}/${p.name}`,
    message: p.message,
    expect: target.kind === 'modelgate' ? p.expect : { allowed: true },
  }));
}

/** Sum of modelgate_decisions_total by reason. */
export async function scrapeDecisions(httpAddress: string): Promise<Record<string, number>> {
  const text = await (await fetch(`http://${httpAddress}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^modelgate_decisions_total\{([^}]*)\} ([0-9.eE+-]+)$/gm)) {
    const reason = /reason="([^"]*)"/.exec(m[1])?.[1] ?? '?';
    out[reason] = (out[reason] ?? 0) + Number(m[2]);
  }
  return out;
}

function delta(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return out;
}

function clientSplit(pm: PreparedMix, clients: number): number[] {
  const shares = pm.parts.reduce((a, p) => a + p.clientShare, 0);
  return pm.parts.map((p) => Math.max(1, Math.round((clients * p.clientShare) / shares)));
}

function expectedReasons(pm: PreparedMix): Set<string> {
  return new Set(pm.parts.map((p) => (p.expect.allowed ? 'allowed' : p.expect.reason)));
}

/** Wraps a load run with verification, decision counting and the interference measurement. */
async function guarded(
  target: Target,
  pm: PreparedMix,
  method: RunMethod,
  s: LoadSettings,
  run: () => Promise<Omit<RunRecord, 'mix' | 'target' | 'method' | 'serverDecisions' | 'interferencePct'>>,
): Promise<RunRecord> {
  let best: RunRecord | undefined;
  const patient = s.patient !== false;
  for (let attempt = 1; attempt <= (patient ? MAX_ATTEMPTS : 1); attempt++) {
    const r = await guardedOnce(target, pm, method, patient, run);
    if (!best || (r.foreignCores ?? 0) < (best.foreignCores ?? 0)) best = { ...r, attempts: attempt };
    else best = { ...best, attempts: attempt };
    if ((r.foreignCores ?? 0) <= MAX_FOREIGN_CORES) break;
  }
  return best!;
}

/** A run during which other processes used more than this many cores is repeated. */
const MAX_FOREIGN_CORES = 0.1;
const MAX_ATTEMPTS = 3;

async function guardedOnce(
  target: Target,
  pm: PreparedMix,
  method: RunMethod,
  patient: boolean,
  run: () => Promise<Omit<RunRecord, 'mix' | 'target' | 'method' | 'serverDecisions' | 'interferencePct'>>,
): Promise<RunRecord> {
  const cases = casesFor(target, pm);
  await verifyDecisions(target.server.grpcAddress, cases);
  const http = target.kind === 'modelgate' ? target.server.httpAddress : undefined;
  const before = http ? await scrapeDecisions(http) : undefined;
  if (patient) await waitForQuiet([target.server.pid, ...childPids(target.server.pid)]);
  const core0 = target.core !== undefined ? coreBusySeconds(target.core) : Number.NaN;
  const cpu0 = treeCpuSeconds(target.server.pid);
  const machine0 = machineCpu().busy;
  const children0 = reapedChildrenCpuSeconds();
  const own0 = ownCpuSeconds();
  const t0 = process.hrtime.bigint();
  const r = await run();
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const serverCpu = treeCpuSeconds(target.server.pid) - cpu0;
  const interferencePct =
    target.core !== undefined ? (100 * (coreBusySeconds(target.core) - core0 - serverCpu)) / wall : undefined;
  const foreignCores = Math.max(
    0,
    (machineCpu().busy - machine0 - serverCpu - (reapedChildrenCpuSeconds() - children0) - (ownCpuSeconds() - own0)) /
      wall,
  );
  const serverDecisions = http && before ? delta(await scrapeDecisions(http), before) : undefined;
  await verifyDecisions(target.server.grpcAddress, cases);
  if (serverDecisions) {
    const unexpected = Object.keys(serverDecisions).filter((k) => !expectedReasons(pm).has(k));
    if (unexpected.length > 0) {
      throw new Error(
        `${pm.mix.id} on ${target.kind}: the server decided ${JSON.stringify(serverDecisions)} under load; unexpected: ${unexpected.join(', ')}`,
      );
    }
  }
  return {
    mix: pm.mix.id,
    target: target.kind,
    method,
    ...r,
    serverDecisions,
    interferencePct: interferencePct === undefined ? undefined : Math.max(0, interferencePct),
    foreignCores,
  };
}

/** Max throughput: h2load, closed loop, `clients` connections × `streams` streams, one h2load per part. */
export async function runMaxThroughput(
  target: Target,
  pm: PreparedMix,
  s: LoadSettings,
  rpsPerClient?: number,
): Promise<RunRecord> {
  const split = clientSplit(pm, s.clients);
  return guarded(target, pm, rpsPerClient === undefined ? 'h2load' : 'h2load-rps', s, async () => {
    const results = await runH2loadGroup(
      pm.parts.map((p, i) => ({
        address: target.server.grpcAddress,
        dataFile: p.frameFile,
        clients: split[i],
        streams: rpsPerClient === undefined ? s.streams : 100,
        durationS: s.durationS,
        warmupS: s.warmupS,
        rpsPerClient,
        cpus: s.loadCpus,
        logFile: path.join(s.outDir, `h2load-${pm.mix.id}-${p.name}.log`),
      })),
    );
    results.forEach((r, i) => assertClean(r, `${pm.mix.id}/${pm.parts[i].name} on ${target.kind}`));
    const all = new Float64Array(results.reduce((a, r) => a + r.durationsUs.length, 0));
    let off = 0;
    for (const r of results) {
      all.set(r.durationsUs, off);
      off += r.durationsUs.length;
    }
    const lat = summarize(all);
    const byPart: Record<string, number> = {};
    results.forEach((r, i) => (byPart[pm.parts[i].name] = r.done));
    return {
      requestedRate: rpsPerClient === undefined ? undefined : rpsPerClient * split.reduce((a, b) => a + b, 0),
      rps: results.reduce((a, r) => a + r.rps, 0),
      p50Us: lat.p50Us,
      p99Us: lat.p99Us,
      histogram: lat.histogram,
      count: lat.count,
      byPart,
      loadCommand: results.map((r) => r.command).join('  &  '),
    };
  });
}

/** A fixed, evenly spaced rate (open loop) from the raw HTTP/2 client; parts interleaved by share. */
export async function runPaced(target: Target, pm: PreparedMix, s: LoadSettings, rate: number): Promise<RunRecord> {
  const [host, port] = target.server.grpcAddress.split(':');
  const sequence = pm.parts.flatMap((p) => Array.from({ length: p.clientShare }, () => p.name));
  return guarded(target, pm, 'paced', s, async () => {
    const r = await runRawLoad(
      {
        host,
        port: Number(port),
        path: CHECK_PATH,
        connections: s.clients,
        maxInFlight: 100,
        rate,
        warmupMs: s.warmupS * 1000,
        durationMs: s.durationS * 1000,
        // Every 10th answer is decoded and checked here (decoding all would add client lag to the
        // latencies); all of them are checked by modelgate's own counters around the run.
        verifyEvery: 10,
        kinds: pm.parts.map((p) => ({
          name: p.name,
          frameFile: p.frameFile,
          expect: target.kind === 'modelgate' ? p.expect : { allowed: true },
        })),
        sequence,
      },
      s.outDir,
      s.loadCpus,
    );
    if (r.rpcErrors || r.streamResets || r.wrongDecisions) {
      throw new Error(
        `${pm.mix.id} paced on ${target.kind}: ${r.rpcErrors} RPC errors, ${r.streamResets} resets, ${r.wrongDecisions} wrong decisions (${r.firstWrong})`,
      );
    }
    return {
      requestedRate: rate,
      rps: r.rps,
      p50Us: r.latency.p50Us,
      p99Us: r.latency.p99Us,
      histogram: r.latency.histogram,
      count: r.latency.count,
      byPart: r.countsByKind,
      lateSends: r.lateSends,
      sendLagP99Us: r.sendLagP99Us,
    };
  });
}

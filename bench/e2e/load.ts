/**
 * One end-to-end load run: the load generator (load-process.ts) pinned to the load core against
 * one setup's Envoy, with everything measured around it: CPU time of Envoy, the authorizing
 * process(es), the upstream and PostgreSQL (from /proc), Envoy's own response counters (every
 * request's status class, warm-up included), the CPU other processes used on each core, and the
 * checks that make a run count (no wrong body, no empty response, no reset, no 5xx, and exactly
 * the 4xx the mix must produce).
 */
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { pooledPercentile, type LatencySummary } from '../latency';
import { coreBusySeconds } from '../proc-stats';
import { envoyResponseCounts } from './envoy';
import type { HttpLoadResult, HttpLoadSpec } from './load-process';
import type { HttpMix } from './mixes';
import type { RunningSetup, SetupId } from './setups';
import type { MixId } from './mixes';

export type Method = 'closed' | 'paced';

export interface RunRecord {
  readonly setup: SetupId;
  readonly mix: MixId;
  readonly method: Method;
  /** What the rate is: `25%` of the floor, `noop50` (half the no-op's capacity), `own50` ... */
  readonly rateLabel?: string;
  readonly requestedRate?: number;
  readonly rep: number;
  readonly rps: number;
  readonly latency: LatencySummary;
  readonly ttfb: LatencySummary;
  /** Requests Envoy answered during the run (warm-up included), by status class. */
  readonly envoyCounts: Record<string, number>;
  readonly requests: number;
  /** CPU seconds used during the run, by role. */
  readonly cpu: { envoy: number; authz: number; upstream: number; store: number; client: number };
  /** CPU seconds of other processes on the gateway core and on the load core, per second of run. */
  readonly otherCores: { gateway: number; load: number };
  readonly lateSends: number;
  readonly sendLagP99Us: number;
  readonly clientCpuPct: number;
  readonly countsByKind: Record<string, number>;
  /** Why this run does not count (empty when it does). */
  readonly problems: string[];
  readonly wallSeconds: number;
}

export interface LoadSettings {
  readonly outDir: string;
  readonly root: string;
  readonly loadCpus?: string;
  readonly gatewayCpus?: string;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly connections: number;
  /** Streams per connection in closed loop (in flight: connections × this). */
  readonly closedStreams: number;
  readonly upstreamPid: number;
}

/**
 * CPU seconds of a process tree: each process's own user + system time plus that of its children
 * it has already reaped (cutime, cstime). A child that exits between two readings (a PostgreSQL
 * backend, a LiteLLM worker) then moves its time into its parent's count instead of taking it
 * out of the sum, so a difference of two readings of the same tree is never negative.
 */
function cpuOf(pids: readonly number[]): number {
  let s = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      s += (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100;
    } catch {
      /* exited */
    }
  }
  return s;
}

const coreSum = (cpus: string | undefined): number =>
  cpus ? cpus.split(',').reduce((a, c) => a + coreBusySeconds(Number(c)), 0) : Number.NaN;

/**
 * The load generator runs at nice 19 on the load core: paced, it spins (setImmediate) between sends,
 * and the upstream and PostgreSQL beside it must get the core the moment they have work. Its own
 * delays still count: latency is measured from the scheduled send time, and late sends are counted.
 */
function runProcess(args: string[], cpus: string | undefined, cwd: string): Promise<void> {
  const niced = ['nice', '-n', '19', process.execPath, ...args];
  const [cmd, argv] = cpus ? ['taskset', ['-c', cpus, ...niced]] : [niced[0], niced.slice(1)];
  return new Promise((resolve, reject) => {
    const c = spawn(cmd as string, argv as string[], { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    c.stderr.on('data', (d) => (err += d));
    c.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`load generator exited ${code}: ${err.slice(-2000)}`)),
    );
  });
}

/** Sum of modelgate_decisions_total by reason (modelgate setups). */
async function decisions(http: string | undefined): Promise<Record<string, number> | undefined> {
  if (!http) return undefined;
  const text = await (await fetch(`http://${http}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^modelgate_decisions_total\{([^}]*)\} ([0-9.eE+-]+)$/gm)) {
    const reason = /reason="([^"]*)"/.exec(m[1])?.[1] ?? '?';
    out[reason] = (out[reason] ?? 0) + Number(m[2]);
  }
  return out;
}

export async function runLoad(
  setup: RunningSetup,
  mix: HttpMix,
  bodyFiles: Map<string, string>,
  s: LoadSettings,
  method: Method,
  rep: number,
  rate = 0,
  rateLabel?: string,
): Promise<RunRecord> {
  const spec: HttpLoadSpec = {
    host: '127.0.0.1',
    port: setup.envoy.port,
    connections: s.connections,
    maxInFlight: method === 'closed' ? s.closedStreams : 100,
    rate,
    warmupMs: s.warmupMs,
    durationMs: s.durationMs,
    // Closed loop: every body is checked. Paced: every 10th (keeping and scanning every body would
    // add client lag to the latencies); Envoy's counters check every status around the run.
    verifyEvery: method === 'closed' ? 1 : 10,
    kinds: mix.kinds.map((k) => ({
      name: k.name,
      path: k.path,
      headers: k.headers,
      bodyFile: bodyFiles.get(`${mix.id}/${k.name}`)!,
      mustContain: setup.mustContain(k),
    })),
    sequence: mix.sequence,
  };
  const specFile = path.join(s.outDir, 'load-spec.json');
  const resultFile = path.join(s.outDir, 'load-result.json');
  writeFileSync(specFile, JSON.stringify(spec));
  rmSync(resultFile, { force: true });
  // The process trees are read at each end: a process started during the run counts whole.
  const cpuNow = () => ({
    envoy: cpuOf([setup.envoy.pid]),
    authz: cpuOf(setup.authz?.pids() ?? []),
    upstream: cpuOf([s.upstreamPid]),
    store: cpuOf(setup.storePids?.() ?? []),
  });
  const dec0 = await decisions(setup.modelgateHttp);
  const counts0 = await envoyResponseCounts(setup.envoy.adminUrl);
  const cpu0 = cpuNow();
  const gw0 = coreSum(s.gatewayCpus);
  const ld0 = coreSum(s.loadCpus);
  const t0 = process.hrtime.bigint();
  await runProcess([path.join(s.root, 'dist/bench/e2e/load-process.js'), specFile, resultFile], s.loadCpus, s.root);
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu1 = cpuNow();
  const cpu = {
    envoy: cpu1.envoy - cpu0.envoy,
    authz: cpu1.authz - cpu0.authz,
    upstream: cpu1.upstream - cpu0.upstream,
    store: cpu1.store - cpu0.store,
    client: 0,
  };
  const gw = coreSum(s.gatewayCpus) - gw0;
  const ld = coreSum(s.loadCpus) - ld0;
  const counts1 = await envoyResponseCounts(setup.envoy.adminUrl);
  const dec1 = await decisions(setup.modelgateHttp);
  const r = JSON.parse(readFileSync(resultFile, 'utf8')) as HttpLoadResult;
  cpu.client = (r.clientCpuPct / 100) * wall;
  const envoyCounts: Record<string, number> = {};
  for (const [k, v] of Object.entries(counts1)) envoyCounts[k] = v - (counts0[k] ?? 0);
  const requests = Object.values(envoyCounts).reduce((a, b) => a + b, 0);

  const problems: string[] = [];
  if (r.wrong) problems.push(`${r.wrong} wrong answers (${r.firstWrong})`);
  if (r.emptyResponses) problems.push(`${r.emptyResponses} responses without a body`);
  if (r.streamResets) problems.push(`${r.streamResets} stream resets`);
  if (envoyCounts['5xx']) problems.push(`${envoyCounts['5xx']} 5xx from Envoy`);
  const deniedShare =
    mix.sequence.filter((n) => !mix.kinds.find((k) => k.name === n)!.expect.allowed).length / mix.sequence.length;
  const deniesHere = setup.id !== 'envoy' && !setup.id.startsWith('noop');
  const want4xx = deniesHere ? deniedShare * requests : 0;
  if (Math.abs((envoyCounts['4xx'] ?? 0) - want4xx) > Math.max(2, 0.01 * want4xx)) {
    problems.push(`${envoyCounts['4xx'] ?? 0} 4xx from Envoy, expected about ${Math.round(want4xx)}`);
  }
  if (dec0 && dec1) {
    const allowedReasons = new Set(mix.kinds.map((k) => (k.expect.allowed ? 'allowed' : k.expect.reason)));
    for (const [reason, n] of Object.entries(dec1)) {
      if (n - (dec0[reason] ?? 0) > 0 && !allowedReasons.has(reason))
        problems.push(`modelgate decided ${reason} ${n - (dec0[reason] ?? 0)} times`);
    }
  }
  if (r.measured === 0) problems.push('no request completed in the measured phase');
  const onGateway = cpu.envoy + cpu.authz;
  const onLoad = cpu.upstream + cpu.store + cpu.client;
  return {
    setup: setup.id,
    mix: mix.id,
    method,
    rateLabel,
    requestedRate: rate || undefined,
    rep,
    rps: r.rps,
    latency: r.latency,
    ttfb: r.ttfb,
    envoyCounts,
    requests,
    cpu,
    otherCores: { gateway: Math.max(0, (gw - onGateway) / wall), load: Math.max(0, (ld - onLoad) / wall) },
    lateSends: r.lateSends,
    sendLagP99Us: r.sendLagP99Us,
    clientCpuPct: r.clientCpuPct,
    countsByKind: r.countsByKind,
    problems,
    wallSeconds: wall,
  };
}

/** Pooled percentile (p in 0..100) of several runs' latency summaries, µs. */
export function pooled(summaries: readonly LatencySummary[], p: number): number {
  return pooledPercentile(
    summaries.map((x) => x.histogram),
    p,
  );
}

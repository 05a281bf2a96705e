/**
 * Renders bench/RESULTS.md from one run's measurements. Pure: everything it prints is in
 * `BenchResults`, which run.ts also saves as bench/out/results.json.
 */
import type { Mix } from './check-requests';
import type { RunRecord } from './load-runs';
import type { MemoryBench } from './memory.bench';
import type { ExtractModelBench } from './extract-model.bench';
import type { CheckPathBench } from './check-path.bench';
import type { ProfileSummary } from './cpu-profile-top';
import { median, pooledPercentile } from './latency';
import { int, mib, ratio, table, us, verdict } from './render';

export interface BenchResults {
  readonly date: string;
  readonly machine: { nproc: number; cpuModel: string; node: string; h2load: string; grpcJs: string; pinned: boolean };
  readonly settings: {
    durationS: number;
    warmupS: number;
    clients: number;
    streams: number;
    repeats: number;
    quick: boolean;
  };
  readonly mixes: readonly { id: Mix['id']; title: string }[];
  readonly runs: readonly RunRecord[];
  readonly extract?: ExtractModelBench;
  readonly checkPath?: CheckPathBench;
  /** The memory run shown in detail (the one with the median throughput change). */
  readonly memory?: MemoryBench;
  /** Every memory run (each on a fresh server). */
  readonly memoryRuns?: readonly MemoryBench[];
  readonly scaling?: readonly { workers: number; runs: RunRecord[] }[];
  readonly logCheck?: { decisionsCounted: number; decisionLines: number };
  readonly profiles?: { server?: ProfileSummary; baseline?: ProfileSummary; checkPath?: ProfileSummary };
  readonly errors: readonly string[];
  /**
   * SHA-256 of every .js under dist/src and the packages' dist/ when the run started and ended: the build the numbers
   * belong to.
   */
  readonly build?: { atStart: string; atEnd?: string };
}

export interface Aggregate {
  readonly rps: number;
  readonly p50Us: number;
  readonly p99Us: number;
  readonly n: number;
  readonly requestedRate?: number;
}

/**
 * The repeated runs of one (mix, target, method): throughput is the median of the runs; latency
 * percentiles are over all their requests pooled (a p99 is set by rare pauses, a garbage
 * collection of a few tens of ms every several seconds, which one 10 s run may or may not catch;
 * the median of a few such p99s jumps between those cases). Runs recorded without a histogram
 * fall back to the median of their percentiles.
 */
export function aggregate(
  runs: readonly RunRecord[],
  mix: string,
  target: string,
  method: string,
): Aggregate | undefined {
  const rs = runs.filter((r) => r.mix === mix && r.target === target && r.method === method);
  if (rs.length === 0) return undefined;
  const histograms = rs.map((r) => r.histogram);
  const pooled = histograms.every((h) => h !== undefined && h.length > 0);
  return {
    rps: median(rs.map((r) => r.rps)),
    p50Us: pooled
      ? pooledPercentile(histograms as NonNullable<RunRecord['histogram']>[], 50)
      : median(rs.map((r) => r.p50Us)),
    p99Us: pooled
      ? pooledPercentile(histograms as NonNullable<RunRecord['histogram']>[], 99)
      : median(rs.map((r) => r.p99Us)),
    n: rs.length,
    requestedRate: rs[0].requestedRate,
  };
}

export interface TargetRow {
  readonly target: string;
  readonly measured: string;
  readonly threshold: string;
  readonly ok: boolean | undefined;
}

export function targets(r: BenchResults): TargetRow[] {
  const b = aggregate(r.runs, 'small_chat', 'baseline', 'h2load');
  const g = aggregate(r.runs, 'small_chat', 'baseline-grpcjs', 'h2load');
  const m = aggregate(r.runs, 'small_chat', 'modelgate', 'h2load');
  const bp = aggregate(r.runs, 'small_chat', 'baseline', 'paced');
  const mp = aggregate(r.runs, 'small_chat', 'modelgate', 'paced');
  const bb = aggregate(r.runs, 'small_chat', 'baseline', 'h2load-rps');
  const mbb = aggregate(r.runs, 'small_chat', 'modelgate', 'h2load-rps');
  const rows: TargetRow[] = [];
  rows.push({
    target: "small chat, every decision logged: throughput vs the no-op on modelgate's own gRPC server (the baseline)",
    measured: b && m ? `${int(m.rps)} / ${int(b.rps)} req/s = ${(m.rps / b.rps).toFixed(2)}` : '–',
    threshold: '≥ 0.85',
    ok: b && m ? m.rps / b.rps >= 0.85 : undefined,
  });
  rows.push({
    target:
      "(second row) the same vs the no-op on grpc-js's server, the earlier baseline: a comparison of transports as much as of work",
    measured: g && m ? `${int(m.rps)} / ${int(g.rps)} req/s = ${(m.rps / g.rps).toFixed(2)}` : '–',
    threshold: '–',
    ok: undefined,
  });
  rows.push({
    target: 'small chat: p99 at half of the baseline capacity (evenly paced, open loop)',
    measured:
      bp && mp
        ? `${us(mp.p99Us)} vs ${us(bp.p99Us)} at ${int(bp.requestedRate)} req/s = ${(mp.p99Us / bp.p99Us).toFixed(2)}×`
        : '–',
    threshold: '≤ 1.5×',
    ok: bp && mp ? mp.p99Us <= 1.5 * bp.p99Us : undefined,
  });
  if (bb && mbb) {
    rows.push({
      target: 'same, with h2load --rps (bursts every 10 ms; shown for reference)',
      measured: `${us(mbb.p99Us)} vs ${us(bb.p99Us)} at ${int(bb.requestedRate)} req/s = ${(mbb.p99Us / bb.p99Us).toFixed(2)}×`,
      threshold: '≤ 1.5×',
      ok: mbb.p99Us <= 1.5 * bb.p99Us,
    });
  }
  rows.push({
    target: '1 MiB body, `model` last: extractModel vs JSON.parse(buf.toString())',
    measured: r.extract
      ? `${us(r.extract.extractMedianUs)} vs ${us(r.extract.jsonParseMedianUs)} = ${r.extract.speedup.toFixed(1)}× faster`
      : '–',
    threshold: '≥ 5× faster',
    ok: r.extract ? r.extract.speedup >= 5 : undefined,
  });
  rows.push({
    target: 'in-process read-decide-write, cached key, small body (median)',
    measured: r.checkPath ? `${r.checkPath.medianUs.toFixed(2)} µs` : '–',
    threshold: '< 5 µs',
    ok: r.checkPath ? r.checkPath.medianUs < 5 : undefined,
  });
  const mem = r.memory;
  const memRuns = r.memoryRuns && r.memoryRuns.length > 0 ? r.memoryRuns : mem ? [mem] : [];
  // RSS: the worst run; throughput: the median run's change (each run listed).
  const worst = memRuns.length
    ? memRuns.reduce((a, b) => (b.rssEndBytes - b.rssStartBytes > a.rssEndBytes - a.rssStartBytes ? b : a))
    : undefined;
  const growth = worst ? worst.rssEndBytes - worst.rssStartBytes : undefined;
  const complete = memRuns.length > 0 && memRuns.every((m) => m.checks >= 1_000_000);
  rows.push({
    target: `memory: RSS growth after ${worst ? int(worst.checks) : '1,000,000'} Checks with distinct unknown keys${memRuns.length > 1 ? ` (worst of ${memRuns.length} runs)` : ''}`,
    measured: worst
      ? `${mib(worst.rssStartBytes)} → ${mib(worst.rssEndBytes)} (+${mib(growth)}; max ${mib(worst.rssMaxBytes)})`
      : '–',
    threshold: '< 100 MB',
    ok: worst && growth !== undefined ? growth < 100 * 1024 * 1024 && complete : undefined,
  });
  const changePct = (m: MemoryBench): string => {
    const d = 1 - m.rpsEnd / m.rpsStart;
    return `${d >= 0 ? '−' : '+'}${Math.abs(100 * d).toFixed(1)}%`;
  };
  const drop = mem ? 1 - mem.rpsEnd / mem.rpsStart : undefined;
  rows.push({
    target: `memory run: throughput at the end vs the start${memRuns.length > 1 ? ` (median of ${memRuns.length} runs)` : ''}`,
    measured: mem
      ? `${int(mem.rpsStart)} → ${int(mem.rpsEnd)} req/s (${changePct(mem)})${memRuns.length > 1 ? `; runs: ${memRuns.map(changePct).join(', ')}` : ''}`
      : '–',
    threshold: 'drop ≤ 10%',
    ok: mem && drop !== undefined ? drop <= 0.1 && complete : undefined,
  });
  return rows;
}

/** The README table: one row per fixed mix. */
export function mixTable(r: BenchResults): string {
  return table(
    [
      'mix',
      'baseline req/s',
      'p50',
      'p99',
      'modelgate req/s',
      'p50',
      'p99',
      'req/s ratio',
      'p50 ratio',
      'p99 ratio',
      'p99 @ 50% baseline capacity: baseline / modelgate (ratio)',
      "grpc-js's no-op req/s (modelgate's ratio)",
    ],
    r.mixes.map((mx) => {
      const b = aggregate(r.runs, mx.id, 'baseline', 'h2load');
      const g = aggregate(r.runs, mx.id, 'baseline-grpcjs', 'h2load');
      const m = aggregate(r.runs, mx.id, 'modelgate', 'h2load');
      const bp = aggregate(r.runs, mx.id, 'baseline', 'paced');
      const mp = aggregate(r.runs, mx.id, 'modelgate', 'paced');
      return [
        mx.title,
        int(b?.rps),
        us(b?.p50Us),
        us(b?.p99Us),
        int(m?.rps),
        us(m?.p50Us),
        us(m?.p99Us),
        ratio(b && m ? m.rps / b.rps : undefined),
        ratio(b && m ? m.p50Us / b.p50Us : undefined),
        ratio(b && m ? m.p99Us / b.p99Us : undefined),
        bp && mp
          ? `${us(bp.p99Us)} / ${us(mp.p99Us)} (${ratio(mp.p99Us / bp.p99Us)}) at ${int(bp.requestedRate)} req/s`
          : '–',
        g ? `${int(g.rps)} (${ratio(m ? m.rps / g.rps : undefined)})` : '–',
      ];
    }),
  );
}

export function renderResults(r: BenchResults): string {
  const out: string[] = [];
  out.push('# modelgate benchmark results');
  out.push('');
  out.push(
    `Written by \`npm run bench\` (bench/run.ts) on ${r.date}. Do not edit: run it again. How each number is measured: [README.md](README.md).`,
  );
  if (r.settings.quick) out.push('\n**QUICK RUN (`--quick`): shorter runs and fewer Checks; not for the README.**');
  out.push('');
  out.push('## Machine');
  out.push('');
  out.push(
    `- \`nproc\`: ${r.machine.nproc}; CPU: ${r.machine.cpuModel}; node ${r.machine.node}; ${r.machine.h2load}; @grpc/grpc-js ${r.machine.grpcJs}`,
  );
  out.push(
    r.machine.pinned
      ? '- Pinning: each server under test runs on core 0 (`taskset -c 0`), every load generator on core 1 (`taskset -c 1`); the in-process micro-benchmarks run on core 0. Exception: the `--workers` scaling runs (below) are not pinned.'
      : '- Not pinned (fewer than 2 cores).',
  );
  const foreign = r.runs.map((x) => x.foreignCores).filter((x): x is number => x !== undefined);
  if (foreign.length > 0) {
    const retried = r.runs.filter((x) => (x.attempts ?? 1) > 1).length;
    out.push(
      `- Other processes (this machine is shared) used a median ${median(foreign).toFixed(2)} and at most ${Math.max(...foreign).toFixed(2)} cores during the kept load runs. ` +
        `Each run waits for a quiet machine first; a run during which they used more than 0.10 cores is repeated (3 attempts at most, the least disturbed kept): ${retried} of ${r.runs.length} runs needed that.`,
    );
  }
  if (r.build) {
    out.push(
      r.build.atEnd && r.build.atEnd !== r.build.atStart
        ? `- **The build changed during this run** (dist/src fingerprint ${r.build.atStart.slice(0, 12)} → ${r.build.atEnd.slice(0, 12)}): servers started after the change ran the new code.`
        : `- Build: dist/src fingerprint ${r.build.atStart.slice(0, 12)} (unchanged during the run).`,
    );
  }
  out.push(
    `- Load runs: ${r.settings.durationS} s measured after ${r.settings.warmupS} s warm-up; throughput is the median of ${r.settings.repeats} runs, latency percentiles are over the requests of the ${r.settings.repeats} runs pooled (bench/README.md says why); baseline and modelgate interleaved.`,
  );
  out.push('');
  out.push('## Targets');
  out.push('');
  out.push(
    table(
      ['target', 'measured', 'threshold', 'result'],
      targets(r).map((t) => [t.target, t.measured, t.threshold, verdict(t.ok)]),
    ),
  );
  if (r.errors.length > 0) {
    out.push('');
    out.push('**Errors during this run** (the affected numbers are missing):');
    for (const e of r.errors) out.push(`- ${e.split('\n')[0]}`);
  }
  out.push('');
  out.push('## Fixed mixes: modelgate vs the no-op baseline');
  out.push('');
  out.push(
    "The baseline is a no-op Authorization server on modelgate's own gRPC server (bench/baseline-builtin-server.ts: every Check answered allowed at once), so the ratios are modelgate's work, not a difference of transports; the last column is the same no-op on grpc-js's server (bench/baseline-server.ts), the earlier baseline. " +
      `Max throughput: h2load, closed loop, ${r.settings.clients} connections × ${r.settings.streams} streams (in flight: ${r.settings.clients * r.settings.streams}); latency p50/p99 from h2load's per-request log. ` +
      "The paced column: an evenly paced open-loop run at 50% of the baseline's max throughput for that mix, latency from the scheduled send time.",
  );
  out.push('');
  out.push(mixTable(r));
  const mixed = r.runs.filter((x) => x.mix === 'mixed_90_10' && x.target === 'modelgate');
  if (mixed.length > 0) {
    out.push('');
    out.push(
      'Mixed case (d), the ratio actually achieved (h2load runs two processes side by side, 9 clients valid + 1 client denied, so the ratio follows the answer speeds; the paced runs interleave 9:1 exactly):',
    );
    out.push('');
    for (const x of mixed) {
      const total = Object.values(x.byPart).reduce((a, b) => a + b, 0);
      const sd = x.serverDecisions ?? {};
      const sTotal = Object.values(sd).reduce((a, b) => a + b, 0);
      out.push(
        `- ${x.method}: valid ${((100 * (x.byPart.valid ?? 0)) / total).toFixed(1)}% / denied ${((100 * (x.byPart.denied ?? 0)) / total).toFixed(1)}% of ${int(total)} measured; ` +
          `modelgate's own counters over the run: allowed ${((100 * (sd.allowed ?? 0)) / sTotal).toFixed(1)}% / model_not_in_group ${((100 * (sd.model_not_in_group ?? 0)) / sTotal).toFixed(1)}%`,
      );
    }
  }
  if (r.logCheck) {
    out.push('');
    out.push(
      `Decision logging was on throughout: modelgate counted ${int(r.logCheck.decisionsCounted)} decisions and wrote ${int(r.logCheck.decisionLines)} decision log lines (to a file).`,
    );
  }
  out.push('');
  out.push('## In-process micro-benchmarks (no network)');
  out.push('');
  if (r.extract) {
    out.push(
      `- Model of a ${int(r.extract.bodyBytes)}-byte chat body, \`model\` last: \`extractModel(body)\` ${us(r.extract.extractMedianUs)} vs \`JSON.parse(buf.toString())\` ${us(r.extract.jsonParseMedianUs)} (median of ${r.extract.rounds} alternating rounds): **${r.extract.speedup.toFixed(1)}× faster**.`,
    );
  }
  if (r.checkPath) {
    out.push(
      `- \`service.checkBytes(bytes)\` (what the gRPC handler runs: CheckRequest bytes in, decoded, decided, CheckResponse bytes out, logged and counted), cached key, small chat body, logging on: median **${r.checkPath.medianUs.toFixed(2)} µs** per call (p99 ${r.checkPath.p99Us.toFixed(1)} µs; ${int(r.checkPath.calls)} timed calls after 50,000 warm-up calls); back-to-back mean ${r.checkPath.meanUs.toFixed(2)} µs (includes the log file writes and GC, amortised).`,
    );
  }
  if (r.memory) {
    const m = r.memory;
    out.push('');
    out.push('## Memory: distinct unknown keys');
    out.push('');
    if (r.memoryRuns && r.memoryRuns.length > 1) {
      out.push(
        `${r.memoryRuns.length} runs, each on a fresh server: RSS growth ${r.memoryRuns.map((x) => `+${mib(x.rssEndBytes - x.rssStartBytes)}`).join(', ')}; ` +
          `throughput first → last tenth ${r.memoryRuns.map((x) => `${int(x.rpsStart)} → ${int(x.rpsEnd)}`).join(', ')} req/s. The run with the median change, in detail:`,
      );
      out.push('');
    }
    out.push(
      `${int(m.checks)} Checks, each with a different generated \`sk-mg-\` key (valid checksum, unknown to the store), raw HTTP/2 client, closed loop, 10 connections × 10 streams. ` +
        `Every answer was decoded and checked (${int(m.client.verified)} verified, ${m.client.wrongDecisions} wrong, ${m.client.rpcErrors} RPC errors); modelgate's counters: ${JSON.stringify(m.serverDecisions)}; decision lines logged (including the 5 s warm-up): ${int(m.decisionLinesLogged)}.`,
    );
    out.push('');
    out.push(
      `- RSS (/proc/PID/status VmRSS): ${mib(m.rssStartBytes)} after warm-up → ${mib(m.rssEndBytes)} at the end (max ${mib(m.rssMaxBytes)}); \`process_resident_memory_bytes\`: ${mib(m.metricRssStartBytes)} → ${mib(m.metricRssEndBytes)}.`,
    );
    out.push(
      `- Throughput: ${int(m.rpsStart)} req/s over the first tenth of the run, ${int(m.rpsEnd)} req/s over the last tenth. Other processes used ${m.foreignCores.toFixed(2)} cores on average meanwhile.`,
    );
    out.push('');
    out.push(
      table(
        ['Checks done', 'window req/s', 'server RSS'],
        m.windows.map((w) => [int(w.completed), int(w.rps), mib(w.rssBytes)]),
      ),
    );
  }
  if (r.scaling && r.scaling.length > 0) {
    out.push('');
    out.push('## Scaling: `serve --workers N` (node:cluster), small chat mix');
    out.push('');
    out.push(
      'Not pinned: the servers and h2load share both cores, so `--workers 2` competes with the load generator for the second core. Median of the runs below.',
    );
    out.push('');
    out.push(
      table(
        ['workers', 'req/s', 'p50', 'p99', 'runs'],
        r.scaling.map((s) => [
          String(s.workers),
          int(median(s.runs.map((x) => x.rps))),
          us(median(s.runs.map((x) => x.p50Us))),
          us(median(s.runs.map((x) => x.p99Us))),
          s.runs.map((x) => int(x.rps)).join(', '),
        ]),
      ),
    );
    const w1 = r.scaling.find((s) => s.workers === 1);
    const w2 = r.scaling.find((s) => s.workers === 2);
    if (w1 && w2)
      out.push(
        `\n--workers 2 / --workers 1 throughput: ${ratio(median(w2.runs.map((x) => x.rps)) / median(w1.runs.map((x) => x.rps)))}`,
      );
  }
  if (r.profiles && (r.profiles.server || r.profiles.checkPath)) {
    out.push('');
    out.push('## Where the time goes (node --cpu-prof, self time, % of busy samples)');
    for (const [title, p] of [
      ['modelgate server under h2load, small chat mix (pinned)', r.profiles.server],
      ['no-op baseline under the same load, for comparison', r.profiles.baseline],
      ['in-process check loop (check-path.bench.ts)', r.profiles.checkPath],
    ] as const) {
      if (!p) continue;
      out.push('');
      out.push(`### ${title}`);
      out.push('');
      out.push(
        'By area: ' +
          p.areas
            .slice(0, 10)
            .map((a) => `${a.area} ${a.selfPct.toFixed(1)}%`)
            .join(', '),
      );
      out.push('');
      out.push(
        table(
          ['function', 'where', 'self %'],
          p.top.map((t) => [`\`${t.name}\``, t.where, t.selfPct.toFixed(1)]),
        ),
      );
    }
  }
  out.push('');
  out.push('## Every run');
  out.push('');
  out.push(
    table(
      [
        'mix',
        'server',
        'method',
        'requested req/s',
        'req/s',
        'p50',
        'p99',
        'measured',
        'other processes (cores)',
        'other CPU on server core',
        'attempts',
        'late sends',
        'client send lag p99',
      ],
      r.runs.map((x) => [
        x.mix,
        x.target,
        x.method,
        int(x.requestedRate),
        int(x.rps),
        us(x.p50Us),
        us(x.p99Us),
        int(x.count),
        x.foreignCores === undefined ? '–' : x.foreignCores.toFixed(2),
        x.interferencePct === undefined ? '–' : `${x.interferencePct.toFixed(1)}%`,
        String(x.attempts ?? 1),
        x.lateSends === undefined ? '–' : int(x.lateSends),
        us(x.sendLagP99Us),
      ]),
    ),
  );
  out.push('');
  return out.join('\n');
}

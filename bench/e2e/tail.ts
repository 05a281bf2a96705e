/**
 * Tail-latency experiments through Envoy (bench/README-e2e.md): one setup of setups.ts at a
 * time (the no-op or modelgate), evenly paced small chat requests at a fixed rate, with V8's GC
 * trace, for several variants (node flags, workers, Envoy worker threads). Prints and writes a
 * Markdown table: latency percentiles, and the GC pauses seen during the measured runs.
 *
 *   node dist/bench/e2e/tail.js --rate=4000 [--duration=10] [--repeats=3] \
 *     --variant='default|modelgate||1' --variant='semi64|modelgate|--max-semi-space-size=64|1' ...
 *
 * A variant is `label|setup|node flags (space separated)|Envoy --concurrency[|root[|settings]]`,
 * where root is another build of modelgate (a directory with dist/, envoy/ and node_modules; default
 * this one), for before/after comparisons in one run, and settings are changes to the demo config
 * as `dotted.path=YAML value` pairs separated by `;` (e.g. `log.allows=false`). Runs of the variants are interleaved (A
 * B C, C B A, ...),
 * like bench:e2e's setups.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { parse, parseDocument } from 'yaml';
import { runLoad, pooled, type LoadSettings, type RunRecord } from './load';
import { httpMixes } from './mixes';
import { freePort } from '../../src/server/free-port';
import { listening, spawnPinned } from './procs';
import { startSetup, type SetupId } from './setups';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const OUT = path.join(ROOT, 'bench', 'out', 'e2e');

interface Variant {
  readonly label: string;
  readonly setup: SetupId;
  readonly flags: string[];
  readonly envoyConcurrency: number;
  readonly root: string;
  /** Changes to the demo config: [dotted path, YAML value]. */
  readonly settings: [string, string][];
}

/** The demo config with a variant's settings applied. */
function configWith(text: string, settings: readonly [string, string][]): string {
  const doc = parseDocument(text);
  for (const [p, v] of settings) doc.setIn(p.split('.'), parse(v));
  return doc.toString();
}

/** GC events of a --trace-gc log written after byte `from`: pauses in ms by kind. */
export function gcPauses(log: string): { scavenges: number[]; markCompacts: number[]; incrementalSteps: number[] } {
  const scavenges: number[] = [];
  const markCompacts: number[] = [];
  const incrementalSteps: number[] = [];
  for (const m of log.matchAll(
    /: (Scavenge|Mark-Compact|Mark-Sweep|Minor Mark-Sweep)[^,]*, ([\d.]+) \/ ([\d.]+) ms(?:\s+\(\+ ([\d.]+) ms in \d+ steps[^,]*, biggest step ([\d.]+) ms)?/g,
  )) {
    const pause = Number(m[2]);
    if (m[1] === 'Scavenge' || m[1] === 'Minor Mark-Sweep') scavenges.push(pause);
    else {
      markCompacts.push(pause);
      if (m[5]) incrementalSteps.push(Number(m[5]));
    }
  }
  return { scavenges, markCompacts, incrementalSteps };
}

const arg = (name: string): string | undefined =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

async function main(): Promise<void> {
  const variants: Variant[] = process.argv
    .filter((a) => a.startsWith('--variant='))
    .map((a) => {
      const [label, setup, flags, conc, root, settings] = a.slice(10).split('|');
      const pairs = (settings ?? '')
        .split(';')
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)] as [string, string]);
      return {
        label,
        setup: setup as SetupId,
        flags: (flags ?? '').split(' ').filter(Boolean),
        envoyConcurrency: Number(conc || 1),
        root: root ? path.resolve(root) : ROOT,
        settings: pairs,
      };
    });
  if (variants.length === 0) throw new Error('give at least one --variant=label|setup|flags|concurrency');
  const rate = Number(arg('rate'));
  if (!rate) throw new Error('--rate=REQ_PER_S is required');
  const repeats = Number(arg('repeats') ?? 3);
  const durationMs = 1000 * Number(arg('duration') ?? 10);
  const warmupMs = 1000 * Number(arg('warmup') ?? 2);
  const mixId = arg('mix') ?? 'small_chat';
  mkdirSync(OUT, { recursive: true });
  spawnSync('taskset', ['-a', '-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
  const mix = httpMixes().find((m) => m.id === mixId)!;
  const bodyFiles = new Map<string, string>();
  for (const k of mix.kinds) {
    const f = path.join(OUT, `tail-${mix.id}-${k.name}.json`);
    writeFileSync(f, k.body);
    bodyFiles.set(`${mix.id}/${k.name}`, f);
  }
  const upPort = await freePort();
  const upstream = await spawnPinned({
    name: 'upstream',
    cmd: process.execPath,
    args: [path.join(ROOT, 'dist/bench/e2e/upstream.js'), String(upPort)],
    cpus: '1',
    ready: () => listening(upPort),
  });
  const envoyBin =
    process.env.ENVOY_BIN ??
    path.join(ROOT, '.envoy', '1.40.0', 'lib', 'python3.11', 'site-packages', 'envoy', '_bin', 'envoy');
  const settings: LoadSettings = {
    outDir: OUT,
    root: ROOT,
    loadCpus: '1',
    gatewayCpus: '0',
    warmupMs,
    durationMs,
    connections: 10,
    closedStreams: 10,
    upstreamPid: upstream.pid,
  };
  const started = [];
  for (const v of variants) {
    const dir = path.join(OUT, `tail-${v.label}`);
    mkdirSync(dir, { recursive: true });
    const setup = await startSetup(
      {
        root: v.root,
        outDir: dir,
        envoyBin,
        envoyConcurrency: v.envoyConcurrency,
        gatewayCpus: '0',
        loadCpus: '1',
        upstreamPort: upPort,
        demoConfig: configWith(readFileSync(path.join(v.root, 'envoy', 'modelgate.yaml'), 'utf8'), v.settings),
        nodeFlags: ['--trace-gc', ...v.flags],
        opaBin: '',
        litellmBin: '',
        goNoopBin: path.join(ROOT, '.peers', 'grpc-go-noop', 'bin', 'grpc-go-noop'),
      },
      v.setup,
    );
    started.push({ v, setup, dir });
  }
  const rows: { v: Variant; runs: RunRecord[]; gc: ReturnType<typeof gcPauses>[] }[] = started.map((s) => ({
    v: s.v,
    runs: [],
    gc: [],
  }));
  try {
    // Warm every variant first (JIT, caches, connections).
    for (const s of started)
      await runLoad(s.setup, mix, bodyFiles, { ...settings, warmupMs: 0, durationMs: 3000 }, 'paced', -1, rate, 'warm');
    for (let rep = 0; rep < repeats; rep++) {
      const order = rep % 2 === 0 ? started : [...started].reverse();
      for (const s of order) {
        const logFile = path.join(s.dir, `${s.v.setup}.log`);
        // The floor (Envoy alone) has no authorizer and so no GC log.
        const gcLog = (): string => (existsSync(logFile) ? readFileSync(logFile, 'latin1') : '');
        const before = gcLog().length;
        const r = await runLoad(s.setup, mix, bodyFiles, settings, 'paced', rep, rate, s.v.label);
        const gc = gcPauses(gcLog().slice(before));
        const row = rows.find((x) => x.v === s.v)!;
        row.runs.push(r);
        row.gc.push(gc);
        const f = (us: number): string => `${(us / 1000).toFixed(2)} ms`;
        process.stderr.write(
          `[tail] ${s.v.label} rep ${rep + 1}: ${Math.round(r.rps)} req/s p50 ${f(r.latency.p50Us)} p99 ${f(r.latency.p99Us)} p99.9 ${f(r.latency.p999Us)} max ${f(r.latency.maxUs)}; GC: ${gc.scavenges.length} scavenges (max ${Math.max(0, ...gc.scavenges).toFixed(1)} ms), ${gc.markCompacts.length} mark-compacts (max ${Math.max(0, ...gc.markCompacts).toFixed(1)} ms)${r.problems.length ? ` PROBLEMS ${r.problems.join('; ')}` : ''}\n`,
        );
      }
    }
  } finally {
    for (const s of started) await s.setup.stop();
    await upstream.stop();
  }
  const ms = (us: number): string => `${(us / 1000).toFixed(2)}`;
  const lines = [
    `Small chat through Envoy, evenly paced at ${rate} req/s, ${repeats} × ${durationMs / 1000} s per variant (interleaved), latency from the scheduled send time; GC pauses from --trace-gc during the measured runs (incl. warm-up).`,
    '',
    '| variant | setup | node flags | Envoy conc. | req/s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | scavenges/s | max scavenge ms | mark-compacts/s | max mark-compact ms | max incremental step ms | authz CPU /10k s | Envoy CPU /10k s |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const row of rows) {
    const lat = row.runs.map((r) => r.latency);
    const secs = row.runs.reduce((a, r) => a + r.wallSeconds, 0);
    const sc = row.gc.flatMap((g) => g.scavenges);
    const mc = row.gc.flatMap((g) => g.markCompacts);
    const steps = row.gc.flatMap((g) => g.incrementalSteps);
    const n = row.runs.reduce((a, r) => a + r.requests, 0);
    const cpu = (10_000 * row.runs.reduce((a, r) => a + r.cpu.authz, 0)) / n;
    const envoyCpu = (10_000 * row.runs.reduce((a, r) => a + r.cpu.envoy, 0)) / n;
    lines.push(
      `| ${row.v.label} | ${row.v.setup} | \`${row.v.flags.join(' ') || '–'}\` | ${row.v.envoyConcurrency} | ${Math.round(row.runs.reduce((a, r) => a + r.rps, 0) / row.runs.length)} | ${ms(pooled(lat, 50))} | ${ms(pooled(lat, 90))} | ${ms(pooled(lat, 99))} | ${ms(pooled(lat, 99.9))} | ${ms(Math.max(...lat.map((l) => l.maxUs)))} | ${(sc.length / secs).toFixed(1)} | ${Math.max(0, ...sc).toFixed(1)} | ${(mc.length / secs).toFixed(2)} | ${Math.max(0, ...mc).toFixed(1)} | ${Math.max(0, ...steps).toFixed(1)} | ${cpu.toFixed(2)} | ${envoyCpu.toFixed(2)} |`,
    );
  }
  const text = lines.join('\n');
  const file = path.join(OUT, `tail-${new Date().toISOString().replace(/[:.]/g, '-')}.md`);
  writeFileSync(file, `${text}\n`);
  process.stdout.write(`${text}\n\n(${path.relative(ROOT, file)})\n`);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

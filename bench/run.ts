/**
 * `npm run bench`: modelgate against a no-op Authorization server on modelgate's own gRPC server
 * (the baseline; the same no-op on grpc-js's server is a second, labelled row), in one run on one
 * machine, over the FIXED request mixes of check-requests.ts; then the in-process
 * micro-benchmarks, the distinct-unknown-keys memory run, `--workers` scaling and CPU profiles.
 * Writes bench/RESULTS.md (and bench/out/results.json). See bench/README.md for the method.
 *
 * Flags: --quick (short runs, 100,000 memory Checks: for trying the bench, not for numbers),
 *        --only=mixes,paced,rps,micro,memory,scaling,profile (default: all).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fixedMixes } from './check-requests';
import { encodeCheckRequest, grpcFrame } from './grpc-frame';
import { h2loadVersion } from './h2load';
import { median } from './latency';
import {
  runMaxThroughput,
  runPaced,
  scrapeDecisions,
  type LoadSettings,
  type PreparedMix,
  type RunRecord,
  type Target,
} from './load-runs';
import { benchMemory, countDecisionLines, type MemoryBench } from './memory.bench';
import { machineInfo, waitForQuiet } from './proc-stats';
import { renderResults, targets, type BenchResults } from './results-md';
import { benchRunner, interleaved } from './runner';
import { startBaseline, startModelgate, type RunningServer } from './servers';
import { verifyDecisions } from './verify-decisions';
import { summarizeProfile, type ProfileSummary } from './cpu-profile-top';
import type { ExtractModelBench } from './extract-model.bench';
import type { CheckPathBench } from './check-path.bench';

const ROOT = path.resolve(__dirname, '..', '..');
const OUT = path.join(ROOT, 'bench', 'out');
const CONFIG = path.join(ROOT, 'envoy', 'modelgate.yaml');
const PHASES = ['mixes', 'paced', 'rps', 'micro', 'memory', 'scaling', 'profile'] as const;
type Phase = (typeof PHASES)[number];

function prepareMixes(): PreparedMix[] {
  mkdirSync(path.join(OUT, 'frames'), { recursive: true });
  return fixedMixes().map((mix) => ({
    mix,
    parts: mix.parts.map((p) => {
      const message = encodeCheckRequest(p.request);
      const frameFile = path.join(OUT, 'frames', `${mix.id}-${p.name}.bin`);
      writeFileSync(frameFile, grpcFrame(message));
      return { name: p.name, frameFile, message, clientShare: p.clientShare, expect: p.expect };
    }),
  }));
}

/** Runs a node script pinned to `cpus`; resolves when it exits 0. */
function runNode(cpus: string | undefined, args: string[]): Promise<void> {
  const [cmd, argv] = cpus ? ['taskset', ['-c', cpus, process.execPath, ...args]] : [process.execPath, args];
  return new Promise((resolve, reject) => {
    const child = spawn(cmd as string, argv as string[], { cwd: ROOT, stdio: ['ignore', 'inherit', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${args.join(' ')} exited ${code}: ${err}`)),
    );
  });
}

/**
 * Fingerprint of the compiled service (every .js under dist/src and the workspace packages' dist/),
 * to tell which build the numbers belong to.
 */
function buildFingerprint(): string {
  const h = createHash('sha256');
  const packages = readdirSync(path.join(ROOT, 'packages'), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => path.join(ROOT, 'packages', d.name, 'dist'));
  for (const dir of [path.join(ROOT, 'dist', 'src'), ...packages]) {
    const files = (readdirSync(dir, { recursive: true }) as string[]).filter((x) => x.endsWith('.js')).sort();
    for (const f of files) h.update(f).update(readFileSync(path.join(dir, f)));
  }
  return h.digest('hex');
}

function newestProfile(dir: string): string | undefined {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  return files.length ? path.join(dir, files.sort().at(-1)!) : undefined;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const quick = argv.includes('--quick');
  const onlyArg = argv.find((a) => a.startsWith('--only='))?.slice(7);
  const only = new Set<Phase>(onlyArg ? (onlyArg.split(',') as Phase[]) : PHASES);
  mkdirSync(OUT, { recursive: true });

  const h2load = h2loadVersion();
  const info = machineInfo();
  const pinned = os.availableParallelism() >= 2;
  const serverCpus = pinned ? '0' : undefined;
  const loadCpus = pinned ? '1' : undefined;
  const settings: LoadSettings = {
    outDir: OUT,
    loadCpus,
    durationS: quick ? 3 : 10,
    warmupS: quick ? 1 : 2,
    clients: 10,
    streams: 10,
    // A quick run is for trying the bench, not for numbers: no waiting for a quiet machine.
    patient: !quick,
  };
  const repeats = quick ? 1 : 5;
  const grpcJs = (
    JSON.parse(readFileSync(require.resolve('@grpc/grpc-js/package.json'), 'utf8')) as { version: string }
  ).version;
  const mixes = prepareMixes();
  const runs: RunRecord[] = [];
  const errors: string[] = [];
  const results: BenchResults & { runs: RunRecord[]; errors: string[] } = {
    date: new Date().toISOString(),
    build: { atStart: buildFingerprint() },
    machine: { ...info, h2load, grpcJs, pinned },
    settings: {
      durationS: settings.durationS,
      warmupS: settings.warmupS,
      clients: settings.clients,
      streams: settings.streams,
      repeats,
      quick,
    },
    mixes: mixes.map((m) => ({ id: m.mix.id, title: m.mix.title })),
    runs,
    errors,
  };
  const mutable = results as { -readonly [K in keyof BenchResults]: BenchResults[K] };
  const runner = benchRunner({
    name: 'bench',
    argv,
    partialFlags: ['only'],
    committedFile: path.join(ROOT, 'bench', 'RESULTS.md'),
    outFile: path.join(OUT, 'RESULTS.md'),
    jsonFile: path.join(OUT, 'results.json'),
    jsonIndent: 2,
    results,
    render: renderResults,
  });
  const { log, save, attempt, resultsFile } = runner;

  // Phase 1-3: the servers pinned to the same core, driven in turn.
  if (only.has('mixes') || only.has('paced') || only.has('rps')) {
    const mgLog = path.join(OUT, 'modelgate-load.log');
    let baseline: RunningServer | undefined;
    let grpcJs: RunningServer | undefined;
    let modelgate: RunningServer | undefined;
    try {
      baseline = await startBaseline(serverCpus, [], 'builtin');
      grpcJs = await startBaseline(serverCpus, [], 'grpc-js');
      modelgate = await startModelgate({ cpus: serverCpus, logFile: mgLog });
      const core = pinned ? 0 : undefined;
      // Max throughput: all three; the paced runs: the baseline and modelgate.
      const targetsList: Target[] = [
        { kind: 'baseline', server: baseline, core },
        { kind: 'baseline-grpcjs', server: grpcJs, core },
        { kind: 'modelgate', server: modelgate, core },
      ];
      const pacedTargets = targetsList.filter((t) => t.kind !== 'baseline-grpcjs');
      for (const pm of mixes) {
        await verifyDecisions(
          modelgate.grpcAddress,
          pm.parts.map((p) => ({ name: `${pm.mix.id}/${p.name}`, message: p.message, expect: p.expect })),
        );
      }
      const capacity = new Map<string, number>();

      if (only.has('mixes')) {
        for (const pm of mixes) {
          for (let rep = 0; rep < repeats; rep++) {
            for (const t of interleaved(targetsList, rep)) {
              await attempt(`${pm.mix.id} max throughput on ${t.kind}`, async () => {
                log(`${pm.mix.id}: max throughput, ${t.kind} (run ${rep + 1}/${repeats})`);
                const r = await runMaxThroughput(t, pm, settings);
                runs.push(r);
                log(`  ${Math.round(r.rps)} req/s, p50 ${Math.round(r.p50Us)} µs, p99 ${Math.round(r.p99Us)} µs`);
              });
            }
          }
          const b = runs.filter((r) => r.mix === pm.mix.id && r.target === 'baseline' && r.method === 'h2load');
          if (b.length) capacity.set(pm.mix.id, median(b.map((r) => r.rps)));
        }
      }
      if (only.has('paced') || only.has('rps')) {
        for (const pm of mixes) {
          const cap = capacity.get(pm.mix.id);
          if (!cap) {
            errors.push(`${pm.mix.id}: no baseline capacity measured, so no half-capacity run`);
            continue;
          }
          const rate = Math.round(cap / 2);
          for (let rep = 0; rep < repeats; rep++) {
            for (const t of interleaved(pacedTargets, rep)) {
              if (only.has('paced')) {
                await attempt(`${pm.mix.id} paced on ${t.kind}`, async () => {
                  log(`${pm.mix.id}: paced at ${rate} req/s, ${t.kind} (run ${rep + 1}/${repeats})`);
                  const r = await runPaced(t, pm, settings, rate);
                  runs.push(r);
                  log(
                    `  ${Math.round(r.rps)} req/s, p50 ${Math.round(r.p50Us)} µs, p99 ${Math.round(r.p99Us)} µs, late sends ${r.lateSends}`,
                  );
                });
              }
              if (only.has('rps') && pm.mix.id === 'small_chat') {
                await attempt(`${pm.mix.id} h2load --rps on ${t.kind}`, async () => {
                  log(
                    `${pm.mix.id}: h2load --rps ${Math.round(rate / settings.clients)} × ${settings.clients} clients, ${t.kind}`,
                  );
                  const r = await runMaxThroughput(t, pm, settings, Math.round(rate / settings.clients));
                  runs.push(r);
                  log(`  ${Math.round(r.rps)} req/s, p50 ${Math.round(r.p50Us)} µs, p99 ${Math.round(r.p99Us)} µs`);
                });
              }
            }
          }
        }
      }
      const counted = Object.values(await scrapeDecisions(modelgate.httpAddress!)).reduce((a, b) => a + b, 0);
      await modelgate.stop();
      mutable.logCheck = { decisionsCounted: counted, decisionLines: countDecisionLines(mgLog) };
    } catch (err) {
      errors.push(`load phases: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      await baseline?.stop();
      await grpcJs?.stop();
      await modelgate?.stop();
      rmSync(mgLog, { force: true });
    }
    save();
  }

  if (only.has('micro')) {
    await attempt('extractModel micro-benchmark', async () => {
      log('micro: extractModel vs JSON.parse, 1 MiB body');
      const out = path.join(OUT, 'micro-extract.json');
      if (!quick) await waitForQuiet([]);
      await runNode(serverCpus, ['dist/bench/micro.js', 'extract', out]);
      mutable.extract = JSON.parse(readFileSync(out, 'utf8')) as ExtractModelBench;
    });
    await attempt('check path micro-benchmark', async () => {
      log('micro: service.checkBytes(bytes) in process');
      const out = path.join(OUT, 'micro-check.json');
      const logFile = path.join(OUT, 'micro-check.log');
      if (!quick) await waitForQuiet([]);
      await runNode(serverCpus, ['dist/bench/micro.js', 'check-path', out, CONFIG, logFile]);
      rmSync(logFile, { force: true });
      mutable.checkPath = JSON.parse(readFileSync(out, 'utf8')) as CheckPathBench;
    });
  }

  if (only.has('memory')) {
    await attempt('memory run', async () => {
      const checks = quick ? 100_000 : 1_000_000;
      // Three fresh servers: this shared machine's speed drifts over a minute, which one run's
      // start-vs-end throughput cannot tell from a slowdown of the server.
      const runsWanted = quick ? 1 : 3;
      const memoryRuns: MemoryBench[] = [];
      for (let i = 0; i < runsWanted; i++) {
        log(`memory: ${checks} Checks with distinct unknown keys (run ${i + 1}/${runsWanted})`);
        const m = await benchMemory({ outDir: OUT, serverCpus, loadCpus, checks, windows: 20 });
        rmSync(path.join(OUT, 'modelgate-memory.log'), { force: true });
        rmSync(path.join(OUT, 'distinct-keys.bin'), { force: true });
        memoryRuns.push(m);
        log(
          `  RSS ${(m.rssStartBytes / 2 ** 20).toFixed(1)} → ${(m.rssEndBytes / 2 ** 20).toFixed(1)} MB, ${Math.round(m.rpsStart)} → ${Math.round(m.rpsEnd)} req/s`,
        );
      }
      mutable.memoryRuns = memoryRuns;
      // The run with the median throughput change is the one shown in detail.
      mutable.memory = [...memoryRuns].sort((a, b) => a.rpsEnd / a.rpsStart - b.rpsEnd / b.rpsStart)[
        memoryRuns.length >> 1
      ];
    });
  }

  if (only.has('scaling')) {
    const pm = mixes.find((m) => m.mix.id === 'small_chat')!;
    const scaling: { workers: number; runs: RunRecord[] }[] = [];
    for (const workers of [1, 2]) {
      await attempt(`scaling --workers ${workers}`, async () => {
        const logFile = path.join(OUT, `modelgate-workers-${workers}.log`);
        const server = await startModelgate({ workers, logFile });
        try {
          const entry = { workers, runs: [] as RunRecord[] };
          scaling.push(entry);
          for (let rep = 0; rep < Math.max(2, repeats - 1); rep++) {
            log(`scaling: --workers ${workers} (run ${rep + 1})`);
            // /metrics belongs to whichever worker answers, so no per-run counter check here; decisions are verified
            // before/after.
            const r = await runMaxThroughput({ kind: 'modelgate', server: { ...server, httpAddress: undefined } }, pm, {
              ...settings,
              loadCpus: undefined,
            });
            entry.runs.push(r);
            log(`  ${Math.round(r.rps)} req/s`);
          }
        } finally {
          await server.stop();
          rmSync(logFile, { force: true });
        }
      });
    }
    mutable.scaling = scaling;
    save();
  }

  if (only.has('profile')) {
    const profDir = path.join(OUT, 'profiles');
    mkdirSync(profDir, { recursive: true });
    const profiles: { server?: ProfileSummary; baseline?: ProfileSummary; checkPath?: ProfileSummary } = {};
    await attempt('baseline profile', async () => {
      const dir = path.join(profDir, 'baseline');
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
      log('profile: baseline under h2load, small chat');
      const server = await startBaseline(serverCpus, ['--cpu-prof', '--cpu-prof-dir', dir], 'builtin');
      try {
        await runMaxThroughput({ kind: 'baseline', server, core: pinned ? 0 : undefined }, mixes[0], settings);
      } finally {
        await server.stop();
      }
      const file = newestProfile(dir);
      if (!file) throw new Error('no .cpuprofile written');
      profiles.baseline = summarizeProfile(file);
    });
    await attempt('server profile', async () => {
      for (const f of readdirSync(profDir).filter((x) => x.endsWith('.cpuprofile'))) rmSync(path.join(profDir, f));
      log('profile: modelgate under h2load, small chat');
      const logFile = path.join(OUT, 'modelgate-profile.log');
      const server = await startModelgate({
        cpus: serverCpus,
        logFile,
        nodeFlags: ['--cpu-prof', '--cpu-prof-dir', profDir],
      });
      try {
        await runMaxThroughput({ kind: 'modelgate', server, core: pinned ? 0 : undefined }, mixes[0], settings);
      } finally {
        await server.stop();
        rmSync(logFile, { force: true });
      }
      const file = newestProfile(profDir);
      if (!file) throw new Error('no .cpuprofile written');
      profiles.server = summarizeProfile(file);
    });
    await attempt('check path profile', async () => {
      const dir = path.join(profDir, 'check-path');
      mkdirSync(dir, { recursive: true });
      log('profile: in-process check loop');
      const logFile = path.join(OUT, 'micro-check-prof.log');
      await runNode(serverCpus, [
        '--cpu-prof',
        '--cpu-prof-dir',
        dir,
        'dist/bench/micro.js',
        'check-path',
        path.join(OUT, 'micro-check-prof.json'),
        CONFIG,
        logFile,
      ]);
      rmSync(logFile, { force: true });
      const file = newestProfile(dir);
      if (!file) throw new Error('no .cpuprofile written');
      profiles.checkPath = summarizeProfile(file);
    });
    mutable.profiles = profiles;
    save();
  }

  mutable.build = { atStart: results.build!.atStart, atEnd: buildFingerprint() };
  save();
  const rows = targets(results);
  process.stdout.write(renderResults(results).split('## Fixed mixes')[0].split('## Targets')[1] ?? '');
  process.stdout.write(
    `\nWrote ${path.relative(ROOT, resultsFile)} (${rows.filter((r) => r.ok === true).length} of ${rows.length} targets pass).\n`,
  );
  if (errors.length > 0) process.exitCode = 1;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

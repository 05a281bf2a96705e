/**
 * `npm run bench:e2e` (bench/README.md): the same requests through the same Envoy (the generated bundle,
 * a stand-in upstream that answers at once) in every setup of setups.ts, in one run on one
 * machine: max throughput (closed loop) and latency at fixed offered rates (open loop, evenly
 * paced: 25%, 50% and 75% of the floor's capacity for each mix), CPU seconds per 10,000 requests
 * of each process, the authorizing process's RSS; ratios to the floor and to the no-op ext_authz.
 * Writes bench/RESULTS-e2e.md and bench/out/e2e/results.json. Method: bench/README-e2e.md.
 *
 *   npm run bench:e2e                         the full run (about 40 minutes on 2 cores)
 *   node dist/bench/e2e/run.js --quick        seconds per run, one repeat: for trying the harness
 *   --setups=envoy,noop,modelgate  --mixes=small_chat  --phases=closed,paced,tail,litellm
 *   --repeats=N --warmup=S --duration=S --node-flags="--max-semi-space-size=32" --out=FILE
 *   --before=DIR --setups=noop-go,modelgate,modelgate-before   another built checkout beside this one
 *   --profile-dir=DIR   every modelgate setup under node --cpu-prof, its profiles in DIR/<setup>/ (profile-parts.ts)
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { median } from '../latency';
import { machineInfo } from '../proc-stats';
import { benchRunner, interleaved } from '../runner';
import { envoyVersion } from './envoy';
import { runLoad, type LoadSettings, type RunRecord } from './load';
import { httpMixes, type HttpMix, type MixId } from './mixes';
import { startBenchPg, type BenchPg } from './pg';
import { freePort } from '../../src/server/free-port';
import { spawnPinned, listening, type Proc } from './procs';
import { renderResults, type E2eResults } from './results';
import { EXTRA_SETUP_IDS, SETUP_IDS, SETUP_TITLES, startSetup, type RunningSetup, type SetupId } from './setups';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const OUT = path.join(ROOT, 'bench', 'out', 'e2e');

/** Which mixes each setup runs (the metering rows: the small chat, answered and streamed). */
const MAIN_MIXES: MixId[] = ['small_chat', 'body_256k_model_last', 'generative_path', 'mixed_90_10'];
const METER_SETUPS: SetupId[] = [
  'modelgate-meter',
  'modelgate-meter-nogzip',
  'modelgate-meter-logonly',
  'modelgate-pg-meter',
  'modelgate-pg-strict',
  'modelgate-rl',
  'modelgate-rl-global',
];
const STREAM_ALSO: SetupId[] = ['envoy', 'modelgate', 'modelgate-pg'];
/**
 * Closed loop only: LiteLLM with its budget, beside the meter rows by throughput and CPU per request
 * (LiteLLM cannot take the fixed rates; \`litellm\` is the latency reference for LiteLLM).
 */
const CLOSED_ONLY: SetupId[] = ['litellm-budget'];
/** The metering rows' offered rate. */
const METER_RATE = 200;
const METER_LABEL = '200/s';
/** Offered rates, as fractions of the floor's closed-loop capacity for the same mix (fixed by the issue). */
const RATES = [0.25, 0.5, 0.75];
/** A rate above this share of a setup's own capacity is not offered to it: it cannot keep up, the queue only grows. */
const OVER_CAPACITY = 0.95;
/** At shares of the no-op's capacity: every authorizer for the small chat, the main comparison for the other mixes. */
const TAIL_SETUPS: SetupId[] = ['envoy', 'noop', 'noop-builtin', 'modelgate', 'modelgate-w2', 'modelgate-pg', 'opa'];
const NOOP_RATE_SETUPS: SetupId[] = ['envoy', 'noop', 'noop-builtin', 'modelgate', 'opa'];

/** A `--name=value` flag of the command line. */
function arg(name: string): string | undefined {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a?.slice(name.length + 3);
}

function mixesFor(id: SetupId): MixId[] {
  // What an estimate costs: the soft meter row and its reference without the meter.
  const estimated: MixId[] = id === 'modelgate-meter' || id === 'modelgate' ? ['small_chat_stream_estimated'] : [];
  if (METER_SETUPS.includes(id)) return ['small_chat', 'small_chat_stream', ...estimated];
  if (CLOSED_ONLY.includes(id)) return ['small_chat'];
  return STREAM_ALSO.includes(id) ? [...MAIN_MIXES, 'small_chat_stream', ...estimated] : MAIN_MIXES;
}

function versions(ctx: {
  envoyBin: string;
  opaBin: string;
  litellmBin: string;
  goNoopBin: string;
  pg?: BenchPg;
}): Record<string, string> {
  const v: Record<string, string> = {};
  v.envoy = envoyVersion(ctx.envoyBin);
  v.node = process.version;
  v['@grpc/grpc-js'] = (
    JSON.parse(readFileSync(require.resolve('@grpc/grpc-js/package.json'), 'utf8')) as { version: string }
  ).version;
  const opa = spawnSync(ctx.opaBin, ['version'], { encoding: 'utf8' });
  if (opa.status === 0) v['opa-envoy-plugin'] = /Version: (\S+)/.exec(opa.stdout)?.[1] ?? '?';
  const goNoop = spawnSync('go', ['version', '-m', ctx.goNoopBin], { encoding: 'utf8' });
  if (goNoop.status === 0)
    v['grpc-go (the no-op)'] = /dep\s+google\.golang\.org\/grpc\s+(\S+)/.exec(goNoop.stdout)?.[1] ?? '?';
  const lite = spawnSync(
    path.join(path.dirname(ctx.litellmBin), 'python'),
    ['-c', 'import importlib.metadata as m; print(m.version("litellm"))'],
    { encoding: 'utf8' },
  );
  if (lite.status === 0) v.litellm = lite.stdout.trim();
  if (ctx.pg) v.postgresql = ctx.pg.version;
  return v;
}

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick');
  const setupsWanted = (arg('setups')?.split(',') ?? [...SETUP_IDS]) as SetupId[];
  const known: readonly string[] = [...SETUP_IDS, ...EXTRA_SETUP_IDS];
  for (const s of setupsWanted)
    if (!known.includes(s)) throw new Error(`unknown setup ${s}; known: ${known.join(', ')}`);
  const mixFilter = arg('mixes')?.split(',') as MixId[] | undefined;
  const phases = new Set(arg('phases')?.split(',') ?? ['closed', 'paced', 'tail', 'litellm']);
  const repeats = Number(arg('repeats') ?? (quick ? 1 : 2));
  const warmupMs = 1000 * Number(arg('warmup') ?? (quick ? 1 : 2));
  const durationMs = 1000 * Number(arg('duration') ?? (quick ? 2 : 8));
  const nodeFlags = arg('node-flags')?.split(' ').filter(Boolean) ?? [];
  mkdirSync(OUT, { recursive: true });

  const pinned = os.availableParallelism() >= 2;
  const gatewayCpus = pinned ? '0' : undefined;
  const loadCpus = pinned ? '1' : undefined;
  // This process (mostly idle during a run) stays off the gateway core too.
  if (loadCpus) spawnSync('taskset', ['-a', '-p', '-c', loadCpus, String(process.pid)], { stdio: 'ignore' });
  const envoyBin =
    process.env.ENVOY_BIN ??
    path.join(ROOT, '.envoy', '1.40.0', 'lib', 'python3.11', 'site-packages', 'envoy', '_bin', 'envoy');
  const opaBin = process.env.OPA_BIN ?? path.join(ROOT, '.peers', 'opa', 'bin', 'opa');
  const litellmBin = process.env.LITELLM_BIN ?? path.join(ROOT, '.peers', 'litellm-venv', 'bin', 'litellm');
  const goNoopBin = process.env.GO_NOOP_BIN ?? path.join(ROOT, '.peers', 'grpc-go-noop', 'bin', 'grpc-go-noop');
  const before = arg('before');
  const beforeRoot = before ? path.resolve(before) : undefined;
  const profileArg = arg('profile-dir');
  const profileDir = profileArg ? path.resolve(profileArg) : undefined;
  const started = new Date();
  const load1 = os.loadavg()[0];

  // The request bodies, written once.
  const mixes = httpMixes().filter((m) => !mixFilter || mixFilter.includes(m.id));
  const bodyFiles = new Map<string, string>();
  mkdirSync(path.join(OUT, 'bodies'), { recursive: true });
  for (const m of mixes) {
    for (const k of m.kinds) {
      const f = path.join(OUT, 'bodies', `${m.id}-${k.name}.json`);
      writeFileSync(f, k.body);
      bodyFiles.set(`${m.id}/${k.name}`, f);
    }
  }

  const upPort = await freePort();
  const upstream: Proc = await spawnPinned({
    name: 'upstream',
    cmd: process.execPath,
    args: [path.join(ROOT, 'dist/bench/e2e/upstream.js'), String(upPort)],
    cpus: loadCpus,
    logFile: path.join(OUT, 'upstream.log'),
    ready: () => listening(upPort),
  });
  const pg = setupsWanted.some((s) => s.includes('-pg')) ? await startBenchPg(OUT, loadCpus) : undefined;
  const ctx = {
    root: ROOT,
    outDir: OUT,
    envoyBin,
    envoyConcurrency: 1,
    gatewayCpus,
    loadCpus,
    upstreamPort: upPort,
    demoConfig: readFileSync(path.join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8'),
    pg,
    nodeFlags,
    opaBin,
    litellmBin,
    goNoopBin,
    beforeRoot,
    profileDir,
  };
  const settings: LoadSettings = {
    outDir: OUT,
    root: ROOT,
    loadCpus,
    gatewayCpus,
    warmupMs,
    durationMs,
    connections: 10,
    closedStreams: 10,
    upstreamPid: upstream.pid,
  };
  const runs: RunRecord[] = [];
  const errors: string[] = [];
  const setups = new Map<SetupId, RunningSetup>();
  const results: E2eResults = {
    date: started.toISOString(),
    quick,
    machine: {
      ...machineInfo(),
      kernel: os.release(),
      loadAverageAtStart: load1,
      pinned,
      gatewayCpus,
      loadCpus,
      memoryGiB: os.totalmem() / 2 ** 30,
    },
    versions: versions({ envoyBin, opaBin, litellmBin, goNoopBin, pg }),
    settings: {
      repeats,
      warmupMs,
      durationMs,
      connections: settings.connections,
      closedInFlight: settings.connections * settings.closedStreams,
      envoyConcurrency: ctx.envoyConcurrency,
      nodeFlags,
      rates: RATES,
      overCapacity: OVER_CAPACITY,
    },
    setups: [],
    runs,
    skipped: [],
    rss: {},
    errors,
  };
  const runner = benchRunner({
    name: 'bench:e2e',
    argv: process.argv.slice(2),
    partialFlags: ['setups', 'mixes', 'phases', 'repeats', 'duration', 'warmup', 'node-flags', 'before', 'profile-dir'],
    committedFile: path.join(ROOT, 'bench', 'RESULTS-e2e.md'),
    outFile: path.join(OUT, 'RESULTS-e2e.md'),
    jsonFile: path.join(OUT, 'results.json'),
    results,
    render: (r) => renderResults(r, mixes),
  });
  const { log, save, resultsFile: outFile } = runner;

  try {
    for (const id of setupsWanted) {
      log(`starting ${SETUP_TITLES[id]}`);
      try {
        const s = await startSetup(ctx, id);
        setups.set(id, s);
        results.setups.push({ id, title: s.title, bundleChanges: [...s.bundleChanges], notes: [...s.notes] });
      } catch (err) {
        errors.push(`${id}: did not start: ${err instanceof Error ? err.message : String(err)}`);
        log(`ERROR ${errors.at(-1)}`);
      }
    }
    const order = [...setups.values()];
    const attempt = async (what: string, fn: () => Promise<RunRecord>): Promise<void> => {
      await runner.attempt(what, async () => {
        const r = await fn();
        runs.push(r);
        const lat = r.latency;
        log(
          `  ${what}: ${Math.round(r.rps)} req/s, p50 ${(lat.p50Us / 1000).toFixed(2)} ms, p99 ${(lat.p99Us / 1000).toFixed(2)} ms, p99.9 ${(lat.p999Us / 1000).toFixed(2)} ms${r.problems.length ? `  PROBLEMS: ${r.problems.join('; ')}` : ''}`,
        );
      });
    };
    const mixById = new Map<MixId, HttpMix>(mixes.map((m) => [m.id, m]));

    // Warm-up: a short closed-loop run per setup (JIT, caches, connections); not recorded.
    for (const s of order) {
      const mix = mixById.get(mixesFor(s.id).find((m) => mixById.has(m))!);
      if (!mix) continue;
      try {
        await runLoad(s, mix, bodyFiles, { ...settings, warmupMs: 0, durationMs: quick ? 1000 : 3000 }, 'closed', -1);
      } catch (err) {
        errors.push(`${s.id} warm-up: ${err instanceof Error ? err.message : String(err)}`);
      }
    }

    // 1. Max throughput, closed loop.
    const capacity = (setup: SetupId, mix: MixId): number | undefined => {
      const xs = runs
        .filter((r) => r.setup === setup && r.mix === mix && r.method === 'closed' && r.problems.length === 0)
        .map((r) => r.rps);
      return xs.length ? median(xs) : undefined;
    };
    if (phases.has('closed')) {
      for (const mix of mixes) {
        const list = order.filter((s) => mixesFor(s.id).includes(mix.id));
        for (let rep = 0; rep < repeats; rep++) {
          for (const s of interleaved(list, rep)) {
            log(`${mix.id}: closed loop, ${s.id} (${rep + 1}/${repeats})`);
            // LiteLLM answers tens of requests per second: with 100 in flight a 256 KiB request would
            // wait longer than a run for its turn, so it gets 10 (one per connection).
            const closed =
              s.id === 'litellm' || s.id === 'litellm-budget' ? { ...settings, closedStreams: 1 } : settings;
            await attempt(`${mix.id} closed ${s.id}`, () => runLoad(s, mix, bodyFiles, closed, 'closed', rep));
          }
        }
      }
    }

    // 2. Fixed offered rates: shares of the floor's capacity for the same mix.
    const paced = async (mix: HttpMix, list: RunningSetup[], rate: number, label: string): Promise<void> => {
      const able = list.filter((s) => {
        const cap = capacity(s.id, mix.id);
        if (cap !== undefined && rate > OVER_CAPACITY * cap) {
          results.skipped.push({ setup: s.id, mix: mix.id, rateLabel: label, rate, capacity: cap });
          return false;
        }
        return true;
      });
      for (let rep = 0; rep < repeats; rep++) {
        for (const s of interleaved(able, rep)) {
          log(`${mix.id}: ${label} = ${Math.round(rate)} req/s, ${s.id} (${rep + 1}/${repeats})`);
          // At a few requests a second (LiteLLM, 256 KiB), a run lasts long enough for 30 requests (at most 30 s).
          const long = { ...settings, durationMs: Math.max(settings.durationMs, Math.min(30_000, 30_000 / rate)) };
          await attempt(`${mix.id} ${label} ${s.id}`, () =>
            runLoad(s, mix, bodyFiles, long, 'paced', rep, rate, label),
          );
        }
      }
    };
    if (phases.has('paced')) {
      for (const mix of mixes) {
        const floor = capacity('envoy', mix.id);
        if (!floor) {
          errors.push(`${mix.id}: no floor capacity measured, so no fixed rates`);
          continue;
        }
        if (mix.id === 'small_chat_stream' || mix.id === 'small_chat_stream_estimated') continue;
        const list = order.filter(
          (s) => mixesFor(s.id).includes(mix.id) && !METER_SETUPS.includes(s.id) && !CLOSED_ONLY.includes(s.id),
        );
        for (const share of RATES) await paced(mix, list, share * floor, `${share * 100}%`);
      }
      // The metering rows (and their references without the meter): the small chat answered and
      // streamed at one rate every metering setup can take (strict mode on PostgreSQL: ~450 req/s).
      for (const mix of mixes.filter(
        (m) => m.id === 'small_chat' || m.id === 'small_chat_stream' || m.id === 'small_chat_stream_estimated',
      )) {
        const list = order.filter(
          (s) => mixesFor(s.id).includes(mix.id) && [...METER_SETUPS, ...STREAM_ALSO].includes(s.id),
        );
        await paced(mix, list, METER_RATE, METER_LABEL);
      }
    }

    // 3. The same shares of the no-op ext_authz's capacity. On 2 cores Envoy alone answers 4-5 times
    // what any ext_authz setup can, so every fixed rate above is over their capacity: these are the
    // rates at which the authorizers can be compared (and noop50, the earlier bench's "half capacity",
    // is the tail-latency target). The floor runs them too, for "added p50".
    if (phases.has('tail')) {
      for (const mix of mixes.filter((m) => MAIN_MIXES.includes(m.id))) {
        const noopCap = capacity('noop', mix.id);
        if (!noopCap) continue;
        const list = order.filter((s) => (mix.id === 'small_chat' ? TAIL_SETUPS : NOOP_RATE_SETUPS).includes(s.id));
        for (const share of RATES) await paced(mix, list, share * noopCap, `noop${share * 100}`);
      }
    }

    // 4. LiteLLM cannot take the fixed rates; at half its own capacity, beside the floor and modelgate.
    const lite = setups.get('litellm');
    if (phases.has('litellm') && lite) {
      for (const mix of mixes.filter((m) => MAIN_MIXES.includes(m.id))) {
        const cap = capacity('litellm', mix.id);
        if (!cap) continue;
        await paced(
          mix,
          order.filter((s) => ['envoy', 'modelgate', 'litellm'].includes(s.id)),
          cap / 2,
          'litellm50',
        );
      }
    }

    for (const s of order) {
      if (!s.authz) continue;
      let rss = 0;
      let hwm = 0;
      for (const pid of s.authz.pids()) {
        try {
          const st = readFileSync(`/proc/${pid}/status`, 'utf8');
          rss += Number(/^VmRSS:\s+(\d+)/m.exec(st)?.[1] ?? 0) * 1024;
          hwm += Number(/^VmHWM:\s+(\d+)/m.exec(st)?.[1] ?? 0) * 1024;
        } catch {
          /* gone */
        }
      }
      results.rss[s.id] = { rssBytes: rss, peakBytes: hwm, processes: s.authz.pids().length };
    }
  } finally {
    for (const s of setups.values()) await s.stop();
    await upstream.stop();
    await pg?.close();
    results.finished = new Date().toISOString();
    save();
  }
  log(`wrote ${path.relative(ROOT, outFile)} (${runs.length} runs, ${errors.length} errors)`);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

/**
 * Runs h2load (Debian's nghttp2-client) with a pre-encoded gRPC frame as the POST body and reads
 * both its summary and its per-request log (`--log-file`: start µs, HTTP status, µs until the end
 * of the response), from which p50/p99 are computed exactly (h2load itself prints only min, max,
 * mean and sd).
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { summarize, type LatencySummary } from './latency';
import { CHECK_PATH } from '../src/server/grpc-server';

export interface H2loadOptions {
  readonly address: string;
  readonly dataFile: string;
  readonly clients: number;
  /** Max concurrent streams per client (-m). */
  readonly streams: number;
  readonly durationS: number;
  readonly warmupS: number;
  /** --rps per client (h2load ≥ 1.41); undefined = as fast as possible. */
  readonly rpsPerClient?: number;
  /** taskset CPU list for h2load, e.g. "1". */
  readonly cpus?: string;
  readonly logFile: string;
}

export interface H2loadResult {
  readonly rps: number;
  readonly done: number;
  readonly succeeded: number;
  readonly failed: number;
  readonly errored: number;
  readonly timeout: number;
  readonly status2xx: number;
  /** Log lines whose status is not 200 (-1 = failed stream), except 0 (started during warm-up). */
  readonly badLogLines: number;
  readonly latency: LatencySummary;
  /** Raw per-request durations (µs), for merging runs that ran side by side. */
  readonly durationsUs: Float64Array;
  readonly command: string;
}

/** Throws unless h2load is installed; the message says how to install it. */
export function h2loadVersion(): string {
  const r = spawnSync('h2load', ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    throw new Error('h2load not found: install it with `apt-get update && apt-get install -y nghttp2-client`');
  }
  return r.stdout.trim();
}

function args(o: H2loadOptions): string[] {
  const a = [
    '-c',
    String(o.clients),
    '-m',
    String(o.streams),
    '-t',
    '1',
    '-D',
    String(o.durationS),
    '--warm-up-time',
    String(o.warmupS),
    '-d',
    o.dataFile,
    '-H',
    'content-type: application/grpc',
    '-H',
    'te: trailers',
    '--log-file',
    o.logFile,
  ];
  if (o.rpsPerClient !== undefined) a.push('--rps', String(o.rpsPerClient));
  a.push(`http://${o.address}${CHECK_PATH}`);
  return a;
}

function parseSummary(out: string) {
  const num = (re: RegExp, what: string): number => {
    const m = re.exec(out);
    if (!m) throw new Error(`h2load output has no ${what}:\n${out}`);
    return Number(m[1]);
  };
  return {
    rps: num(/finished in [\d.]+\w*, ([\d.]+) req\/s/, 'req/s'),
    done: num(/requests: \d+ total, \d+ started, (\d+) done/, 'done count'),
    succeeded: num(/(\d+) succeeded/, 'succeeded count'),
    failed: num(/(\d+) failed/, 'failed count'),
    errored: num(/(\d+) errored/, 'errored count'),
    timeout: num(/(\d+) timeout/, 'timeout count'),
    status2xx: num(/status codes: (\d+) 2xx/, '2xx count'),
  };
}

function readLog(file: string): { durations: Float64Array; bad: number } {
  const text = readFileSync(file, 'latin1');
  const durations: number[] = [];
  let bad = 0;
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const t1 = text.indexOf('\t', start);
    const t2 = text.indexOf('\t', t1 + 1);
    if (t1 > start && t2 > t1 && t2 < end) {
      const status = text.slice(t1 + 1, t2);
      // Status 0: a request started during warm-up that ended in the measured phase (h2load does
      // not record the status of warm-up streams). Not a failure, and not a measured request.
      if (status !== '0') {
        if (status !== '200') bad++;
        durations.push(Number(text.slice(t2 + 1, end)));
      }
    }
    start = end + 1;
  }
  return { durations: Float64Array.from(durations), bad };
}

/** Runs several h2load processes side by side (e.g. 9 valid + 1 denied client) and waits for all. */
export async function runH2loadGroup(runs: readonly H2loadOptions[]): Promise<H2loadResult[]> {
  return Promise.all(
    runs.map(
      (o) =>
        new Promise<H2loadResult>((resolve, reject) => {
          rmSync(o.logFile, { force: true }); // h2load appends to an existing log
          const cmd = o.cpus ? 'taskset' : 'h2load';
          const argv = o.cpus ? ['-c', o.cpus, 'h2load', ...args(o)] : args(o);
          const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
          let out = '';
          child.stdout.on('data', (d) => (out += d));
          child.stderr.on('data', (d) => (out += d));
          child.on('error', reject);
          child.on('close', (code) => {
            if (code !== 0) return reject(new Error(`h2load exited ${code}:\n${out}`));
            try {
              const s = parseSummary(out);
              const log = readLog(o.logFile);
              rmSync(o.logFile, { force: true });
              resolve({
                ...s,
                badLogLines: log.bad,
                latency: summarize(log.durations),
                durationsUs: log.durations,
                command: `${cmd} ${argv.join(' ')}`,
              });
            } catch (err) {
              reject(err);
            }
          });
        }),
    ),
  );
}

/** Fails loudly when h2load saw any failed, errored or timed-out stream or non-200 status. */
export function assertClean(r: H2loadResult, what: string): void {
  if (r.failed || r.errored || r.timeout || r.badLogLines || r.succeeded !== r.done) {
    throw new Error(
      `${what}: h2load reports ${r.failed} failed, ${r.errored} errored, ${r.timeout} timeout, ${r.badLogLines} non-200 log lines (${r.succeeded}/${r.done} succeeded)`,
    );
  }
}

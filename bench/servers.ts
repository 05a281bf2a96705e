/**
 * Starts the servers under test as child processes, each optionally pinned with taskset: the no-op
 * baseline on modelgate's own gRPC server (baseline-builtin-server.ts) or on grpc-js's
 * (baseline-server.ts), and modelgate itself (`dist/src/cli/main.js serve` on the demo file store,
 * decision logging on, log lines to a file).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { parseConfig, type Config } from '../src/config/load';
import { freePort } from '../src/server/free-port';

export interface RunningServer {
  readonly name: string;
  readonly pid: number;
  readonly grpcAddress: string;
  readonly httpAddress?: string;
  stop(): Promise<void>;
}

const ROOT = path.resolve(__dirname, '..', '..');

/**
 * The demo config's gRPC settings (envoy/modelgate.yaml), which modelgate runs with in the benchmarks: the no-ops take
 * the same.
 */
export function demoGrpcSettings(): Config['grpc'] {
  return parseConfig(readFileSync(path.join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8')).grpc;
}

function spawnPinned(
  cpus: string | undefined,
  argv: string[],
  stdout: number | 'pipe',
  extraArgs: string[] = [],
): ChildProcess {
  const nodeArgv = [...extraArgs, ...argv];
  return cpus
    ? spawn('taskset', ['-c', cpus, process.execPath, ...nodeArgv], { cwd: ROOT, stdio: ['ignore', stdout, 'pipe'] })
    : spawn(process.execPath, nodeArgv, { cwd: ROOT, stdio: ['ignore', stdout, 'pipe'] });
}

function stopper(child: ChildProcess): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      child.kill('SIGTERM');
    });
}

/** A no-op Authorization server: on modelgate's own gRPC server (`builtin`, the baseline) or on grpc-js's. */
export async function startBaseline(
  cpus?: string,
  nodeFlags: string[] = [],
  on: 'builtin' | 'grpc-js' = 'builtin',
): Promise<RunningServer> {
  const port = await freePort();
  const script = on === 'builtin' ? 'dist/bench/baseline-builtin-server.js' : 'dist/bench/baseline-server.js';
  const child = spawnPinned(cpus, [script, `127.0.0.1:${port}`], 'pipe', nodeFlags);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('baseline listening')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`baseline exited ${code}: ${stderr}`)));
  });
  return {
    name: on === 'builtin' ? 'baseline' : 'baseline-grpcjs',
    pid: child.pid!,
    grpcAddress: `127.0.0.1:${port}`,
    stop: stopper(child),
  };
}

export interface ModelgateOptions {
  readonly cpus?: string;
  readonly workers?: number;
  /** pino lines (one per decision) go here. */
  readonly logFile: string;
  readonly configPath?: string;
  /** Extra node flags, e.g. --cpu-prof. */
  readonly nodeFlags?: string[];
}

async function waitReady(httpAddress: string, child: ChildProcess, stderr: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`modelgate exited ${child.exitCode}: ${stderr()}`);
    try {
      const res = await fetch(`http://${httpAddress}/readyz`);
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`modelgate not ready after 30 s: ${stderr()}`);
}

/** `modelgate serve` on the demo config (file store), pinned to `cpus` when given. */
export async function startModelgate(o: ModelgateOptions): Promise<RunningServer> {
  const grpcPort = await freePort();
  const httpPort = await freePort();
  const grpcAddress = `127.0.0.1:${grpcPort}`;
  const httpAddress = `127.0.0.1:${httpPort}`;
  const argv = [
    'dist/src/cli/main.js',
    'serve',
    '--config',
    o.configPath ?? 'envoy/modelgate.yaml',
    '--grpc',
    grpcAddress,
    '--http',
    httpAddress,
  ];
  if (o.workers) argv.push('--workers', String(o.workers));
  const fd = openSync(o.logFile, 'w');
  const child = spawnPinned(o.cpus, argv, fd, o.nodeFlags);
  closeSync(fd);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  await waitReady(httpAddress, child, () => stderr);
  return {
    name: `modelgate${o.workers ? ` --workers ${o.workers}` : ''}`,
    pid: child.pid!,
    grpcAddress,
    httpAddress,
    stop: stopper(child),
  };
}

/** Lines of a modelgate log that record a decision (pino JSON with a `decision` field). */
export function countDecisionLines(logFile: string): { allow: number; deny: number; byReason: Record<string, number> } {
  const text = readFileSync(logFile, 'utf8');
  let allow = 0;
  let deny = 0;
  const byReason: Record<string, number> = {};
  for (const m of text.matchAll(/"decision":"(allow|deny)".*?"reason":"([a-z_]+)"/g)) {
    if (m[1] === 'allow') allow++;
    else deny++;
    byReason[m[2]] = (byReason[m[2]] ?? 0) + 1;
  }
  return { allow, deny, byReason };
}

/** Scrapes one Prometheus gauge/counter value (first sample whose line starts with `name`). */
export async function scrapeMetric(httpAddress: string, name: string): Promise<number | undefined> {
  const text = await (await fetch(`http://${httpAddress}/metrics`)).text();
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

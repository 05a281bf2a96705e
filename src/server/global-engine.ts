/**
 * The global rate limit engine's processes (`rateLimits.engine: global`, docs/rate-limits.md):
 * Debian's redis-server and envoyproxy/ratelimit at its pinned version (package.json
 * config.ratelimit, built by scripts/ensure-ratelimit into .ratelimit/). `modelgate up` starts
 * them when the config asks for the global engine; the end-to-end tests and benchmarks start one
 * pair shared by several Envoys and modelgate replicas. Never a download here: a missing binary
 * is an error that names the script that installs it.
 *
 * envoyproxy/ratelimit runs with its file config holding only the domain: every descriptor
 * modelgate sends carries its limit (Envoy's per-descriptor override), which the service accepts
 * for any descriptor of a known domain, so limits live in modelgate's store alone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { HostPort } from '../config/load';
import { freePort } from './free-port';
import { projectRoot } from '../envoy/ensure';
import { InternalError } from '../errors/internal-error';

/** A binary that is not there; the message says how to get it. */
export class EngineUnavailable extends InternalError {
  constructor(message: string) {
    super('engine_unavailable', message);
  }
}

/** envoyproxy/ratelimit: RATELIMIT_BIN, else .ratelimit/<pinned version>/service_cmd. */
export function ratelimitBinary(env: NodeJS.ProcessEnv = process.env): string {
  if (env.RATELIMIT_BIN) return env.RATELIMIT_BIN;
  const root = projectRoot();
  const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { config: { ratelimit: string } })
    .config.ratelimit;
  const bin = join(root, '.ratelimit', version, 'service_cmd');
  if (!existsSync(bin))
    throw new EngineUnavailable(
      `envoyproxy/ratelimit ${version} is not built: run scripts/ensure-ratelimit (needs Go), or set RATELIMIT_BIN`,
    );
  return bin;
}

/** redis-server: REDIS_BIN, else on PATH, else /usr/bin/redis-server. */
export function redisBinary(env: NodeJS.ProcessEnv = process.env): string {
  if (env.REDIS_BIN) return env.REDIS_BIN;
  for (const dir of (env.PATH ?? '').split(':')) {
    const f = join(dir, 'redis-server');
    if (dir && existsSync(f)) return f;
  }
  if (existsSync('/usr/bin/redis-server')) return '/usr/bin/redis-server';
  throw new EngineUnavailable(
    'redis-server is not installed: run scripts/ensure-redis (Debian: apt-get install redis-server), or set REDIS_BIN',
  );
}

export interface EngineProcess {
  readonly pid: number;
  /** host:port it serves on. */
  readonly address: string;
  readonly process: ChildProcess;
  /** Its last output lines (stdout and stderr). */
  output(): string;
  stop(): Promise<void>;
  /** SIGSTOP / SIGCONT (drills: a hung service). */
  pause(): void;
  resume(): void;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Whether host:port accepts a TCP connection now. */
function accepts(at: HostPort): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: at.host, port: at.port });
    const done = (ok: boolean): void => {
      s.destroy();
      resolve(ok);
    };
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
    s.setTimeout(1000, () => done(false));
  });
}

function run(
  bin: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  at: HostPort,
  what: string,
  cleanup?: () => void,
): Promise<EngineProcess> {
  const child = spawn(bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const keep = (c: Buffer): void => {
    tail = (tail + c.toString('utf8')).slice(-8000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  const stop = async (): Promise<void> => {
    if (!exited) {
      child.kill('SIGCONT');
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exit;
      clearTimeout(killer);
    }
    cleanup?.();
  };
  const handle: EngineProcess = {
    pid: child.pid as number,
    address: `${at.host}:${at.port}`,
    process: child,
    output: () => tail,
    stop,
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
  };
  return (async () => {
    const until = Date.now() + 30_000;
    while (Date.now() < until) {
      if (exited) throw new Error(`${what} exited at start: ${tail.trim().split('\n').slice(-3).join(' | ')}`);
      if (await accepts(at)) return handle;
      await sleep(50);
    }
    await stop();
    throw new Error(
      `${what} did not listen on ${at.host}:${at.port} within 30 s: ${tail.trim().split('\n').slice(-3).join(' | ')}`,
    );
  })();
}

/** A redis-server of its own: no persistence, loopback only. */
export function startRedis(at: HostPort, env: NodeJS.ProcessEnv = process.env): Promise<EngineProcess> {
  return run(
    redisBinary(env),
    ['--port', String(at.port), '--bind', at.host, '--save', '', '--appendonly', 'no', '--protected-mode', 'no'],
    env,
    at,
    'redis-server',
  );
}

export interface RatelimitOptions {
  /** Where it serves gRPC (Envoy's filters, modelgate's token charges). */
  readonly grpc: HostPort;
  readonly redis: HostPort;
  readonly domain: string;
  readonly env?: NodeJS.ProcessEnv;
}

/**
 * envoyproxy/ratelimit on `grpc`, counting in `redis`; its HTTP and debug ports on free ports,
 * statistics off, logs at warn. Descriptors without a limit of their own count nothing.
 */
export async function startRatelimit(o: RatelimitOptions): Promise<EngineProcess> {
  const env = o.env ?? process.env;
  const root = mkdtempSync(join(tmpdir(), 'modelgate-ratelimit-'));
  mkdirSync(join(root, 'config'));
  writeFileSync(
    join(root, 'config', 'modelgate.yaml'),
    `# rendered by modelgate: descriptors carry their limits\ndomain: ${o.domain}\ndescriptors: []\n`,
  );
  const runEnv: NodeJS.ProcessEnv = {
    PATH: env.PATH,
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: `${o.redis.host}:${o.redis.port}`,
    GRPC_HOST: o.grpc.host,
    GRPC_PORT: String(o.grpc.port),
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    DEBUG_HOST: '127.0.0.1',
    DEBUG_PORT: String(await freePort()),
    RUNTIME_ROOT: root,
    RUNTIME_SUBDIRECTORY: '.',
    RUNTIME_APPDIRECTORY: 'config',
    RUNTIME_WATCH_ROOT: 'false',
    USE_STATSD: 'false',
    DISABLE_STATS: 'true',
    LOG_LEVEL: 'warn',
    // A bounded wait on Redis (connecting, reading, writing): an outage is an error that Envoy's
    // failure mode handles, not a stall. (This version refuses REDIS_POOL_ON_EMPTY_BEHAVIOR=ERROR.)
    REDIS_TIMEOUT: '1s',
  };
  return run(ratelimitBinary(env), [], runEnv, o.grpc, 'envoyproxy/ratelimit', () =>
    rmSync(root, { recursive: true, force: true }),
  );
}

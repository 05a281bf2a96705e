/**
 * Runs a real Envoy on a rendered bundle: spawns it, waits until its admin interface says LIVE,
 * finds the listener's real port (the bundle may ask for port 0), and stops it. Used by
 * `modelgate up`, the end-to-end tests and the benchmarks.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface EnvoyProcess {
  readonly pid: number;
  /** http://host:port of the public listener. */
  readonly listenerUrl: string;
  /** http://host:port of the admin interface (stats, clusters, config_dump). */
  readonly adminUrl: string;
  readonly process: ChildProcess;
  /** Resolves with the exit code when Envoy exits (for any reason). */
  readonly exited: Promise<number | null>;
  /** Stops Envoy (SIGTERM, then SIGKILL after graceMs) and removes its scratch files. */
  stop(graceMs?: number): Promise<void>;
}

export interface EnvoyStartOptions {
  readonly binary: string;
  /** The bootstrap, as YAML text. */
  readonly config: string;
  /** Envoy worker threads (default: Envoy's own, one per core). */
  readonly concurrency?: number;
  /** Envoy's log level (default warn). */
  readonly logLevel?: string;
  /** Where Envoy's stdout (the access log) and stderr go; default: dropped. */
  readonly onStdout?: (chunk: Buffer) => void;
  readonly onStderr?: (chunk: Buffer) => void;
  /** How long to wait for LIVE (default 30 s). */
  readonly readyTimeoutMs?: number;
  readonly extraArgs?: readonly string[];
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function getText(url: string): Promise<string | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return res.ok ? await res.text() : undefined;
  } catch {
    // not reachable (yet), or too slow: the caller polls again or gives up at its deadline
    return undefined;
  }
}

/** Starts Envoy and resolves once it is ready to take traffic; rejects with Envoy's own last words if it fails. */
export async function startEnvoy(opts: EnvoyStartOptions): Promise<EnvoyProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-envoy-'));
  const configFile = join(dir, 'envoy.yaml');
  const adminFile = join(dir, 'admin-address');
  // The bundle can hold the gRPC secret: only this user reads it (the folder is 0700 already).
  writeFileSync(configFile, opts.config, { mode: 0o600 });
  const args = [
    '-c',
    configFile,
    // Several Envoys on one machine (parallel test files, a demo beside a test run): no shared memory.
    '--disable-hot-restart',
    '--admin-address-path',
    adminFile,
    '-l',
    opts.logLevel ?? 'warn',
    ...(opts.concurrency ? ['--concurrency', String(opts.concurrency)] : []),
    ...(opts.extraArgs ?? []),
  ];
  const child = spawn(opts.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderrTail = '';
  child.stdout!.on('data', (c: Buffer) => opts.onStdout?.(c));
  child.stderr!.on('data', (c: Buffer) => {
    stderrTail = (stderrTail + c.toString('utf8')).slice(-4000);
    opts.onStderr?.(c);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let gone = false;
  void exited.then(() => (gone = true));

  const stop = async (graceMs = 5000): Promise<void> => {
    if (!gone) {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(killer);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + (opts.readyTimeoutMs ?? 30_000);
  let admin: string | undefined;
  while (Date.now() < deadline && !gone) {
    if (!admin) {
      try {
        const a = readFileSync(adminFile, 'utf8').trim();
        if (a) admin = `http://${a}`;
      } catch {
        /* not written yet */
      }
    }
    if (admin && (await getText(`${admin}/ready`))?.trim() === 'LIVE') {
      const listeners = JSON.parse((await getText(`${admin}/listeners?format=json`)) ?? '{}') as {
        listener_statuses?: Array<{ local_address?: { socket_address?: { address: string; port_value: number } } }>;
      };
      const sa = listeners.listener_statuses?.[0]?.local_address?.socket_address;
      if (sa) {
        const host =
          sa.address === '0.0.0.0'
            ? '127.0.0.1'
            : sa.address === '::'
              ? '[::1]'
              : sa.address.includes(':')
                ? `[${sa.address}]`
                : sa.address;
        return {
          pid: child.pid!,
          listenerUrl: `http://${host}:${sa.port_value}`,
          adminUrl: admin,
          process: child,
          exited,
          stop,
        };
      }
    }
    await sleep(50);
  }
  await stop(1000);
  const last =
    stderrTail
      .trim()
      .split('\n')
      .filter((l) => /critical|error/i.test(l))
      .pop() ??
    stderrTail.trim().split('\n').pop() ??
    '';
  throw new Error(
    gone
      ? `Envoy exited at start: ${last.replace(/^\[[^\]]*\]\[\d+\]\[\w+\]\[\w+\] \[[^\]]*\] /, '')}`
      : `Envoy was not ready within ${opts.readyTimeoutMs ?? 30_000} ms`,
  );
}

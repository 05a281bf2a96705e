/**
 * Child processes of the end-to-end benchmark: started pinned to a core list with taskset, their
 * own pids and their descendants' found from /proc (for CPU time and RSS), stopped with SIGTERM.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import * as net from 'node:net';

export interface Proc {
  readonly name: string;
  readonly pid: number;
  /** This process and all its descendants now alive (workers, LiteLLM's uvicorn children). */
  pids(): number[];
  stop(graceMs?: number): Promise<void>;
}

/** Every descendant of `pid` (children, grandchildren...), from /proc/PID/task/TID/children. */
export function descendants(pid: number): number[] {
  const out: number[] = [];
  const walk = (p: number): void => {
    let tids: string[] = [];
    try {
      tids = readdirSync(`/proc/${p}/task`);
    } catch {
      return;
    }
    for (const t of tids) {
      let kids: number[] = [];
      try {
        kids = readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
      } catch {
        /* gone */
      }
      for (const k of kids) {
        out.push(k);
        walk(k);
      }
    }
  };
  walk(pid);
  return out;
}

export interface SpawnOptions {
  readonly name: string;
  readonly cmd: string;
  readonly args: readonly string[];
  /** taskset CPU list ("0"); undefined: not pinned. */
  readonly cpus?: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** stdout and stderr go to this file (default: dropped). */
  readonly logFile?: string;
  /** Resolves when the process is ready (polls until true, or throws after timeoutMs). */
  readonly ready: (proc: Proc) => Promise<boolean>;
  readonly timeoutMs?: number;
}

/** Spawns a process (taskset-pinned when cpus is set) and waits until `ready` says so. */
export async function spawnPinned(o: SpawnOptions): Promise<Proc> {
  const fd = o.logFile ? openSync(o.logFile, 'w') : 'ignore';
  const [cmd, args] = o.cpus ? ['taskset', ['-c', o.cpus, o.cmd, ...o.args]] : [o.cmd, [...o.args]];
  const child: ChildProcess = spawn(cmd, args as string[], {
    cwd: o.cwd,
    env: o.env ?? process.env,
    stdio: ['ignore', fd, fd],
  });
  if (typeof fd === 'number') closeSync(fd);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  let gone = false;
  void exited.then(() => (gone = true));
  const proc: Proc = {
    name: o.name,
    pid: child.pid!,
    pids: () => [child.pid!, ...descendants(child.pid!)],
    stop: async (graceMs = 8000) => {
      if (gone) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => {
        for (const p of proc.pids()) {
          try {
            process.kill(p, 'SIGKILL');
          } catch {
            /* gone */
          }
        }
      }, graceMs);
      await exited;
      clearTimeout(t);
    },
  };
  const deadline = Date.now() + (o.timeoutMs ?? 30_000);
  while (Date.now() < deadline) {
    if (gone) throw new Error(`${o.name} exited at start${o.logFile ? ` (see ${o.logFile})` : ''}`);
    if (await o.ready(proc).catch(() => false)) return proc;
    await new Promise((r) => setTimeout(r, 100));
  }
  await proc.stop(1000);
  throw new Error(
    `${o.name} not ready after ${(o.timeoutMs ?? 30_000) / 1000} s${o.logFile ? ` (see ${o.logFile})` : ''}`,
  );
}

/** true once something accepts TCP connections on the port. */
export function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

/** HTTP GET status (0 when nothing answers). */
export async function httpStatus(url: string): Promise<number> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(2000) })).status;
  } catch {
    return 0;
  }
}

/** Sets the CPU affinity of processes and all their threads (`taskset -a -p`). */
export async function pin(pids: readonly number[], cpus: string): Promise<void> {
  for (const pid of pids) {
    await new Promise<void>((resolve) => {
      const c = spawn('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
      c.on('close', () => resolve());
    });
  }
}

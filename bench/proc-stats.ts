/** Reads what the kernel knows about a process and the machine (Linux /proc). */
import { readFileSync } from 'node:fs';

/** Resident set size of a process in bytes (VmRSS in /proc/PID/status). */
export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

/** CPU time (user + system) a process has used, in seconds. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[11], fields[12] are utime, stime (fields 14 and 15 of proc(5), counted from `state`).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Busy and total CPU time of the whole machine so far, in seconds (from /proc/stat). */
export function machineCpu(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = v[3] + (v[4] ?? 0);
  const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: (total - idle) / 100, total: total / 100 };
}

/** The machine facts RESULTS.md starts with. */
export function machineInfo(): { nproc: number; cpuModel: string; node: string } {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  const models = [...cpuinfo.matchAll(/^model name\s*:\s*(.*)$/gm)].map((m) => m[1]);
  return { nproc: models.length || 1, cpuModel: models[0] ?? 'unknown', node: process.version };
}

/** user + nice + system CPU seconds spent so far on one core (from /proc/stat `cpuN`). */
export function coreBusySeconds(core: number): number {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`cpu${core} `));
  if (!line) return Number.NaN;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  return (v[0] + v[1] + v[2]) / 100;
}

/** Pids of a process's direct children (for `--workers N`, where the primary forks). */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** CPU seconds of this process's reaped children (cutime + cstime): load generators that have exited. */
export function reapedChildrenCpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[13], fields[14] are cutime, cstime (fields 16 and 17 of proc(5)).
  return (Number(fields[13]) + Number(fields[14])) / 100;
}

/** CPU seconds used by this process itself. */
export function ownCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/**
 * Waits (up to `maxWaitS`) until the machine's busy CPU over one second, minus `ownPids`' CPU, is
 * below `maxCores` cores: other sessions' builds and tests on a shared machine skew a run.
 * Resolves with the last measured foreign load (in cores).
 */
export async function waitForQuiet(ownPids: readonly number[], maxCores = 0.15, maxWaitS = 90): Promise<number> {
  const deadline = Date.now() + maxWaitS * 1000;
  const ours = () => ownPids.reduce((a, p) => a + safeCpu(p), 0) + ownCpuSeconds();
  let load = Number.POSITIVE_INFINITY;
  while (Date.now() < deadline) {
    const m0 = machineCpu().busy;
    const o0 = ours();
    await new Promise((r) => setTimeout(r, 1000));
    load = machineCpu().busy - m0 - (ours() - o0);
    if (load < maxCores) break;
  }
  return load;
}

function safeCpu(pid: number): number {
  try {
    return cpuSeconds(pid);
  } catch {
    return 0;
  }
}

/** CPU seconds of a process and its direct children (a `--workers N` primary and its workers). */
export function treeCpuSeconds(pid: number): number {
  return [pid, ...childPids(pid)].reduce((a, p) => a + safeCpu(p), 0);
}

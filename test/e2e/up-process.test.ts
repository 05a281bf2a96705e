/**
 * `modelgate up` (what `npm start` runs) never outlives what started it: stopped with SIGTERM it
 * stops Envoy and the demo upstream; and when its parent dies without passing a signal on (npm
 * killed with SIGKILL, a supervisor that signals only its own child) it stops all three too, so no
 * Envoy is left holding the ports.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { freePort } from '../../src/server/global-engine';
import { describeE2E } from '../support/gateway';
import { waitFor } from '../support/meter-cases';

const ROOT = join(__dirname, '..', '..');
const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const pids = (args: string[]): number[] => spawnSync('pgrep', args, { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);

/** `modelgate up` processes of this run (their command line holds its config directory), and their children (Envoy). */
function processesWith(marker: string): number[] {
  const ups = pids(['-f', `main.js up --config ${marker}`]).filter((pid) => pid !== process.pid);
  return [...ups, ...ups.flatMap((pid) => pids(['-P', String(pid)]))];
}

/** Whether a process is alive. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}


/** The demo config on free ports, in a directory of its own (its path marks this run's processes). */
async function demoOnFreePorts(): Promise<{ dir: string; config: string; listen: number; upstream: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-up-'));
  dirs.push(dir);
  const [listen, admin, grpc, http, upstream] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  const text = readFileSync(join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8')
    .replace('0.0.0.0:10000', `127.0.0.1:${listen}`).replace('127.0.0.1:9901', `127.0.0.1:${admin}`)
    .replace('127.0.0.1:9191', `127.0.0.1:${grpc}`).replace('127.0.0.1:9192', `127.0.0.1:${http}`)
    .replaceAll('http://127.0.0.1:9300', `http://127.0.0.1:${upstream}`)
    .replace(/stateFile: [^\n]*/, '');
  const config = join(dir, 'modelgate.yaml');
  writeFileSync(config, text);
  return { dir, config, listen, upstream };
}

async function answering(port: number): Promise<boolean> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/v1/models`)).status === 401;
  } catch {
    return false;
  }
}

describeE2E('modelgate up, as npm start runs it', () => {
  it('stops Envoy and the demo upstream when its parent dies without passing a signal on (SIGKILL)', async () => {
    const { dir, config, listen, upstream } = await demoOnFreePorts();
    // A parent that forks `up` (`; true` keeps sh from exec-ing it), as npm's shell did.
    const parent: ChildProcess = spawn('sh', ['-c', `"${process.execPath}" "${CLI}" up --config "${config}" --demo-upstream 127.0.0.1:${upstream}; true`], { cwd: ROOT, stdio: 'ignore' });
    try {
      await waitFor('the gateway to answer', () => answering(listen), 60_000);
      const running = processesWith(dir);
      expect(running.length).toBeGreaterThanOrEqual(2); // modelgate up, and Envoy its child
      parent.kill('SIGKILL');
      await waitFor('modelgate and Envoy to stop', () => running.every((pid) => !alive(pid)), 30_000);
      expect(await answering(listen)).toBe(false);
    } finally {
      for (const pid of processesWith(dir)) process.kill(pid, 'SIGKILL');
    }
  }, 120_000);

  it('stops all three on SIGTERM (npm start runs it with exec, so npm\'s SIGTERM reaches it)', async () => {
    const { dir, config, listen, upstream } = await demoOnFreePorts();
    const up = spawn(process.execPath, [CLI, 'up', '--config', config, '--demo-upstream', `127.0.0.1:${upstream}`], { cwd: ROOT, stdio: 'ignore' });
    try {
      await waitFor('the gateway to answer', () => answering(listen), 60_000);
      const running = processesWith(dir);
      expect(running.length).toBeGreaterThanOrEqual(2);
      const exited = new Promise<number | null>((resolve) => up.once('exit', (code) => resolve(code)));
      up.kill('SIGTERM');
      expect(await exited).toBe(0);
      await waitFor('Envoy to stop', () => running.every((pid) => !alive(pid)), 30_000);
    } finally {
      for (const pid of processesWith(dir)) process.kill(pid, 'SIGKILL');
    }
    expect(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.start).toMatch(/&& exec node dist\/src\/cli\/main\.js up /);
  }, 120_000);

  it('stops all three on a SIGTERM that comes while it starts (as soon as Envoy is spawned): exit 0, no Envoy left', async () => {
    const { dir, config, upstream } = await demoOnFreePorts();
    const up = spawn(process.execPath, [CLI, 'up', '--config', config, '--demo-upstream', `127.0.0.1:${upstream}`], { cwd: ROOT, stdio: 'ignore' });
    const exited = new Promise<number | null>((resolve) => up.once('exit', (code) => resolve(code)));
    let envoy: number[] = [];
    try {
      await waitFor('Envoy to be spawned', () => (envoy = pids(['-P', String(up.pid)])).length > 0, 60_000);
      up.kill('SIGTERM');
      expect(await exited).toBe(0);
      await waitFor('Envoy to stop', () => envoy.every((pid) => !alive(pid)), 30_000);
    } finally {
      for (const pid of [...processesWith(dir), ...envoy]) if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
  }, 120_000);
});

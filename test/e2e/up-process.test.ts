/**
 * `modelgate up` (what `npm start` runs) never outlives what started it: stopped with SIGTERM it
 * stops Envoy and the demo upstream; and when its parent dies without passing a signal on (npm
 * killed with SIGKILL, a supervisor that signals only its own child) it stops all three too, so no
 * Envoy is left holding the ports.
 * Its gRPC port takes only its own Envoy: with a config that sets no gRPC authentication, `up`
 * makes a secret for the install (a 0600 file beside the config) that its bundle sends and
 * modelgate requires, so a forged meter stream or Check from another local process is refused,
 * while the demo works end to end; `explain --config` and `usage --config` find that port, secret
 * and state file from the config alone.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { statSync } from 'node:fs';
import { afterAll, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main';
import { installSecretPath } from '../../src/config/grpc-auth';
import { GRPC_SECRET } from '../../src/config/schema';
import { freePort } from '../../src/server/free-port';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E } from '../support/gateway';
import { check, forgedMeterStream, metadata } from '../support/grpc-clients';
import { waitFor } from '../support/meter-cases';

const ROOT = join(__dirname, '..', '..');
const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const pids = (args: string[]): number[] =>
  spawnSync('pgrep', args, { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);

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
async function demoOnFreePorts(): Promise<{
  dir: string;
  config: string;
  listen: number;
  upstream: number;
  grpc: number;
}> {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-up-'));
  dirs.push(dir);
  const [listen, admin, grpc, http, upstream] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    freePort(),
    freePort(),
  ]);
  const text = readFileSync(join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8')
    .replace('0.0.0.0:10000', `127.0.0.1:${listen}`)
    .replace('127.0.0.1:9901', `127.0.0.1:${admin}`)
    .replace('127.0.0.1:9191', `127.0.0.1:${grpc}`)
    .replace('127.0.0.1:9192', `127.0.0.1:${http}`)
    .replaceAll('http://127.0.0.1:9300', `http://127.0.0.1:${upstream}`)
    .replace(/stateFile: [^\n]*/, '');
  const config = join(dir, 'modelgate.yaml');
  writeFileSync(config, text.replace(/^meter:\n/m, 'meter:\n  stateFile: spent/ledger.json\n'));
  mkdirSync(join(dir, 'spent'));
  return { dir, config, listen, upstream, grpc };
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
    const parent: ChildProcess = spawn(
      'sh',
      ['-c', `"${process.execPath}" "${CLI}" up --config "${config}" --demo-upstream 127.0.0.1:${upstream}; true`],
      { cwd: ROOT, stdio: 'ignore' },
    );
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

  it("stops all three on SIGTERM (npm start runs it with exec, so npm's SIGTERM reaches it)", async () => {
    const { dir, config, listen, upstream } = await demoOnFreePorts();
    const up = spawn(process.execPath, [CLI, 'up', '--config', config, '--demo-upstream', `127.0.0.1:${upstream}`], {
      cwd: ROOT,
      stdio: 'ignore',
    });
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
    expect(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.start).toMatch(
      /&& exec node dist\/src\/cli\/main\.js up /,
    );
  }, 120_000);

  it('stops all three on a SIGTERM that comes while it starts (as soon as Envoy is spawned): exit 0, no Envoy left', async () => {
    const { dir, config, upstream } = await demoOnFreePorts();
    const up = spawn(process.execPath, [CLI, 'up', '--config', config, '--demo-upstream', `127.0.0.1:${upstream}`], {
      cwd: ROOT,
      stdio: 'ignore',
    });
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

  it("refuses a forged meter stream and Check without the install's secret on up's port; the demo works, and explain/usage --config find port, secret and state", async () => {
    const { dir, config, listen, upstream, grpc: grpcPort } = await demoOnFreePorts();
    let out = '';
    const up = spawn(process.execPath, [CLI, 'up', '--config', config, '--demo-upstream', `127.0.0.1:${upstream}`], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    up.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    up.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    try {
      await waitFor('the gateway to answer', () => answering(listen), 60_000);
      const secretFile = installSecretPath(config);
      expect(secretFile).toBe(join(dir, 'modelgate.grpc-secret'));
      expect(statSync(secretFile).mode & 0o777).toBe(0o600);
      const secret = readFileSync(secretFile, 'utf8').trim();
      expect(secret).toMatch(GRPC_SECRET);
      const port = `127.0.0.1:${grpcPort}`;
      const CHAT = {
        method: 'POST',
        path: '/v1/chat/completions',
        headers: [
          ['authorization', `Bearer ${DEMO_KEYS.alice}`],
          ['content-type', 'application/json'],
        ] as [string, string][],
        body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}',
      };
      // Another local process, without the secret or with a wrong one: no stream, no decision.
      expect((await forgedMeterStream(port, metadata(), 'forged-up-1')).code).toBe(grpc.status.UNAUTHENTICATED);
      expect(
        (await forgedMeterStream(port, metadata('Bearer not-the-secret-of-this-install-0123456789'), 'forged-up-2'))
          .code,
      ).toBe(grpc.status.UNAUTHENTICATED);
      const forgedCheck = await check(port, grpc.credentials.createInsecure(), CHAT);
      expect(
        forgedCheck.denied_response?.headers?.find((h) => h.header?.key === 'x-modelgate-reason')?.header?.value,
      ).toBe('authz_unauthenticated');
      // The demo through Envoy, which sends the secret: served and metered.
      const res = await fetch(`http://127.0.0.1:${listen}/v1/chat/completions`, {
        method: 'POST',
        headers: Object.fromEntries(CHAT.headers),
        body: CHAT.body,
      });
      expect(res.status).toBe(200);
      // explain --config: the config's gRPC address (not 127.0.0.1:9191) and the install's secret.
      let stdout = '';
      let stderr = '';
      const io = { stdout: (t: string) => void (stdout += t), stderr: (t: string) => void (stderr += t), env: {} };
      expect(
        await runCli(
          [
            'explain',
            '--config',
            config,
            '-H',
            `Authorization: Bearer ${DEMO_KEYS.alice}`,
            '-H',
            'content-type: application/json',
            'POST',
            '/v1/chat/completions',
            CHAT.body,
          ],
          io,
        ),
      ).toBe(0);
      expect(stdout).toContain('POST /v1/chat/completions -> ALLOW');
      // usage --config: the config's meter.stateFile (spent/ledger.json), written by the meter.
      await waitFor(
        'the ledger to be written',
        () => {
          try {
            return readFileSync(join(dir, 'spent', 'ledger.json'), 'utf8').includes('alice');
          } catch {
            return false;
          }
        },
        30_000,
      );
      stdout = '';
      expect(await runCli(['usage', '--config', config, '--key', 'alice'], io)).toBe(0);
      expect(stdout).toMatch(/alice\s+\S+\s+gpt-4o-mini\s+chat/);
      expect(stdout).toContain('1 response:');
      expect(stderr).toBe('');
      // Neither the forged streams nor the secret reached the logs.
      expect(out).not.toContain(secret);
      expect(out).not.toContain('forged-up-');
      expect(out).toContain(`gRPC secret  ${secretFile}`);
    } finally {
      up.kill('SIGTERM');
      for (const pid of processesWith(dir)) if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
  }, 120_000);
});

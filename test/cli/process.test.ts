/**
 * The real `modelgate` command as a process (the compiled CLI that `npm start` runs): it serves,
 * answers `explain`, and stops cleanly on SIGTERM (test/server/drain.test.ts shows the drain itself).
 * `npm test` builds dist/ before running the tests.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { hashKey } from '../../src/contract/key-format';
import { PINNED_ENVOY } from '../../src/envoy/ensure';
import { DEMO_KEYS } from '../support/demo-keys';
import { tempConfig } from '../support/service-harness';

const CLI = join(__dirname, '..', '..', 'dist', 'src', 'cli', 'main.js');
/** What `npx modelgate` and a linked `modelgate` run. */
const BIN = join(__dirname, '..', '..', 'bin', 'modelgate.js');
let proc: ChildProcessWithoutNullStreams;
let grpcAddress = '';
let stdout = '';

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error('dist/src/cli/main.js is missing: run `npm run build` (npm test does it)');
  proc = spawn(process.execPath, [
    CLI,
    'serve',
    '--config',
    tempConfig(),
    '--grpc',
    '127.0.0.1:0',
    '--http',
    '127.0.0.1:0',
  ]);
  await new Promise<void>((resolve, reject) => {
    proc.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const m = /"grpcAddress":"([^"]+)"/.exec(stdout);
      if (m && !grpcAddress) {
        grpcAddress = m[1];
        resolve();
      }
    });
    proc.once('exit', (code) => reject(new Error(`modelgate exited early (${code}): ${stdout}`)));
  });
});
afterAll(() => {
  if (proc.exitCode === null) proc.kill('SIGKILL');
});

test('explain prints the decision for a hand-built request, and never the key', () => {
  const r = spawnSync(
    process.execPath,
    [
      CLI,
      'explain',
      '--addr',
      grpcAddress,
      '-H',
      `Authorization: Bearer ${DEMO_KEYS.alice}`,
      'POST',
      '/v1/chat/completions',
      '{"messages":[],"model":"gpt-4o"}',
    ],
    { encoding: 'utf8' },
  );
  expect(r.status).toBe(0);
  expect(r.stdout).toContain('DENY 403 model_not_in_group');
  expect(r.stdout).toContain('hint: the key\'s group "basic" does not include model "gpt-4o"');
  expect(r.stdout + r.stderr).not.toContain(DEMO_KEYS.alice);
  const ok = spawnSync(
    process.execPath,
    [
      CLI,
      'explain',
      '--addr',
      grpcAddress,
      '-H',
      `x-goog-api-key: ${DEMO_KEYS.alice}`,
      'POST',
      '/v1beta/models/gemini-2.5-flash:generateContent',
      '{}',
    ],
    { encoding: 'utf8' },
  );
  expect(ok.stdout).toContain('-> ALLOW');
  expect(ok.stdout).toContain('x-modelgate-model: gemini-2.5-flash');
});

test('explain says clearly when nothing listens', () => {
  const r = spawnSync(process.execPath, [CLI, 'explain', '--addr', '127.0.0.1:1', 'GET', '/v1/models'], {
    encoding: 'utf8',
  });
  expect(r.status).toBe(1);
  expect(r.stderr).toMatch(/^modelgate: 127\.0\.0\.1:1: Check failed/);
});

test('envoy-check accepts the bundled Envoy config with the pinned Envoy and names a misspelled enum', () => {
  const ok = spawnSync(process.execPath, [CLI, 'envoy-check', join(__dirname, '..', '..', 'envoy', 'envoy.yaml')], {
    encoding: 'utf8',
  });
  expect(ok.status, ok.stderr).toBe(0);
  expect(ok.stdout).toContain(`valid for Envoy ${PINNED_ENVOY} (envoy --mode validate)`);
  const broken = tempConfig(
    readFileSync(join(__dirname, '..', '..', 'envoy', 'envoy.yaml'), 'utf8').replace(
      'transport_api_version: V3',
      'transport_api_version: V4',
    ),
  );
  const bad = spawnSync(process.execPath, [CLI, 'envoy-check', broken], { encoding: 'utf8' });
  expect(bad.status).toBe(1);
  expect(bad.stderr).toMatch(/refuses it: .*unknown enum value: 'V4'/);
});

test('keys new --yaml without a store prints the key once and the YAML stanza with its hash', () => {
  const r = spawnSync(process.execPath, [CLI, 'keys', 'new', '--group', 'basic', '--id', 'zoe', '--yaml'], {
    encoding: 'utf8',
    env: { ...process.env, DATABASE_URL: '', MODELGATE_STORE: '' },
  });
  expect(r.status).toBe(0);
  const key = /sk-mg-[A-Za-z0-9]{40}/.exec(r.stdout)![0];
  expect(r.stdout.split(key).length).toBe(2);
  expect(r.stdout).toContain(`sha256: ${hashKey(key)}`);
  expect(r.stdout).toContain('group: basic');
});

test('bin/modelgate.js (npx modelgate) answers --version and --help, and ends a usage error with exit code 2', () => {
  const { version } = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
    version: string;
  };
  expect(spawnSync(process.execPath, [BIN, '--version'], { encoding: 'utf8' })).toMatchObject({
    status: 0,
    stdout: `${version}\n`,
    stderr: '',
  });
  const help = spawnSync(process.execPath, [BIN, 'envoy-check', '--help'], { encoding: 'utf8' });
  expect(help).toMatchObject({ status: 0, stderr: '' });
  expect(help.stdout).toMatch(/^Usage: modelgate envoy-check \[options\] \[file\]\n/);
  expect(spawnSync(process.execPath, [BIN, 'serve', '--workers', '0'], { encoding: 'utf8' })).toMatchObject({
    status: 2,
    stdout: '',
    stderr: "modelgate: --workers must be an integer from 1 to 64 (see 'modelgate serve --help')\n",
  });
  // The demo config meters on the file store: balances in one process's memory, so no workers.
  const workers = spawnSync(
    process.execPath,
    [
      BIN,
      'serve',
      '--workers',
      '2',
      '--config',
      join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'),
      '--store',
      'file',
    ],
    { encoding: 'utf8', timeout: 30_000 },
  );
  expect(workers).toMatchObject({ status: 2, stdout: '' });
  expect(workers.stderr).toMatch(
    /^modelgate: --workers 2 with the meter on the file store: each worker would keep its own balances, so a key could spend 2 times its balance; run one process \(no --workers\), or keep balances on PostgreSQL/,
  );
});

test('SIGTERM stops the process cleanly: exit code 0 and a final log line', async () => {
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  proc.kill('SIGTERM');
  expect(await exited).toBe(0);
  expect(stdout).toContain('"msg":"draining: health NOT_SERVING, answering in-flight checks"');
  expect(stdout).toContain('"msg":"modelgate stopped"');
});

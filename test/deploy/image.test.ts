/**
 * The image (docs/kubernetes.md#the-image): scripts/build-image makes modelgate's OCI image from
 * Debian's packages (mmdebstrap), npm's node binary and the packed tarball's production install, and
 * runc runs it as a pod would: its own user (uid 1000), a read-only root file system, the config
 * mounted read-only, the state directory a volume, node as PID 1. It answers health and a Check and
 * drains on SIGTERM with exit 0. The image's network namespace is dropped so the test reaches it on
 * loopback (ports 0: modelgate logs the ones it bound). Needs root (runc, the image's uid 1000 files);
 * scripts/ensure-image-tools installs the tools.
 */
import { execFileSync, spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { check, health } from '../support/grpc-clients';

const ROOT = join(__dirname, '..', '..');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/** Why the image cannot be built and run here (thrown in CI), or undefined. */
function missing(): string | undefined {
  if (process.getuid?.() !== 0) return 'runc and the image build need root';
  const tools = spawnSync(join(ROOT, 'scripts', 'ensure-image-tools'), { encoding: 'utf8' });
  if (tools.status !== 0) return `${tools.stderr.trim()} (scripts/ensure-image-tools)`;
  return undefined;
}
const why = missing();
if (why && process.env.CI) throw new Error(`the image test cannot run: ${why}`);
const describeImage = why ? describe.skip : describe;
if (why) console.log(`skipping the image test: ${why}`);

interface ImageConfig {
  config: {
    User: string;
    Entrypoint: string[];
    Cmd: string[];
    Env: string[];
    StopSignal?: string;
    Volumes?: Record<string, object>;
    ExposedPorts?: Record<string, object>;
  };
}

describeImage('the OCI image built from Debian packages, run by runc', () => {
  let dir = '';
  let layout = '';
  let container = '';
  let proc: ChildProcessWithoutNullStreams | undefined;
  let out = '';
  let grpcAddress = '';
  let httpAddress = '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'modelgate-image-'));
    layout = join(dir, 'layout');
    execFileSync(join(ROOT, 'scripts', 'build-image'), ['--from-dist', layout], {
      cwd: ROOT,
      stdio: 'pipe',
      timeout: 1_500_000,
    });
    const bundle = join(dir, 'bundle');
    execFileSync('umoci', ['unpack', '--image', `${layout}:${VERSION}`, bundle], { stdio: 'pipe' });
    // The demo config with a short meter drain (the allowed Check below has no report to wait for).
    const configFile = join(dir, 'modelgate.yaml');
    writeFileSync(
      configFile,
      readFileSync(join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8').replace(
        /^  drainSeconds: 25 /m,
        '  drainSeconds: 1 ',
      ),
    );
    const state = join(dir, 'state');
    mkdirSync(state);
    chownSync(state, 1000, 1000);
    const specFile = join(bundle, 'config.json');
    const spec = JSON.parse(readFileSync(specFile, 'utf8')) as {
      root: { readonly?: boolean };
      process: { env: string[]; terminal: boolean };
      linux: { namespaces: { type: string }[] };
      mounts: { destination: string; type: string; source: string; options: string[] }[];
    };
    spec.root.readonly = true;
    spec.process.terminal = false;
    spec.process.env = [
      ...spec.process.env.filter((e) => !/^MODELGATE_(GRPC|HTTP)_ADDR=/.test(e)),
      'MODELGATE_GRPC_ADDR=127.0.0.1:0',
      'MODELGATE_HTTP_ADDR=127.0.0.1:0',
    ];
    spec.linux.namespaces = spec.linux.namespaces.filter((n) => n.type !== 'network');
    spec.mounts.push({
      destination: '/etc/modelgate/modelgate.yaml',
      type: 'bind',
      source: configFile,
      options: ['rbind', 'ro'],
    });
    spec.mounts.push({ destination: '/var/lib/modelgate', type: 'bind', source: state, options: ['rbind', 'rw'] });
    writeFileSync(specFile, JSON.stringify(spec));
    container = `modelgate-test-${process.pid}`;
    proc = spawn('runc', ['run', '--bundle', bundle, container]);
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
      proc!.once('exit', (code) => reject(new Error(`the image's modelgate exited early (${code}): ${out}`)));
    });
  }, 1_800_000);

  afterAll(() => {
    if (container) spawnSync('runc', ['delete', '--force', container]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("the image's config is the Dockerfile's: uid 1000, node as PID 1 running modelgate serve, SIGTERM, the state volume", () => {
    const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as {
      manifests: { digest: string; annotations: Record<string, string> }[];
    };
    expect(index.manifests.map((m) => m.annotations['org.opencontainers.image.ref.name'])).toEqual([VERSION]);
    const blob = (digest: string): string => readFileSync(join(layout, 'blobs', ...digest.split(':')), 'utf8');
    const manifest = JSON.parse(blob(index.manifests[0].digest)) as { config: { digest: string }; layers: unknown[] };
    const { config } = JSON.parse(blob(manifest.config.digest)) as ImageConfig;
    expect(config.User).toBe('1000:1000');
    expect(config.Entrypoint).toEqual(['node', '/opt/modelgate/node_modules/modelgate/bin/modelgate.js']);
    expect(config.Cmd).toEqual(['serve']);
    expect(config.StopSignal).toBe('SIGTERM');
    expect(Object.keys(config.Volumes ?? {})).toEqual(['/var/lib/modelgate']);
    expect(Object.keys(config.ExposedPorts ?? {}).sort()).toEqual(['9191/tcp', '9192/tcp']);
    expect(config.Env).toContain('MODELGATE_CONFIG=/etc/modelgate/modelgate.yaml');
    expect(manifest.layers).toHaveLength(1);
  });

  test('it answers /healthz, /readyz, gRPC health and a Check, as uid 1000 on a read-only root, node as PID 1', async () => {
    expect((await fetch(`http://${httpAddress}/healthz`)).status).toBe(200);
    expect((await fetch(`http://${httpAddress}/readyz`)).status).toBe(200);
    const creds = grpc.credentials.createInsecure();
    expect(await health(grpcAddress, creds)).toBe('SERVING');
    const headers: [string, string][] = [
      ['authorization', `Bearer ${DEMO_KEYS.alice}`],
      ['content-type', 'application/json'],
    ];
    const allowed = await check(grpcAddress, creds, {
      method: 'POST',
      path: '/v1/chat/completions',
      headers,
      body: '{"model":"gpt-4o-mini","messages":[]}',
    });
    expect(allowed.status?.code ?? 0).toBe(0);
    const denied = await check(grpcAddress, creds, {
      method: 'POST',
      path: '/v1/chat/completions',
      headers,
      body: '{"model":"gpt-4o","messages":[]}',
    });
    expect(denied.denied_response?.headers?.map((h) => h.header?.value)).toContain('model_not_in_group');
    const exec = (...args: string[]) => spawnSync('runc', ['exec', container, ...args], { encoding: 'utf8' });
    expect(exec('id', '-u').stdout.trim()).toBe('1000');
    expect(exec('cat', '/proc/1/cmdline').stdout.split('\0')[0]).toBe('node');
    const write = exec('touch', '/opt/modelgate/written');
    expect(write.status).not.toBe(0);
    expect(write.stderr).toMatch(/Read-only file system/);
    expect(exec('touch', '/var/lib/modelgate/written').status).toBe(0);
    expect(out).not.toContain(DEMO_KEYS.alice);
  });

  test('SIGTERM to the container drains modelgate, which exits 0', async () => {
    const exited = new Promise<number | null>((resolve) => proc!.once('exit', resolve));
    execFileSync('runc', ['kill', container, 'TERM']);
    expect(await exited).toBe(0);
    expect(out).toContain('"signal":"SIGTERM"');
  }, 60_000);
});

/**
 * Every command that takes --config reads what it needs of that config: `explain` its gRPC address
 * (gateway.authz, default server.grpc) and secret (grpc.secret, else the install secret `up` made),
 * `usage` its meter.stateFile and its `store:`. And the install secret itself: made once, 0600, reused,
 * replaced when others could read it.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { portOfConfig } from '../../src/cli/explain';
import { runCli } from '../../src/cli/main';
import { usageSource } from '../../src/cli/usage';
import {
  configSetsGrpcAuth,
  ensureInstallSecret,
  installSecretPath,
  readInstallSecret,
} from '../../src/config/grpc-auth';
import { parseConfig } from '../../src/config/load';
import { GRPC_SECRET } from '../../src/config/schema';
import { FileMeter } from '../../src/store/file-meter';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A config file in a fresh directory. */
function configFile(yaml: string): { dir: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-cfg-'));
  dirs.push(dir);
  const path = join(dir, 'gw.yaml');
  writeFileSync(path, yaml);
  return { dir, path };
}

async function cli(
  argv: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, { stdout: (s) => void (stdout += s), stderr: (s) => void (stderr += s), env });
  return { code, stdout, stderr };
}

describe("the install's gRPC secret (modelgate up)", () => {
  it('is made once beside the config, mode 0600, and reused', () => {
    const { dir, path } = configFile('{}\n');
    expect(installSecretPath(path)).toBe(join(dir, 'gw.grpc-secret'));
    expect(readInstallSecret(path)).toBeUndefined();
    const first = ensureInstallSecret(path);
    expect(first).toMatch(GRPC_SECRET);
    expect(statSync(installSecretPath(path)).mode & 0o777).toBe(0o600);
    expect(ensureInstallSecret(path)).toBe(first);
    expect(readInstallSecret(path)).toBe(first);
  });

  it('is replaced when its file is readable by others (it may be known) or holds no valid secret', () => {
    const { path } = configFile('{}\n');
    const first = ensureInstallSecret(path);
    chmodSync(installSecretPath(path), 0o644);
    expect(readInstallSecret(path)).toBeUndefined();
    const second = ensureInstallSecret(path);
    expect(second).not.toBe(first);
    expect(statSync(installSecretPath(path)).mode & 0o777).toBe(0o600);
    writeFileSync(installSecretPath(path), 'short\n', { mode: 0o600 });
    const third = ensureInstallSecret(path);
    expect(third).toMatch(GRPC_SECRET);
    expect(readFileSync(installSecretPath(path), 'utf8')).toBe(`${third}\n`);
  });

  it('is not used when the config sets grpc.secret or grpc.tls', () => {
    expect(configSetsGrpcAuth(parseConfig('{}\n', {}))).toBe(false);
    expect(configSetsGrpcAuth(parseConfig('grpc:\n  secret: { env: S }\n', {}))).toBe(true);
  });
});

describe('explain --config', () => {
  it("reaches the config's gRPC address (server.grpc, or gateway.authz) with its secret, else the install secret", () => {
    const a = configFile('server:\n  grpc: 127.0.0.1:45123\n');
    expect(portOfConfig(a.path, {})).toEqual({
      address: '127.0.0.1:45123',
      auth: { secret: undefined, tls: undefined },
    });
    const secret = ensureInstallSecret(a.path);
    expect(portOfConfig(a.path, {}).auth.secret).toBe(secret);
    const b = configFile('server:\n  grpc: 0.0.0.0:45124\ngrpc:\n  secret: { env: MG_TEST_SECRET }\n');
    ensureInstallSecret(b.path);
    const own = 'x'.repeat(40);
    expect(portOfConfig(b.path, { MG_TEST_SECRET: own })).toEqual({
      address: '127.0.0.1:45124',
      auth: { secret: own, tls: undefined },
    });
    const c = configFile('server:\n  grpc: 0.0.0.0:45125\ngateway:\n  authz: 10.1.2.3:45126\n');
    expect(portOfConfig(c.path, {}).address).toBe('10.1.2.3:45126');
    expect(portOfConfig(undefined, {})).toEqual({ auth: {} });
  });

  it('connects to the config address, not 127.0.0.1:9191 (the failure names it); --addr and $MODELGATE_GRPC_ADDR still win', async () => {
    const { path } = configFile('server:\n  grpc: 127.0.0.1:1\n');
    const r = await cli(['explain', '--config', path, 'GET', '/v1/models']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^modelgate: 127\.0\.0\.1:1: Check failed/);
    expect((await cli(['explain', 'GET', '/v1/models'], { MODELGATE_CONFIG: path })).stderr).toMatch(
      /^modelgate: 127\.0\.0\.1:1: /,
    );
    expect((await cli(['explain', '--config', path, '--addr', '127.0.0.1:2', 'GET', '/v1/models'])).stderr).toMatch(
      /^modelgate: 127\.0\.0\.1:2: /,
    );
    expect(
      (await cli(['explain', '--config', path, 'GET', '/v1/models'], { MODELGATE_GRPC_ADDR: '127.0.0.1:3' })).stderr,
    ).toMatch(/^modelgate: 127\.0\.0\.1:3: /);
  });
});

describe('usage --config', () => {
  it("reads the config's meter.stateFile (relative to the config), else <config>.state.json", () => {
    const a = configFile('meter:\n  stateFile: data/spent.json\n');
    expect(usageSource(a.path, {})).toEqual({ store: { mode: 'file' }, statePath: join(a.dir, 'data', 'spent.json') });
    const b = configFile('{}\n');
    expect(usageSource(undefined, { MODELGATE_CONFIG: b.path }).statePath).toBe(join(b.dir, 'gw.state.json'));
  });

  it("reads the config's postgres store: after --store, MODELGATE_STORE and DATABASE_URL", () => {
    const { path } = configFile('store: postgres://u:pw@127.0.0.1:1/db\n');
    expect(usageSource(path, {}).store).toEqual({
      mode: 'postgres',
      url: 'postgres://u:pw@127.0.0.1:1/db',
      source: `store: in ${path}`,
    });
  });

  it('shows the rows of the state file the config names, and refuses a config that does not load', async () => {
    const { dir, path } = configFile('meter:\n  stateFile: elsewhere.json\n');
    expect(await cli(['usage', '--config', path])).toEqual({ code: 0, stdout: 'No usage.\n', stderr: '' });
    // What the file meter writes there, through the file meter itself.
    const meter = new FileMeter(() => null, { path: join(dir, 'elsewhere.json'), onSpent: () => {} });
    meter.debitNow({
      requestId: 'r1',
      keyId: 'alice',
      group: 'basic',
      model: 'gpt-4o-mini',
      protocol: 'chat',
      inputTokens: 10,
      outputTokens: 5,
      cachedInputTokens: 0,
      price: null,
    });
    await meter.flush();
    // Beside the config, where `usage` used to look, there is nothing.
    expect(() => statSync(join(dir, 'gw.state.json'))).toThrow();
    const r = await cli(['usage', '--config', path]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/alice\s+basic\s+gpt-4o-mini\s+chat\s+10\s+0\s+5\s+0 \(no price\)\s+provider/);
    expect(r.stdout).toContain('1 response: 10 input (0 cached), 5 output tokens');
    const bad = configFile('meter: [\n');
    const rb = await cli(['usage', '--config', bad.path]);
    expect(rb.code).toBe(1);
    expect(rb.stderr).toContain(bad.path);
  });
});

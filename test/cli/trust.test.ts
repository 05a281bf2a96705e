/**
 * Trust boundaries at the command line (docs/security.md): `envoy-config` writes the bundle 0600 (it can hold the gRPC
 * secret), renders the secret it reads from the real environment, and warns about an Envoy admin
 * address or a gRPC port beyond loopback; `up`'s banner takes its figures from the config;
 * `explain` authenticates as Envoy does with --config.
 */
import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runCli } from '../../src/cli/main';
import { banner } from '../../src/cli/up';
import { parseConfig } from '../../src/config/load';
import { startService, type Service } from '../../src/server/service';
import { DEMO_KEYS } from '../support/demo-keys';
import { DEMO_CONFIG, LogSink, tempConfig } from '../support/service-harness';

const SECRET = 'cli-test-secret-4Hs8Kd2Lq9Wm1Zx7Vb3Nc6Tj0Rp5Gf';
const DEMO = readFileSync(DEMO_CONFIG, 'utf8');
const withSecret = DEMO.replace(/^grpc:\n/m, 'grpc:\n  secret: { env: MG_SECRET }\n');

async function run(argv: string[], env: NodeJS.ProcessEnv = {}) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s), env });
  return { code, stdout, stderr };
}

describe('envoy-config', () => {
  test('writes the bundle for its owner only (0600), an existing file too', async () => {
    const config = tempConfig();
    const out = join(dirname(config), 'envoy.yaml');
    writeFileSync(out, 'old', { mode: 0o644 });
    chmodSync(out, 0o644);
    expect(await run(['envoy-config', '--config', config, '--out', out])).toMatchObject({ code: 0, stderr: '' });
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(readFileSync(out, 'utf8')).toContain('modelgate_authz');
  });

  test('renders the gRPC secret from the environment into every call to modelgate, and never prints it elsewhere', async () => {
    const r = await run(['envoy-config', '--config', tempConfig(withSecret)], { MG_SECRET: SECRET });
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    // ext_authz, the meter's access log, the health check and the two rate limit filters (the embedded engine answers
    // on the port).
    expect(r.stdout.split(`Bearer ${SECRET}`).length - 1).toBe(5);
  });

  test('refuses to render without the secret the config names, saying where it looked', async () => {
    const r = await run(['envoy-config', '--config', tempConfig(withSecret)], {});
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/grpc\.secret\.env: environment variable MG_SECRET is not set or empty/);
    expect(r.stdout).toBe('');
  });

  test('warns about an admin address beyond loopback', async () => {
    const r = await run([
      'envoy-config',
      '--config',
      tempConfig(DEMO.replace('admin: 127.0.0.1:9901', 'admin: 0.0.0.0:9901')),
    ]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(
      /^warning: gateway\.admin 0\.0\.0\.0:9901 is beyond loopback: Envoy's admin interface has no authentication/m,
    );
  });

  test('warns about a gRPC port beyond loopback without authentication, and not with it', async () => {
    const remote = DEMO.replace('grpc: 127.0.0.1:9191', 'grpc: 10.0.0.5:9191');
    expect((await run(['envoy-config', '--config', tempConfig(remote)])).stderr).toMatch(
      /^warning: Envoy reaches modelgate's gRPC port at 10\.0\.0\.5:9191, beyond loopback, without grpc\.secret or grpc\.tls/m,
    );
    const authed = remote.replace(/^grpc:\n/m, 'grpc:\n  secret: { env: MG_SECRET }\n');
    expect((await run(['envoy-config', '--config', tempConfig(authed)], { MG_SECRET: SECRET })).stderr).toBe('');
  });
});

describe("up's banner", () => {
  test("takes the demo keys' balances from the config (it once said 0.1 for a trial key of 0.00006)", () => {
    const config = parseConfig(DEMO);
    const text = banner(config, DEMO_CONFIG, '1.40.0', { url: 'http://127.0.0.1:9300' });
    expect(text).toContain('$TRIAL starts with a balance of 0.00006');
    expect(text).toContain("alice's balance in the config: 12.5");
    expect(text).not.toContain('0.1,');
    const changed = parseConfig(DEMO.replace(/(- id: trial[\s\S]*?balance: )0\.00006/, '$10.25'));
    expect(banner(changed, DEMO_CONFIG, '1.40.0', { url: 'http://127.0.0.1:9300' })).toContain(
      '$TRIAL starts with a balance of 0.25',
    );
  });
});

describe('explain against an authenticated port', () => {
  let service: Service;
  let configPath: string;
  beforeAll(async () => {
    configPath = tempConfig(withSecret);
    service = await startService({
      configPath,
      grpcAddress: '127.0.0.1:0',
      httpAddress: '127.0.0.1:0',
      logDestination: new LogSink(),
      watch: false,
      env: { MG_SECRET: SECRET },
    });
  });
  afterAll(async () => service?.close(1000, 0));

  const args = () => [
    'explain',
    '--addr',
    service.grpcAddress,
    '-H',
    `Authorization: Bearer ${DEMO_KEYS.alice}`,
    'POST',
    '/v1/chat/completions',
    '{"messages":[],"model":"gpt-4o-mini"}',
  ];

  test('authenticates with the config given, as Envoy does', async () => {
    const r = await run([...args(), '--config', configPath], { MG_SECRET: SECRET });
    expect(r.stdout).toContain('-> ALLOW');
    expect(r.stdout + r.stderr).not.toContain(SECRET);
    expect(r.stdout + r.stderr).not.toContain(DEMO_KEYS.alice);
  });

  test('without it, shows the denial an unauthenticated caller gets', async () => {
    const r = await run(args());
    expect(r.stdout).toContain('-> DENY 503 authz_unauthenticated');
  });
});

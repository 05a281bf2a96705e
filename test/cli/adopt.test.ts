/**
 * `modelgate adopt` and `modelgate adopt --check` at the command line (src/cli/adopt.ts): YAML and
 * JSON in and out, the merged file 0600, the summary on stderr, the linter's exit code, and a
 * result that still lets a team route reach a provider cluster without modelgate reported.
 */
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { runCli } from '../../src/cli/main';

const FIXTURES = join(__dirname, '..', 'envoy', 'fixtures');
const TEAM = join(FIXTURES, 'team-envoy.yaml');
const CONFIG = join(FIXTURES, 'modelgate-adopt.yaml');

async function run(argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s), env: {} });
  return { code, stdout, stderr };
}

describe('modelgate adopt', () => {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-adopt-'));

  test('writes the merged YAML 0600, says what it added and changed, and the result lints clean', async () => {
    const out = join(dir, 'merged.yaml');
    const r = await run(['adopt', '--envoy', TEAM, '--config', CONFIG, '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(r.stderr).toContain('28 routes (named modelgate.*) at the start of virtual host all');
    expect(r.stderr).toContain('changed on the connection manager');
    expect(r.stderr).toMatch(/\d+ lines added/);
    expect(parseYaml(readFileSync(out, 'utf8')).static_resources.listeners[0].name).toBe('ingress');
    const check = await run(['adopt', '--check', out, '--config', CONFIG]);
    expect(check).toMatchObject({ code: 0 });
    expect(check.stdout).toContain('no finding');
  });

  test('reads and writes JSON, and re-running on its own output changes nothing', async () => {
    const json = join(dir, 'team.json');
    writeFileSync(json, JSON.stringify(parseYaml(readFileSync(TEAM, 'utf8'))));
    const once = join(dir, 'once.json');
    const twice = join(dir, 'twice.json');
    expect((await run(['adopt', '--envoy', json, '--config', CONFIG, '--out', once])).code).toBe(0);
    expect((await run(['adopt', '--envoy', once, '--config', CONFIG, '--out', twice])).code).toBe(0);
    expect(readFileSync(twice, 'utf8')).toBe(readFileSync(once, 'utf8'));
    expect(() => JSON.parse(readFileSync(once, 'utf8')) as unknown).not.toThrow();
  });

  test('exits 1 when a route of the team still reaches a provider cluster without modelgate, naming it', async () => {
    const team = parseYaml(readFileSync(TEAM, 'utf8'));
    team.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes.push(
      { name: 'old_openai', match: { prefix: '/openai/' }, route: { cluster: 'openai' } },
    );
    const file = join(dir, 'bypass.yaml');
    writeFileSync(file, JSON.stringify(team));
    const r = await run(['adopt', '--envoy', file, '--config', CONFIG, '--out', join(dir, 'bypass-merged.yaml')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/routes\[\d+\]: ext_authz never runs on route old_openai to a provider/);
    const check = await run(['adopt', '--check', join(dir, 'bypass-merged.yaml'), '--config', CONFIG]);
    expect(check.code).toBe(1);
    expect(check.stdout).toMatch(/\d+ finding\(s\)/);
  });

  test('answers a wrong use in one line', async () => {
    expect((await run(['adopt', '--config', CONFIG])).stderr).toContain('adopt needs --envoy FILE');
    expect((await run(['adopt', '--envoy', join(dir, 'missing.yaml'), '--config', CONFIG])).stderr).toContain(
      'cannot read',
    );
    expect((await run(['adopt', '--envoy', TEAM, '--config', CONFIG, '--upstreams', 'chat,bogus'])).stderr).toContain(
      '--upstreams: bogus is not one of',
    );
  });
});

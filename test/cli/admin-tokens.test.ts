/**
 * `modelgate admin-tokens new` on the file store: the token is printed once and kept only as its
 * hash in the admin state file beside the config (the config itself untouched); usage errors.
 */
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { adminStatePath, readAdminState } from '../../src/admin/file-backend';
import { hashToken } from '../../src/admin/tokens';
import { runCli } from '../../src/cli/main';
import { tempConfig } from '../support/service-harness';

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(args, { stdout: (s) => (out += s), stderr: (s) => (err += s), env: {} });
  return { code, out, err };
}

it('prints a token once and keeps only its hash beside the config, audited as the command line', async () => {
  const config = tempConfig();
  const before = readFileSync(config, 'utf8');
  const r = await cli(['admin-tokens', 'new', '--scope', 'billing', '--id', 'finance', '--config', config]);
  expect(r.code, r.err).toBe(0);
  const token = /^(mg-admin-\S+)$/m.exec(r.out)![1];
  expect(r.out).toContain(`Created management token finance (scope billing) in ${adminStatePath(config)}.`);
  const stateText = readFileSync(adminStatePath(config), 'utf8');
  expect(stateText).not.toContain(token);
  const state = readAdminState(adminStatePath(config));
  expect(state.tokens).toMatchObject([{ id: 'finance', scope: 'billing', sha256: hashToken(token) }]);
  expect(state.audit).toMatchObject([
    { actor: 'cli', action: 'token.create', target: 'finance', after: { id: 'finance', scope: 'billing' } },
  ]);
  expect(readFileSync(config, 'utf8')).toBe(before);
  const again = await cli(['admin-tokens', 'new', '--scope', 'read', '--id', 'finance', '--config', config]);
  expect(again).toMatchObject({ code: 1, err: 'modelgate: a token with id "finance" already exists\n' });
});

it('refuses a missing or unknown scope with a usage error', async () => {
  const config = tempConfig();
  expect((await cli(['admin-tokens', 'new', '--config', config])).code).toBe(2);
  const bad = await cli(['admin-tokens', 'new', '--scope', 'root', '--config', config]);
  expect(bad.code).toBe(2);
  expect(bad.err).toContain('--scope "root" is not one of read, keys, billing, admin');
});

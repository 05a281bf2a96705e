/**
 * Codex CLI (the real npm package, pinned by scripts/clients/) through the real Envoy, configured
 * exactly as the console's "set up a client" renders it for the coding-agent row of the Base URL
 * table (docs/spec.md §4.1: `{base_url}`, no /v1 suffix): a config.toml provider block with
 * `base_url = "{base_url}"` and `wire_api = "responses"`, the key in the variable it names. It
 * sends `POST /responses`, which the gateway serves as /v1/responses. `codex exec` runs
 * non-interactively, in a fresh home, under a timeout.
 *
 * Codex retries any 401/403/404 of a turn five times (it reads no x-should-retry), so a denial is
 * shown after six requests, about 7 s; the tests count the requests rather than the seconds.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/check/key-format';
import { parseConfig } from '../../src/config/load';
import { clientKind, setupFor } from '../../src/console/client-kinds';
import { realClient, requestLine } from '../../src/console/real-clients';
import { snippetsFor } from '../../src/console/snippets';
import { agentCommand, CODEX_QUIET_TOML, CODEX_QUIET_TOP, decisionsFrom, describeClients, freshHome, runClient, snippetEnv, type ClientRun } from '../support/clients';
import { DEMO_KEYS } from '../support/demo-keys';
import { startGateway, type Gateway } from '../support/gateway';

const { alice, carol } = DEMO_KEYS;

describeClients('Codex CLI through a real Envoy, set up as the console says', { timeout: 180_000 }, () => {
  let gw: Gateway;
  const homes: Array<() => void> = [];
  beforeAll(async () => {
    gw = await startGateway();
  });
  afterAll(async () => {
    for (const remove of homes) remove();
    await gw?.close();
  });

  /** Runs `codex exec` with the console's snippets for this gateway; returns the run and the decisions it caused. */
  async function codex(key: string, model: string, alt = false) {
    const config = parseConfig(readFileSync(gw.configPath, 'utf8'));
    const setup = setupFor(clientKind('coding-agent')!, alt ? `${gw.baseUrl}${config.routes.altPrefix}` : gw.baseUrl, config.routes, model);
    const snippets = snippetsFor(setup, model);
    const h = freshHome('codex');
    homes.push(h.remove);
    mkdirSync(join(h.home, '.codex'));
    // The snippet as a user pastes it at the top of the file, then the tests' own quiet settings.
    writeFileSync(join(h.home, '.codex', 'config.toml'), `${CODEX_QUIET_TOP}${snippets.find((s) => s.id === 'codex-config')!.code}\n\n${CODEX_QUIET_TOML}`);
    const env = { ...h.env, CODEX_HOME: join(h.home, '.codex'), ...snippetEnv(snippets.find((s) => s.id === 'codex-env')!.code, key) };
    const { command, args } = agentCommand('codex');
    const before = gw.modelgate.logLines().length;
    const run: ClientRun = await runClient(command, [...args, 'exec', '--skip-git-repo-check', 'say hi'], { env, cwd: h.work });
    return { run, decisions: decisionsFrom(gw.modelgate.logLines(), before) };
  }

  it('completes a short task with its default model: POST /responses at the root address, served as /v1/responses', async () => {
    const { run, decisions } = await codex(alice, 'gpt-6.1-sol');
    expect(run.timedOut).toBe(false);
    expect(run.code, run.output).toBe(0);
    expect(run.stdout).toContain('Hello from the demo upstream. You asked gpt-6.1-sol as key alice; no client key header reached me.');
    expect(decisions.map((d) => `${String(d.decision)} ${String(d.reason)}`)).toEqual(['allow allowed']);
    // What it sent is the docs' table row (docs/clients.md), and the provider got its own path.
    expect(new Set(decisions.map((d) => requestLine(String(d.method), String(d.path))))).toEqual(new Set(realClient('Codex CLI 0.169', 'coding-agent').sends));
    expect(gw.received.at(-1)).toMatchObject({ method: 'POST', url: '/v1/responses', family: 'chat' });
    expect(gw.received.at(-1)!.headers['x-modelgate-model']).toBe('gpt-6.1-sol');
  });

  it('completes a short task under the alternate prefix ({base_url}/alt): POST /alt/responses', async () => {
    const { run, decisions } = await codex(alice, 'gpt-6.1-sol', true);
    expect(run.code, run.output).toBe(0);
    expect(run.stdout).toContain('You asked gpt-6.1-sol as key alice');
    expect(decisions.map((d) => `${String(d.method)} ${String(d.path)} ${String(d.reason)}`)).toEqual(['POST /alt/responses allowed']);
    expect(gw.received.at(-1)).toMatchObject({ url: '/alt/v1/responses', family: 'alt' });
  });

  /** A denial: Codex exits non-zero and prints modelgate's hint; at most its five turn retries. */
  async function denied(key: string, model: string, reason: string, hint: string) {
    const { run, decisions } = await codex(key, model);
    expect(run.timedOut).toBe(false);
    expect(run.code).not.toBe(0);
    expect(run.output).toContain(hint);
    expect(run.output).toContain(`[modelgate: ${reason}]`);
    expect(run.output).not.toContain('{base_url}');
    expect(decisions.length).toBeGreaterThan(0);
    expect(decisions.length).toBeLessThanOrEqual(6);
    for (const d of decisions) expect(d.reason).toBe(reason);
    expect(run.output).not.toContain(key.slice(6));
    return run;
  }

  it("shows modelgate's hint for a model outside the key's group", async () => {
    await denied(alice, 'gpt-4o', 'model_not_in_group', 'the key\'s group "basic" does not include model "gpt-4o"');
  });

  it("shows modelgate's hint for a balance at zero", async () => {
    await denied(carol, 'gpt-6.1-sol', 'balance_insufficient', "the key's balance is 0");
  });

  it("shows modelgate's hint for a wrong key, naming the console at the address Codex used", async () => {
    await denied(generateKey(), 'gpt-6.1-sol', 'key_unknown', `check that the whole key was copied from the console (${gw.baseUrl}/console/)`);
  });
});

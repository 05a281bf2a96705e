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
 *
 * Codex 0.171 declares the hosted `web_search` tool in every turn on the models of its catalog
 * (gpt-5.5 here; not on gpt-6.x-sol, which it does not know), by its `web_search` setting ("cached"
 * by default). This gateway serves gpt-5.5 with web_search priced, and the demo upstream searches
 * once whenever it is declared, so each turn is debited one call; where a gateway leaves it
 * unpriced, the refusal names Codex's own switch (docs/metering.md, "Hosted tools").
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import { parseConfig } from '../../src/config/load';
import { clientKind, setupFor } from '../../src/console/client-kinds';
import { realClient, requestLine } from '../../src/console/real-clients';
import { snippetsFor } from '../../src/console/snippets';
import {
  agentCommand,
  CODEX_QUIET_TOML,
  CODEX_QUIET_TOP,
  decisionsFrom,
  describeClients,
  freshHome,
  runClient,
  snippetEnv,
  type ClientRun,
} from '../support/clients';
import { DEMO_KEYS } from '../support/demo-keys';
import { startGateway, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';

/** The per-call price of web_search on gpt-5.5 (OpenAI's list price: $10 per 1,000 calls). */
const SEARCH_FEE = 0.01;
/**
 * The demo's gpt-5.5 (a model of Codex's catalog, for which it declares web_search) with its price's
 * tools replaced: `', tools: { web_search: 0.01 }'` as the demo has it, `''` for none. A demo without
 * that price line fails here rather than testing something else.
 */
const withCodexModel =
  (tools: string) =>
  (demo: string): string => {
    const line = /(- name: gpt-5\.5\b[^\n]*\n\s*protocols: \[chat, responses\]\n\s*)price: \{[^\n]*\}\n/;
    if (!line.test(demo)) throw new Error('the demo config has no priced gpt-5.5 in its basic group');
    return demo.replace(line, (_m, head: string) => `${head}price: { input: 1.25, output: 10${tools} }\n`);
  };

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

  /**
   * Runs `codex exec` with the console's snippets for this gateway; returns the run and the decisions it caused.
   * @param base `alt`: the snippet of the alternate prefix; else a path appended to the snippet's base_url (`/v1`,
   * `/alt/v1`)
   * @param top settings put above the snippet (Codex's own switch)
   */
  async function codex(
    key: string,
    model: string,
    base: 'alt' | '' | '/v1' | '/alt/v1' = '',
    on: Gateway = gw,
    top = '',
    ownModel = false,
  ) {
    const config = parseConfig(readFileSync(on.configPath, 'utf8'));
    const setup = setupFor(
      clientKind('coding-agent')!,
      base === 'alt' ? `${on.baseUrl}${config.routes.altPrefix}` : on.baseUrl,
      config.routes,
      model,
    );
    const snippets = snippetsFor(setup, model).map((s) =>
      s.id === 'codex-config' && base !== 'alt' && base !== ''
        ? { ...s, code: s.code.replace(`base_url = "${on.baseUrl}"`, `base_url = "${on.baseUrl}${base}"`) }
        : s,
    );
    const h = freshHome('codex');
    homes.push(h.remove);
    mkdirSync(join(h.home, '.codex'));
    // The snippet as a user pastes it at the top of the file, then the tests' own quiet settings.
    let code = snippets.find((s) => s.id === 'codex-config')!.code;
    // ownModel: the snippet without its model line, so Codex asks for its own default.
    if (ownModel) code = code.replace(/^model = .*\n/m, '');
    writeFileSync(join(h.home, '.codex', 'config.toml'), `${CODEX_QUIET_TOP}${top}${code}\n\n${CODEX_QUIET_TOML}`);
    const env = {
      ...h.env,
      CODEX_HOME: join(h.home, '.codex'),
      ...snippetEnv(snippets.find((s) => s.id === 'codex-env')!.code, key),
    };
    const { command, args } = agentCommand('codex');
    const before = on.modelgate.logLines().length;
    const run: ClientRun = await runClient(command, [...args, 'exec', '--skip-git-repo-check', 'say hi'], {
      env,
      cwd: h.work,
    });
    return { run, decisions: decisionsFrom(on.modelgate.logLines(), before) };
  }

  /** The ledger rows of the requests these decisions allowed, once settled. */
  async function ledgerOf(decisions: Array<Record<string, unknown>>, on: Gateway = gw) {
    const ids = new Set(decisions.filter((d) => d.decision === 'allow').map((d) => String(d.requestId)));
    const ledger = on.modelgate.service!.store.meter!;
    const rows = async () => (await ledger.usage({ keyId: 'alice', limit: 1000 })).filter((r) => ids.has(r.requestId));
    await waitFor('the ledger rows', async () => (await rows()).length === ids.size, 15_000);
    return rows();
  }

  /** The upstream got Codex's web_search tool declared, as Codex sends it (nothing removed on the way). */
  function declaredWebSearch(on: Gateway = gw): void {
    const body = JSON.parse(on.received.at(-1)!.body.toString('utf8')) as { tools?: Array<{ type?: string }> };
    expect((body.tools ?? []).map((t) => t.type)).toContain('web_search');
    expect(String(on.received.at(-1)!.headers['user-agent'])).toMatch(/^codex_[a-z_]+\//);
  }

  /** Each served turn was debited one web search at its price, besides its tokens. */
  async function debitedOneSearchEach(decisions: Array<Record<string, unknown>>, on: Gateway = gw): Promise<void> {
    const rows = await ledgerOf(decisions, on);
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      expect(r.estimated ?? undefined, JSON.stringify(r)).toBeUndefined();
      expect(r.toolCalls, JSON.stringify(r)).toBe(1);
      const tokens = ((r.inputTokens - r.cachedInputTokens) * 1.25 + r.outputTokens * 10) / 1e6;
      expect(r.cost, JSON.stringify(r)).toBeCloseTo(tokens + SEARCH_FEE, 9);
    }
  }

  it('completes a short task with its default model: POST /responses at the root address, served as /v1/responses', async () => {
    const { run, decisions } = await codex(alice, 'gpt-6.1-sol');
    expect(run.timedOut).toBe(false);
    expect(run.code, run.output).toBe(0);
    expect(run.stdout).toContain(
      'Hello from the demo upstream. You asked gpt-6.1-sol as key alice; no client key header reached me.',
    );
    expect(decisions.map((d) => `${String(d.decision)} ${String(d.reason)}`)).toEqual(['allow allowed']);
    // What it sent is the docs' table row (docs/clients.md), and the provider got its own path.
    expect(new Set(decisions.map((d) => requestLine(String(d.method), String(d.path))))).toEqual(
      new Set(realClient('Codex CLI 0.171', 'coding-agent').sends),
    );
    expect(gw.received.at(-1)).toMatchObject({ method: 'POST', url: '/v1/responses', family: 'chat' });
    expect(gw.received.at(-1)!.headers['x-modelgate-model']).toBe('gpt-6.1-sol');
  });

  it("completes a short task with no model set: Codex 0.171's own default (gpt-6.2-sol) is in the demo's groups", async () => {
    const { run, decisions } = await codex(alice, 'gpt-6.2-sol', '', gw, '', true);
    expect(run.timedOut).toBe(false);
    expect(run.code, run.output).toBe(0);
    expect(run.stdout).toContain('You asked gpt-6.2-sol as key alice');
    expect(decisions.map((d) => `${String(d.decision)} ${String(d.reason)} ${String(d.model)}`)).toEqual([
      'allow allowed gpt-6.2-sol',
    ]);
  });

  it('completes a short task with web_search declared at {base_url} (POST /responses), its web search debited per call', async () => {
    const { run, decisions } = await codex(alice, 'gpt-5.5');
    expect(run.code, run.output).toBe(0);
    expect(run.stdout).toContain('You asked gpt-5.5 as key alice');
    expect(decisions.map((d) => `${String(d.method)} ${String(d.path)} ${String(d.reason)}`)).toEqual([
      'POST /responses allowed',
    ]);
    declaredWebSearch();
    await debitedOneSearchEach(decisions);
  });

  it('completes a short task at {base_url}/v1 (POST /v1/responses), its web search debited per call', async () => {
    const { run, decisions } = await codex(alice, 'gpt-5.5', '/v1');
    expect(run.code, run.output).toBe(0);
    expect(run.stdout).toContain('You asked gpt-5.5 as key alice');
    expect(decisions.map((d) => `${String(d.method)} ${String(d.path)} ${String(d.reason)}`)).toEqual([
      'POST /v1/responses allowed',
    ]);
    declaredWebSearch();
    await debitedOneSearchEach(decisions);
  });

  it('completes a short task at {base_url}/alt/v1 (POST /alt/v1/responses), its web search debited per call', async () => {
    const { run, decisions } = await codex(alice, 'gpt-5.5', '/alt/v1');
    expect(run.code, run.output).toBe(0);
    expect(run.stdout).toContain('You asked gpt-5.5 as key alice');
    expect(decisions.map((d) => `${String(d.method)} ${String(d.path)} ${String(d.reason)}`)).toEqual([
      'POST /alt/v1/responses allowed',
    ]);
    expect(gw.received.at(-1)).toMatchObject({ url: '/alt/v1/responses', family: 'alt' });
    declaredWebSearch();
    await debitedOneSearchEach(decisions);
  });

  it("is refused where web_search is unpriced, the hint naming Codex's own setting, and served once that setting is applied", async () => {
    const unpriced = await startGateway({ config: withCodexModel('') });
    try {
      const { run, decisions } = await codex(alice, 'gpt-5.5', '', unpriced);
      expect(run.timedOut).toBe(false);
      expect(run.code).not.toBe(0);
      expect(decisions.length).toBeGreaterThan(0);
      for (const d of decisions) expect(d.reason).toBe('hosted_tool_unpriced');
      expect(run.output).toContain('[modelgate: hosted_tool_unpriced]');
      expect(run.output).toMatch(/Codex: web_search = \\?"disabled\\?" in ~\/\.codex\/config\.toml/);
      // The setting the hint names, as the console's snippet offers it: Codex then declares no search.
      const off = await codex(alice, 'gpt-5.5', '', unpriced, 'web_search = "disabled"\n');
      expect(off.run.code, off.run.output).toBe(0);
      expect(off.decisions.map((d) => String(d.reason))).toEqual(['allowed']);
      const body = JSON.parse(unpriced.received.at(-1)!.body.toString('utf8')) as { tools?: Array<{ type?: string }> };
      expect((body.tools ?? []).map((t) => t.type)).not.toContain('web_search');
    } finally {
      await unpriced.close();
    }
  });

  it('completes a short task under the alternate prefix ({base_url}/alt): POST /alt/responses', async () => {
    const { run, decisions } = await codex(alice, 'gpt-6.1-sol', 'alt');
    expect(run.code, run.output).toBe(0);
    expect(run.stdout).toContain('You asked gpt-6.1-sol as key alice');
    expect(decisions.map((d) => `${String(d.method)} ${String(d.path)} ${String(d.reason)}`)).toEqual([
      'POST /alt/responses allowed',
    ]);
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
    await denied(
      generateKey(),
      'gpt-6.1-sol',
      'key_unknown',
      `check that the whole key was copied from the console (${gw.baseUrl}/console/)`,
    );
  });
});

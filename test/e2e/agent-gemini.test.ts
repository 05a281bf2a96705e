/**
 * gemini-cli (the real npm package, pinned by scripts/clients/) through the real Envoy, configured
 * exactly as the console's "set up a client" renders it for the command-line generative row of the
 * Base URL table (docs/spec.md §4.1: `{base_url}`, and `{base_url}/alt`; §5.6: the key, the root address
 * and the default model as three environment variables), plus the settings.json line the console
 * gives that selects API-key sign-in (without it gemini-cli exits 41, "Invalid auth method
 * selected", before any request). The folder is trusted through GEMINI_CLI_TRUST_WORKSPACE, as the
 * snippet's comment says for `gemini -p` (else exit 55). Runs non-interactively, in a fresh home,
 * under a timeout.
 *
 * Its default model setting ("auto") first asks a router model for a JSON verdict
 * (`responseMimeType: application/json` with a schema); the demo upstream answers in JSON, so the
 * task completes without the five retries (97 s) plain text caused.
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
  decisionsFrom,
  describeClients,
  freshHome,
  GEMINI_QUIET_SETTINGS,
  runClient,
  snippetEnv,
} from '../support/clients';
import { DEMO_KEYS } from '../support/demo-keys';
import { startGateway, type Gateway } from '../support/gateway';

const { alice, carol } = DEMO_KEYS;

describeClients('gemini-cli through a real Envoy, set up as the console says', { timeout: 180_000 }, () => {
  let gw: Gateway;
  const homes: Array<() => void> = [];
  beforeAll(async () => {
    gw = await startGateway();
  });
  afterAll(async () => {
    for (const remove of homes) remove();
    await gw?.close();
  });

  /** `model` undefined: the environment names none (GEMINI_MODEL unset), as gemini-cli's own default "auto". */
  async function gemini(
    key: string,
    model: string | undefined,
    kind: 'generative-cli' | 'alt-generative-cli' = 'generative-cli',
  ) {
    const config = parseConfig(readFileSync(gw.configPath, 'utf8'));
    const snippets = snippetsFor(
      setupFor(clientKind(kind)!, gw.baseUrl, config.routes, model ?? 'gemini-3.8-flash'),
      model ?? 'gemini-3.8-flash',
    );
    const h = freshHome('gemini');
    homes.push(h.remove);
    mkdirSync(join(h.home, '.gemini'));
    const settings = JSON.parse(snippets.find((s) => s.id === 'gemini-settings')!.code) as Record<string, unknown>;
    writeFileSync(
      join(h.home, '.gemini', 'settings.json'),
      JSON.stringify({ ...GEMINI_QUIET_SETTINGS, ...settings }, null, 2),
    );
    const env: Record<string, string> = {
      ...h.env,
      ...snippetEnv(snippets.find((s) => s.id === 'cli-env')!.code, key),
      GEMINI_CLI_TRUST_WORKSPACE: 'true',
    };
    if (model === undefined) delete env.GEMINI_MODEL;
    const { command, args } = agentCommand('gemini');
    const before = gw.modelgate.logLines().length;
    const run = await runClient(command, [...args, '-p', 'say hi'], { env, cwd: h.work });
    return { run, decisions: decisionsFrom(gw.modelgate.logLines(), before) };
  }

  const lines = (decisions: Array<Record<string, unknown>>) =>
    new Set(decisions.map((d) => requestLine(String(d.method), String(d.path), String(d.model))));

  it('completes a short task with its default model setting: a JSON verdict from its router, then the task, each asked once', async () => {
    const { run, decisions } = await gemini(alice, undefined);
    expect(run.timedOut).toBe(false);
    expect(run.code, run.output).toBe(0);
    expect(run.stdout).toMatch(
      /Hello from the demo upstream\. You asked gemini-3\.\d-[a-z-]+ as key alice; no client key header reached me\./,
    );
    expect(run.output).not.toContain('Retry');
    expect(decisions.map((d) => `${String(d.path)} ${String(d.reason)}`)).toEqual([
      '/v1beta/models/gemini-3.5-flash-lite:generateContent allowed',
      expect.stringMatching(/^\/v1beta\/models\/gemini-3\.(8-flash|1-pro-preview):streamGenerateContent allowed$/),
    ]);
    expect(lines(decisions)).toEqual(new Set(realClient('gemini-cli 0.61.0', 'generative-cli').sends));
    const router = JSON.parse(
      gw.received.find((r) => r.url.includes('gemini-3.5-flash-lite'))!.body.toString('utf8'),
    ) as { generationConfig: Record<string, unknown> };
    expect(router.generationConfig.responseMimeType).toBe('application/json');
  });

  it('completes a short task with the model the environment names, under the alternate prefix ({base_url}/alt)', async () => {
    const { run, decisions } = await gemini(alice, 'gemini-3.1-pro-preview', 'alt-generative-cli');
    expect(run.code, run.output).toBe(0);
    expect(run.stdout).toContain('You asked gemini-3.1-pro-preview as key alice');
    expect(lines(decisions)).toEqual(new Set(realClient('gemini-cli 0.61.0', 'alt-generative-cli').sends));
    expect(gw.received.at(-1)).toMatchObject({
      url: '/alt/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse',
      family: 'alt',
    });
  });

  /** A denial: gemini-cli does not retry a 4xx; it exits non-zero printing the error body with the hint. */
  async function denied(key: string, model: string, reason: string, hint: string) {
    const { run, decisions } = await gemini(key, model);
    expect(run.timedOut).toBe(false);
    expect(run.code).not.toBe(0);
    expect(run.output).toContain(hint);
    expect(run.output).not.toContain('{base_url}');
    expect(decisions.map((d) => d.reason)).toEqual([reason]);
    expect(run.output).not.toContain(key.slice(6));
  }

  it("shows modelgate's hint for a model outside the key's group, after one request", async () => {
    // gemini-cli prints the error body as JSON, so the hint's quotes appear escaped.
    await denied(
      alice,
      'gemini-2.5-pro',
      'model_not_in_group',
      `the key's group \\"basic\\" does not include model \\"gemini-2.5-pro\\"`,
    );
  });

  it("shows modelgate's hint for a balance at zero, after one request", async () => {
    await denied(carol, 'gemini-3.8-flash', 'balance_insufficient', "the key's balance is 0");
  });

  it("shows modelgate's hint for a wrong key after one request, naming the console at the address it used", async () => {
    await denied(
      generateKey(),
      'gemini-3.8-flash',
      'key_unknown',
      `check that the whole key was copied from the console (${gw.baseUrl}/console/)`,
    );
  });
});

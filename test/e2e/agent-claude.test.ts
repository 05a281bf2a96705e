/**
 * Claude Code (the real npm package, pinned by scripts/clients/; its native binary run directly)
 * through the real Envoy, configured exactly as the console's "set up a client" renders it for the
 * messages-style row of the Base URL table (docs/spec.md §4.1: `{base_url}`, and `{base_url}/alt`):
 * `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY` and `ANTHROPIC_MODEL`. `claude -p` runs
 * non-interactively, in a fresh home, under a timeout. It sends `POST /v1/messages?beta=true`
 * with the key in x-api-key.
 *
 * Without `x-should-retry: false` Claude Code retried a 401 for three minutes before printing
 * anything; with it every denial is one request and the hint at once (counted below).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import { parseConfig } from '../../src/config/load';
import { clientKind, setupFor } from '../../src/console/client-kinds';
import { realClient, requestLine } from '../../src/console/real-clients';
import { snippetsFor } from '../../src/console/snippets';
import { agentCommand, decisionsFrom, describeClients, freshHome, runClient, snippetEnv } from '../support/clients';
import { DEMO_KEYS } from '../support/demo-keys';
import { startGateway, type Gateway } from '../support/gateway';

const { alice, carol } = DEMO_KEYS;

describeClients('Claude Code through a real Envoy, set up as the console says', { timeout: 180_000 }, () => {
  let gw: Gateway;
  const homes: Array<() => void> = [];
  beforeAll(async () => {
    gw = await startGateway();
  });
  afterAll(async () => {
    for (const remove of homes) remove();
    await gw?.close();
  });

  async function claude(key: string, model: string, kind: 'messages-client' | 'alt-messages' = 'messages-client') {
    const config = parseConfig(readFileSync(gw.configPath, 'utf8'));
    const snippets = snippetsFor(setupFor(clientKind(kind)!, gw.baseUrl, config.routes, model), model);
    const h = freshHome('claude');
    homes.push(h.remove);
    const env = { ...h.env, ...snippetEnv(snippets.find((s) => s.id === 'claude-code-env')!.code, key) };
    const { command, args } = agentCommand('claude');
    const before = gw.modelgate.logLines().length;
    const run = await runClient(command, [...args, '-p', 'say hi'], { env, cwd: h.work });
    return { run, decisions: decisionsFrom(gw.modelgate.logLines(), before) };
  }

  it('completes a short task with its default model, sending what docs/clients.md says', async () => {
    const { run, decisions } = await claude(alice, 'claude-opus-5-5');
    expect(run.timedOut).toBe(false);
    expect(run.code, run.output).toBe(0);
    expect(run.stdout).toContain(
      'Hello from the demo upstream. You asked claude-opus-5-5 as key alice; no client key header reached me.',
    );
    expect(decisions.every((d) => d.reason === 'allowed')).toBe(true);
    expect(new Set(decisions.map((d) => requestLine(String(d.method), String(d.path))))).toEqual(
      new Set(realClient('Claude Code 2.1.332', 'messages-client').sends),
    );
    expect(gw.received.at(-1)).toMatchObject({ method: 'POST', url: '/v1/messages?beta=true', family: 'messages' });
  });

  it('completes a short task under the alternate prefix ({base_url}/alt)', async () => {
    const { run, decisions } = await claude(alice, 'claude-opus-5-5', 'alt-messages');
    expect(run.code, run.output).toBe(0);
    expect(run.stdout).toContain('You asked claude-opus-5-5 as key alice');
    expect(new Set(decisions.map((d) => requestLine(String(d.method), String(d.path))))).toEqual(
      new Set(realClient('Claude Code 2.1.332', 'alt-messages').sends),
    );
  });

  /** A denial: one request (x-should-retry: false), a non-zero exit and modelgate's hint. */
  async function denied(key: string, model: string, reason: string, hint: string) {
    const { run, decisions } = await claude(key, model);
    expect(run.timedOut).toBe(false);
    expect(run.code).not.toBe(0);
    expect(run.output).toContain(hint);
    expect(run.output).not.toContain('{base_url}');
    expect(decisions.map((d) => d.reason)).toEqual([reason]);
    expect(run.output).not.toContain(key.slice(6));
  }

  it("shows modelgate's hint for a model outside the key's group, after one request; Envoy's access log names the model", async () => {
    await denied(
      alice,
      'claude-sonnet-4-5',
      'model_not_in_group',
      `the key's group "basic" does not include model "claude-sonnet-4-5"`,
    );
    const denial = () => gw.accessLog().find((l) => l.reason === 'model_not_in_group');
    for (const until = Date.now() + 10_000; !denial() && Date.now() < until;)
      await new Promise((r) => setTimeout(r, 20));
    expect(denial()).toMatchObject({ decision: 'deny', model: 'claude-sonnet-4-5', key_id: 'alice', status: 403 });
  });

  it("shows modelgate's hint for a balance at zero, after one request", async () => {
    await denied(carol, 'claude-opus-5-5', 'balance_insufficient', "the key's balance is 0");
  });

  it("shows modelgate's hint for a wrong key after one request (no retries), naming the console at the address it used", async () => {
    await denied(
      generateKey(),
      'claude-opus-5-5',
      'key_unknown',
      `check that the whole key was copied from the console (${gw.baseUrl}/console/)`,
    );
  });
});

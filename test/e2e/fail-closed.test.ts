/**
 * Fail closed, through the real Envoy with modelgate as a real `modelgate serve` process:
 * - modelgate stopped (SIGKILL) or hung (SIGSTOP) → Envoy answers 503 authz_unavailable in the
 *   client's own error shape, and the upstream receives nothing;
 * - modelgate restarted on the same ports → traffic flows again, Envoy never restarted;
 * - the config file rewritten again and again under steady traffic → no request is lost or refused
 *   by mistake, and the change takes effect.
 */
import { renameSync, readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { errorBody } from '../../src/contract/error-body';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway, type Reply } from '../support/gateway';

const { alice, bob, carol } = DEMO_KEYS;
const CHAT = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
const MESSAGES = JSON.stringify({
  model: 'claude-3-5-haiku-latest',
  max_tokens: 8,
  messages: [{ role: 'user', content: 'hi' }],
});
const GEN = '{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}';

/** One request per protocol family: [path, headers, body, error shape]. */
const REQUESTS: Array<[string, Array<[string, string]>, string, 'openai' | 'anthropic' | 'gemini']> = [
  ['/v1/chat/completions', [['authorization', `Bearer ${alice}`]], CHAT, 'openai'],
  ['/alt/v1/messages', [['x-api-key', alice]], MESSAGES, 'anthropic'],
  ['/v1beta/models/gemini-2.5-flash:generateContent', [['x-goog-api-key', alice]], GEN, 'gemini'],
];

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describeE2E('fail closed, through a real Envoy', () => {
  let gw: Gateway;
  let envoyPid: number;
  beforeAll(async () => {
    gw = await startGateway({
      modelgate: 'process',
      config: (demo) => demo.replace('authzTimeoutMs: 1000', 'authzTimeoutMs: 400'),
    });
    envoyPid = gw.envoy.pid;
  });
  afterAll(async () => gw?.close());

  const chat = (key = alice): Promise<Reply> =>
    gw.send('POST', '/v1/chat/completions', {
      headers: [
        ['authorization', `Bearer ${key}`],
        ['content-type', 'application/json'],
      ],
      body: CHAT,
    });

  async function expectAuthzUnavailable(): Promise<void> {
    const before = gw.received.length;
    for (const [path, headers, body, family] of REQUESTS) {
      const r = await gw.send('POST', path, { headers: [...headers, ['content-type', 'application/json']], body });
      expect(r.status, r.text).toBe(503);
      expect(r.headers['x-modelgate-reason']).toBe('authz_unavailable');
      const hint = String(r.headers['x-modelgate-hint']);
      expect(hint).toMatch(/could not get an authorization decision/);
      expect(r.text).toBe(errorBody(family, 503, 'authz_unavailable', hint));
    }
    expect(gw.received.length).toBe(before);
  }

  /** Sends requests until one is allowed (modelgate back), at most `ms`. */
  async function untilAllowed(ms: number): Promise<Reply> {
    const until = Date.now() + ms;
    let r = await chat();
    while (r.status !== 200 && Date.now() < until) {
      await sleep(100);
      r = await chat();
    }
    return r;
  }

  it('lets traffic through while modelgate runs', async () => {
    expect((await chat()).status).toBe(200);
  });

  it('answers 503 authz_unavailable and sends nothing upstream while modelgate is stopped (SIGKILL)', async () => {
    gw.modelgate.kill('SIGKILL');
    await sleep(100);
    await expectAuthzUnavailable();
  });

  it('lets traffic through again once modelgate is restarted on the same ports, without restarting Envoy', async () => {
    await gw.modelgate.restart();
    const r = await untilAllowed(15_000);
    expect(r.status, r.text).toBe(200);
    expect(gw.envoy.pid).toBe(envoyPid);
    expect(gw.envoy.process.exitCode).toBeNull();
  });

  it('answers 503 authz_unavailable and sends nothing upstream while modelgate hangs (SIGSTOP), past gateway.authzTimeoutMs', async () => {
    gw.modelgate.kill('SIGSTOP');
    try {
      await expectAuthzUnavailable();
    } finally {
      gw.modelgate.kill('SIGCONT');
    }
    const r = await untilAllowed(10_000);
    expect(r.status).toBe(200);
  });

  it('loses no request while the config is rewritten under steady traffic, and the change takes effect', async () => {
    const original = readFileSync(gw.configPath, 'utf8');
    // Each rewrite changes carol's balance (0 ↔ 5): her answer flips, nobody else's may.
    const write = (carolBalance: number, n: number): void => {
      const text = original.replace(/(- id: carol[\s\S]*?balance: )0/, `$1${carolBalance}`) + `\n# rewrite ${n}\n`;
      expect(text).toContain(`balance: ${carolBalance}`);
      writeFileSync(`${gw.configPath}.tmp`, text);
      renameSync(`${gw.configPath}.tmp`, gw.configPath); // atomic, as an editor or a config manager writes
    };
    let stop = false;
    const answers: number[] = [];
    const traffic = async (key: string): Promise<void> => {
      while (!stop) answers.push((await chat(key)).status);
    };
    const loops = [traffic(alice), traffic(bob), traffic(alice), traffic(bob)];
    const reloadsBefore = gw.modelgate.logLines().filter((l) => l.includes('"config reloaded"')).length;
    for (let n = 1; n <= 6; n++) {
      write(n % 2 === 1 ? 5 : 0, n);
      // Wait for modelgate to apply it (it polls the file every 500 ms), then check carol's answer.
      const until = Date.now() + 10_000;
      while (
        gw.modelgate.logLines().filter((l) => l.includes('"config reloaded"')).length < reloadsBefore + n &&
        Date.now() < until
      )
        await sleep(50);
      expect((await chat(carol)).status).toBe(n % 2 === 1 ? 200 : 403);
    }
    stop = true;
    await Promise.all(loops);
    writeFileSync(gw.configPath, original);
    expect(answers.length).toBeGreaterThan(50);
    expect(answers.filter((s) => s !== 200)).toEqual([]);
  }, 90_000);
});

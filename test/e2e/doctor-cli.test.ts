/**
 * `modelgate doctor` against the real gateway (Envoy on the rendered bundle, modelgate, the demo
 * upstream): it finds the console from the Base URL, signs the key in there, names the failing rule
 * with the one setting to change, and sends one short request where the client would (docs/spec.md §4.1
 * rule 3), whose real answer agrees with the doctor. The key comes from MODELGATE_API_KEY only and
 * is never printed.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import { runCli } from '../../src/cli/main';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

interface Run {
  code: number;
  out: string;
  err: string;
}

/** `key` null: no MODELGATE_API_KEY at all. */
async function doctor(args: string[], key: string | null = DEMO_KEYS.alice): Promise<Run> {
  let out = '';
  let err = '';
  const env: NodeJS.ProcessEnv = key === null ? {} : { MODELGATE_API_KEY: key };
  const code = await runCli(['doctor', ...args], { stdout: (s) => (out += s), stderr: (s) => (err += s), env });
  for (const k of [...Object.values(DEMO_KEYS), key ?? ''])
    if (k.length > 20) expect(out + err).not.toContain(k.slice(6, 20));
  return { code, out, err };
}

describeE2E('modelgate doctor through the real gateway', () => {
  let gw: Gateway;
  let b: string;
  beforeAll(async () => {
    gw = await startGateway();
    b = gw.baseUrl;
  });
  afterAll(async () => {
    await gw?.close();
  });

  test('a right setup: nothing to change, and the short request (the model list) gets 200', async () => {
    const r = await doctor(['--base-url', `${b}/v1`, '--client', 'chat-sdk']);
    expect(r.out).toContain(`gateway: ${b} (alternate prefix /alt)`);
    expect(r.out).toMatch(/ok {6}§4\.1 rule 1 +The Base URL holds the base address only/);
    expect(r.out).toContain(`one short request (§4.1 rule 3): GET ${b}/v1/models -> 200 OK`);
    expect(r.out).toContain('Nothing to change here.');
    expect(r.code).toBe(0);
  });

  test('with a model, the short request is a one-token call through Envoy to the upstream', async () => {
    const before = gw.received.length;
    const r = await doctor(['--base-url', b, '--client', 'generative-cli', '--model', 'gemini-2.5-flash']);
    expect(r.out).toContain(`POST ${b}/v1beta/models/gemini-2.5-flash:generateContent -> 200 OK`);
    expect(r.code).toBe(0);
    const sent = gw.received.slice(before).find((x) => x.url.includes('gemini-2.5-flash'))!;
    expect(sent.family).toBe('generative');
    // The gateway removed the key before the upstream: it arrived in the vendor header, as the spec says.
    expect(JSON.stringify(sent.headers)).not.toContain(DEMO_KEYS.alice);
  });

  test('the alternate route: Base URL {base_url}/alt/v1 for its chat client', async () => {
    const r = await doctor(['--base-url', `${b}/alt/v1`, '--client', 'alt-chat']);
    expect(r.out).toContain(`GET ${b}/alt/v1/models -> 200 OK`);
    expect(r.code).toBe(0);
  });

  test('a repeated path: rule 4 names it, and the gateway answers 404 path_repeated', async () => {
    const r = await doctor(['--base-url', `${b}/v1`, '--client', 'messages-client']);
    expect(r.out).toMatch(/CHANGE {2}§4\.1 rule 4, §7 404 +No repeated path/);
    expect(r.out).toContain(`change: set the Base URL to ${b}`);
    expect(r.out).toContain('the gateway answers this with 404 path_repeated');
    expect(r.out).toContain(`GET ${b}/v1/v1/models -> 404 path_repeated`);
    expect(r.code).toBe(1);
  });

  test('a wrong prefix: an embeddings SDK without /v1', async () => {
    const r = await doctor(['--base-url', b, '--client', 'embeddings', '--model', 'text-embedding-3-small']);
    expect(r.out).toMatch(/CHANGE {2}§4\.1 rule 4/);
    expect(r.out).toContain(`change: set the Base URL to ${b}/v1`);
    expect(r.out).toContain(`POST ${b}/embeddings -> 404 prefix_wrong`);
    expect(r.code).toBe(1);
  });

  test("a chat SDK at the root address reaches the coding agents' endpoint: a note, and the one short request works", async () => {
    const r = await doctor(['--base-url', b, '--client', 'chat-sdk', '--model', 'gpt-4o-mini']);
    expect(r.out).toMatch(/note +§4\.1 rule 4/i);
    expect(r.out).toContain(
      'the client requests /chat/completions, an endpoint of this gateway for chat requests, so it works',
    );
    expect(r.out).toContain(`POST ${b}/chat/completions -> 200`);
  });

  test('a cut key: §7 401 (key), and the malformed key is not sent anywhere', async () => {
    const r = await doctor(['--base-url', `${b}/v1`, '--client', 'chat-sdk'], DEMO_KEYS.alice.slice(0, 38));
    expect(r.out).toMatch(/CHANGE {2}§7 401 \(key\)/);
    expect(r.out).toContain('38 characters; a sk-mg- key has 46');
    expect(r.out).toContain('not sent (the key is malformed: fix it first)');
    expect(r.code).toBe(1);
  });

  test('a wrong key (well-formed, unknown): §7 401 (key), and the gateway answers 401 key_unknown', async () => {
    const r = await doctor(['--base-url', `${b}/v1`, '--client', 'chat-sdk'], generateKey());
    expect(r.out).toMatch(/CHANGE {2}§7 401 \(key\)/);
    expect(r.out).toContain('the key is not valid (key_unknown)');
    expect(r.out).toContain(`GET ${b}/v1/models -> 401 key_unknown`);
    expect(r.code).toBe(1);
  });

  test('a misspelled model: §7 model check 3, and the gateway answers 403 with the same suggestion', async () => {
    const r = await doctor(['--base-url', `${b}/v1`, '--client', 'chat-sdk', '--model', 'gpt-4o-mni']);
    expect(r.out).toMatch(/CHANGE {2}§7 model check 3/);
    expect(r.out).toContain('did you mean "gpt-4o-mini"?');
    expect(r.out).toContain(`POST ${b}/v1/chat/completions -> 403 model_not_in_group`);
    expect(r.out).toMatch(/hint: .*did you mean "gpt-4o-mini"/);
    expect(r.code).toBe(1);
  });

  test('a balance of 0 (carol): §7 403 (balance)', async () => {
    const r = await doctor(
      ['--base-url', `${b}/v1`, '--client', 'chat-sdk', '--model', 'gpt-4o-mini'],
      DEMO_KEYS.carol,
    );
    expect(r.out).toMatch(/CHANGE {2}§7 403 \(balance\)/);
    expect(r.out).toContain('-> 403 balance_insufficient');
    expect(r.code).toBe(1);
  });

  test('an address where no gateway answers: the address rule, and the key stays here', async () => {
    const r = await doctor(['--base-url', 'http://127.0.0.1:9/v1', '--client', 'chat-sdk']);
    expect(r.out).toMatch(/CHANGE {2}§7 401 \(address first\)/);
    expect(r.out).toContain('not sent (no modelgate console answered at this address, so the key stays here)');
    expect(r.code).toBe(1);
  });

  test('--json prints the report and the request', async () => {
    const r = await doctor(['--base-url', `${b}/v1`, '--client', 'chat-sdk', '--json']);
    const j = JSON.parse(r.out);
    expect(j.report.failing).toBeNull();
    expect(j.request).toMatchObject({ method: 'GET', status: 200, url: `${b}/v1/models` });
  });

  test('the key is never an argument: no --key option, and without MODELGATE_API_KEY (no terminal) it says how', async () => {
    const withFlag = await doctor(['--base-url', b, '--client', 'chat-sdk', '--key', DEMO_KEYS.alice]);
    expect(withFlag.code).toBe(2);
    expect(withFlag.err).toMatch(/unknown option '--key'/);
    expect(withFlag.err).not.toContain(DEMO_KEYS.alice);
    const none = await doctor(['--base-url', b, '--client', 'chat-sdk'], null);
    expect(none.code).toBe(2);
    expect(none.err).toContain('no key: set MODELGATE_API_KEY');
    const noBase = await doctor(['--client', 'chat-sdk']);
    expect(noBase.code).toBe(2);
    expect(noBase.err).toContain('--base-url is required');
    const kind = await doctor(['--base-url', b, '--client', 'vscode']);
    expect(kind.code).toBe(2);
    expect(kind.err).toContain('--client must be one of: coding-agent, chat-app');
  });

  test('Envoy routes /console to modelgate without asking ext_authz, and nothing else that starts with it', async () => {
    const page = await gw.send('GET', '/console/');
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(page.headers['x-frame-options']).toBe('DENY');
    const redirect = await gw.send('GET', '/console');
    expect(redirect.status).toBe(308);
    expect(redirect.headers.location).toBe('console/');
    // The console's own 401, not ext_authz's: its JSON shape, and no decision in Envoy's access log.
    const noKey = await gw.send('POST', '/console/api/access');
    expect(noKey.status).toBe(401);
    expect(noKey.json().error).toMatchObject({ reason: 'key_missing', field: 'key' });
    const other = await gw.send('GET', '/consoles');
    expect(other.status).toBe(404);
    expect(other.headers['x-modelgate-reason']).toBe('path_unknown');
    // (The access log shows no path modelgate was not asked about: console lines are found by route.)
    const lines = (await gw.accessLogWhen((log) => log.filter((l) => l.route === 'console').length >= 3)).filter(
      (l) => l.route === 'console',
    );
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const l of lines) expect([l.decision ?? null, l.path ?? null]).toEqual([null, null]);
  });

  test('modelgate logged the sign-ins, never the key', async () => {
    const logs = gw.modelgate.logLines().join('\n');
    for (const k of Object.values(DEMO_KEYS))
      for (let i = 0; i + 12 <= k.length; i += 4) expect(logs).not.toContain(k.slice(i, i + 12));
    expect(gw.modelgate.logLines().some((l) => l.includes('"msg":"console"') && l.includes('"keyId":"alice"'))).toBe(
      true,
    );
  });
});

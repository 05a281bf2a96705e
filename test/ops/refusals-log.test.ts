/**
 * Envoy's own refusals reach ops in modelgate's vocabulary, and one command reports them with
 * modelgate's denials: through a real Envoy (trustedProxyHops: 1, so the client is the address
 * x-forwarded-for names) in front of a `modelgate serve` process. A denial modelgate made is in its
 * decision line (client and user agent as Envoy determined them) and in Envoy's access line
 * (`reply_reason`, the same request id); the 404, 405, 413 and, with modelgate killed, the 503
 * authz_unavailable are in Envoy's only. `modelgate denials` over both logs counts each once.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { DEMO_KEYS } from '../support/demo-keys';

/**
 * The identity modelgate's decision line and the ledger use: Envoy's minted one on modelgate's routes, else its
 * x-request-id.
 */
const idOf = (x: Record<string, unknown> | undefined): string =>
  String(x?.request !== undefined && x.request !== null && x.request !== '-' ? x.request : x?.request_id);
describeE2E("Envoy's refusals in the access log, and modelgate denials over both logs", () => {
  let gw: Gateway;
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    gw = await startGateway({
      modelgate: 'process',
      config: (demo) =>
        demo
          .replace(/maxRequestBytes: \d+/, 'maxRequestBytes: 4096')
          .replace('# trustedProxyHops: 1', 'trustedProxyHops: 1'),
    });
    const chat = (headers: Array<[string, string]>, body = '{"model":"gpt-4o-mini","messages":[]}') =>
      gw.send('POST', '/v1/chat/completions', { headers: [['content-type', 'application/json'], ...headers], body });
    const sent: Array<[string, Promise<{ status: number; headers: Record<string, unknown> }>]> = [
      [
        'key_unknown',
        chat([
          ['authorization', 'Bearer sk-not-a-key'],
          ['x-forwarded-for', '203.0.113.7'],
          ['user-agent', 'ops-e2e/1.0'],
        ]),
      ],
      ['path_unknown', gw.send('GET', '/nothing')],
      ['method_not_allowed', gw.send('DELETE', '/v1/chat/completions')],
      [
        'body_too_large',
        chat(
          [['authorization', `Bearer ${DEMO_KEYS.bob}`]],
          JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(8192) }] }),
        ),
      ],
    ];
    for (const [reason, p] of sent) {
      const r = await p;
      expect(r.headers['x-modelgate-reason'], reason).toBe(reason);
    }
    // Its lines are written every 100 ms: the denial's line is out before the process is killed.
    const until = Date.now() + 10_000;
    while (!gw.modelgate.logLines().some((l) => l.includes('"reason":"key_unknown"')) && Date.now() < until)
      await new Promise((r) => setTimeout(r, 20));
    gw.modelgate.kill('SIGKILL');
    const down = await chat([['authorization', `Bearer ${DEMO_KEYS.bob}`]]);
    expect([down.status, down.headers['x-modelgate-reason']]).toEqual([503, 'authz_unavailable']);
    // Envoy replaces a client's x-request-id with its own (preserve_external_request_id: false): each refusal's id is
    // read from its access line.
    const reasons = ['key_unknown', 'path_unknown', 'method_not_allowed', 'body_too_large', 'authz_unavailable'];
    const log = await gw.accessLogWhen((l) => reasons.every((r) => l.some((x) => x.reply_reason === r)));
    for (const r of reasons) ids[r] = idOf(log.find((x) => x.reply_reason === r));
  }, 60_000);
  afterAll(() => gw?.close());

  it("logs reply_reason and the request id for each of Envoy's refusals, and for modelgate's denial", () => {
    const log = gw.accessLog();
    for (const [reason, id] of Object.entries(ids)) {
      expect(
        log.find((l) => idOf(l) === id),
        reason,
      ).toMatchObject({ reply_reason: reason });
    }
    expect(log.find((l) => idOf(l) === ids.key_unknown)).toMatchObject({
      reason: 'key_unknown',
      decision: 'deny',
      client: '203.0.113.7',
    });
    expect(new Set(Object.values(ids)).size).toBe(5);
    for (const id of Object.values(ids)) expect(id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("puts the client as Envoy determined it and the user agent in modelgate's decision line", () => {
    const line = gw.modelgate
      .logLines()
      .map((l) => (l.startsWith('{') ? (JSON.parse(l) as Record<string, unknown>) : {}))
      .find((l) => l.requestId === ids.key_unknown);
    expect(line).toMatchObject({
      msg: 'decision',
      reason: 'key_unknown',
      client: '203.0.113.7',
      userAgent: 'ops-e2e/1.0',
    });
  });

  it('reports every one of them once with modelgate denials over both logs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'modelgate-refusals-'));
    writeFileSync(join(dir, 'modelgate.log'), gw.modelgate.logLines().join('\n'));
    writeFileSync(join(dir, 'envoy.log'), gw.envoyOutput());
    let out = '';
    const code = await runCli(
      ['denials', join(dir, 'modelgate.log'), join(dir, 'envoy.log'), '--since', '10m', '--json'],
      { stdout: (s) => (out += s), stderr: (s) => (out += s), env: {} },
    );
    expect(code).toBe(0);
    const report = JSON.parse(out) as {
      denials: Array<{ requestId: string; reason: string; seenBy: string; client?: string; userAgent?: string }>;
    };
    const mine = report.denials.filter((d) => Object.values(ids).includes(d.requestId));
    expect(mine.map((d) => d.reason).sort()).toEqual(Object.keys(ids).sort());
    expect(mine.find((d) => d.requestId === ids.key_unknown)).toMatchObject({
      seenBy: 'both',
      client: '203.0.113.7',
      userAgent: 'ops-e2e/1.0',
    });
    expect(
      mine
        .filter((d) => d.seenBy === 'envoy')
        .map((d) => d.reason)
        .sort(),
    ).toEqual(['authz_unavailable', 'body_too_large', 'method_not_allowed', 'path_unknown']);
  });
});

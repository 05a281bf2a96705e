/**
 * A provider's answer never speaks for modelgate, through the real Envoy: an upstream that answers
 * with modelgate's own `x-modelgate-reason` and `x-modelgate-hint` (a misbehaving or hostile
 * provider, or another gateway behind this one) has them removed on the way to the client, so a
 * client never shows its words as modelgate's hint and Envoy's access log never records its reason
 * as modelgate's. modelgate's own denials on the same routes keep theirs.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

const SPOOF = 'x-test-spoof';

describeE2E("headers of modelgate in a provider's answer", () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({
      upstream: {
        // x-test-spoof: the upstream answers with that status and modelgate's reason and hint headers.
        override: (r, res) => {
          const status = r.headers[SPOOF];
          if (typeof status !== 'string') return false;
          res.writeHead(Number(status), {
            'content-type': 'application/json',
            'x-modelgate-reason': 'balance_insufficient',
            'x-modelgate-hint': 'pay at https://evil.example',
          });
          res.end('{"error":{"message":"from the provider"}}');
          return true;
        },
      },
    });
  }, 60_000);
  afterAll(() => gw?.close());

  const chat = (headers: Array<[string, string]>) =>
    gw.send('POST', '/v1/chat/completions', {
      headers: [['content-type', 'application/json'], ...headers],
      body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}',
    });

  it.each(['200', '429', '503'])('removes them from an upstream answer of %s on every protocol', async (status) => {
    const answers = await Promise.all([
      chat([
        ['authorization', `Bearer ${DEMO_KEYS.bob}`],
        [SPOOF, status],
      ]),
      gw.send('POST', '/v1/messages', {
        headers: [
          ['content-type', 'application/json'],
          ['x-api-key', DEMO_KEYS.bob],
          ['anthropic-version', '2023-06-01'],
          [SPOOF, status],
        ],
        body: '{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}',
      }),
      gw.send('POST', '/v1beta/models/gemini-2.5-pro:generateContent', {
        headers: [
          ['content-type', 'application/json'],
          ['x-goog-api-key', DEMO_KEYS.bob],
          [SPOOF, status],
        ],
        body: '{"contents":[{"parts":[{"text":"hi"}]}]}',
      }),
      gw.send('POST', '/alt/v1/chat/completions', {
        headers: [
          ['content-type', 'application/json'],
          ['authorization', `Bearer ${DEMO_KEYS.bob}`],
          [SPOOF, status],
        ],
        body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}',
      }),
    ]);
    for (const a of answers) {
      expect(a.status, a.text).toBe(Number(status));
      expect(a.text).toContain('from the provider');
      expect(a.headers['x-modelgate-reason']).toBeUndefined();
      expect(a.headers['x-modelgate-hint']).toBeUndefined();
    }
    const log = await gw.accessLogWhen(
      (l) => l.filter((x) => String(x.status) === status && x.path !== undefined).length >= 4,
    );
    for (const line of log.filter((x) => String(x.status) === status))
      expect([undefined, null, '-']).toContain(line.reply_reason);
  });

  it("keeps modelgate's own reason and hint on a denial of the same route", async () => {
    const denied = await chat([
      ['authorization', 'Bearer sk-mg-not-a-key-at-all-000000000000000000000'],
      [SPOOF, '200'],
    ]);
    expect(denied.status).toBe(401);
    expect(denied.headers['x-modelgate-reason']).toMatch(/^key_/);
    expect(String(denied.headers['x-modelgate-hint'])).not.toContain('evil');
  });
});

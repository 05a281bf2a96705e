/**
 * Both gRPC transports (packages/grpc-server: `builtin`, modelgate's own HTTP/2, and `node`, node:http2) behind
 * the real Envoy: under concurrent load of allowed and denied requests on Envoy's few HTTP/2
 * connections to modelgate, every client gets its own decision (an answer delivered on the wrong
 * stream would let a denied request through or refuse an allowed one), and Envoy's gRPC health
 * check sees modelgate healthy.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, send, startGateway, type Gateway } from '../support/gateway';

const chat = (key: string, model: string) => ({
  headers: [
    ['authorization', `Bearer ${key}`],
    ['content-type', 'application/json'],
  ] as [string, string][],
  body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
});

/** Each case: what a client sends and the status and reason it must get. */
const CASES = [
  { key: DEMO_KEYS.alice, model: 'gpt-4o-mini', status: 200, reason: undefined },
  { key: DEMO_KEYS.alice, model: 'gpt-4o', status: 403, reason: 'model_not_in_group' },
  { key: DEMO_KEYS.bob, model: 'gpt-4o', status: 200, reason: undefined },
  { key: DEMO_KEYS.carol, model: 'gpt-4o-mini', status: 403, reason: 'balance_insufficient' },
  { key: DEMO_KEYS.dave, model: 'gpt-4o-mini', status: 401, reason: 'key_disabled' },
  { key: `${DEMO_KEYS.alice}x`, model: 'gpt-4o-mini', status: 401, reason: 'key_incomplete' },
];

for (const transport of ['builtin', 'node'] as const) {
  describeE2E(`the ${transport} gRPC transport behind Envoy`, () => {
    let gw: Gateway;
    beforeAll(async () => {
      // What is tested is which answer each request gets, not how fast: a burst of 600 on a busy
      // machine may keep a Check waiting past the demo's 1 s authzTimeoutMs (503 authz_unavailable).
      gw = await startGateway({
        config: (demo) =>
          demo
            .replace('transport: builtin', `transport: ${transport}`)
            .replace(/authzTimeoutMs: \d+/, 'authzTimeoutMs: 30000'),
      });
    });
    afterAll(() => gw?.close());

    it('gives each of 600 concurrent requests over HTTP/1.1 and HTTP/2 its own decision', async () => {
      const jobs = Array.from({ length: 600 }, (_, i) => CASES[(i * 7) % CASES.length]);
      const replies = await Promise.all(
        jobs.map((c, i) =>
          send(gw.baseUrl, 'POST', '/v1/chat/completions', { ...chat(c.key, c.model), http2: i % 2 === 0 }),
        ),
      );
      replies.forEach((r, i) => {
        expect(r.status, `request ${i}: ${r.headers['x-modelgate-reason']}: ${r.headers['x-modelgate-hint']}`).toBe(
          jobs[i].status,
        );
        expect(r.headers['x-modelgate-reason'], `request ${i}`).toBe(jobs[i].reason);
      });
      // What reached the upstream: exactly the allowed requests, each with its own key's identity.
      const count = (xs: string[]): Record<string, number> =>
        xs.reduce<Record<string, number>>((m, k) => ((m[k] = (m[k] ?? 0) + 1), m), {});
      const sent = count(
        jobs.filter((j) => j.status === 200).map((j) => (j.key === DEMO_KEYS.alice ? 'alice' : 'bob')),
      );
      const got = count(
        gw.received.filter((r) => r.url === '/v1/chat/completions').map((r) => String(r.headers['x-modelgate-key-id'])),
      );
      expect(got).toEqual(sent);
    });

    it("is healthy to Envoy's gRPC health check", async () => {
      const stats = await (
        await fetch(`${gw.envoy.adminUrl}/stats?filter=cluster.modelgate_authz.health_check`)
      ).text();
      expect(stats).toMatch(/cluster\.modelgate_authz\.health_check\.success: [1-9]/);
      expect(stats).toMatch(/cluster\.modelgate_authz\.health_check\.failure: 0/);
    });
  });
}

/**
 * The rate limit service out of reach with `failureMode: deny` (docs/rate-limits.md),
 * through the real Envoy: a key with limits gets 503 rate_limit_unavailable in its protocol's
 * shape, with `x-should-retry: true` and `retry-after: 1` (src/contract/retry-advice.ts: a 503 is worth
 * retrying, as for every other 503), so the SDKs retry it as they retry store_unavailable. The
 * service is a port nothing listens on: no Redis, no envoyproxy/ratelimit needed. (The drills stop a
 * running service and see it recover: test/e2e/drills.test.ts.)
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { DEMO_KEYS } from '../support/demo-keys';
import { limitedKey, sendAs, withKeys, type Family } from '../support/rate-limit-cases';
import { REFUSED_PORT } from '../support/refused-port';

const limited = limitedKey('rl-unavailable', { rpm: 1000 });

describeE2E('the rate limit service out of reach (failureMode deny)', () => {
  let gw: Gateway;
  beforeAll(async () => {
    const port = REFUSED_PORT;
    gw = await startGateway({
      config: withKeys([limited], (doc) => {
        doc.rateLimits = {
          engine: 'global',
          service: `127.0.0.1:${port}`,
          redis: '127.0.0.1:6379',
          failureMode: 'deny',
          timeoutMs: 200,
        };
      }),
    });
  }, 60_000);
  afterAll(() => gw?.close());

  const shapes: Record<Family, (body: any) => void> = {
    // eslint-disable-line @typescript-eslint/no-explicit-any
    openai: (b) =>
      expect(b).toEqual({
        error: {
          message: expect.stringContaining('[modelgate: rate_limit_unavailable]'),
          type: 'server_error',
          param: null,
          code: 'rate_limit_unavailable',
        },
      }),
    anthropic: (b) =>
      expect(b).toEqual({
        type: 'error',
        error: { type: 'api_error', message: expect.stringContaining('[modelgate: rate_limit_unavailable]') },
      }),
    gemini: (b) =>
      expect(b).toEqual({
        error: {
          code: 503,
          status: 'UNAVAILABLE',
          message: expect.stringContaining('[modelgate: rate_limit_unavailable]'),
        },
      }),
  };

  it.each(['openai', 'anthropic', 'gemini'] as const)(
    'answers a %s client 503 rate_limit_unavailable with x-should-retry: true and retry-after: 1',
    async (family) => {
      const r = await sendAs(gw, family, limited.key);
      expect(r.status).toBe(503);
      expect(r.headers).toMatchObject({
        'x-modelgate-reason': 'rate_limit_unavailable',
        'x-should-retry': 'true',
        'retry-after': '1',
        'content-type': 'application/json',
      });
      shapes[family](r.json());
      expect(gw.received.filter((q) => q.headers['x-modelgate-key-id'] === limited.id)).toHaveLength(0);
    },
  );

  it('serves a key without limits: no rate limit call is made for it', async () => {
    expect((await sendAs(gw, 'openai', DEMO_KEYS.bob)).status).toBe(200);
  });
});

/**
 * Metering at a sustained rate (found by the end-to-end benchmark, bench/README-e2e.md): Envoy ends
 * every observability-mode ext_proc stream with a RST_STREAM, and Node's HTTP/2 server (nghttp2's
 * rapid-reset guard: a burst of 1,000 resets per connection, then 33 a second) answers a connection
 * past that with GOAWAY. When the meter shared the Checks' connection, every Check in flight then
 * failed (503 authz_unavailable). The meter now has connections of its own, each retired after 900
 * streams: thousands of metered requests in a few seconds leave every Check answered and no
 * connection of modelgate's closed by modelgate.
 */
import * as http2 from 'node:http2';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

const REQUESTS = 2500;
const CONCURRENCY = 25;

async function stats(gw: Gateway, prefix: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${gw.envoy.adminUrl}/stats?filter=^${prefix.replace(/\./g, '\\.')}`)).text();
  return Object.fromEntries([...text.matchAll(/^(\S+): (\d+)$/gm)].map((m) => [m[1].slice(prefix.length), Number(m[2])]));
}

describeE2E('metering thousands of requests on one Envoy', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({ upstream: { chunkDelayMs: 0 } });
  }, 60_000);
  afterAll(() => gw?.close());

  it(`answers every Check of ${REQUESTS} metered requests, and no modelgate connection is closed by modelgate`, async () => {
    const session = http2.connect(gw.baseUrl);
    const body = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'metered' }] });
    const statuses = new Map<number, number>();
    let next = 0;
    const one = (): Promise<void> =>
      new Promise((resolve, reject) => {
        const req = session.request({ ':method': 'POST', ':path': '/v1/chat/completions', 'authorization': `Bearer ${DEMO_KEYS.bob}`, 'content-type': 'application/json' });
        req.on('response', (h) => statuses.set(Number(h[':status']), (statuses.get(Number(h[':status'])) ?? 0) + 1));
        req.on('data', () => {});
        req.on('end', () => resolve());
        req.on('error', reject);
        req.end(body);
      });
    const worker = async (): Promise<void> => {
      while (next < REQUESTS) {
        next++;
        await one();
      }
    };
    try {
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    } finally {
      session.close();
    }
    expect(Object.fromEntries(statuses)).toEqual({ 200: REQUESTS });
    const authz = await stats(gw, 'cluster.modelgate_authz.');
    const meter = await stats(gw, 'cluster.modelgate_meter.');
    // No GOAWAY from modelgate on either cluster; the meter's connections were retired by Envoy instead.
    expect(authz.upstream_cx_close_notify ?? 0).toBe(0);
    expect(meter.upstream_cx_close_notify ?? 0).toBe(0);
    expect(meter.upstream_cx_max_requests).toBeGreaterThanOrEqual(2);
    expect(meter.upstream_rq_total).toBeGreaterThanOrEqual(REQUESTS);
  }, 120_000);
});

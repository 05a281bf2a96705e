/**
 * Metering at a sustained rate: thousands of metered requests in a few seconds on one Envoy leave
 * every Check answered, no connection of modelgate's closed by modelgate, and every request settled
 * exactly once, through a few long-lived access-log streams (a stream per request, as the meter's
 * earlier ext_proc design opened, tripped HTTP/2 reset guards at this rate).
 */
import * as http2 from 'node:http2';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';

const REQUESTS = 2500;
const CONCURRENCY = 25;

async function stats(gw: Gateway, prefix: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${gw.envoy.adminUrl}/stats?filter=^${prefix.replace(/\./g, '\\.')}`)).text();
  return Object.fromEntries(
    [...text.matchAll(/^(\S+): (\d+)$/gm)].map((m) => [m[1].slice(prefix.length), Number(m[2])]),
  );
}

describeE2E('metering thousands of requests on one Envoy', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({ upstream: { chunkDelayMs: 0 } });
  }, 60_000);
  afterAll(() => gw?.close());

  it(`answers every Check of ${REQUESTS} metered requests, settles each once, and no modelgate connection is closed by modelgate`, async () => {
    const session = http2.connect(gw.baseUrl);
    const body = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'metered' }] });
    const statuses = new Map<number, number>();
    let next = 0;
    const one = (): Promise<void> =>
      new Promise((resolve, reject) => {
        const req = session.request({
          ':method': 'POST',
          ':path': '/v1/chat/completions',
          authorization: `Bearer ${DEMO_KEYS.bob}`,
          'content-type': 'application/json',
        });
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
    // No GOAWAY from modelgate on either cluster; the reports went on a stream or two, not one per request.
    expect(authz.upstream_cx_close_notify ?? 0).toBe(0);
    expect(meter.upstream_cx_close_notify ?? 0).toBe(0);
    expect(meter.upstream_rq_total).toBeLessThanOrEqual(4);
    // Each settled once: the meter's count, and the ledger's newest rows (the file store keeps 2,000) all distinct.
    const metered = async (): Promise<number> =>
      Number(
        /modelgate_meter_responses_total\{result="metered",reason=""\} (\d+)/.exec(
          await (await fetch(`http://${gw.modelgate.httpAddress}/metrics`)).text(),
        )?.[1] ?? 0,
      );
    await waitFor('every settlement', async () => (await metered()) >= REQUESTS, 30_000);
    expect(await metered()).toBe(REQUESTS);
    const rows = await gw.modelgate.service!.store.meter!.usage({ keyId: 'bob', limit: 2000 });
    expect(new Set(rows.map((u) => u.requestId)).size).toBe(rows.length);
  }, 120_000);
});

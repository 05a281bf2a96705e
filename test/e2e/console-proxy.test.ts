/**
 * The console's per-address limit behind a load balancer, through the real
 * Envoy. A stand-in load balancer (an HTTP proxy that appends the client's address to
 * x-forwarded-for, as cloud load balancers do) sits in front of Envoy; two clients reach it from two
 * loopback addresses (127.0.0.2, 127.0.0.3). With `gateway.trustedProxyHops: 1` Envoy takes the
 * client's address from x-forwarded-for and each client has its own bucket; without it every
 * client is the load balancer, one bucket (what the finding saw: one key holder locked another out).
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

const PER_ADDRESS = 3;
const limited =
  (hops: number) =>
  (demo: string): string =>
    `${demo.replace('gateway:\n', `gateway:\n  trustedProxyHops: ${hops}\n`)}\nconsole:\n  rateLimit:\n    perAddressPerMinute: ${PER_ADDRESS}\n    perKeyPerMinute: 100\n`;

/** A load balancer: forwards to Envoy, appending the connecting client's address to x-forwarded-for. */
async function startBalancer(target: string): Promise<{ url: string; close(): Promise<void> }> {
  const to = new URL(target);
  const server = http.createServer((req, res) => {
    const xff = [req.headers['x-forwarded-for'], req.socket.remoteAddress].filter(Boolean).join(', ');
    const up = http.request(
      {
        host: to.hostname,
        port: to.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, 'x-forwarded-for': xff },
        agent: false,
      },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    up.on('error', () => {
      res.writeHead(502);
      res.end();
    });
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** GET /console/api/info through the balancer from a given loopback address. */
function info(
  balancer: string,
  from: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; reason?: string }> {
  const u = new URL(balancer);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: '/console/api/info', localAddress: from, headers, agent: false },
      (res) => {
        res.resume();
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, reason: res.headers['x-modelgate-reason'] as string | undefined }),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const burst = async (balancer: string, from: string, n: number, headers?: Record<string, string>) => {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await info(balancer, from, headers)).status);
  return out;
};

describeE2E('the console behind a load balancer (docs/security.md)', () => {
  let trusted: Gateway;
  let untrusted: Gateway;
  let lbTrusted: Awaited<ReturnType<typeof startBalancer>>;
  let lbUntrusted: Awaited<ReturnType<typeof startBalancer>>;
  beforeAll(async () => {
    trusted = await startGateway({ config: limited(1) });
    untrusted = await startGateway({ config: limited(0) });
    lbTrusted = await startBalancer(trusted.baseUrl);
    lbUntrusted = await startBalancer(untrusted.baseUrl);
  });
  afterAll(async () => {
    await lbTrusted?.close();
    await lbUntrusted?.close();
    await trusted?.close();
    await untrusted?.close();
  });

  it('renders trustedProxyHops as xff_num_trusted_hops', () => {
    expect(trusted.envoyYaml).toMatch(/xff_num_trusted_hops: 1\b/);
    expect(untrusted.envoyYaml).not.toMatch(/xff_num_trusted_hops/);
  });

  it('with trustedProxyHops: 1, two clients behind one balancer get a bucket each', async () => {
    expect(await burst(lbTrusted.url, '127.0.0.2', PER_ADDRESS + 1)).toEqual([200, 200, 200, 429]);
    // The other client is not locked out by the first.
    expect(await burst(lbTrusted.url, '127.0.0.3', PER_ADDRESS)).toEqual([200, 200, 200]);
    // Envoy's access log names each client, not the balancer (flushed every 20 ms: wait for the lines).
    const clients = () =>
      [
        ...new Set(
          trusted
            .accessLog()
            .filter((l) => l.route === 'console')
            .map((l) => l.client),
        ),
      ].sort();
    await expect.poll(clients, { timeout: 15_000 }).toEqual(['127.0.0.2', '127.0.0.3']);
  });

  it('with trustedProxyHops: 1, addresses a client prepends to x-forwarded-for change nothing', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < PER_ADDRESS + 1; i++)
      statuses.push((await info(lbTrusted.url, '127.0.0.4', { 'x-forwarded-for': `198.51.100.${i}` })).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    // Nor does a copy of modelgate's own client-address header.
    expect((await info(lbTrusted.url, '127.0.0.4', { 'x-modelgate-client-address': '192.0.2.99' })).status).toBe(429);
  });

  it('without trustedProxyHops, every client behind the balancer shares its one bucket (the finding)', async () => {
    expect(await burst(lbUntrusted.url, '127.0.0.2', PER_ADDRESS)).toEqual([200, 200, 200]);
    const other = await info(lbUntrusted.url, '127.0.0.3');
    expect(other).toEqual({ status: 429, reason: 'console_rate_limited' });
  });
});

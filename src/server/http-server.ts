/**
 * The small HTTP listener beside the gRPC port: `/healthz` (the process is up), `/readyz` (it can
 * answer Checks: not draining; a store outage does not count, since the cache answers within its
 * stale window and the rest is a prompt 503 store_unavailable: a Kubernetes readiness probe on
 * `/readyz` must not take every replica out at once), `/healthz/store` (the store itself can
 * answer; for monitoring), Prometheus `/metrics`, and the catalog's model-list routes when a
 * catalog handler is given.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { metricsText } from './cluster-metrics';

export type RouteHandler = (req: http.IncomingMessage, res: http.ServerResponse) => boolean | Promise<boolean>;

export interface HttpServer {
  readonly address: string;
  close(): Promise<void>;
}

export async function startHttpServer(
  address: string,
  ready: () => boolean,
  registry: Registry,
  extra?: RouteHandler,
  onError?: (err: unknown) => void,
  storeReady?: () => boolean,
): Promise<HttpServer> {
  const server = http.createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      onError?.(err);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('internal error\n');
    });
  });
  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    if (path === '/readyz') {
      const ok = ready();
      const store =
        storeReady === undefined || storeReady()
          ? ''
          : ' (the store cannot answer: cached keys within the stale window, others 503 store_unavailable; see /healthz/store)';
      return void res
        .writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' })
        .end(ok ? `ready${store}\n` : 'not ready\n');
    }
    if (path === '/healthz/store') {
      const ok = storeReady === undefined || storeReady();
      return void res
        .writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' })
        .end(ok ? 'store ok\n' : 'store unavailable\n');
    }
    if (path === '/metrics') {
      const body = await metricsText(registry);
      return void res.writeHead(200, { 'content-type': registry.contentType }).end(body);
    }
    if (extra && (await extra(req, res))) return;
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  }
  const colon = address.lastIndexOf(':');
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(address.slice(colon + 1)), address.slice(0, colon).replace(/^\[|\]$/g, ''), () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    address: `${address.slice(0, colon)}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

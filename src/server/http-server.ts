/**
 * The small HTTP listener beside the gRPC port: `/healthz` (the process is up), `/readyz` (the
 * store is loaded and the service is not draining), Prometheus `/metrics`, and the catalog's
 * model-list routes when a catalog handler is given.
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

export async function startHttpServer(address: string, ready: () => boolean, registry: Registry, extra?: RouteHandler, onError?: (err: unknown) => void): Promise<HttpServer> {
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
      return void res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ready\n' : 'not ready\n');
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
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

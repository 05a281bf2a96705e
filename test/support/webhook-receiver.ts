/**
 * A local receiver of budget-alert webhooks: it keeps every delivery (path with its query string,
 * signature and event id headers, body, and the event's threshold and subject when the body is an
 * event) and answers `status(path, n)` to the n-th delivery of each path. `signedWith` checks a
 * delivery's signature as a receiver must: HMAC-SHA256 of "<t>.<body>" under the webhook's secret.
 */
import { createHmac } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  readonly path: string;
  readonly signature: string;
  readonly eventId: string;
  readonly body: string;
  /** The event's threshold (percent), NaN when the body is not an event. */
  readonly threshold: number;
  /** `<kind>:<name>` of the event's budget, '' when the body is not an event. */
  readonly subject: string;
}

export interface WebhookReceiver {
  /** http://127.0.0.1:<port> */
  readonly base: string;
  readonly got: Delivery[];
  close(): Promise<void>;
}

export async function startWebhookReceiver(
  status: (path: string, n: number) => number = () => 204,
): Promise<WebhookReceiver> {
  const got: Delivery[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const path = req.url ?? '';
      let threshold = NaN;
      let subject = '';
      try {
        const e = JSON.parse(body) as { threshold?: unknown; subject?: { kind?: unknown; name?: unknown } };
        if (typeof e.threshold === 'number') threshold = e.threshold;
        if (e.subject) subject = `${String(e.subject.kind)}:${String(e.subject.name)}`;
      } catch {
        // not JSON: kept with its body, which the test's assertions then show
      }
      got.push({
        path,
        signature: String(req.headers['x-modelgate-signature']),
        eventId: String(req.headers['x-modelgate-event-id']),
        body,
        threshold,
        subject,
      });
      res.writeHead(status(path, got.filter((g) => g.path === path).length)).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    got,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Whether a delivery's signature (`t=<unix seconds>,v1=<hex>`) is HMAC-SHA256 of "<t>.<body>" under `secret`. */
export function signedWith(secret: string, d: { readonly signature: string; readonly body: string }): boolean {
  const [t, v1] = d.signature.replace('t=', '').split(',v1=');
  return v1 !== undefined && createHmac('sha256', secret).update(`${t}.${d.body}`).digest('hex') === v1;
}

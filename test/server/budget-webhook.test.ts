/**
 * Budget alerts (src/meter/budget-alerts.ts) delivered by webhook (src/server/budget-webhook.ts) to
 * a local receiver that checks the HMAC-SHA256 signature over timestamp and body: each threshold
 * fires once per window, the next window fires again, a receiver that fails is retried with
 * backoff (no real waits: the delays are recorded), and a wrong secret does not verify.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { alertId, BudgetAlerts, thresholdsCrossed, type BudgetAlertEvent } from '../../src/meter/budget-alerts';
import { BudgetBook, type BudgetSubject } from '../../src/meter/budgets';
import type { Budget } from '../../src/store/budget-window';
import { BudgetWebhook, EVENT_ID_HEADER, SIGNATURE_HEADER } from '../../src/server/budget-webhook';
import type { WebhookDelivery } from '../../src/admin/backend';

const SECRET = 'whsec-test-0123456789';
const key: BudgetSubject = { kind: 'key', name: 'team-a' };
const budget: Budget = { amount: 100, period: 'day', timeZone: 'Europe/Berlin' };

interface Received {
  id: string;
  event: BudgetAlertEvent;
  verified: boolean;
}

/** A receiver that verifies each delivery's signature, and fails the first `failFirst` attempts. */
async function receiver(
  failFirst = 0,
): Promise<{ url: string; got: Received[]; attempts: number; close(): Promise<void> }> {
  const state = { got: [] as Received[], attempts: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      state.attempts++;
      const body = Buffer.concat(chunks).toString('utf8');
      const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(req.headers[SIGNATURE_HEADER]));
      const expected = m ? createHmac('sha256', SECRET).update(`${m[1]}.${body}`).digest() : Buffer.alloc(32);
      const verified = m !== null && timingSafeEqual(expected, Buffer.from(m[2], 'hex'));
      if (state.attempts <= failFirst) return void res.writeHead(503).end();
      state.got.push({
        id: String(req.headers[EVENT_ID_HEADER]),
        event: JSON.parse(body) as BudgetAlertEvent,
        verified,
      });
      res.writeHead(verified ? 204 : 401).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/budget`,
    get got() {
      return state.got;
    },
    get attempts() {
      return state.attempts;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

describe('thresholdsCrossed', () => {
  it('names each threshold a spend reaches from below', () => {
    expect(thresholdsCrossed(0, 49.99, 100, [50, 80, 95, 100])).toEqual([]);
    expect(thresholdsCrossed(0, 50, 100, [50, 80, 95, 100])).toEqual([50]);
    expect(thresholdsCrossed(49, 96, 100, [50, 80, 95, 100])).toEqual([50, 80, 95]);
    expect(thresholdsCrossed(100, 130, 100, [50, 80, 95, 100])).toEqual([]);
  });
});

describe('budget alerts by webhook', () => {
  it('fires each threshold once per window, signed, and again in the next window', async () => {
    const r = await receiver();
    close = r.close;
    let now = Date.parse('2026-10-25T10:00:00Z'); // Berlin's 25-hour day
    const hook = new BudgetWebhook({ url: r.url, secret: SECRET, now: () => now, log: () => {} });
    const alerts = new BudgetAlerts(
      (e) => hook.send(e),
      undefined,
      () => now,
    );
    const book = new BudgetBook({
      load: async () => 0,
      now: () => now,
      onSpent: (s, b, w, before, after) => alerts.spent(s, b, w, before, after),
    });
    for (const cost of [30, 30, 5, 20, 10, 10]) {
      // 30, 60, 65, 85, 95, 105
      const v = await book.admit([{ subject: key, budget }], 1, 'soft');
      expect(v.ok).toBe(true);
      if (v.ok) book.settle(v.hold, cost, now);
    }
    await hook.idle();
    expect(r.got.map((g) => g.event.threshold)).toEqual([50, 80, 95, 100]);
    expect(r.got.every((g) => g.verified)).toBe(true);
    expect(new Set(r.got.map((g) => g.id)).size).toBe(4);
    expect(r.got.every((g) => g.id === g.event.id)).toBe(true);
    expect(r.got[0].event).toMatchObject({
      type: 'budget.threshold',
      subject: key,
      spent: 60,
      windowStart: '2026-10-24T22:00:00.000Z',
      resetsAt: '2026-10-25T23:00:00.000Z',
    });
    expect(hook.status(r.got[0].id)).toBe('delivered');

    // The next day: a new window, the thresholds fire again with other ids.
    now = Date.parse('2026-10-25T23:00:00Z');
    const v = await book.admit([{ subject: key, budget }], 1, 'soft');
    if (v.ok) book.settle(v.hold, 55, now);
    await hook.idle();
    expect(r.got).toHaveLength(5);
    expect(r.got[4].event).toMatchObject({ threshold: 50, windowStart: '2026-10-25T23:00:00.000Z' });
    expect(r.got.slice(0, 4).map((g) => g.id)).not.toContain(r.got[4].id);
  });

  it('retries a failing receiver with exponential backoff, then delivers once', async () => {
    const r = await receiver(3);
    close = r.close;
    const delays: number[] = [];
    const logged: { attempt: number; delivered: boolean; status?: number }[] = [];
    const hook = new BudgetWebhook({
      url: r.url,
      secret: SECRET,
      delay: async (ms) => {
        delays.push(ms);
      },
      log: (o) => logged.push(o),
    });
    const alerts = new BudgetAlerts((e) => hook.send(e));
    alerts.spent(key, budget, { start: 0, resetsAt: 86_400_000 }, 0, 80);
    await hook.idle();
    expect(r.attempts).toBe(5); // 3 failures, then 50 % and 80 % delivered
    expect(r.got.map((g) => g.event.threshold).sort()).toEqual([50, 80]);
    expect(delays.sort((a, b) => a - b).slice(0, 3)).toEqual([1000, 1000, 2000]);
    expect(logged.filter((l) => !l.delivered).every((l) => l.status === 503)).toBe(true);
  });

  it('gives up after its attempts and says so; a receiver with another secret cannot verify the signature', async () => {
    const r = await receiver(100);
    close = r.close;
    const hook = new BudgetWebhook({ url: r.url, secret: SECRET, attempts: 3, delay: async () => {}, log: () => {} });
    const alerts = new BudgetAlerts((e) => hook.send(e), [100]);
    alerts.spent(key, budget, { start: 0, resetsAt: 86_400_000 }, 0, 100);
    await hook.idle();
    expect(r.attempts).toBe(3);
    expect(r.got).toHaveLength(0);
    expect(hook.status(alertId(key, { start: 0, resetsAt: 86_400_000 }, 100))).toBe('failed');
    const wrong = await receiver();
    const other = new BudgetWebhook({
      url: wrong.url,
      secret: 'another-secret',
      attempts: 1,
      delay: async () => {},
      log: () => {},
    });
    new BudgetAlerts((e) => other.send(e), [100]).spent(key, budget, { start: 0, resetsAt: 86_400_000 }, 0, 100);
    await other.idle();
    expect(wrong.got.map((g) => g.verified)).toEqual([false]);
    await wrong.close();
  });

  it("records each delivery's state for the admin API: queued, each failed attempt with its status, then delivered; an unreachable receiver's error is a code, never the URL", async () => {
    const r = await receiver(2);
    close = r.close;
    const states: WebhookDelivery[] = [];
    const hook = new BudgetWebhook({
      url: r.url,
      secret: SECRET,
      delay: async () => {},
      log: () => {},
      record: (d) => states.push(d),
    });
    const model: BudgetSubject = { kind: 'model', name: 'team-a', model: 'gpt-4o' };
    new BudgetAlerts((e) => hook.send(e), [100]).spent(model, budget, { start: 0, resetsAt: 86_400_000 }, 0, 100);
    await hook.idle();
    expect(states.map((d) => [d.status, d.attempts, d.lastStatus, d.lastError])).toEqual([
      ['pending', 0, null, null],
      ['pending', 1, 503, 'http_503'],
      ['pending', 2, 503, 'http_503'],
      ['delivered', 3, 204, null],
    ]);
    expect(states[3]).toMatchObject({
      eventId: alertId(model, { start: 0, resetsAt: 86_400_000 }, 100),
      subject: 'model:team-a:gpt-4o',
      threshold: 100,
      type: 'budget.threshold',
    });

    // A URL holding a secret (as many webhook URLs do) on a port nobody listens on any more.
    const gone = await receiver();
    await gone.close();
    const secretUrl = `${gone.url}/T0KEN-IN-THE-PATH`;
    const down: WebhookDelivery[] = [];
    const lost = new BudgetWebhook({
      url: secretUrl,
      secret: SECRET,
      attempts: 2,
      delay: async () => {},
      log: () => {},
      record: (d) => down.push(d),
    });
    new BudgetAlerts((e) => lost.send(e), [100]).spent(key, budget, { start: 0, resetsAt: 86_400_000 }, 0, 100);
    await lost.idle();
    expect(down.map((d) => [d.status, d.attempts, d.lastError])).toEqual([
      ['pending', 0, null],
      ['pending', 1, 'ECONNREFUSED'],
      ['failed', 2, 'ECONNREFUSED'],
    ]);
    expect(JSON.stringify(down)).not.toContain('T0KEN');
  });
});

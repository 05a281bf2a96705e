/**
 * BudgetWebhooks (src/server/budget-webhooks.ts): each alert goes to every webhook that takes it (its
 * thresholds, the budgets it watches, enabled), the config file's included, each signed with its own
 * secret; the list is read from the store when the alert fires and before each retry, so a webhook
 * removed between two attempts gets no more, and one whose secret was rotated gets the next attempt
 * signed with the new secret. No real waits: the retry delay is a function the test drives.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { WebhookDelivery } from '../../src/admin/backend';
import type { WebhookRecord } from '../../src/admin/webhooks';
import type { BudgetAlertEvent } from '../../src/meter/budget-alerts';
import { BudgetWebhooks } from '../../src/server/budget-webhooks';
import { signedWith, startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

/** A receiver answering `status(path, n)` to the n-th request of each path, closed after the test. */
async function receiver(status?: (path: string, n: number) => number): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver(status);
  closers.push(r.close);
  return r;
}

const hook = (id: string, url: string, over: Partial<WebhookRecord> = {}): WebhookRecord => ({
  id,
  url,
  secret: `whsec_${id}-secret`,
  thresholds: [50, 100],
  subjects: null,
  enabled: true,
  description: null,
  createdAt: 0,
  secretRotatedAt: 0,
  ...over,
});

const event = (threshold: number, subject: BudgetAlertEvent['subject'], id = `ev-${threshold}`): BudgetAlertEvent => ({
  id,
  type: 'budget.threshold',
  subject,
  budget: { amount: 1, period: 'day', timeZone: 'UTC' },
  threshold,
  spent: threshold / 100,
  windowStart: '2026-11-28T00:00:00.000Z',
  resetsAt: '2026-11-29T00:00:00.000Z',
  time: '2026-11-28T12:00:00.000Z',
});

describe('BudgetWebhooks', () => {
  it("sends an alert to each webhook whose thresholds and subjects take it, the config's included, each signed with its own secret", async () => {
    const r = await receiver();
    let list: WebhookRecord[] = [
      hook('all', `${r.base}/all`),
      hook('team-a', `${r.base}/team-a`, { subjects: ['key:team-a'], thresholds: [80] }),
      hook('group-g', `${r.base}/group-g`, { subjects: ['group:g'] }),
      hook('off', `${r.base}/off`, { enabled: false }),
    ];
    const records: WebhookDelivery[] = [];
    const w = new BudgetWebhooks({
      config: { url: `${r.base}/config`, secret: 'config-secret', thresholds: [100] },
      load: async () => list,
      pollMs: 0,
      log: () => {},
      record: (d) => records.push(d),
    });
    closers.push(async () => w.close());
    await w.refresh();
    expect(w.thresholds()).toEqual([50, 80, 100]);

    w.send(event(80, { kind: 'model', name: 'team-a', model: 'gpt-4o' }));
    w.send(event(50, { kind: 'group', name: 'g' }));
    w.send(event(100, { kind: 'key', name: 'team-b' }));
    await w.idle();
    const paths = r.got.map((g) => g.path).sort();
    expect(paths).toEqual(['/all', '/all', '/config', '/group-g', '/team-a']);
    for (const g of r.got) {
      const id = g.path.slice(1);
      expect(signedWith(id === 'config' ? 'config-secret' : `whsec_${id}-secret`, g), g.path).toBe(true);
    }
    expect(
      records
        .filter((d) => d.status === 'delivered')
        .map((d) => `${d.webhookId}:${d.eventId}`)
        .sort(),
    ).toEqual(['all:ev-100', 'all:ev-50', 'config:ev-100', 'group-g:ev-50', 'team-a:ev-80']);

    list = [];
    await w.refresh();
    expect(w.thresholds()).toEqual([100]);
  });

  it('stops retrying a webhook removed between attempts, and signs a retry with a secret rotated meanwhile', async () => {
    const r = await receiver((path, n) => (n === 1 ? 503 : 204));
    let list: WebhookRecord[] = [hook('gone', `${r.base}/gone`), hook('rotated', `${r.base}/rotated`)];
    const records: WebhookDelivery[] = [];
    const delays: number[] = [];
    const w = new BudgetWebhooks({
      config: null,
      load: async () => list,
      pollMs: 0,
      log: () => {},
      record: (d) => records.push(d),
      // Between the first and the second attempt: one webhook is removed, the other's secret rotated.
      delay: async (ms) => {
        delays.push(ms);
        list = [hook('rotated', `${r.base}/rotated`, { secret: 'whsec_new-secret' })];
      },
    });
    closers.push(async () => w.close());
    w.send(event(50, { kind: 'key', name: 'k' }));
    await w.idle();
    expect(r.got.map((g) => g.path).sort()).toEqual(['/gone', '/rotated', '/rotated']);
    const rotated = r.got.filter((g) => g.path === '/rotated');
    expect(signedWith('whsec_rotated-secret', rotated[0])).toBe(true);
    expect(signedWith('whsec_new-secret', rotated[1])).toBe(true);
    const last = (id: string) => records.filter((d) => d.webhookId === id).at(-1);
    expect(last('gone')).toMatchObject({ status: 'failed', attempts: 1, lastError: 'webhook_removed' });
    expect(last('rotated')).toMatchObject({ status: 'delivered', attempts: 2 });
    expect(delays).toEqual([1000, 1000]);
  });
});

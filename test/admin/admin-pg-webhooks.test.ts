/**
 * Webhooks of budget alerts on PostgreSQL (migration 14) with two replicas on one database: a webhook
 * created through replica A's API gets the signed alert of a settlement on replica B at once (B reads
 * the webhooks when the alert fires); after DELETE on A, B sends it nothing more. Deliveries are kept
 * per event and webhook, and the secret is a column the API never answers after create.
 */
import { readFileSync } from 'node:fs';
import createClient from 'openapi-fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main';
import type { AdminDb } from '../../src/store/pg/admin';
import { setGroup, setPrice } from '../../src/store/pg/groups';
import { migrate } from '../../src/store/pg/schema';
import type { paths } from '../support/admin-api';
import { openPool, startPgServer, type PgServer } from '../support/pg-server';
import { signedWith, startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import {
  DEMO_CONFIG,
  deniedHeader,
  reasonOf,
  startHarness,
  tempConfig,
  type Harness,
} from '../support/service-harness';

let now = Date.parse('2026-11-28T12:00:00Z');
let server: PgServer;
let pool: AdminDb;
let a: Harness;
let b: Harness;
let token = '';
let receiver: WebhookReceiver;
let base = '';
const api = (h: Harness) =>
  createClient<paths>({ baseUrl: `http://${h.service.httpAddress}`, headers: { authorization: `Bearer ${token}` } });

/**
 * A key made on A with a day's budget of 0.0002 (strict mode: each of two replicas may hold half);
 * one chat on B, settled there at its maximum (33 % of the budget).
 */
async function crossHalfOnB(id: string): Promise<void> {
  const made = await api(a).POST('/admin/v1/keys', {
    body: { id, group: 'basic', balance: 5, budget: { amount: 0.0002, period: 'day', timeZone: 'UTC' } },
  });
  expect(made.response.status).toBe(201);
  const end = Date.now() + 10_000;
  for (;;) {
    const r = await b.check({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${made.data!.secret}`]],
      body: '{"model":"gpt-4o-mini","max_tokens":100}',
    });
    if (reasonOf(r) === 'allowed') break;
    if (Date.now() > end)
      throw new Error(`B still answers ${reasonOf(r)}: ${JSON.stringify(deniedHeader(r, 'x-modelgate-hint'))}`);
    await new Promise((res) => setTimeout(res, 20));
  }
  now += 3_600_000;
  b.service.meter.expire();
  await b.service.meter.idle();
}

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  base = receiver.base;
  server = await startPgServer();
  pool = openPool(server.url);
  await migrate(pool);
  await setGroup(pool, { name: 'basic', models: [{ name: 'gpt-4o-mini', protocols: null, available: true }] });
  await setPrice(pool, 'basic', 'gpt-4o-mini', { price: { input: 0.15, output: 0.6, cachedInput: null } });
  let out = '';
  const code = await runCli(
    ['admin-tokens', 'new', '--scope', 'admin', '--id', 'tok-admin', '--store', server.url, '--json'],
    { stdout: (s) => (out += s), stderr: () => {}, env: {} },
  );
  expect(code).toBe(0);
  token = JSON.parse(out).token;
  const config = tempConfig(
    `${readFileSync(DEMO_CONFIG, 'utf8').replace('  mode: soft ', '  mode: strict ')}\nstore: ${server.url}\n`,
  );
  [a, b] = await Promise.all([
    startHarness({ configPath: config, now: () => now }),
    startHarness({ configPath: config, now: () => now }),
  ]);
}, 120_000);
afterAll(async () => {
  await a?.close();
  await b?.close();
  await pool?.end();
  await server?.close();
  await receiver?.close();
});

describe('webhooks on PostgreSQL, two replicas', () => {
  it('a webhook created on A gets the signed alert of a settlement on B; after DELETE on A, nothing more', async () => {
    const made = await api(a).POST('/admin/v1/webhooks', {
      body: { id: 'pg-hook', url: `${base}/hook?sig=receiver-credential`, thresholds: [25] },
    });
    expect(made.response.status).toBe(201);
    const secret = made.data!.secret;
    // B lists it at once; the secret is a column, never answered.
    const onB = await api(b).GET('/admin/v1/webhooks');
    expect(onB.data!.webhooks.map((w) => [w.id, w.url, w.urlHasQuery])).toEqual([['pg-hook', `${base}/hook`, true]]);
    expect(JSON.stringify(onB.data)).not.toMatch(/whsec_|receiver-credential/);
    const { rows } = await pool.query<{ secret: string }>('SELECT secret FROM modelgate.webhooks WHERE id = $1', [
      'pg-hook',
    ]);
    expect(rows[0].secret).toBe(secret);

    const got = receiver.got;
    await crossHalfOnB('pg-a');
    const end = Date.now() + 5000;
    while (got.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    expect(got.map((g) => [g.path, g.subject])).toEqual([['/hook?sig=receiver-credential', 'key:pg-a']]);
    expect(signedWith(secret, got[0])).toBe(true);

    // The delivery B recorded, seen through A.
    const stop = Date.now() + 5000;
    let deliveries = (await api(a).GET('/admin/v1/webhooks/deliveries')).data!.deliveries;
    while (deliveries[0]?.status !== 'delivered' && Date.now() < stop) {
      await new Promise((r) => setTimeout(r, 20));
      deliveries = (await api(a).GET('/admin/v1/webhooks/deliveries')).data!.deliveries;
    }
    expect(deliveries.map((d) => [d.webhookId, d.subject, d.status])).toEqual([['pg-hook', 'key:pg-a', 'delivered']]);

    expect(
      (await api(a).DELETE('/admin/v1/webhooks/{id}', { params: { path: { id: 'pg-hook' } } })).response.status,
    ).toBe(200);
    // Another webhook, made on A after the removal: the next alert fires and reaches it, and only it.
    expect(
      (await api(a).POST('/admin/v1/webhooks', { body: { id: 'pg-other', url: `${base}/other`, thresholds: [25] } }))
        .response.status,
    ).toBe(201);
    await crossHalfOnB('pg-b');
    const fired = Date.now() + 5000;
    while (!got.some((g) => g.path === '/other') && Date.now() < fired) await new Promise((r) => setTimeout(r, 10));
    expect(got.map((g) => [g.path, g.subject])).toEqual([
      ['/hook?sig=receiver-credential', 'key:pg-a'],
      ['/other', 'key:pg-b'],
    ]);
    await new Promise((r) => setTimeout(r, 100));
    expect(got).toHaveLength(2);

    const audit = (await api(b).GET('/admin/v1/audit', { params: { query: { limit: 20 } } })).data!.entries.filter(
      (e) => e.target === 'pg-hook',
    );
    expect(audit.map((e) => e.action)).toEqual(['webhook.delete', 'webhook.create']);
    expect(JSON.stringify(audit) + a.logs.raw.join('\n') + b.logs.raw.join('\n')).not.toMatch(
      new RegExp(`${secret}|receiver-credential`),
    );
  });
});

/**
 * The admin API with the whole gateway (demo config, file store, a real Envoy): a key created
 * through the typed client serves a chat through Envoy, and its usage then appears through the API;
 * a webhook created through the API gets the signed alert of a metered chat, and nothing once
 * removed; Envoy's public listener does not serve the admin API.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import createClient from 'openapi-fetch';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { paths } from '../support/admin-api';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { signedWith, startWebhookReceiver } from '../support/webhook-receiver';

const ADMIN_TOKEN = /^export ADMIN_TOKEN=(\S+)/m.exec(
  readFileSync(join(__dirname, '..', '..', 'envoy', 'demo-keys.env'), 'utf8'),
)![1];

describeE2E('the admin API with a real Envoy', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway();
  });
  afterAll(async () => gw?.close());
  const api = () =>
    createClient<paths>({
      baseUrl: `http://${gw.modelgate.httpAddress}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });

  it('a key created by the API serves a chat through Envoy, and its usage appears', async () => {
    const made = await api().POST('/admin/v1/keys', { body: { id: 'portal-1', group: 'basic', balance: 3 } });
    expect(made.response.status).toBe(201);
    const r = await gw.send('POST', '/v1/chat/completions', {
      headers: [
        ['authorization', `Bearer ${made.data!.secret}`],
        ['content-type', 'application/json'],
      ],
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }] }),
    });
    expect(r.status, r.text).toBe(200);
    expect(gw.received.at(-1)?.headers['x-modelgate-key-id']).toBe('portal-1');
    let entries: Array<{ keyId: string; model: string; cost: number; outputTokens: number }> = [];
    const end = Date.now() + 15_000;
    while (entries.length === 0 && Date.now() < end) {
      entries = (await api().GET('/admin/v1/usage', { params: { query: { keyId: 'portal-1' } } })).data!.entries;
      if (entries.length === 0) await new Promise((res) => setTimeout(res, 50));
    }
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ keyId: 'portal-1', model: 'gpt-4o-mini' });
    expect(entries[0].outputTokens).toBeGreaterThan(0);
    const key = (await api().GET('/admin/v1/keys/{id}', { params: { path: { id: 'portal-1' } } })).data!;
    expect(key.balance).toBeCloseTo(3 - entries[0].cost, 12);
  });

  it("GET /v1/me through Envoy answers the key holder's own view, the key sent as each protocol sends it", async () => {
    const made = await api().POST('/admin/v1/keys', {
      body: { id: 'me-1', group: 'basic', balance: 2, limits: { rpm: 50 } },
    });
    const key = made.data!.secret;
    const chat = await gw.send('POST', '/v1/chat/completions', {
      headers: [
        ['authorization', `Bearer ${key}`],
        ['content-type', 'application/json'],
      ],
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(chat.status).toBe(200);
    let me = await gw.send('GET', '/v1/me', { headers: [['authorization', `Bearer ${key}`]] });
    const end = Date.now() + 15_000;
    while (me.json().recentSpend?.requests !== 1 && Date.now() < end) {
      await new Promise((res) => setTimeout(res, 50));
      me = await gw.send('GET', '/v1/me', { headers: [['authorization', `Bearer ${key}`]] });
    }
    expect(me.status, me.text).toBe(200);
    const body = me.json();
    expect(body).toMatchObject({
      object: 'key',
      key: { id: 'me-1', disabled: false, expiresAt: null },
      group: { name: 'basic', available: true },
      limits: { rpm: 50 },
    });
    expect(body.models.map((m: { name: string }) => m.name)).toContain('gpt-4o-mini');
    expect(body.recentSpend.requests).toBe(1);
    expect(body.recentSpend.entries[0].model).toBe('gpt-4o-mini');
    expect(body.balance).toBeCloseTo(2 - body.recentSpend.cost, 12);
    expect(me.text).not.toContain(key);
    for (const [path, headers] of [
      [
        '/v1/me',
        [
          ['x-api-key', key],
          ['anthropic-version', '2023-06-01'],
        ],
      ],
      ['/v1beta/me', [['x-goog-api-key', key]]],
      ['/alt/v1/me', [['authorization', `Bearer ${key}`]]],
    ] as Array<[string, Array<[string, string]>]>) {
      const r = await gw.send('GET', path, { headers });
      expect(r.status, `${path} ${r.text}`).toBe(200);
      expect(r.json().key.id).toBe('me-1');
    }
    const none = await gw.send('GET', '/v1/me', { headers: [['authorization', 'Bearer sk-mg-notakey']] });
    expect(none.status).toBe(401);
    expect(none.headers['x-modelgate-reason']).toMatch(/^key_/);
    const token = await gw.send('GET', '/v1/me', { headers: [['authorization', `Bearer ${ADMIN_TOKEN}`]] });
    expect(token.status).toBe(401);
  });

  it('a webhook created by the API gets the signed budget alert of a metered chat through Envoy; removed, nothing more', async () => {
    const receiver = await startWebhookReceiver();
    const { base, got } = receiver;
    try {
      const hook = await api().POST('/admin/v1/webhooks', {
        body: { id: 'e2e-hook', url: `${base}/hook?token=receiver-credential`, thresholds: [100] },
      });
      expect(hook.response.status).toBe(201);
      const watch = await api().POST('/admin/v1/webhooks', {
        body: { id: 'e2e-watch', url: `${base}/watch`, thresholds: [100], subjects: ['key:e2e-2'] },
      });
      expect(watch.response.status).toBe(201);
      const chatWith = async (id: string): Promise<void> => {
        const made = await api().POST('/admin/v1/keys', {
          body: { id, group: 'basic', balance: 1, budget: { amount: 0.000001, period: 'day', timeZone: 'UTC' } },
        });
        const r = await gw.send('POST', '/v1/chat/completions', {
          headers: [
            ['authorization', `Bearer ${made.data!.secret}`],
            ['content-type', 'application/json'],
          ],
          body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }] }),
        });
        expect(r.status, r.text).toBe(200);
      };
      const arrived = async (n: number): Promise<void> => {
        const end = Date.now() + 15_000;
        while (got.length < n && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
        expect(got.length).toBe(n);
      };

      await chatWith('e2e-1');
      await arrived(1);
      expect(got[0]).toMatchObject({ path: '/hook?token=receiver-credential', subject: 'key:e2e-1' });
      expect(signedWith(hook.data!.secret, got[0])).toBe(true);

      expect(
        (await api().DELETE('/admin/v1/webhooks/{id}', { params: { path: { id: 'e2e-hook' } } })).response.status,
      ).toBe(200);
      // The alert of the next chat fires (the watching webhook gets it); the removed one gets nothing.
      await chatWith('e2e-2');
      await arrived(2);
      await new Promise((r) => setTimeout(r, 200));
      expect(got.map((g) => [g.path, g.subject])).toEqual([
        ['/hook?token=receiver-credential', 'key:e2e-1'],
        ['/watch', 'key:e2e-2'],
      ]);
      expect(gw.modelgate.logLines().join('\n')).not.toContain('receiver-credential');
    } finally {
      await receiver.close();
    }
  });

  it("Envoy's public listener does not serve the admin API, with or without the token", async () => {
    for (const headers of [[], [['authorization', `Bearer ${ADMIN_TOKEN}`]]] as Array<Array<[string, string]>>) {
      const r = await gw.send('GET', '/admin/v1/keys', { headers });
      expect(r.status).not.toBe(200);
      expect(r.text).not.toContain('portal-1');
    }
  });
});

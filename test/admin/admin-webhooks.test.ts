/**
 * Webhooks of budget alerts as an admin API resource on the file store, through the typed client: a
 * webhook created by the API gets the alerts of a real Check's settlements, signed with the secret
 * answered once; rotate-secret signs the next with the new one; PATCH narrows the budgets it watches;
 * DELETE stops deliveries while the config file's webhook keeps getting them. Its URL's query string
 * and its secret are never answered, audited or logged; the config's webhook answers 409 naming the file.
 */
import { readFileSync, statSync } from 'node:fs';
import createClient from 'openapi-fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addTokenToFile, adminStatePath } from '../../src/admin/file-backend';
import { generateToken, hashToken } from '../../src/admin/tokens';
import type { paths } from '../support/admin-api';
import { signedWith, startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { DEMO_CONFIG, reasonOf, startHarness, tempConfig, type Harness } from '../support/service-harness';

let now = Date.parse('2026-11-28T12:00:00Z');
let h: Harness;
let configPath = '';
let receiver: WebhookReceiver;
let base = '';
const admin = generateToken();
const keysToken = generateToken();
const api = (token = admin) =>
  createClient<paths>({ baseUrl: `http://${h.service.httpAddress}`, headers: { authorization: `Bearer ${token}` } });

const got = () => receiver.got;

/** A key of its own with a day's budget of 0.0001, then one chat settled at its maximum (60 % of the budget). */
async function crossHalf(id: string): Promise<void> {
  const made = await api().POST('/admin/v1/keys', {
    body: { id, group: 'basic', balance: 5, budget: { amount: 0.0001, period: 'day', timeZone: 'UTC' } },
  });
  expect(made.response.status).toBe(201);
  const r = await h.check({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [['authorization', `Bearer ${made.data!.secret}`]],
    body: '{"model":"gpt-4o-mini","max_tokens":100}',
  });
  expect(reasonOf(r)).toBe('allowed');
  now += 3_600_000;
  h.service.meter.expire();
  await h.service.meter.idle();
}

/** Waits (real deliveries over HTTP) until the config's webhook got the alert of `key`. */
async function configGot(key: string): Promise<void> {
  const end = Date.now() + 5000;
  while (!got().some((g) => g.path === '/config' && g.subject === key) && Date.now() < end)
    await new Promise((r) => setTimeout(r, 10));
  expect(got().some((g) => g.path === '/config' && g.subject === key)).toBe(true);
}

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  base = receiver.base;
  const yaml = readFileSync(DEMO_CONFIG, 'utf8')
    .replace('  mode: soft ', '  mode: strict ')
    .replace(/\nmeter:\n/, `\nmeter:\n  budgetAlerts: { url: "${base}/config", secretEnv: HOOK_SECRET }\n`);
  configPath = tempConfig(yaml);
  const cli = { tokenId: 'cli', address: null, requestId: null };
  addTokenToFile(
    adminStatePath(configPath),
    { id: 'tok-admin', sha256: hashToken(admin), scope: 'admin', createdAt: now },
    cli,
  );
  addTokenToFile(
    adminStatePath(configPath),
    { id: 'tok-keys', sha256: hashToken(keysToken), scope: 'keys', createdAt: now },
    cli,
  );
  h = await startHarness({ configPath, now: () => now, env: { ...process.env, HOOK_SECRET: 'config-secret' } });
});
afterAll(async () => {
  await h?.close();
  await receiver?.close();
});

describe('webhooks through the admin API (file store)', () => {
  it('a webhook created by the API gets signed alerts; rotate, narrow, delete; never its secret or query answered', async () => {
    const made = await api().POST('/admin/v1/webhooks', {
      body: { id: 'team-hook', url: `${base}/hook?token=receiver-credential`, thresholds: [50] },
    });
    expect(made.response.status).toBe(201);
    const secret1 = made.data!.secret;
    expect(secret1).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(made.data!.webhook).toMatchObject({
      id: 'team-hook',
      url: `${base}/hook`,
      urlHasQuery: true,
      thresholds: [50],
      subjects: null,
      enabled: true,
      source: 'api',
    });

    const list = await api().GET('/admin/v1/webhooks');
    expect(list.data!.webhooks.map((w) => [w.id, w.source, w.url])).toEqual([
      ['config', 'config', `${base}/config`],
      ['team-hook', 'api', `${base}/hook`],
    ]);
    const one = await api().GET('/admin/v1/webhooks/{id}', { params: { path: { id: 'team-hook' } } });
    expect(one.data?.thresholds).toEqual([50]);
    // Stored so it can sign, owner-only; never answered again.
    expect(readFileSync(adminStatePath(configPath), 'utf8')).toContain(secret1);
    expect(statSync(adminStatePath(configPath)).mode & 0o777).toBe(0o600);
    expect(JSON.stringify([list.data, one.data])).not.toMatch(/whsec_|receiver-credential/);

    await crossHalf('wh-a');
    await configGot('key:wh-a');
    const end = Date.now() + 5000;
    while (!got().some((g) => g.path.startsWith('/hook')) && Date.now() < end)
      await new Promise((r) => setTimeout(r, 10));
    const first = got().filter((g) => g.path.startsWith('/hook'));
    expect(first.map((g) => [g.path, g.subject, g.threshold])).toEqual([
      ['/hook?token=receiver-credential', 'key:wh-a', 50],
    ]);
    expect(signedWith(secret1, first[0])).toBe(true);
    expect(
      signedWith(
        'config-secret',
        got().find((g) => g.path === '/config' && g.subject === 'key:wh-a')!,
      ),
    ).toBe(true);

    const rotated = await api().POST('/admin/v1/webhooks/{id}/rotate-secret', {
      params: { path: { id: 'team-hook' } },
    });
    expect(rotated.response.status).toBe(200);
    const secret2 = rotated.data!.secret;
    expect(secret2).not.toBe(secret1);
    const narrowed = await api().PATCH('/admin/v1/webhooks/{id}', {
      params: { path: { id: 'team-hook' } },
      body: { subjects: ['key:wh-b', 'key:wh-d'] },
    });
    expect(narrowed.data?.subjects).toEqual(['key:wh-b', 'key:wh-d']);

    await crossHalf('wh-b');
    await configGot('key:wh-b');
    const end2 = Date.now() + 5000;
    const toHook = () => got().filter((g) => g.path.startsWith('/hook'));
    while (toHook().length < 2 && Date.now() < end2) await new Promise((r) => setTimeout(r, 10));
    expect(toHook().map((g) => g.subject)).toEqual(['key:wh-a', 'key:wh-b']);
    expect(signedWith(secret2, toHook()[1])).toBe(true);
    expect(signedWith(secret1, toHook()[1])).toBe(false);

    // Not a budget it watches: the config's webhook gets it, this one does not.
    await crossHalf('wh-c');
    await configGot('key:wh-c');
    const removed = await api().DELETE('/admin/v1/webhooks/{id}', { params: { path: { id: 'team-hook' } } });
    expect(removed.response.status).toBe(200);
    expect(
      (await api().GET('/admin/v1/webhooks/{id}', { params: { path: { id: 'team-hook' } } })).response.status,
    ).toBe(404);
    // Watched before the removal, and gone: nothing more reaches it.
    await crossHalf('wh-d');
    await configGot('key:wh-d');
    await new Promise((r) => setTimeout(r, 100));
    expect(toHook()).toHaveLength(2);

    const deliveries = await api().GET('/admin/v1/webhooks/deliveries', {
      params: { query: { webhookId: 'team-hook' } },
    });
    expect(deliveries.data!.deliveries.map((d) => [d.webhookId, d.subject, d.status])).toEqual(
      expect.arrayContaining([
        ['team-hook', 'key:wh-a', 'delivered'],
        ['team-hook', 'key:wh-b', 'delivered'],
      ]),
    );
    expect(deliveries.data!.deliveries).toHaveLength(2);

    const audit = (await api().GET('/admin/v1/audit', { params: { query: { limit: 50 } } })).data!.entries.filter(
      (e) => e.target === 'team-hook',
    );
    expect(audit.map((e) => [e.action, e.actor])).toEqual([
      ['webhook.delete', 'tok-admin'],
      ['webhook.update', 'tok-admin'],
      ['webhook.rotate-secret', 'tok-admin'],
      ['webhook.create', 'tok-admin'],
    ]);
    expect(audit[1]).toMatchObject({ before: { subjects: null }, after: { subjects: ['key:wh-b', 'key:wh-d'] } });
    const everything = JSON.stringify(audit) + h.logs.raw.join('\n');
    for (const s of [secret1, secret2, 'receiver-credential', 'config-secret']) expect(everything).not.toContain(s);
  });

  it('refuses a URL that is not http(s), holds a user or password, or a fragment, with 422', async () => {
    for (const url of [
      'ftp://127.0.0.1/hook',
      'http://user:pass@127.0.0.1/hook',
      'https://127.0.0.1/hook#frag',
      'javascript:alert(1)',
      'not a url',
    ]) {
      const r = await api().POST('/admin/v1/webhooks', { body: { id: 'bad-url', url } });
      expect(r.response.status, url).toBe(422);
      expect(JSON.stringify(r.error)).not.toContain('pass@');
    }
    const stored = await api().GET('/admin/v1/webhooks');
    expect(stored.data!.webhooks.map((w) => w.id)).not.toContain('bad-url');
  });

  it("the config file's webhook answers 409 naming the file; an id taken 409; an unknown one 404; scope keys 403", async () => {
    for (const r of [
      await api().PATCH('/admin/v1/webhooks/{id}', { params: { path: { id: 'config' } }, body: { enabled: false } }),
      await api().DELETE('/admin/v1/webhooks/{id}', { params: { path: { id: 'config' } } }),
      await api().POST('/admin/v1/webhooks/{id}/rotate-secret', { params: { path: { id: 'config' } } }),
    ]) {
      expect(r.response.status).toBe(409);
      expect(r.error).toMatchObject({ error: { code: 'webhook_in_config' } });
      expect(r.error!.error.hint).toContain(configPath);
    }
    const reserved = await api().POST('/admin/v1/webhooks', { body: { id: 'config', url: `${base}/x` } });
    expect(reserved.response.status).toBe(422);
    expect((await api().POST('/admin/v1/webhooks', { body: { id: 'twice', url: `${base}/x` } })).response.status).toBe(
      201,
    );
    const again = await api().POST('/admin/v1/webhooks', { body: { id: 'twice', url: `${base}/y` } });
    expect(again.response.status).toBe(409);
    expect(again.error).toMatchObject({ error: { code: 'webhook_exists' } });
    const unknown = await api().PATCH('/admin/v1/webhooks/{id}', {
      params: { path: { id: 'nope' } },
      body: { enabled: false },
    });
    expect(unknown.response.status).toBe(404);
    const denied = await api(keysToken).POST('/admin/v1/webhooks', { body: { url: `${base}/z` } });
    expect(denied.response.status).toBe(403);
    expect((await api(keysToken).GET('/admin/v1/webhooks')).response.status).toBe(200);
  });
});

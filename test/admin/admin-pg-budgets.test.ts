/**
 * Budgets per window on PostgreSQL (migration 11), through the admin API's typed client and a real
 * Check: a key's budget set by the API refuses on the replica with budget_exhausted, a group's
 * budget set by PATCH holds its keys, the column's CHECK refuses a malformed budget written by
 * hand, and a window's spend is the usage table summed over the window (PgMeterStore.spentIn).
 */
import createClient from 'openapi-fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { PgAdminBackend } from '../../src/admin/pg-backend';
import { runCli } from '../../src/cli/main';
import type { AdminDb } from '../../src/store/pg/admin';
import { setGroup, setPrice } from '../../src/store/pg/groups';
import { migrate } from '../../src/store/pg/schema';
import type { paths } from '../support/admin-api';
import { openPool, startPgServer, type PgServer } from '../support/pg-server';
import {
  DEMO_CONFIG,
  deniedHeader,
  reasonOf,
  startHarness,
  tempConfig,
  type Harness,
} from '../support/service-harness';

const now = (): number => Date.parse('2026-11-01T12:00:00Z');
let server: PgServer;
let pool: AdminDb;
let h: Harness;
let token = '';
const api = () =>
  createClient<paths>({ baseUrl: `http://${h.service.httpAddress}`, headers: { authorization: `Bearer ${token}` } });
const chat = (key: string) =>
  h.check({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [['authorization', `Bearer ${key}`]],
    body: '{"model":"gpt-4o-mini","max_tokens":100}',
  });

/** Waits (the store's notification reaching the cache) until the Check answers `reason` for `key`. */
async function until(key: string, reason: string): Promise<void> {
  const end = Date.now() + 10_000;
  for (;;) {
    const got = reasonOf(await chat(key));
    if (got === reason) return;
    if (Date.now() > end) throw new Error(`still ${got}, not ${reason}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

beforeAll(async () => {
  server = await startPgServer();
  pool = openPool(server.url);
  await migrate(pool);
  await setGroup(pool, {
    name: 'basic',
    models: [
      { name: 'gpt-4o-mini', protocols: null, available: true },
      { name: 'gpt-5.5', protocols: null, available: true },
    ],
  });
  await setPrice(pool, 'basic', 'gpt-4o-mini', { price: { input: 0.15, output: 0.6, cachedInput: null } });
  await setPrice(pool, 'basic', 'gpt-5.5', { price: { input: 1.25, output: 10, cachedInput: null } });
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
  h = await startHarness({ configPath: config, now });
}, 120_000);
afterAll(async () => {
  await h?.close();
  await pool?.end();
  await server?.close();
});

describe('budgets on PostgreSQL', () => {
  it("a key's budget set through the API refuses at the Check; removed, the key is served again", async () => {
    const r = await api().POST('/admin/v1/keys', {
      body: {
        id: 'pg-team',
        group: 'basic',
        balance: 5,
        budget: { amount: 0.00001, period: 'day', timeZone: 'America/New_York' },
      },
    });
    expect(r.response.status).toBe(201);
    expect(r.data!.key.budget).toEqual({ amount: 0.00001, period: 'day', timeZone: 'America/New_York' });
    const secret = r.data!.secret;
    const denied = await chat(secret);
    expect(reasonOf(denied)).toBe('budget_exhausted');
    // 2026-11-01 in New York lasts 25 hours: it resets at 05:00 UTC on the 2nd.
    expect(deniedHeader(denied, 'x-modelgate-hint')).toContain('it resets at 2026-11-02T05:00:00.000Z');
    const { rows } = await pool.query("SELECT budget FROM modelgate.keys WHERE id = 'pg-team'");
    expect(rows[0].budget).toEqual({ amount: 0.00001, period: 'day', timeZone: 'America/New_York' });
    await api().PATCH('/admin/v1/keys/{id}', { params: { path: { id: 'pg-team' } }, body: { budget: null } });
    await until(secret, 'allowed');

    // The group's budget, set by PATCH, holds the same key.
    const g = await api().PATCH('/admin/v1/groups/{name}', {
      params: { path: { name: 'basic' } },
      body: { budget: { amount: 0.00001, period: 'month', timeZone: 'Europe/Berlin' } },
    });
    expect(g.data?.budget).toEqual({ amount: 0.00001, period: 'month', timeZone: 'Europe/Berlin' });
    await until(secret, 'budget_exhausted');
    expect(deniedHeader(await chat(secret), 'x-modelgate-hint')).toMatch(
      /^the group "basic"'s monthly budget .* it resets at 2026-11-30T23:00:00\.000Z/,
    );
    await api().PATCH('/admin/v1/groups/{name}', { params: { path: { name: 'basic' } }, body: { budget: null } });
    await until(secret, 'allowed');
  });

  it("a key's budget per model, set through the API and the CLI, refuses that model only at the Check (migration 12)", async () => {
    const r = await api().POST('/admin/v1/keys', {
      body: {
        id: 'pg-model',
        group: 'basic',
        balance: 5,
        modelBudgets: { 'gpt-4o-mini': { amount: 0.00001, period: 'week', timeZone: 'Asia/Tokyo' } },
      } as never,
    });
    expect(r.response.status).toBe(201);
    const secret = r.data!.secret;
    const denied = await chat(secret);
    expect(reasonOf(denied)).toBe('model_budget_exhausted');
    // 2026-11-01 is a Sunday; Tokyo's week (from Monday 2 November, 00:00 +09:00) starts at 15:00 UTC that day.
    expect(deniedHeader(denied, 'x-modelgate-hint')).toMatch(
      /^the key's weekly budget for the model "gpt-4o-mini" \(0\.00001\) .* it resets at 2026-11-01T15:00:00\.000Z/,
    );
    const other = () =>
      h.check({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: [['authorization', `Bearer ${secret}`]],
        body: '{"model":"gpt-5.5","max_tokens":10}',
      });
    expect(reasonOf(await other())).toBe('allowed');
    const { rows } = await pool.query("SELECT model_budgets FROM modelgate.keys WHERE id = 'pg-model'");
    expect(rows[0].model_budgets).toEqual({
      'gpt-4o-mini': { amount: 0.00001, period: 'week', timeZone: 'Asia/Tokyo' },
    });

    // The command line: the same backend (audited as cli), seen by the replica at once.
    const cli = async (...args: string[]): Promise<{ code: number; out: string; err: string }> => {
      let out = '';
      let err = '';
      const code = await runCli(['keys', 'model-budget', ...args, '--store', server.url], {
        stdout: (x) => (out += x),
        stderr: (x) => (err += x),
        env: {},
      });
      return { code, out, err };
    };
    expect(await cli('pg-model', 'gpt-5.5', '--amount', '0.000001', '--period', 'day')).toMatchObject({
      code: 0,
      out: expect.stringContaining('gpt-5.5: 0.000001 per day (UTC)'),
    });
    await new Promise<void>((resolve, reject) => {
      const end = Date.now() + 10_000;
      const poll = async (): Promise<void> => {
        if (reasonOf(await other()) === 'model_budget_exhausted') return resolve();
        if (Date.now() > end) return reject(new Error('gpt-5.5 still allowed'));
        setTimeout(() => void poll(), 20);
      };
      void poll();
    });
    expect(await cli('pg-model', 'gpt-4o-mini', '--remove')).toMatchObject({
      code: 0,
      out: expect.not.stringContaining('gpt-4o-mini'),
    });
    await until(secret, 'allowed');
    expect(await cli('pg-model', 'no-such-model', '--amount', '1', '--period', 'day')).toMatchObject({
      code: 1,
      err: expect.stringContaining('has no model "no-such-model"'),
    });
    expect(await cli('pg-model', 'gpt-5.5', '--amount', '1')).toMatchObject({
      err: expect.stringContaining('needs --amount and --period'),
    });
    expect(
      await cli('pg-model', 'gpt-5.5', '--amount', '1', '--period', 'day', '--time-zone', 'Mars/Base'),
    ).toMatchObject({ err: expect.stringContaining('--time-zone') });
    const audit = (await api().GET('/admin/v1/audit', { params: { query: { limit: 20 } } })).data!.entries.filter(
      (e) => e.target === 'pg-model',
    );
    expect(audit.map((e) => `${e.action} ${e.actor}`)).toEqual([
      'key.update cli',
      'key.update cli',
      'key.create tok-admin',
    ]);
  });

  it('keeps budget alert deliveries in webhook_deliveries (migration 13): a delivered event stays delivered, pages newest first', async () => {
    const backend = new PgAdminBackend(pool);
    const base = {
      webhookId: 'config',
      type: 'budget.threshold',
      subject: 'model:pg-model:gpt-5.5',
      lastStatus: null,
      lastError: null,
    };
    await backend.recordDelivery({
      ...base,
      eventId: 'ev-1',
      threshold: 50,
      status: 'pending',
      attempts: 0,
      createdAt: '2026-11-01T10:00:00.000Z',
      updatedAt: '2026-11-01T10:00:00.000Z',
    });
    await backend.recordDelivery({
      ...base,
      eventId: 'ev-1',
      threshold: 50,
      status: 'pending',
      attempts: 1,
      lastStatus: 500,
      lastError: 'http_500',
      createdAt: '2026-11-01T10:00:00.000Z',
      updatedAt: '2026-11-01T10:00:01.000Z',
    });
    await backend.recordDelivery({
      ...base,
      eventId: 'ev-1',
      threshold: 50,
      status: 'delivered',
      attempts: 2,
      lastStatus: 204,
      createdAt: '2026-11-01T10:00:00.000Z',
      updatedAt: '2026-11-01T10:00:03.000Z',
    });
    // Another replica saw the same crossing and queues the same event id: still delivered.
    await backend.recordDelivery({
      ...base,
      eventId: 'ev-1',
      threshold: 50,
      status: 'pending',
      attempts: 0,
      createdAt: '2026-11-01T10:00:05.000Z',
      updatedAt: '2026-11-01T10:00:05.000Z',
    });
    await backend.recordDelivery({
      ...base,
      eventId: 'ev-2',
      threshold: 80,
      status: 'failed',
      attempts: 6,
      lastError: 'ECONNREFUSED',
      createdAt: '2026-11-01T11:00:00.000Z',
      updatedAt: '2026-11-01T11:01:00.000Z',
    });
    const first = await api().GET('/admin/v1/webhooks/deliveries', { params: { query: { limit: 1 } } });
    expect(first.response.status).toBe(200);
    expect(first.data!.deliveries).toEqual([
      {
        ...base,
        eventId: 'ev-2',
        threshold: 80,
        status: 'failed',
        attempts: 6,
        lastError: 'ECONNREFUSED',
        createdAt: '2026-11-01T11:00:00.000Z',
        updatedAt: '2026-11-01T11:01:00.000Z',
      },
    ]);
    const next = await api().GET('/admin/v1/webhooks/deliveries', {
      params: { query: { limit: 1, cursor: first.data!.nextCursor! } },
    });
    expect(next.data!.deliveries).toEqual([
      {
        ...base,
        eventId: 'ev-1',
        threshold: 50,
        status: 'delivered',
        attempts: 2,
        lastStatus: 204,
        createdAt: '2026-11-01T10:00:00.000Z',
        updatedAt: '2026-11-01T10:00:05.000Z',
      },
    ]);
    const last = await api().GET('/admin/v1/webhooks/deliveries', {
      params: { query: { limit: 1, cursor: next.data!.nextCursor! } },
    });
    expect(last.data).toEqual({ deliveries: [], nextCursor: null });
  });

  it("PATCH /admin/v1/groups/{name} adds, prices, changes and removes a group's models on every replica at once, audited", async () => {
    const r = await api().POST('/admin/v1/keys', { body: { id: 'pg-groups', group: 'basic', balance: 5 } });
    const secret = r.data!.secret;
    const ask = (model: string) =>
      h.check({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: [['authorization', `Bearer ${secret}`]],
        body: JSON.stringify({ model, max_tokens: 10 }),
      });
    const waitFor = async (model: string, reason: string): Promise<void> => {
      const end = Date.now() + 10_000;
      while (reasonOf(await ask(model)) !== reason) {
        if (Date.now() > end) throw new Error(`${model} is not ${reason}`);
        await new Promise((res) => setTimeout(res, 20));
      }
    };
    expect(reasonOf(await ask('o9-mini'))).toBe('model_not_in_group');

    const added = await api().PATCH('/admin/v1/groups/{name}', {
      params: { path: { name: 'basic' } },
      body: { models: [{ name: 'o9-mini', price: { input: 1, output: 4 }, maxOutputTokens: 1000 }] } as never,
    });
    expect(added.response.status).toBe(200);
    expect(added.data?.models.find((m) => m.name === 'o9-mini')).toEqual({
      name: 'o9-mini',
      protocols: null,
      available: true,
      price: { input: 1, output: 4, cachedInput: null },
      maxOutputTokens: 1000,
    });
    expect(added.data?.models.map((m) => m.name)).toEqual(['gpt-4o-mini', 'gpt-5.5', 'o9-mini']);
    await waitFor('o9-mini', 'allowed');
    const { rows } = await pool.query(
      "SELECT input_price::float8 AS i, max_output_tokens AS t FROM modelgate.group_models WHERE group_name = 'basic' AND name = 'o9-mini'",
    );
    expect(rows).toEqual([{ i: 1, t: 1000 }]);

    // Down, then priced again with the others left as they are, then removed.
    await api().PATCH('/admin/v1/groups/{name}', {
      params: { path: { name: 'basic' } },
      body: { models: [{ name: 'o9-mini', available: false }] } as never,
    });
    await waitFor('o9-mini', 'model_unavailable');
    const repriced = await api().PATCH('/admin/v1/groups/{name}', {
      params: { path: { name: 'basic' } },
      body: { models: [{ name: 'o9-mini', price: null, protocols: ['messages'] }] } as never,
    });
    expect(repriced.data?.models.find((m) => m.name === 'o9-mini')).toEqual({
      name: 'o9-mini',
      protocols: ['messages'],
      available: false,
      price: null,
      // Not named in this change: kept.
      maxOutputTokens: 1000,
    });
    const removed = await api().PATCH('/admin/v1/groups/{name}', {
      params: { path: { name: 'basic' } },
      body: { models: [{ name: 'o9-mini', remove: true }] } as never,
    });
    expect(removed.data?.models.map((m) => m.name)).toEqual(['gpt-4o-mini', 'gpt-5.5']);
    await waitFor('o9-mini', 'model_not_in_group');

    // Refused, nothing changed: removing a model the group lacks, a price without output, remove with other fields, a
    // name twice.
    for (const models of [
      [{ name: 'nope', remove: true }],
      [{ name: 'x', price: { input: 1 } }],
      [{ name: 'gpt-5.5', remove: true, available: true }],
      [{ name: 'a' }, { name: 'a' }],
    ]) {
      const bad = await api().PATCH('/admin/v1/groups/{name}', {
        params: { path: { name: 'basic' } },
        body: { models } as never,
      });
      expect(bad.response.status, JSON.stringify(models)).toBe(422);
    }
    expect(
      (await api().GET('/admin/v1/groups/{name}', { params: { path: { name: 'basic' } } })).data?.models.map(
        (m) => m.name,
      ),
    ).toEqual(['gpt-4o-mini', 'gpt-5.5']);

    const audit = (await api().GET('/admin/v1/audit', { params: { query: { limit: 50 } } })).data!.entries.filter(
      (e) => e.action === 'group.update' && e.target === 'basic',
    );
    expect(audit[0]).toMatchObject({
      actor: 'tok-admin',
      before: { models: expect.arrayContaining([expect.objectContaining({ name: 'o9-mini' })]) },
      after: { models: [{ name: 'gpt-4o-mini' }, { name: 'gpt-5.5' }] },
    });
    expect(audit.length).toBeGreaterThanOrEqual(4);
  });

  it('POST /admin/v1/groups creates a group served by the Check at once; DELETE is refused while it has keys, then removes it; audited', async () => {
    const made = await api().POST('/admin/v1/groups', {
      body: {
        name: 'pg-new',
        models: [
          { name: 'gpt-4o-mini', price: { input: 0.15, output: 0.6 } as never, maxOutputTokens: 4096 },
          { name: 'o9-mini', available: false, protocols: ['chat'] },
        ],
        budget: { amount: 3, period: 'week', timeZone: 'UTC' },
      },
    });
    expect(made.response.status, JSON.stringify(made.error)).toBe(201);
    expect(made.data).toEqual({
      name: 'pg-new',
      available: true,
      limits: null,
      budget: { amount: 3, period: 'week', timeZone: 'UTC' },
      models: [
        {
          name: 'gpt-4o-mini',
          protocols: null,
          available: true,
          price: { input: 0.15, output: 0.6, cachedInput: null },
          maxOutputTokens: 4096,
        },
        { name: 'o9-mini', protocols: ['chat'], available: false, price: null, maxOutputTokens: null },
      ],
    });
    const { rows } = await pool.query<{ t: number }>(
      "SELECT max_output_tokens AS t FROM modelgate.group_models WHERE group_name = 'pg-new' AND name = 'gpt-4o-mini'",
    );
    expect(rows[0].t).toBe(4096);
    const again = await api().POST('/admin/v1/groups', { body: { name: 'pg-new', models: [] } });
    expect(again.error).toMatchObject({ error: { code: 'group_exists' } });

    const key = await api().POST('/admin/v1/keys', { body: { id: 'pg-new-1', group: 'pg-new', balance: 1 } });
    expect(key.response.status).toBe(201);
    await until(key.data!.secret, 'allowed');
    const busy = await api().DELETE('/admin/v1/groups/{name}', { params: { path: { name: 'pg-new' } } });
    expect(busy.response.status).toBe(409);
    expect(busy.error).toMatchObject({
      error: { code: 'group_has_keys', message: expect.stringContaining('pg-new-1') },
    });
    await api().DELETE('/admin/v1/keys/{id}', { params: { path: { id: 'pg-new-1' } } });
    const removed = await api().DELETE('/admin/v1/groups/{name}', { params: { path: { name: 'pg-new' } } });
    expect(removed.response.status).toBe(200);
    expect((await pool.query("SELECT 1 FROM modelgate.group_models WHERE group_name = 'pg-new'")).rowCount).toBe(0);
    expect(
      (await api().DELETE('/admin/v1/groups/{name}', { params: { path: { name: 'pg-new' } } })).response.status,
    ).toBe(404);
    const audit = (await api().GET('/admin/v1/audit', { params: { query: { limit: 20 } } })).data!.entries.filter(
      (e) => e.target === 'pg-new',
    );
    expect(audit.map((e) => e.action)).toEqual(['group.delete', 'group.create']);
    expect(audit[1].after).toMatchObject({ name: 'pg-new', models: [{ name: 'gpt-4o-mini' }, { name: 'o9-mini' }] });
  });

  it('the column refuses malformed budgets per model written by hand', async () => {
    for (const bad of [
      '{"m":{"amount":0,"period":"day","timeZone":"UTC"}}',
      '{"m":{"amount":1,"period":"year","timeZone":"UTC"}}',
      '{"m":1}',
      '[1]',
      '{"":{"amount":1,"period":"day","timeZone":"UTC"}}',
    ]) {
      await expect(
        pool.query("UPDATE modelgate.keys SET model_budgets = $1::jsonb WHERE id = 'pg-model'", [bad]),
        bad,
      ).rejects.toThrow(/check constraint/);
    }
  });

  it('the column refuses a malformed budget written by hand', async () => {
    for (const bad of [
      '{"amount":0,"period":"day","timeZone":"UTC"}',
      '{"amount":1,"period":"year","timeZone":"UTC"}',
      '{"amount":"1","period":"day","timeZone":"UTC"}',
      '[1]',
    ]) {
      await expect(
        pool.query("UPDATE modelgate.keys SET budget = $1::jsonb WHERE id = 'pg-team'", [bad]),
      ).rejects.toThrow(/check constraint/);
      await expect(
        pool.query("UPDATE modelgate.groups SET budget = $1::jsonb WHERE name = 'basic'", [bad]),
      ).rejects.toThrow(/check constraint/);
    }
  });

  it("a window's spend is the usage table summed over [since, until) for a key or a group", async () => {
    const meter = h.service.store.meter!;
    const t0 = Date.parse('2026-11-01T04:00:00Z');
    await pool.query(
      `INSERT INTO modelgate.usage (request_id, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens, cost, priced, time)
      VALUES ('r1', 'pg-team', 'basic', 'gpt-4o-mini', 'chat', 1, 1, 0, 0.25, true, $1), ('r2', 'pg-team', 'basic', 'gpt-4o-mini', 'chat', 1, 1, 0, 0.5, true, $2),
             ('r3', 'other', 'basic', 'gpt-4o-mini', 'chat', 1, 1, 0, 1, true, $3)`,
      [new Date(t0 - 1), new Date(t0), new Date(t0 + 3_600_000)],
    );
    expect(await meter.spentIn!({ keyId: 'pg-team', since: t0, until: t0 + 86_400_000 })).toBe(0.5);
    expect(await meter.spentIn!({ group: 'basic', since: t0, until: t0 + 86_400_000 })).toBe(1.5);
    expect(await meter.spentIn!({ keyId: 'nobody', since: t0, until: t0 + 86_400_000 })).toBe(0);
    await pool.query(
      `INSERT INTO modelgate.usage (request_id, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens, cost, priced, time)
      VALUES ('r4', 'pg-team', 'basic', 'gpt-5.5', 'chat', 1, 1, 0, 2, true, $1)`,
      [new Date(t0 + 60_000)],
    );
    expect(await meter.spentIn!({ keyId: 'pg-team', model: 'gpt-4o-mini', since: t0, until: t0 + 86_400_000 })).toBe(
      0.5,
    );
    expect(await meter.spentIn!({ keyId: 'pg-team', model: 'gpt-5.5', since: t0, until: t0 + 86_400_000 })).toBe(2);
    expect(await meter.spentIn!({ keyId: 'pg-team', since: t0, until: t0 + 86_400_000 })).toBe(2.5);
  });
});

/**
 * Budgets per window through the admin API on the file store, with the typed client generated from
 * the committed OpenAPI document: a key created with a budget is held to it by the Check (403
 * budget_exhausted naming the reset), PATCH changes or removes it at once, a budget the config's
 * schema refuses (a zone Intl does not know, an amount of 0) answers 422, and each change is audited.
 */
import { readFileSync } from 'node:fs';
import createClient from 'openapi-fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addTokenToFile, adminStatePath } from '../../src/admin/file-backend';
import { generateToken, hashToken } from '../../src/admin/tokens';
import type { paths } from '../support/admin-api';
import {
  DEMO_CONFIG,
  deniedHeader,
  reasonOf,
  startHarness,
  tempConfig,
  type Harness,
} from '../support/service-harness';

const now = (): number => Date.parse('2026-03-08T12:00:00Z');
let h: Harness;
const token = generateToken();
const client = () =>
  createClient<paths>({ baseUrl: `http://${h.service.httpAddress}`, headers: { authorization: `Bearer ${token}` } });
const chat = (key: string) =>
  h.check({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [['authorization', `Bearer ${key}`]],
    body: '{"model":"gpt-4o-mini"}',
  });

beforeAll(async () => {
  const configPath = tempConfig(readFileSync(DEMO_CONFIG, 'utf8').replace('  mode: soft ', '  mode: strict '));
  addTokenToFile(
    adminStatePath(configPath),
    { id: 'tok-keys', sha256: hashToken(token), scope: 'keys', createdAt: now() },
    { tokenId: 'cli', address: null, requestId: null },
  );
  h = await startHarness({ configPath, now });
});
afterAll(async () => {
  await h?.close();
});

describe('budgets through the admin API', () => {
  it('a key created with a budget is held to it; PATCH raises it, removes it, and each change is audited', async () => {
    const r = await client().POST('/admin/v1/keys', {
      body: {
        id: 'team-b',
        group: 'basic',
        balance: 5,
        budget: { amount: 0.001, period: 'day', timeZone: 'America/New_York' },
      },
    });
    expect(r.response.status).toBe(201);
    expect(r.data!.key.budget).toEqual({ amount: 0.001, period: 'day', timeZone: 'America/New_York' });
    const secret = r.data!.secret;
    // Its maximum (16,384 output tokens of gpt-4o-mini) is over 0.001: strict mode refuses it.
    const denied = await chat(secret);
    expect(reasonOf(denied)).toBe('budget_exhausted');
    // 2026-03-08 in New York lasts 23 hours: it resets at 04:00 UTC on the 9th.
    expect(deniedHeader(denied, 'x-modelgate-hint')).toContain('it resets at 2026-03-09T04:00:00.000Z');

    const raised = await client().PATCH('/admin/v1/keys/{id}', {
      params: { path: { id: 'team-b' } },
      body: { budget: { amount: 1, period: 'month', timeZone: 'UTC' } },
    });
    expect(raised.data?.budget).toEqual({ amount: 1, period: 'month', timeZone: 'UTC' });
    expect(reasonOf(await chat(secret))).toBe('allowed');

    // timeZone left out: UTC (openapi-typescript types a property with a default as required; the document does not).
    const lowered = await client().PATCH('/admin/v1/keys/{id}', {
      params: { path: { id: 'team-b' } },
      body: { budget: { amount: 0.0001, period: 'week' } } as never,
    });
    expect(lowered.data?.budget).toEqual({ amount: 0.0001, period: 'week', timeZone: 'UTC' });
    expect(reasonOf(await chat(secret))).toBe('budget_exhausted');

    const removed = await client().PATCH('/admin/v1/keys/{id}', {
      params: { path: { id: 'team-b' } },
      body: { budget: null },
    });
    expect(removed.data?.budget).toBeNull();
    expect(reasonOf(await chat(secret))).toBe('allowed');

    const audit = (await client().GET('/admin/v1/audit', { params: { query: { limit: 10 } } })).data!.entries.filter(
      (e) => e.target === 'team-b',
    );
    expect(audit.map((e) => e.action)).toEqual(['key.update', 'key.update', 'key.update', 'key.create']);
    expect(audit[0]).toMatchObject({ before: { budget: { amount: 0.0001, period: 'week' } }, after: { budget: null } });
  });

  it('refuses a budget the schema does not take with 422, and changes nothing', async () => {
    for (const budget of [
      { amount: 1, period: 'day', timeZone: 'Mars/Olympus_Mons' },
      { amount: 0, period: 'day' },
      { amount: 1, period: 'year' },
      { amount: 1, period: 'day', extra: true },
    ]) {
      const r = await client().POST('/admin/v1/keys', {
        body: { id: 'bad-budget', group: 'basic', budget: budget as never },
      });
      expect([400, 422], JSON.stringify(budget)).toContain(r.response.status);
      expect(
        (await client().GET('/admin/v1/keys/{id}', { params: { path: { id: 'bad-budget' } } })).response.status,
      ).toBe(404);
    }
  });

  it('a key created with budgets per model is held on that model only; PATCH merges, removes, and each change is audited', async () => {
    const r = await client().POST('/admin/v1/keys', {
      body: {
        id: 'team-m',
        group: 'basic',
        balance: 5,
        modelBudgets: { 'gpt-4o-mini': { amount: 0.001, period: 'day', timeZone: 'Asia/Tokyo' } },
      } as never,
    });
    expect(r.response.status).toBe(201);
    expect(r.data!.key.modelBudgets).toEqual({
      'gpt-4o-mini': { amount: 0.001, period: 'day', timeZone: 'Asia/Tokyo' },
    });
    const secret = r.data!.secret;
    const other = () =>
      h.check({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: [['authorization', `Bearer ${secret}`]],
        body: '{"model":"gpt-5.5","max_tokens":10}',
      });
    // Its maximum (16,384 output tokens of gpt-4o-mini) is over 0.001: strict mode refuses it on that model.
    const denied = await chat(secret);
    expect(reasonOf(denied)).toBe('model_budget_exhausted');
    expect(deniedHeader(denied, 'x-modelgate-hint')).toContain('for the model "gpt-4o-mini" (0.001)');
    // Tokyo's 8 March ends at 15:00 UTC.
    expect(deniedHeader(denied, 'x-modelgate-hint')).toContain('it resets at 2026-03-08T15:00:00.000Z');
    expect(reasonOf(await other())).toBe('allowed');

    // A merge: gpt-5.5 gets one, gpt-4o-mini's is raised; then gpt-4o-mini's is removed and gpt-5.5's kept.
    const both = await client().PATCH('/admin/v1/keys/{id}', {
      params: { path: { id: 'team-m' } },
      body: {
        modelBudgets: {
          'gpt-4o-mini': { amount: 1, period: 'month', timeZone: 'UTC' },
          'gpt-5.5': { amount: 0.00001, period: 'week', timeZone: 'UTC' },
        },
      } as never,
    });
    expect(both.data?.modelBudgets).toEqual({
      'gpt-4o-mini': { amount: 1, period: 'month', timeZone: 'UTC' },
      'gpt-5.5': { amount: 0.00001, period: 'week', timeZone: 'UTC' },
    });
    expect(reasonOf(await chat(secret))).toBe('allowed');
    expect(reasonOf(await other())).toBe('model_budget_exhausted');
    const one = await client().PATCH('/admin/v1/keys/{id}', {
      params: { path: { id: 'team-m' } },
      body: { modelBudgets: { 'gpt-4o-mini': null } } as never,
    });
    expect(one.data?.modelBudgets).toEqual({ 'gpt-5.5': { amount: 0.00001, period: 'week', timeZone: 'UTC' } });
    const none = await client().PATCH('/admin/v1/keys/{id}', {
      params: { path: { id: 'team-m' } },
      body: { modelBudgets: null },
    });
    expect(none.data?.modelBudgets).toEqual({});
    expect(reasonOf(await other())).toBe('allowed');

    const audit = (await client().GET('/admin/v1/audit', { params: { query: { limit: 10 } } })).data!.entries.filter(
      (e) => e.target === 'team-m',
    );
    expect(audit.map((e) => e.action)).toEqual(['key.update', 'key.update', 'key.update', 'key.create']);
    expect(audit[1]).toMatchObject({
      before: { modelBudgets: { 'gpt-4o-mini': { amount: 1 }, 'gpt-5.5': { amount: 0.00001 } } },
      after: { modelBudgets: { 'gpt-5.5': { amount: 0.00001 } } },
    });
  });

  it('refuses a budget per model on a model the group lacks, of a bad shape, or named __proto__, with 422', async () => {
    const bad = await client().POST('/admin/v1/keys', {
      body: {
        id: 'bad-model',
        group: 'basic',
        modelBudgets: { 'GPT-4o-mini': { amount: 1, period: 'day', timeZone: 'UTC' } },
      } as never,
    });
    expect(bad.response.status).toBe(422);
    expect(bad.error?.error).toMatchObject({
      code: 'model_not_in_group',
      message: expect.stringContaining('"GPT-4o-mini"'),
    });
    for (const modelBudgets of [{ 'gpt-4o-mini': { amount: -1, period: 'day' } }, { 'gpt-4o-mini': 5 }, [1]]) {
      const r = await client().POST('/admin/v1/keys', {
        body: { id: 'bad-model', group: 'basic', modelBudgets } as never,
      });
      expect(r.response.status, JSON.stringify(modelBudgets)).toBe(422);
    }
    const proto = await fetch(`http://${h.service.httpAddress}/admin/v1/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"id":"bad-model","group":"basic","modelBudgets":{"__proto__":{"amount":1,"period":"day"}}}',
    });
    expect(proto.status).toBe(422);
    expect((await client().GET('/admin/v1/keys/{id}', { params: { path: { id: 'bad-model' } } })).response.status).toBe(
      404,
    );
  });

  it("shows a group's budget (none in the demo) on the group resource", async () => {
    const g = await client().GET('/admin/v1/groups/{name}', { params: { path: { name: 'basic' } } });
    expect(g.data).toMatchObject({ name: 'basic', budget: null });
    // Groups live in the YAML on the file store: a change of their models answers 409 naming the file (a keys token may
    // not even ask).
    expect(
      (
        await client().PATCH('/admin/v1/groups/{name}', {
          params: { path: { name: 'basic' } },
          body: { models: [{ name: 'o9-mini' }] } as never,
        })
      ).response.status,
    ).toBe(403);
    const admin = generateToken();
    addTokenToFile(
      adminStatePath(h.configPath),
      { id: 'tok-admin', sha256: hashToken(admin), scope: 'admin', createdAt: now() },
      { tokenId: 'cli', address: null, requestId: null },
    );
    const res = await fetch(`http://${h.service.httpAddress}/admin/v1/groups/basic`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ models: [{ name: 'o9-mini', price: { input: 1, output: 2 } }] }),
    });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({
      error: { code: 'group_in_config', message: expect.stringContaining(h.configPath) },
    });
  });
});

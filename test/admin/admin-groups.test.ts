/**
 * Creating and removing whole groups through the admin API on the file store, with the typed client:
 * a group created by the API lives in modelgate's own state (never the YAML) and is served to the
 * Check at once (its models, prices, availability); PATCH changes it; DELETE is refused while keys
 * belong to it and then removes it; a group of the YAML answers 409 naming the file; each write is audited.
 */
import { readFileSync } from 'node:fs';
import createClient from 'openapi-fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addTokenToFile, adminStatePath } from '../../src/admin/file-backend';
import { generateToken, hashToken } from '../../src/admin/tokens';
import type { paths } from '../support/admin-api';
import { DEMO_CONFIG, reasonOf, startHarness, tempConfig, type Harness } from '../support/service-harness';

let h: Harness;
let configPath = '';
const token = generateToken();
const api = () =>
  createClient<paths>({ baseUrl: `http://${h.service.httpAddress}`, headers: { authorization: `Bearer ${token}` } });
const chat = (key: string, model: string) =>
  h.check({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [['authorization', `Bearer ${key}`]],
    body: JSON.stringify({ model, max_tokens: 10 }),
  });

beforeAll(async () => {
  configPath = tempConfig(readFileSync(DEMO_CONFIG, 'utf8'));
  addTokenToFile(
    adminStatePath(configPath),
    { id: 'tok-admin', sha256: hashToken(token), scope: 'admin', createdAt: 0 },
    { tokenId: 'cli', address: null, requestId: null },
  );
  h = await startHarness({ configPath });
});
afterAll(async () => {
  await h?.close();
});

describe('groups through the admin API (file store)', () => {
  it('creates a group served at once, changes it, refuses its removal while it has keys, then removes it; audited', async () => {
    const made = await api().POST('/admin/v1/groups', {
      body: {
        name: 'team-x',
        models: [
          { name: 'gpt-4o-mini', price: { input: 0.15, output: 0.6 } as never },
          { name: 'o9-mini', available: false },
        ],
        limits: { rpm: 100 },
        budget: { amount: 5, period: 'month', timeZone: 'Europe/Berlin' },
      },
    });
    expect(made.response.status, JSON.stringify(made.error)).toBe(201);
    expect(made.data).toEqual({
      name: 'team-x',
      available: true,
      limits: { rpm: 100 },
      budget: { amount: 5, period: 'month', timeZone: 'Europe/Berlin' },
      models: [
        {
          name: 'gpt-4o-mini',
          protocols: null,
          available: true,
          price: { input: 0.15, output: 0.6, cachedInput: null },
          maxOutputTokens: null,
        },
        { name: 'o9-mini', protocols: null, available: false, price: null, maxOutputTokens: null },
      ],
    });
    expect((await api().GET('/admin/v1/groups/{name}', { params: { path: { name: 'team-x' } } })).data).toEqual(
      made.data,
    );
    expect(readFileSync(configPath, 'utf8')).not.toContain('team-x');
    // Its priced model has no output cap of its own: the warning the config's groups get at start names it too.
    const uncapped = () => h.logs.raw.filter((l) => l.includes('priced models without maxOutputTokens'));
    expect(uncapped().at(-1)).toContain('team-x/gpt-4o-mini');
    const warnings = uncapped().length;
    expect(readFileSync(adminStatePath(configPath), 'utf8')).toContain('team-x');

    const key = await api().POST('/admin/v1/keys', { body: { id: 'x-1', group: 'team-x', balance: 1 } });
    expect(key.response.status).toBe(201);
    // A change that leaves the list as it was does not warn again.
    expect(uncapped()).toHaveLength(warnings);
    const secret = key.data!.secret;
    expect(reasonOf(await chat(secret, 'gpt-4o-mini'))).toBe('allowed');
    expect(reasonOf(await chat(secret, 'o9-mini'))).toBe('model_unavailable');
    expect(reasonOf(await chat(secret, 'gpt-5.5'))).toBe('model_not_in_group');

    const patched = await api().PATCH('/admin/v1/groups/{name}', {
      params: { path: { name: 'team-x' } },
      body: {
        models: [
          { name: 'o9-mini', available: true },
          { name: 'gpt-4o-mini', remove: true },
        ],
      },
    });
    expect(patched.response.status, JSON.stringify(patched.error)).toBe(200);
    expect(patched.data!.models.map((m) => [m.name, m.available])).toEqual([['o9-mini', true]]);
    expect(reasonOf(await chat(secret, 'o9-mini'))).toBe('allowed');
    expect(reasonOf(await chat(secret, 'gpt-4o-mini'))).toBe('model_not_in_group');

    const busy = await api().DELETE('/admin/v1/groups/{name}', { params: { path: { name: 'team-x' } } });
    expect(busy.response.status).toBe(409);
    expect(busy.error).toMatchObject({ error: { code: 'group_has_keys', message: expect.stringContaining('x-1') } });
    expect((await api().DELETE('/admin/v1/keys/{id}', { params: { path: { id: 'x-1' } } })).response.status).toBe(200);
    const removed = await api().DELETE('/admin/v1/groups/{name}', { params: { path: { name: 'team-x' } } });
    expect(removed.response.status).toBe(200);
    expect(removed.data?.name).toBe('team-x');
    expect((await api().GET('/admin/v1/groups/{name}', { params: { path: { name: 'team-x' } } })).response.status).toBe(
      404,
    );
    const orphan = await api().POST('/admin/v1/keys', { body: { id: 'x-2', group: 'team-x' } });
    expect(orphan.error).toMatchObject({ error: { code: 'group_not_found' } });

    const audit = (await api().GET('/admin/v1/audit', { params: { query: { limit: 20 } } })).data!.entries.filter(
      (e) => e.target === 'team-x',
    );
    expect(audit.map((e) => [e.action, e.actor])).toEqual([
      ['group.delete', 'tok-admin'],
      ['group.update', 'tok-admin'],
      ['group.create', 'tok-admin'],
    ]);
    expect(audit[0]).toMatchObject({ before: { name: 'team-x' }, after: null });
  });

  it('refuses a group of the YAML (409 naming the file), a name taken, a reserved or malformed name, a model twice', async () => {
    for (const r of [
      await api().POST('/admin/v1/groups', { body: { name: 'basic', models: [] } }),
      await api().DELETE('/admin/v1/groups/{name}', { params: { path: { name: 'basic' } } }),
      await api().PATCH('/admin/v1/groups/{name}', { params: { path: { name: 'basic' } }, body: { available: false } }),
    ]) {
      expect(r.response.status).toBe(409);
      expect(r.error).toMatchObject({ error: { code: 'group_in_config', hint: expect.stringContaining(configPath) } });
    }
    expect((await api().POST('/admin/v1/groups', { body: { name: 'twice', models: [] } })).response.status).toBe(201);
    const again = await api().POST('/admin/v1/groups', { body: { name: 'twice', models: [] } });
    expect(again.error).toMatchObject({ error: { code: 'group_exists' } });
    for (const body of [
      { name: '__proto__', models: [] },
      { name: 'constructor', models: [] },
      { name: 'a b', models: [] },
      { name: 'dup', models: [{ name: 'm' }, { name: 'm' }] },
    ]) {
      const r = await api().POST('/admin/v1/groups', { body });
      expect(r.response.status, JSON.stringify(body)).toBe(422);
    }
    expect(
      (await api().DELETE('/admin/v1/groups/{name}', { params: { path: { name: 'nope' } } })).response.status,
    ).toBe(404);
  });
});

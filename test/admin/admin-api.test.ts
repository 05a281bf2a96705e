/**
 * The admin API on the file store (docs/admin-api.md), through the typed client generated from the
 * committed OpenAPI document: keys created, changed, rotated, credited and deleted through it are
 * what the Check sees; scopes refuse what they must; every write is audited; the operator's YAML
 * is never rewritten. A fake clock moves the rotation's grace period.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import createClient from 'openapi-fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addTokenToFile, adminStatePath } from '../../src/admin/file-backend';
import { generateToken, hashToken, SCOPES, type Scope } from '../../src/admin/tokens';
import { ADMIN_SCOPES } from '../../src/config/schema';
import { openApiText } from '../../src/admin/openapi';
import type { paths } from '../support/admin-api';
import { DEMO_KEYS } from '../support/demo-keys';
import { reasonOf, startHarness, tempConfig, type Harness } from '../support/service-harness';

const ROOT = join(__dirname, '..', '..');
let t = Date.parse('2026-03-01T12:00:00Z');
const now = (): number => t;
let h: Harness;
let yamlBefore: string;
const tokens = {} as Record<Scope, string>;
const client = (token: string | undefined) =>
  createClient<paths>({
    baseUrl: `http://${h.service.httpAddress}`,
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
const chat = (key: string) =>
  h.check({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [['authorization', `Bearer ${key}`]],
    body: '{"model":"gpt-4o-mini"}',
  });

beforeAll(async () => {
  const configPath = tempConfig();
  yamlBefore = readFileSync(configPath, 'utf8');
  for (const scope of ['read', 'keys', 'billing', 'admin'] as const) {
    tokens[scope] = generateToken();
    addTokenToFile(
      adminStatePath(configPath),
      { id: `tok-${scope}`, sha256: hashToken(tokens[scope]), scope, createdAt: t },
      { tokenId: 'cli', address: null, requestId: null },
    );
  }
  h = await startHarness({ configPath, now });
});
afterAll(async () => {
  await h?.close();
});

describe('the OpenAPI document', () => {
  it('is served at /admin/v1/openapi.json exactly as committed in docs/admin-api.openapi.json', async () => {
    const served = await (await fetch(`http://${h.service.httpAddress}/admin/v1/openapi.json`)).text();
    expect(served).toBe(readFileSync(join(ROOT, 'docs', 'admin-api.openapi.json'), 'utf8'));
    expect(served).toBe(openApiText());
    expect(JSON.parse(served).openapi).toBe('3.1.0');
  });

  it('is what the committed typed client was generated from', async () => {
    const { default: openapiTS, astToString } = await import('openapi-typescript');
    const generated = astToString(await openapiTS(JSON.parse(openApiText())));
    const committed = readFileSync(join(ROOT, 'test', 'support', 'admin-api.d.ts'), 'utf8');
    // The committed file has openapi-typescript's header comment above the same text.
    expect(committed.endsWith(generated)).toBe(true);
  });
});

describe('authentication', () => {
  it('answers 401 token_missing without a token, and model_key_refused for a model key', async () => {
    const none = await client(undefined).GET('/admin/v1/keys');
    expect(none.response.status).toBe(401);
    expect(none.error?.error.code).toBe('token_missing');
    const model = await client(DEMO_KEYS.alice).GET('/admin/v1/keys');
    expect(model.response.status).toBe(401);
    expect(model.error?.error.code).toBe('model_key_refused');
    const unknown = await client(generateToken()).GET('/admin/v1/keys');
    expect(unknown.response.status).toBe(401);
    expect(unknown.error?.error.code).toBe('token_unknown');
  });

  it('takes the demo token of envoy/demo-keys.env (adminTokens in the config, by hash) with its scope', async () => {
    const demo = /^export ADMIN_TOKEN=(\S+)/m.exec(readFileSync(join(ROOT, 'envoy', 'demo-keys.env'), 'utf8'))![1];
    const r = await client(demo).GET('/admin/v1/groups');
    expect(r.response.status).toBe(200);
    expect(r.data!.groups.map((g) => g.name)).toContain('basic');
    expect(ADMIN_SCOPES).toEqual(SCOPES);
  });

  it('a management token is refused by the Check (it is never a model key)', async () => {
    const res = await chat(tokens.admin);
    expect(reasonOf(res)).toBe('key_unknown');
    expect(res.denied_response?.headers?.find((x) => x.header?.key === 'x-modelgate-hint')?.header?.value).toContain(
      'management token',
    );
    expect(JSON.stringify(res)).not.toContain(tokens.admin.slice(9));
    expect(res.denied_response?.status?.code).toBe('Unauthorized');
  });
});

describe('keys', () => {
  let id = '';
  let secret = '';

  it('a key created through the API is allowed by the Check; the response holds its secret once', async () => {
    const r = await client(tokens.keys).POST('/admin/v1/keys', {
      body: { id: 'team-a', group: 'basic', balance: 5, metadata: { team: 'a' } },
    });
    expect(r.response.status).toBe(201);
    id = r.data!.key.id;
    secret = r.data!.secret;
    expect(r.data!.key).toMatchObject({
      id: 'team-a',
      group: 'basic',
      balance: 5,
      source: 'api',
      metadata: { team: 'a' },
    });
    expect(reasonOf(await chat(secret))).toBe('allowed');
    const got = await client(tokens.read).GET('/admin/v1/keys/{id}', { params: { path: { id } } });
    expect(got.data).toMatchObject({ id, balance: 5 });
    expect(JSON.stringify(got.data)).not.toContain(secret);
  });

  it('scopes refuse what they must: read cannot write, billing cannot create keys, keys cannot credit', async () => {
    const read = await client(tokens.read).POST('/admin/v1/keys', { body: { group: 'basic' } });
    expect(read.response.status).toBe(403);
    expect(read.error?.error.code).toBe('scope_insufficient');
    expect(
      (
        await client(tokens.billing).PATCH('/admin/v1/keys/{id}', {
          params: { path: { id } },
          body: { disabled: true },
        })
      ).response.status,
    ).toBe(403);
    expect(
      (
        await client(tokens.keys).POST('/admin/v1/keys/{id}/credits', {
          params: { path: { id } },
          body: { amount: 1, idempotencyKey: 'x' },
        })
      ).response.status,
    ).toBe(403);
    expect(
      (await client(tokens.read).POST('/admin/v1/keys/{id}/rotate', { params: { path: { id } }, body: {} })).response
        .status,
    ).toBe(403);
    expect((await client(tokens.billing).GET('/admin/v1/keys')).response.status).toBe(200);
  });

  it('a key of the YAML file answers 409 key_in_config naming the file, and the file is never rewritten', async () => {
    const r = await client(tokens.admin).PATCH('/admin/v1/keys/{id}', {
      params: { path: { id: 'alice' } },
      body: { disabled: true },
    });
    expect(r.response.status).toBe(409);
    expect(r.error?.error.code).toBe('key_in_config');
    expect(r.error?.error.message).toContain(h.configPath);
    expect(
      (await client(tokens.admin).POST('/admin/v1/keys', { body: { id: 'alice', group: 'basic' } })).response.status,
    ).toBe(409);
    expect(readFileSync(h.configPath, 'utf8')).toBe(yamlBefore);
    const group = await client(tokens.admin).PATCH('/admin/v1/groups/{name}', {
      params: { path: { name: 'basic' } },
      body: { available: false },
    });
    expect(group.response.status).toBe(409);
    expect(group.error?.error).toMatchObject({
      code: 'group_in_config',
      message: expect.stringContaining(h.configPath),
    });
    const listed = await client(tokens.read).GET('/admin/v1/keys');
    expect(listed.data!.keys.find((k) => k.id === 'alice')?.source).toBe('config');
  });

  it('PATCH disables the key for the Check, and enables it again', async () => {
    const off = await client(tokens.keys).PATCH('/admin/v1/keys/{id}', {
      params: { path: { id } },
      body: { disabled: true },
    });
    expect(off.data?.disabled).toBe(true);
    expect(reasonOf(await chat(secret))).toBe('key_disabled');
    await client(tokens.keys).PATCH('/admin/v1/keys/{id}', { params: { path: { id } }, body: { disabled: false } });
    expect(reasonOf(await chat(secret))).toBe('allowed');
  });

  it('a credit with a repeated idempotency key credits once; another amount under the same key is 409', async () => {
    const body = { amount: 2.5, idempotencyKey: 'ticket-1', reason: 'top-up' };
    const first = await client(tokens.billing).POST('/admin/v1/keys/{id}/credits', { params: { path: { id } }, body });
    expect(first.data).toMatchObject({ amount: 2.5, balance: 7.5, replayed: false });
    const again = await client(tokens.billing).POST('/admin/v1/keys/{id}/credits', { params: { path: { id } }, body });
    expect(again.data).toMatchObject({ balance: 7.5, replayed: true, id: first.data!.id });
    const header = await client(tokens.billing).POST('/admin/v1/keys/{id}/credits', {
      params: { path: { id }, header: { 'Idempotency-Key': 'ticket-1' } },
      body: { amount: 2.5 },
    });
    expect(header.data?.replayed).toBe(true);
    const other = await client(tokens.billing).POST('/admin/v1/keys/{id}/credits', {
      params: { path: { id } },
      body: { amount: 3, idempotencyKey: 'ticket-1' },
    });
    expect(other.response.status).toBe(409);
    expect((await client(tokens.read).GET('/admin/v1/keys/{id}', { params: { path: { id } } })).data?.balance).toBe(
      7.5,
    );
    const none = await client(tokens.billing).POST('/admin/v1/keys/{id}/credits', {
      params: { path: { id } },
      body: { amount: 1 },
    });
    expect(none.response.status).toBe(422);
  });

  it('usage the meter recorded for the key is listed with its totals', async () => {
    await h.service.store.meter!.debit({
      requestId: 'req-usage-1',
      keyId: id,
      group: 'basic',
      model: 'gpt-4o-mini',
      protocol: 'chat',
      inputTokens: 1000,
      outputTokens: 500,
      cachedInputTokens: 0,
      price: { input: 1, output: 2, cachedInput: null },
    });
    const u = await client(tokens.read).GET('/admin/v1/usage', { params: { query: { keyId: id } } });
    expect(u.data!.entries.map((e) => e.requestId)).toEqual(['req-usage-1']);
    expect(u.data!.totals).toEqual({ requests: 1, inputTokens: 1000, outputTokens: 500, cost: 0.002 });
    expect((await client(tokens.read).GET('/admin/v1/keys/{id}', { params: { path: { id } } })).data?.balance).toBe(
      7.498,
    );
    expect(u.data!.nextCursor).toBeNull();
    expect(
      (await client(tokens.read).GET('/admin/v1/usage', { params: { query: { keyId: id, model: 'other' } } })).data!
        .entries,
    ).toEqual([]);
  });

  it('usage comes in pages (newest first, a cursor to the next), with the totals of all of them', async () => {
    for (const n of [2, 3]) {
      t += 1000;
      await h.service.store.meter!.debit({
        requestId: `req-usage-${n}`,
        keyId: id,
        group: 'basic',
        model: 'gpt-4o-mini',
        protocol: 'chat',
        inputTokens: 1000,
        outputTokens: 500,
        cachedInputTokens: 0,
        price: { input: 1, output: 2, cachedInput: null },
      });
    }
    const first = await client(tokens.read).GET('/admin/v1/usage', { params: { query: { keyId: id, limit: 2 } } });
    expect(first.data!.entries.map((e) => e.requestId)).toEqual(['req-usage-3', 'req-usage-2']);
    expect(first.data!.totals).toEqual({ requests: 3, inputTokens: 3000, outputTokens: 1500, cost: 0.006 });
    const second = await client(tokens.read).GET('/admin/v1/usage', {
      params: { query: { keyId: id, limit: 2, cursor: first.data!.nextCursor! } },
    });
    expect(second.data!.entries.map((e) => e.requestId)).toEqual(['req-usage-1']);
    expect(second.data!.nextCursor).toBeNull();
    expect(second.data!.totals.requests).toBe(3);
    expect(
      (await client(tokens.read).GET('/admin/v1/usage', { params: { query: { cursor: 'nonsense' } } })).response.status,
    ).toBe(422);
    // A window splits the ledger at an entry's time (the meter stamps entries with the real clock).
    const at = first.data!.entries[0].time;
    const since = await client(tokens.read).GET('/admin/v1/usage', { params: { query: { keyId: id, since: at } } });
    const until = await client(tokens.read).GET('/admin/v1/usage', { params: { query: { keyId: id, until: at } } });
    expect(since.data!.entries.map((e) => e.requestId)).toContain('req-usage-3');
    expect(until.data!.entries.map((e) => e.requestId)).not.toContain('req-usage-3');
    expect(since.data!.totals.requests + until.data!.totals.requests).toBe(3);
  });

  it('rotation with a 5 s grace keeps the id; the old secret works for the grace only, the new one from now on', async () => {
    const r = await client(tokens.keys).POST('/admin/v1/keys/{id}/rotate', {
      params: { path: { id } },
      body: { gracePeriodSeconds: 5 },
    });
    expect(r.data!.key.id).toBe(id);
    const fresh = r.data!.secret;
    expect(fresh).not.toBe(secret);
    expect(r.data!.key.previousSecretValidUntil).toBe(new Date(t + 5000).toISOString().replace('.000Z', 'Z'));
    expect(reasonOf(await chat(fresh))).toBe('allowed');
    expect(reasonOf(await chat(secret))).toBe('allowed');
    t += 4999;
    expect(reasonOf(await chat(secret))).toBe('allowed');
    t += 1;
    const late = await chat(secret);
    expect(reasonOf(late)).toBe('key_expired');
    expect(late.denied_response?.status?.code).toBe('Unauthorized');
    expect(reasonOf(await chat(fresh))).toBe('allowed');
    secret = fresh;
  });

  it('DELETE removes the key: the Check answers key_unknown', async () => {
    const r = await client(tokens.keys).DELETE('/admin/v1/keys/{id}', { params: { path: { id } } });
    expect(r.data?.id).toBe(id);
    expect(reasonOf(await chat(secret))).toBe('key_unknown');
    expect((await client(tokens.read).GET('/admin/v1/keys/{id}', { params: { path: { id } } })).response.status).toBe(
      404,
    );
  });

  it('every write has its audit entry: actor token, address, request id, before and after, never a secret', async () => {
    const a = await client(tokens.read).GET('/admin/v1/audit', { params: { query: { limit: 100 } } });
    const entries = a.data!.entries;
    const writes = entries
      .filter((e) => e.action.startsWith('key.'))
      .map((e) => `${e.action} ${e.actor}`)
      .reverse();
    expect(writes).toEqual([
      'key.create tok-keys',
      'key.update tok-keys',
      'key.update tok-keys',
      'key.credit tok-billing',
      'key.rotate tok-keys',
      'key.delete tok-keys',
    ]);
    for (const e of entries.filter((x) => x.action.startsWith('key.'))) {
      expect(e.address).toMatch(/127\.0\.0\.1/);
      expect(e.requestId).toMatch(/^[0-9a-f-]{36}$/);
      expect(e.target).toBe(id);
    }
    expect(entries.filter((e) => e.action === 'token.create')).toHaveLength(4);
    const page1 = (await client(tokens.read).GET('/admin/v1/audit', { params: { query: { limit: 3 } } })).data!;
    const page2 = (
      await client(tokens.read).GET('/admin/v1/audit', { params: { query: { limit: 3, cursor: page1.nextCursor! } } })
    ).data!;
    expect([...page1.entries, ...page2.entries].map((e) => e.id)).toEqual(entries.slice(0, 6).map((e) => e.id));
    const text = JSON.stringify(entries) + readFileSync(adminStatePath(h.configPath), 'utf8') + h.logs.raw.join('\n');
    for (const s of Object.values(tokens)) expect(text).not.toContain(s);
    expect(text).not.toMatch(/sk-mg-[A-Za-z0-9]{40}/);
  });

  it("keys created through the API survive a restart (modelgate's own state file)", async () => {
    const r = await client(tokens.keys).POST('/admin/v1/keys', { body: { id: 'lasting', group: 'basic' } });
    const secret2 = r.data!.secret;
    await h.close();
    h = await startHarness({ configPath: h.configPath, now });
    expect(reasonOf(await chat(secret2))).toBe('allowed');
    expect(createHash('sha256').update(readFileSync(h.configPath)).digest('hex')).toBe(
      createHash('sha256').update(yamlBefore).digest('hex'),
    );
  });
});

describe('management tokens', () => {
  it("are listed to the admin scope only (never the tokens), the config's included", async () => {
    expect((await client(tokens.keys).GET('/admin/v1/tokens')).response.status).toBe(403);
    const list = await client(tokens.admin).GET('/admin/v1/tokens');
    expect(list.data!.tokens.map((x) => `${x.id} ${x.scope} ${x.source}`)).toEqual([
      'demo-admin admin config',
      'tok-read read api',
      'tok-keys keys api',
      'tok-billing billing api',
      'tok-admin admin api',
    ]);
    for (const s of Object.values(tokens)) expect(JSON.stringify(list.data)).not.toContain(s);
  });

  it('an admin token creates a token through the API: shown once, works with its scope at once, audited', async () => {
    expect((await client(tokens.keys).POST('/admin/v1/tokens', { body: { scope: 'admin' } })).response.status).toBe(
      403,
    );
    const made = await client(tokens.admin).POST('/admin/v1/tokens', {
      body: { id: 'portal', scope: 'read', description: 'the portal' },
    });
    expect(made.response.status).toBe(201);
    expect(made.data!.token).toEqual({
      id: 'portal',
      scope: 'read',
      description: 'the portal',
      createdAt: expect.any(String),
      source: 'api',
    });
    const portal = made.data!.secret;
    expect((await client(portal).GET('/admin/v1/keys')).response.status).toBe(200);
    expect((await client(portal).POST('/admin/v1/keys', { body: { group: 'basic' } })).response.status).toBe(403);
    expect(
      (await client(tokens.admin).POST('/admin/v1/tokens', { body: { id: 'portal', scope: 'read' } })).response.status,
    ).toBe(409);
    expect(
      (await client(tokens.admin).POST('/admin/v1/tokens', { body: { id: 'demo-admin', scope: 'read' } })).response
        .status,
    ).toBe(409);
    expect(readFileSync(adminStatePath(h.configPath), 'utf8')).not.toContain(portal);
    await client(tokens.admin).DELETE('/admin/v1/tokens/{id}', { params: { path: { id: 'portal' } } });
    expect((await client(portal).GET('/admin/v1/keys')).response.status).toBe(401);
  });

  it('a revoked token is refused at its next request, and the revocation is audited; a config token answers 409', async () => {
    expect((await client(tokens.billing).GET('/admin/v1/keys')).response.status).toBe(200);
    const r = await client(tokens.admin).DELETE('/admin/v1/tokens/{id}', { params: { path: { id: 'tok-billing' } } });
    expect(r.data).toMatchObject({ id: 'tok-billing', scope: 'billing' });
    const after = await client(tokens.billing).GET('/admin/v1/keys');
    expect(after.response.status).toBe(401);
    expect(after.error?.error.code).toBe('token_unknown');
    expect(
      (await client(tokens.admin).DELETE('/admin/v1/tokens/{id}', { params: { path: { id: 'demo-admin' } } })).response
        .status,
    ).toBe(409);
    expect(
      (await client(tokens.admin).DELETE('/admin/v1/tokens/{id}', { params: { path: { id: 'nope' } } })).response
        .status,
    ).toBe(404);
    const audit = (await client(tokens.read).GET('/admin/v1/audit', { params: { query: { limit: 1 } } })).data!
      .entries[0];
    expect(audit).toMatchObject({ action: 'token.delete', actor: 'tok-admin', target: 'tok-billing', after: null });
  });
});

describe('failed attempts', () => {
  it('are logged without the token, and rate limited per address (429 with Retry-After, even for a valid token)', async () => {
    const guess = generateToken();
    let last = 0;
    for (let i = 0; i < 21; i++) last = (await client(guess).GET('/admin/v1/keys')).response.status;
    expect(last).toBe(429);
    const valid = await client(tokens.read).GET('/admin/v1/keys');
    expect(valid.response.status).toBe(429);
    expect(Number(valid.response.headers.get('retry-after'))).toBeGreaterThan(0);
    const lines = h.logs.raw.filter((l) => l.includes('admin API authentication failed'));
    expect(lines.length).toBeGreaterThanOrEqual(20);
    expect(h.logs.raw.join('\n')).not.toContain(guess);
    expect(h.logs.raw.join('\n')).not.toContain(guess.slice(9));
    t += 60_000;
    expect((await client(tokens.read).GET('/admin/v1/keys')).response.status).toBe(200);
  });
});

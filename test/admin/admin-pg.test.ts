/**
 * The admin API on PostgreSQL with two replicas (two modelgate services on one database), through
 * the typed client: a token created by `modelgate admin-tokens new --store` works on both; a key
 * created on one is served by the other's Check; a credit repeated on either replica with one
 * idempotency key credits once; a rotation with a 5 s grace keeps the old secret working on both
 * replicas, then 401 on both after it (a fake clock); every write is in the shared audit log.
 */
import createClient from 'openapi-fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { runCli } from '../../src/cli/main';
import type { AdminDb } from '../../src/store/pg/admin';
import { setGroup } from '../../src/store/pg/groups';
import { migrate } from '../../src/store/pg/schema';
import type { paths } from '../support/admin-api';
import { openPool, startPgServer, type PgServer } from '../support/pg-server';
import { DEMO_CONFIG, reasonOf, startHarness, tempConfig, type Harness } from '../support/service-harness';

let t = Date.parse('2026-03-31T22:00:00Z');
const now = (): number => t;
let server: PgServer;
let pool: AdminDb;
let a: Harness;
let b: Harness;
let token = '';
let billing = '';
const api = (h: Harness, tok = token) =>
  createClient<paths>({ baseUrl: `http://${h.service.httpAddress}`, headers: { authorization: `Bearer ${tok}` } });
const chat = (h: Harness, key: string) =>
  h.check({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [['authorization', `Bearer ${key}`]],
    body: '{"model":"gpt-4o-mini"}',
  });

/** Waits (a notification crossing replicas) until `h`'s Check answers `reason` for `key`. */
async function until(h: Harness, key: string, reason: string): Promise<void> {
  const end = Date.now() + 10_000;
  for (;;) {
    const got = reasonOf(await chat(h, key));
    if (got === reason) return;
    if (Date.now() > end) throw new Error(`still ${got}, not ${reason}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(args, { stdout: (s) => (out += s), stderr: (s) => (err += s), env: {} });
  return { code, out, err };
}

beforeAll(async () => {
  server = await startPgServer();
  pool = openPool(server.url);
  await migrate(pool);
  await setGroup(pool, { name: 'basic', models: [{ name: 'gpt-4o-mini', protocols: null, available: true }] });
  for (const [scope, set] of [
    ['admin', (s: string) => (token = s)],
    ['billing', (s: string) => (billing = s)],
  ] as const) {
    const r = await cli([
      'admin-tokens',
      'new',
      '--scope',
      scope,
      '--id',
      `tok-${scope}`,
      '--store',
      server.url,
      '--json',
    ]);
    expect(r.code, r.err).toBe(0);
    set(JSON.parse(r.out).token);
  }
  const config = tempConfig(`${readFileSync(DEMO_CONFIG, 'utf8')}\nstore: ${server.url}\n`);
  [a, b] = await Promise.all([startHarness({ configPath: config, now }), startHarness({ configPath: config, now })]);
}, 120_000);
afterAll(async () => {
  await a?.close();
  await b?.close();
  await pool?.end();
  await server?.close();
});

describe('the admin API on PostgreSQL, two replicas', () => {
  let id = '';
  let secret = '';

  it('a token made by `admin-tokens new --store` works on both replicas, and is stored only as its hash', async () => {
    expect(token).toMatch(/^mg-admin-[A-Za-z0-9_-]{43}$/);
    for (const h of [a, b]) expect((await api(h).GET('/admin/v1/groups')).response.status).toBe(200);
    const { rows } = await pool.query('SELECT * FROM modelgate.admin_tokens');
    expect(JSON.stringify(rows)).not.toContain(token);
    expect(rows.map((r: { scope: string }) => r.scope).sort()).toEqual(['admin', 'billing']);
  });

  it('a key created on one replica is served by the other', async () => {
    const r = await api(a).POST('/admin/v1/keys', {
      body: { id: 'pg-team', group: 'basic', balance: 10, metadata: { team: 'x' } },
    });
    expect(r.response.status).toBe(201);
    id = r.data!.key.id;
    secret = r.data!.secret;
    expect(r.data!.key).toMatchObject({ source: 'store', balance: 10, metadata: { team: 'x' } });
    await until(b, secret, 'allowed');
    expect((await api(b).GET('/admin/v1/keys/{id}', { params: { path: { id } } })).data?.metadata).toEqual({
      team: 'x',
    });
  });

  it('a credit repeated on either replica with one idempotency key credits once', async () => {
    const body = { amount: 1.25, idempotencyKey: 'invoice-77' };
    const results = await Promise.all(
      [a, b, a, b].map((h) => api(h, billing).POST('/admin/v1/keys/{id}/credits', { params: { path: { id } }, body })),
    );
    expect(results.map((r) => r.response.status)).toEqual([200, 200, 200, 200]);
    expect(results.filter((r) => r.data!.replayed === false)).toHaveLength(1);
    expect(new Set(results.map((r) => r.data!.id)).size).toBe(1);
    const { rows } = await pool.query<{ b: string }>('SELECT balance::text AS b FROM modelgate.keys WHERE id = $1', [
      id,
    ]);
    expect(rows[0].b).toBe('11.25');
    expect(
      (
        await api(b, billing).POST('/admin/v1/keys/{id}/credits', {
          params: { path: { id } },
          body: { amount: 2, idempotencyKey: 'invoice-77' },
        })
      ).response.status,
    ).toBe(409);
  });

  it('rotation with a 5 s grace: the old secret works on both replicas for the grace only, then 401', async () => {
    for (const h of [a, b]) expect(reasonOf(await chat(h, secret))).toBe('allowed');
    const r = await api(a).POST('/admin/v1/keys/{id}/rotate', {
      params: { path: { id } },
      body: { gracePeriodSeconds: 5 },
    });
    expect(r.data!.key.id).toBe(id);
    const fresh = r.data!.secret;
    for (const h of [a, b]) await until(h, fresh, 'allowed');
    t += 4999;
    for (const h of [a, b]) expect(reasonOf(await chat(h, secret))).toBe('allowed');
    t += 1;
    for (const h of [a, b]) {
      const late = await chat(h, secret);
      expect(reasonOf(late)).toBe('key_expired');
      expect(late.denied_response?.status?.code).toBe('Unauthorized');
      expect(reasonOf(await chat(h, fresh))).toBe('allowed');
    }
    secret = fresh;
  });

  it('a rotation without grace stops the old secret on both replicas at once', async () => {
    const r = await api(b).POST('/admin/v1/keys/{id}/rotate', { params: { path: { id } }, body: {} });
    for (const h of [a, b]) await until(h, secret, 'key_unknown');
    for (const h of [a, b]) await until(h, r.data!.secret, 'allowed');
    secret = r.data!.secret;
  });

  it('`keys rotate --grace` goes through the same backend: audited as cli, the old key kept for its grace', async () => {
    const r = await cli(['keys', 'rotate', id, '--grace', '60', '--store', server.url, '--json']);
    expect(r.code, r.err).toBe(0);
    const out = JSON.parse(r.out) as { key: string; record: { id: string }; previousKeyValidUntil: string };
    expect(out.record.id).toBe(id);
    expect(Date.parse(out.previousKeyValidUntil)).toBeGreaterThan(Date.now());
    for (const h of [a, b]) await until(h, out.key, 'allowed');
    // The grace is on the real clock here (the command line has no fake one): the old key still works.
    for (const h of [a, b]) expect(reasonOf(await chat(h, secret))).toBe('allowed');
    secret = out.key;
  });

  it('a group made unavailable on one replica refuses its keys on the other (group_unavailable), and back', async () => {
    expect(
      (
        await api(a, billing).PATCH('/admin/v1/groups/{name}', {
          params: { path: { name: 'basic' } },
          body: { available: false },
        })
      ).response.status,
    ).toBe(403);
    const off = await api(a).PATCH('/admin/v1/groups/{name}', {
      params: { path: { name: 'basic' } },
      body: { available: false, limits: { rpm: 100 } },
    });
    expect(off.data).toMatchObject({ name: 'basic', available: false, limits: { rpm: 100 } });
    await until(b, secret, 'group_unavailable');
    await api(b).PATCH('/admin/v1/groups/{name}', {
      params: { path: { name: 'basic' } },
      body: { available: true, limits: null },
    });
    await until(a, secret, 'allowed');
    expect(
      (await api(a).PATCH('/admin/v1/groups/{name}', { params: { path: { name: 'nope' } }, body: { available: true } }))
        .response.status,
    ).toBe(404);
  });

  it('DELETE on one replica: the other answers key_unknown', async () => {
    expect((await api(a).DELETE('/admin/v1/keys/{id}', { params: { path: { id } } })).response.status).toBe(200);
    await until(b, secret, 'key_unknown');
  });

  it('a token revoked on one replica is refused by the other at its next request', async () => {
    expect((await api(b, billing).GET('/admin/v1/keys')).response.status).toBe(200);
    expect(
      (await api(a).DELETE('/admin/v1/tokens/{id}', { params: { path: { id: 'tok-billing' } } })).response.status,
    ).toBe(200);
    expect((await api(b, billing).GET('/admin/v1/keys')).response.status).toBe(401);
    expect((await api(b).GET('/admin/v1/tokens')).data!.tokens.map((x) => x.id)).toEqual(['demo-admin', 'tok-admin']);
  });

  it('every write is in the shared audit log, with actor, address and request id, never a secret', async () => {
    const entries = (await api(b).GET('/admin/v1/audit')).data!.entries;
    expect(entries.map((e) => `${e.action} ${e.actor}`).reverse()).toEqual([
      'token.create cli',
      'token.create cli',
      'key.create tok-admin',
      'key.credit tok-billing',
      'key.rotate tok-admin',
      'key.rotate tok-admin',
      'key.rotate cli',
      'group.update tok-admin',
      'group.update tok-admin',
      'key.delete tok-admin',
      'token.delete tok-admin',
    ]);
    for (const e of entries.filter(
      (x) => (x.action.startsWith('key.') || x.action.startsWith('group.')) && x.actor !== 'cli',
    )) {
      expect(e.address).toMatch(/127\.0\.0\.1/);
      expect(e.requestId).toBeTruthy();
    }
    expect(entries.find((e) => e.actor === 'cli' && e.action === 'key.rotate')).toMatchObject({
      address: null,
      requestId: null,
      target: id,
    });
    const page = (await api(a).GET('/admin/v1/audit', { params: { query: { limit: 4 } } })).data!;
    const rest = (await api(a).GET('/admin/v1/audit', { params: { query: { cursor: page.nextCursor! } } })).data!;
    expect([...page.entries, ...rest.entries].map((e) => e.id)).toEqual(entries.map((e) => e.id));
    expect(rest.nextCursor).toBeNull();
    const rotate = entries.find((e) => e.action === 'key.rotate')!;
    expect(rotate.before).toMatchObject({ id });
    const text = JSON.stringify(entries);
    for (const s of [token, billing, secret]) expect(text).not.toContain(s);
    expect(text).not.toMatch(/sk-mg-|[0-9a-f]{64}/);
  });

  it('with PostgreSQL down it fails closed: 503 store_unavailable in JSON, never a 500 or an allow', async () => {
    expect(server.canRestart).toBe(true);
    await server.stop();
    try {
      const r = await api(a).GET('/admin/v1/keys');
      expect(r.response.status).toBe(503);
      expect(r.error?.error.code).toBe('store_unavailable');
      expect(r.response.headers.get('content-type')).toBe('application/json');
    } finally {
      await server.start();
    }
  });
});

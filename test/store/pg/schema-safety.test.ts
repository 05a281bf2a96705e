/**
 * On PostgreSQL: everything modelgate creates lives in its own schema; a database that
 * holds another application's tables is never migrated implicitly (and the error names where the
 * URL came from); tables of an older build are adopted; a balance or price that is not a finite
 * number is refused by the database itself, whoever writes it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ForeignDatabaseError, MIGRATIONS, SCHEMA_VERSION, migrate, schemaVersion } from '../../../src/store/pg/schema';
import { openPgStore } from '../../../src/store/pg/store';
import { openPool, startPgServer, type PgServer } from '../../support/pg-server';

let server: PgServer;
beforeAll(async () => {
  server = await startPgServer();
}, 60_000);
afterAll(() => server?.close());

const objectsIn = async (url: string, schema: string): Promise<string[]> => {
  const pool = openPool(url, 1);
  try {
    const { rows } = await pool.query<{ name: string }>(
      `
      SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1
      UNION ALL SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 ORDER BY 1`,
      [schema],
    );
    return rows.map((r) => r.name);
  } finally {
    await pool.end();
  }
};

describe('the schema modelgate', () => {
  it('holds every table, index and function modelgate creates; public gets nothing', async () => {
    const url = await server.createDatabase();
    const pool = openPool(url, 1);
    await migrate(pool);
    await pool.end();
    expect(await objectsIn(url, 'public')).toEqual([]);
    expect(await objectsIn(url, 'modelgate')).toEqual(
      expect.arrayContaining([
        'keys',
        'groups',
        'group_models',
        'usage',
        'reservations',
        'schema_version',
        'debit',
        'reserve',
        'modelgate_notify_key',
      ]),
    );
  });

  it('refuses to migrate implicitly into a database with tables of another application, naming where its URL came from', async () => {
    const url = await server.createDatabase();
    const pool = openPool(url, 1);
    try {
      await pool.query('CREATE TABLE public.invoices (id int PRIMARY KEY)');
      await pool.query('CREATE SCHEMA billing; CREATE TABLE billing.payments (id int)');
      await expect(migrate(pool)).rejects.toThrow(ForeignDatabaseError);
      await expect(migrate(pool)).rejects.toThrow(
        /billing\.payments, public\.invoices.*modelgate migrate --allow-foreign-tables/,
      );
      await expect(openPgStore(url, { source: 'DATABASE_URL' })).rejects.toThrow(
        /\(from DATABASE_URL\): the database already holds tables of another application/,
      );
      expect(await schemaVersion(pool)).toBe(0);
      expect(await objectsIn(url, 'modelgate')).toEqual([]);
      // With the explicit flag: created beside them, the other tables untouched; afterwards serve opens it.
      expect((await migrate(pool, { allowForeignTables: true })).to).toBe(SCHEMA_VERSION);
      expect(await objectsIn(url, 'public')).toEqual(['invoices', 'invoices_pkey']);
      const store = await openPgStore(url, { source: 'DATABASE_URL' });
      await store.close();
    } finally {
      await pool.end();
    }
  });

  it('names the variable when the server cannot be reached', async () => {
    await expect(
      openPgStore('postgres://u:secret@127.0.0.1:1/db', { source: 'DATABASE_URL', connectTimeoutMs: 500 }),
    ).rejects.toThrow(/^cannot reach PostgreSQL at postgres:\/\/u:\*\*\*@127\.0\.0\.1:1\/db \(from DATABASE_URL\): /);
  });

  it('adopts the tables of an older build (schema version 1 in public), data included, and makes a NaN balance 0', async () => {
    const url = await server.createDatabase();
    const pool = openPool(url, 1);
    try {
      await pool.query(
        `CREATE TABLE modelgate_schema_version (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      await pool.query(MIGRATIONS[0].sql);
      await pool.query("INSERT INTO modelgate_schema_version (version, name) VALUES (1, 'v1')");
      await pool.query("INSERT INTO modelgate_groups (name) VALUES ('basic')");
      await pool.query(
        `INSERT INTO modelgate_keys (id, sha256, group_name, balance) VALUES ('nan', '${'a'.repeat(64)}', 'basic', 'NaN'), ('ok', '${'b'.repeat(64)}', 'basic', 7.5)`,
      );
      expect(await schemaVersion(pool)).toBe(1);
      await expect(openPgStore(url, { migrate: false })).rejects.toThrow(
        new RegExp(`version 1, modelgate needs ${SCHEMA_VERSION}`),
      );
      const result = await migrate(pool);
      expect(result).toMatchObject({
        from: 1,
        to: SCHEMA_VERSION,
        applied: MIGRATIONS.slice(1).map((m) => m.version),
        adopted: true,
      });
      expect(await objectsIn(url, 'public')).toEqual([]);
      const { rows } = await pool.query('SELECT id, balance::text AS balance FROM modelgate.keys ORDER BY id');
      expect(rows).toEqual([
        { id: 'nan', balance: '0' },
        { id: 'ok', balance: '7.5' },
      ]);
    } finally {
      await pool.end();
    }
  });
});

describe('numbers the database refuses', () => {
  let url: string;
  beforeAll(async () => {
    url = await server.createDatabase();
    const pool = openPool(url, 1);
    await migrate(pool);
    await pool.query("INSERT INTO modelgate.groups (name) VALUES ('basic')");
    await pool.query("INSERT INTO modelgate.group_models (group_name, name) VALUES ('basic', 'm')");
    await pool.query(
      `INSERT INTO modelgate.keys (id, sha256, group_name, balance) VALUES ('k', '${'c'.repeat(64)}', 'basic', 1)`,
    );
    await pool.end();
  });

  it.each(["'NaN'", "'Infinity'", "'-Infinity'", "balance - 'NaN'"])(
    'refuses balance = %s from any writer (a billing job subtracting a JS NaN)',
    async (value) => {
      const pool = openPool(url, 1);
      try {
        await expect(pool.query(`UPDATE modelgate.keys SET balance = ${value} WHERE id = 'k'`)).rejects.toMatchObject({
          code: expect.stringMatching(/^(23514|22P02)$/),
        });
        expect((await pool.query("SELECT balance::text AS b FROM modelgate.keys WHERE id = 'k'")).rows[0].b).toBe('1');
      } finally {
        await pool.end();
      }
    },
  );

  it.each([
    ["'NaN'", "'1'"],
    ["'-1'", "'1'"],
    ["'1'", 'NULL'],
  ])('refuses a price (input %s, output %s) that is not finite, negative, or half given', async (input, output) => {
    const pool = openPool(url, 1);
    try {
      await expect(
        pool.query(
          `UPDATE modelgate.group_models SET input_price = ${input}, output_price = ${output} WHERE name = 'm'`,
        ),
      ).rejects.toMatchObject({ code: '23514' });
    } finally {
      await pool.end();
    }
  });
});

/**
 * The PostgreSQL schema of the shared store, as versioned migrations that modelgate applies itself
 * (at `serve` start, by `modelgate migrate`, and before any admin command).
 *
 * Every write to a key, a group or a group's models fires a trigger that sends a notification on
 * INVALIDATION_CHANNEL, so every replica's cache forgets exactly the touched entry within a
 * round trip. Triggers rather than calls in our admin code: a billing job that debits balances with
 * plain SQL must invalidate caches too, and it will not call our code.
 */
import pg from 'pg';

/** The LISTEN/NOTIFY channel; payloads are InvalidationEvent JSON (see ../store.ts). */
export const INVALIDATION_CHANNEL = 'modelgate_invalidate';

/**
 * Key of the transaction-scoped advisory lock that serialises migrations, so replicas starting at
 * the same moment apply each migration exactly once ('modelgat' in ASCII, a fixed signed bigint).
 */
const MIGRATION_LOCK = '7885631859322216820';

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

const notifyFunctions = `
CREATE FUNCTION modelgate_notify_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- OLD for updates and deletes (caches hold the old hash); NEW for inserts too, because caches
  -- remember "not found" for a hash and must forget that when the key appears.
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'key', 'sha256', OLD.sha256)::text);
  END IF;
  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.sha256 <> OLD.sha256) THEN
    PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'key', 'sha256', NEW.sha256)::text);
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION modelgate_notify_group() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  old_name text;
  new_name text;
BEGIN
  -- The same function serves modelgate_groups (column name) and modelgate_group_models (group_name).
  IF TG_TABLE_NAME = 'modelgate_groups' THEN
    IF TG_OP <> 'INSERT' THEN old_name := OLD.name; END IF;
    IF TG_OP <> 'DELETE' THEN new_name := NEW.name; END IF;
  ELSE
    IF TG_OP <> 'INSERT' THEN old_name := OLD.group_name; END IF;
    IF TG_OP <> 'DELETE' THEN new_name := NEW.group_name; END IF;
  END IF;
  -- PostgreSQL folds identical notifications of one transaction into one, so replacing a whole
  -- model list still sends a single event per group.
  IF old_name IS NOT NULL THEN
    PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'group', 'name', old_name)::text);
  END IF;
  IF new_name IS NOT NULL AND new_name IS DISTINCT FROM old_name THEN
    PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'group', 'name', new_name)::text);
  END IF;
  RETURN NULL;
END $$;

-- TRUNCATE has no rows to name: every cached entry may be wrong.
CREATE FUNCTION modelgate_notify_all() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('${INVALIDATION_CHANNEL}', '{"kind":"all"}');
  RETURN NULL;
END $$;
`;

/** Triggers for one table: row changes name the entry; updates that change nothing stay silent. */
function notifyTriggers(table: string, fn: string): string {
  return `
CREATE TRIGGER ${table}_notify_insert_delete AFTER INSERT OR DELETE ON ${table}
  FOR EACH ROW EXECUTE FUNCTION ${fn}();
CREATE TRIGGER ${table}_notify_update AFTER UPDATE ON ${table}
  FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION ${fn}();
CREATE TRIGGER ${table}_notify_truncate AFTER TRUNCATE ON ${table}
  FOR EACH STATEMENT EXECUTE FUNCTION modelgate_notify_all();
`;
}

/** Every migration, oldest first. Never edit one that has shipped: add the next version. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'groups, group models, keys with balances, invalidation triggers',
    sql: `
CREATE TABLE modelgate_groups (
  name text PRIMARY KEY CHECK (name <> '' AND length(name) <= 200),
  available boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE modelgate_group_models (
  group_name text NOT NULL REFERENCES modelgate_groups (name) ON DELETE CASCADE ON UPDATE CASCADE,
  -- Exact model name: case and spaces matter (seed §2).
  name text NOT NULL CHECK (name <> '' AND length(name) <= 500),
  -- NULL = any protocol style; otherwise a non-empty subset of src/store/store.ts PROTOCOLS.
  protocols text[] CHECK (protocols IS NULL OR (cardinality(protocols) > 0
    AND protocols <@ ARRAY['chat', 'responses', 'embeddings', 'messages', 'generative'])),
  available boolean NOT NULL DEFAULT true,
  -- Keeps the order an operator gave, for listings.
  position integer NOT NULL DEFAULT 0,
  PRIMARY KEY (group_name, name)
);

CREATE TABLE modelgate_keys (
  id text PRIMARY KEY CHECK (id <> '' AND length(id) <= 200),
  -- Lowercase hex SHA-256 of the full key: the key itself is never stored.
  sha256 text NOT NULL UNIQUE CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  -- RESTRICT: a group that keys still use cannot disappear under them.
  group_name text NOT NULL REFERENCES modelgate_groups (name) ON DELETE RESTRICT ON UPDATE CASCADE,
  -- NULL = unlimited. numeric: debits of fractions of a cent add up exactly.
  balance numeric,
  disabled boolean NOT NULL DEFAULT false,
  expires_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX modelgate_keys_group_name ON modelgate_keys (group_name);
${notifyFunctions}
${notifyTriggers('modelgate_keys', 'modelgate_notify_key')}
${notifyTriggers('modelgate_groups', 'modelgate_notify_group')}
${notifyTriggers('modelgate_group_models', 'modelgate_notify_group')}
`,
  },
];

/** The schema version this build of modelgate needs. */
export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;

/** What migrate() did. `from` is 0 on an empty database. */
export interface MigrationResult {
  readonly from: number;
  readonly to: number;
  readonly applied: readonly number[];
}

async function withClient<T>(db: pg.Pool | pg.ClientBase, fn: (c: pg.ClientBase) => Promise<T>): Promise<T> {
  if (!(db instanceof pg.Pool)) return fn(db);
  const client = await db.connect();
  try {
    return await fn(client);
  } finally {
    client.release();
  }
}

/**
 * Brings the database to SCHEMA_VERSION. Idempotent, and safe when many replicas call it at once:
 * all of it runs in one transaction under an advisory lock, so a second caller waits, then finds
 * nothing left to do. A database newer than this build (a rolling upgrade) is left as it is.
 */
export async function migrate(db: pg.Pool | pg.ClientBase): Promise<MigrationResult> {
  return withClient(db, async (client) => {
    await client.query('BEGIN');
    try {
      // A lookup-sized statement_timeout (1 s in the store's pool) must not cancel the wait for
      // another replica's migration, nor a migration itself; LOCAL ends with the transaction.
      await client.query('SET LOCAL statement_timeout = 0');
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      // Checked rather than CREATE TABLE IF NOT EXISTS, which needs the CREATE privilege even when
      // the table exists: an up-to-date database must not require DDL rights from the service role.
      const from = await schemaVersion(client);
      if (from === 0) {
        await client.query(`CREATE TABLE IF NOT EXISTS modelgate_schema_version (
          version integer PRIMARY KEY,
          name text NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`);
      }
      const applied: number[] = [];
      for (const m of MIGRATIONS) {
        if (m.version <= from) continue;
        await client.query(m.sql);
        await client.query('INSERT INTO modelgate_schema_version (version, name) VALUES ($1, $2)', [m.version, m.name]);
        applied.push(m.version);
      }
      await client.query('COMMIT');
      return { from, to: Math.max(from, SCHEMA_VERSION), applied };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  });
}

async function currentVersion(client: pg.ClientBase): Promise<number> {
  const { rows } = await client.query<{ v: number | null }>('SELECT max(version) AS v FROM modelgate_schema_version');
  return rows[0].v ?? 0;
}

/** The version the database is at: 0 when modelgate's schema was never applied. */
export async function schemaVersion(db: pg.Pool | pg.ClientBase): Promise<number> {
  return withClient(db, async (client) => {
    const { rows } = await client.query<{ t: string | null }>("SELECT to_regclass('modelgate_schema_version') AS t");
    return rows[0].t === null ? 0 : currentVersion(client);
  });
}

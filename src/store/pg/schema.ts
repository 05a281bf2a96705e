/**
 * The PostgreSQL schema of the shared store, as versioned migrations that modelgate applies itself
 * (at `serve` start, by `modelgate migrate`, and before any admin command). Everything modelgate
 * creates lives in its own schema, SCHEMA (`modelgate`): tables, functions, triggers. A database
 * that already holds other applications' tables is never migrated implicitly (see migrate()).
 *
 * Every write to a key, a group or a group's models fires a trigger that sends a notification on
 * INVALIDATION_CHANNEL, so every replica's cache forgets exactly the touched entry within a
 * round trip. Triggers rather than calls in our admin code: a billing job that debits balances with
 * plain SQL must invalidate caches too, and it will not call our code.
 */
import pg from 'pg';
import { InternalError } from '../../errors/internal-error';

/** The schema that holds everything modelgate creates. */
export const SCHEMA = 'modelgate';

/** The LISTEN/NOTIFY channel; payloads are InvalidationEvent JSON (see ../store.ts). */
export const INVALIDATION_CHANNEL = 'modelgate_invalidate';

/**
 * Settlements (migration 5): `{"s":[[request id, replica or null, cost], ...]}` after each batch of
 * debits, so the replica that allowed a request (and holds it in flight, or leased its balance) hears
 * that another replica settled it; and `{"r":[request id, ...]}` for requests released because they
 * ended before a Check's answer reached them (meter-store.ts announceReleased). A channel of its own: a replica of an
 * older build, which reads
 * anything unknown on the invalidation channel as "forget everything", never sees these.
 */
export const SETTLED_CHANNEL = 'modelgate_settled';

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
  -- Exact model name: case and spaces matter (docs/spec.md §2).
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
  /*
   * Version 2. Migration 1 shipped creating modelgate_* tables in the connection's current schema
   * (usually public); it now runs with search_path = modelgate (so its text is unchanged), and
   * databases migrated by older builds are moved there first (adoptLegacyTables). Then version 2
   * gives the tables their short names, and adds what metering needs (docs/metering.md) and the finite
   * balance rule (docs/security.md).
   */
  {
    version: 2,
    name: 'schema modelgate with short table names; finite balances; prices, usage ledger, reservations',
    sql: `
ALTER TABLE modelgate_groups RENAME TO groups;
ALTER TABLE modelgate_group_models RENAME TO group_models;
ALTER TABLE modelgate_keys RENAME TO keys;
ALTER INDEX modelgate_keys_group_name RENAME TO keys_group_name;

-- The group trigger function told the two tables apart by their old names.
CREATE OR REPLACE FUNCTION modelgate_notify_group() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  old_name text;
  new_name text;
BEGIN
  IF TG_TABLE_NAME = 'groups' THEN
    IF TG_OP <> 'INSERT' THEN old_name := OLD.name; END IF;
    IF TG_OP <> 'DELETE' THEN new_name := NEW.name; END IF;
  ELSE
    IF TG_OP <> 'INSERT' THEN old_name := OLD.group_name; END IF;
    IF TG_OP <> 'DELETE' THEN new_name := NEW.group_name; END IF;
  END IF;
  IF old_name IS NOT NULL THEN
    PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'group', 'name', old_name)::text);
  END IF;
  IF new_name IS NOT NULL AND new_name IS DISTINCT FROM old_name THEN
    PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'group', 'name', new_name)::text);
  END IF;
  RETURN NULL;
END $$;

-- numeric accepts 'NaN', which compares greater than every number, so a NaN balance
-- passed "balance <= 0" for ever. A balance must be finite (NaN and, from PostgreSQL 14, the
-- infinities fail both comparisons). A NaN already stored becomes 0: the key is denied until
-- someone sets a real balance, instead of being unlimited.
UPDATE keys SET balance = 0 WHERE balance IS NOT NULL AND NOT (balance > -1e100 AND balance < 1e100);
ALTER TABLE keys ADD CONSTRAINT keys_balance_finite CHECK (balance IS NULL OR (balance > -1e100 AND balance < 1e100));

-- Prices per million tokens, in the balance's unit. NULL input/output = no price: metered in
-- tokens, costs nothing. cached_input_price NULL = cached input tokens cost the input price.
ALTER TABLE group_models
  ADD COLUMN input_price numeric CHECK (input_price >= 0 AND input_price < 1e12),
  ADD COLUMN output_price numeric CHECK (output_price >= 0 AND output_price < 1e12),
  ADD COLUMN cached_input_price numeric CHECK (cached_input_price >= 0 AND cached_input_price < 1e12),
  -- Strict mode: the output tokens reserved when a request names no maximum.
  ADD COLUMN max_output_tokens integer CHECK (max_output_tokens > 0),
  ADD CONSTRAINT group_models_price_complete CHECK ((input_price IS NULL) = (output_price IS NULL)
    AND (cached_input_price IS NULL OR input_price IS NOT NULL));

-- The usage ledger: one row per metered response, written once per request id (the debit is
-- idempotent: a retried settlement finds its row and debits nothing). No foreign key to keys: a
-- deleted key keeps its history.
CREATE TABLE usage (
  request_id text PRIMARY KEY CHECK (request_id <> '' AND length(request_id) <= 200),
  time timestamptz NOT NULL DEFAULT now(),
  key_id text NOT NULL,
  group_name text NOT NULL,
  model text NOT NULL,
  protocol text NOT NULL,
  input_tokens bigint NOT NULL CHECK (input_tokens >= 0),
  output_tokens bigint NOT NULL CHECK (output_tokens >= 0),
  cached_input_tokens bigint NOT NULL DEFAULT 0 CHECK (cached_input_tokens >= 0 AND cached_input_tokens <= input_tokens),
  cost numeric NOT NULL CHECK (cost >= 0 AND cost < 1e100),
  priced boolean NOT NULL
);
CREATE INDEX usage_key_time ON usage (key_id, time DESC);
CREATE INDEX usage_group_time ON usage (group_name, time DESC);
CREATE INDEX usage_time ON usage (time DESC);

-- Strict mode: what requests in flight may still cost. available = balance - open reservations.
-- expires_at bounds a reservation whose settlement never comes (a crashed replica).
CREATE TABLE reservations (
  request_id text PRIMARY KEY CHECK (request_id <> '' AND length(request_id) <= 200),
  key_id text NOT NULL REFERENCES keys (id) ON DELETE CASCADE ON UPDATE CASCADE,
  amount numeric NOT NULL CHECK (amount >= 0 AND amount < 1e100),
  expires_at timestamptz NOT NULL
);
CREATE INDEX reservations_key ON reservations (key_id);

-- Reserves p_amount for a request if the key's balance minus its open reservations covers it.
-- The key's row is locked first, so reservations of one key are taken one at a time; each later
-- statement of this (volatile) function sees what the previous holder committed.
CREATE FUNCTION reserve(p_request text, p_key text, p_amount numeric, p_seconds integer)
RETURNS TABLE (ok boolean, available numeric) LANGUAGE plpgsql AS $$
DECLARE
  b numeric;
  held numeric;
BEGIN
  SELECT k.balance INTO b FROM ${SCHEMA}.keys k WHERE k.id = p_key FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT false, NULL::numeric;
    RETURN;
  END IF;
  IF b IS NULL THEN
    RETURN QUERY SELECT true, NULL::numeric;
    RETURN;
  END IF;
  DELETE FROM ${SCHEMA}.reservations r WHERE r.key_id = p_key AND r.expires_at <= now();
  SELECT coalesce(sum(r.amount), 0) INTO held FROM ${SCHEMA}.reservations r WHERE r.key_id = p_key;
  IF b - held <= 0 OR b - held < p_amount THEN
    RETURN QUERY SELECT false, b - held;
    RETURN;
  END IF;
  INSERT INTO ${SCHEMA}.reservations (request_id, key_id, amount, expires_at)
    VALUES (p_request, p_key, p_amount, now() + make_interval(secs => p_seconds))
    ON CONFLICT (request_id) DO NOTHING;
  RETURN QUERY SELECT true, b - held - p_amount;
END $$;

-- Settles one response: drops its reservation, writes its ledger row and debits the key, all
-- at most once per request id. cost = (uncached input x input price + cached input x cached
-- price + output x output price) / 1e6, computed here in numeric, so it is exact.
CREATE FUNCTION debit(p_request text, p_key text, p_group text, p_model text, p_protocol text,
  p_input bigint, p_output bigint, p_cached bigint, p_price_in numeric, p_price_out numeric, p_price_cached numeric)
RETURNS TABLE (applied boolean, cost numeric, balance numeric) LANGUAGE plpgsql AS $$
DECLARE
  c numeric;
  b numeric;
BEGIN
  DELETE FROM ${SCHEMA}.reservations r WHERE r.request_id = p_request;
  c := CASE WHEN p_price_in IS NULL OR p_price_out IS NULL THEN 0
    ELSE ((p_input - p_cached) * p_price_in + p_cached * coalesce(p_price_cached, p_price_in) + p_output * p_price_out) / 1000000 END;
  INSERT INTO ${SCHEMA}.usage (request_id, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens, cost, priced)
    VALUES (p_request, p_key, p_group, p_model, p_protocol, p_input, p_output, p_cached, c, p_price_in IS NOT NULL)
    ON CONFLICT (request_id) DO NOTHING;
  IF NOT FOUND THEN
    RETURN QUERY SELECT false, c, (SELECT k.balance FROM ${SCHEMA}.keys k WHERE k.id = p_key);
    RETURN;
  END IF;
  IF c > 0 THEN
    UPDATE ${SCHEMA}.keys k SET balance = k.balance - c WHERE k.id = p_key AND k.balance IS NOT NULL RETURNING k.balance INTO b;
  ELSE
    SELECT k.balance INTO b FROM ${SCHEMA}.keys k WHERE k.id = p_key;
  END IF;
  RETURN QUERY SELECT true, c, b;
END $$;
`,
  },
  /*
   * Version 3. Metering debits a key on every response, and every debit told every replica to forget
   * the key, so each Check of a busy metered key asked PostgreSQL again (the end-to-end benchmark:
   * Checks failed store_unavailable while debits kept the pool busy). A change of the balance alone
   * now carries the new balance, which caches take as is; any other change still invalidates.
   */
  {
    version: 3,
    name: 'a balance-only change notifies the new balance',
    sql: `
CREATE OR REPLACE FUNCTION modelgate_notify_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.balance IS DISTINCT FROM OLD.balance
     AND (to_jsonb(NEW) - 'balance') = (to_jsonb(OLD) - 'balance') THEN
    PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'key', 'sha256', NEW.sha256, 'balance', NEW.balance::text)::text);
    RETURN NULL;
  END IF;
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
`,
  },
  /*
   * Version 4 (docs/rate-limits.md): rate limits on groups (the default of each key), on a group's models and
   * on keys (overrides), as JSON objects of positive integers: rpm, tpm, rpd, tpd (32-bit, as the
   * rate limit service counts) and inFlight (keys and groups only). A change fires the existing
   * triggers: every replica's cache forgets the entry, so the next Check carries the new limit.
   */
  {
    version: 4,
    name: 'rate limits on groups, group models and keys',
    sql: `
CREATE FUNCTION limits_valid(l jsonb, with_in_flight boolean) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT l IS NULL OR (jsonb_typeof(l) = 'object' AND NOT EXISTS (
    SELECT 1 FROM jsonb_each(l) e
    WHERE e.key NOT IN ('rpm', 'tpm', 'rpd', 'tpd', 'inFlight')
       OR (e.key = 'inFlight' AND NOT with_in_flight)
       OR jsonb_typeof(e.value) <> 'number'
       OR e.value::numeric <> trunc(e.value::numeric)
       OR e.value::numeric < 1
       OR e.value::numeric > CASE WHEN e.key = 'inFlight' THEN 1000000 ELSE 4294967295 END))
$$;
ALTER TABLE groups ADD COLUMN limits jsonb CONSTRAINT groups_limits_valid CHECK (limits_valid(limits, true));
ALTER TABLE group_models ADD COLUMN limits jsonb CONSTRAINT group_models_limits_valid CHECK (limits_valid(limits, false));
ALTER TABLE keys ADD COLUMN limits jsonb CONSTRAINT keys_limits_valid CHECK (limits_valid(limits, true));
`,
  },
  /*
   * Version 5. Nothing served unpaid, and strict budgets without a row lock per request:
   * - a ledger row says whether its tokens are the provider's or an estimate (and why), and whether
   *   it is a provisional settlement at the request's maximum (no report came), which the request's
   *   next settlement replaces;
   * - a reservation whose settlement never comes becomes such a provisional row when it expires
   *   (expire_reservations): a crashed replica cannot make a request free;
   * - leases (strict mode): a replica takes a slice of a key's balance in one statement and reserves
   *   from it in memory; what a request costs comes off the balance and off its replica's lease
   *   together, so balance >= every lease + every reservation holds at every commit;
   * - settlements come in batches (debit_many: one statement, one balance update per key) and are
   *   announced on their own channel (SETTLED_CHANNEL) for the replica that allowed them.
   */
  {
    version: 5,
    name: 'estimated and provisional settlements; reservations that expire into debits; strict-mode leases; batched debits',
    sql: `
ALTER TABLE usage
  ADD COLUMN estimated text CHECK (estimated IN ('stream_without_usage', 'no_usage', 'incomplete', 'undecodable', 'implausible', 'no_report')),
  ADD COLUMN provisional boolean NOT NULL DEFAULT false;

-- What a reservation settles as when it expires: the request's maximum in tokens.
ALTER TABLE reservations
  ADD COLUMN group_name text,
  ADD COLUMN model text,
  ADD COLUMN protocol text,
  ADD COLUMN input_tokens bigint CHECK (input_tokens >= 0),
  ADD COLUMN output_tokens bigint CHECK (output_tokens >= 0);
CREATE INDEX reservations_expires ON reservations (expires_at);

-- Strict mode's leases: the part of a key's balance a replica may reserve from without asking.
-- A lease past expires_at counts for nothing (its replica stopped renewing it: gone).
CREATE TABLE leases (
  replica text NOT NULL CHECK (replica <> '' AND length(replica) <= 200),
  key_id text NOT NULL REFERENCES keys (id) ON DELETE CASCADE ON UPDATE CASCADE,
  amount numeric NOT NULL CHECK (amount >= 0 AND amount < 1e100),
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (key_id, replica)
);

-- What a key's balance still covers: minus open reservations and live leases (but p_replica's own).
CREATE FUNCTION held(p_key text, p_replica text) RETURNS numeric LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT sum(r.amount) FROM ${SCHEMA}.reservations r WHERE r.key_id = p_key), 0)
       + coalesce((SELECT sum(l.amount) FROM ${SCHEMA}.leases l WHERE l.key_id = p_key AND l.expires_at > now()
                     AND l.replica IS DISTINCT FROM p_replica), 0)
$$;

DROP FUNCTION reserve(text, text, numeric, integer);
CREATE FUNCTION reserve(p_request text, p_key text, p_amount numeric, p_seconds integer,
  p_group text, p_model text, p_protocol text, p_input bigint, p_output bigint)
RETURNS TABLE (ok boolean, available numeric) LANGUAGE plpgsql AS $$
DECLARE
  b numeric;
  held numeric;
BEGIN
  SELECT k.balance INTO b FROM ${SCHEMA}.keys k WHERE k.id = p_key FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT false, NULL::numeric;
    RETURN;
  END IF;
  IF b IS NULL THEN
    RETURN QUERY SELECT true, NULL::numeric;
    RETURN;
  END IF;
  -- Expired reservations still count until they have become provisional debits.
  held := ${SCHEMA}.held(p_key, NULL);
  IF b - held <= 0 OR b - held < p_amount THEN
    RETURN QUERY SELECT false, b - held;
    RETURN;
  END IF;
  INSERT INTO ${SCHEMA}.reservations (request_id, key_id, amount, expires_at, group_name, model, protocol, input_tokens, output_tokens)
    VALUES (p_request, p_key, p_amount, now() + make_interval(secs => p_seconds), p_group, p_model, p_protocol, p_input, p_output)
    ON CONFLICT (request_id) DO NOTHING;
  RETURN QUERY SELECT true, b - held - p_amount;
END $$;

-- Sets a replica's lease on a key for p_seconds: p_want, but never more than half of what the
-- balance still covers beyond p_need (what the replica needs now), so replicas sharing a small
-- balance each get a share; never more than the balance covers at all (0: none). One statement
-- whatever it changes: the replica asks once for many requests.
CREATE FUNCTION lease(p_replica text, p_key text, p_want numeric, p_need numeric, p_seconds integer)
RETURNS TABLE (granted numeric, balance numeric) LANGUAGE plpgsql AS $$
DECLARE
  b numeric;
  g numeric;
BEGIN
  SELECT k.balance INTO b FROM ${SCHEMA}.keys k WHERE k.id = p_key FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 0::numeric, NULL::numeric;
    RETURN;
  END IF;
  IF b IS NULL THEN
    RETURN QUERY SELECT NULL::numeric, NULL::numeric;
    RETURN;
  END IF;
  g := b - ${SCHEMA}.held(p_key, p_replica);
  g := greatest(0, least(p_want, greatest(p_need, g / 2), g));
  IF g = 0 THEN
    DELETE FROM ${SCHEMA}.leases l WHERE l.key_id = p_key AND l.replica = p_replica;
  ELSE
    INSERT INTO ${SCHEMA}.leases (replica, key_id, amount, expires_at) VALUES (p_replica, p_key, g, now() + make_interval(secs => p_seconds))
      ON CONFLICT (key_id, replica) DO UPDATE SET amount = excluded.amount, expires_at = excluded.expires_at;
  END IF;
  RETURN QUERY SELECT g, b;
END $$;

-- Settles one request: drops its reservation, writes (or, over a provisional row, replaces) its
-- ledger row and debits the key the difference, and its replica's lease as much. At most once per
-- request id, except that a settlement that is not provisional replaces a provisional one.
DROP FUNCTION debit(text, text, text, text, text, bigint, bigint, bigint, numeric, numeric, numeric);
CREATE FUNCTION debit(p_request text, p_key text, p_group text, p_model text, p_protocol text,
  p_input bigint, p_output bigint, p_cached bigint, p_price_in numeric, p_price_out numeric, p_price_cached numeric,
  p_estimated text, p_provisional boolean, p_replica text)
RETURNS TABLE (applied boolean, cost numeric, balance numeric) LANGUAGE plpgsql AS $$
DECLARE
  c numeric;
  b numeric;
  old_cost numeric;
  old_provisional boolean;
  delta numeric;
BEGIN
  DELETE FROM ${SCHEMA}.reservations r WHERE r.request_id = p_request;
  c := CASE WHEN p_price_in IS NULL OR p_price_out IS NULL THEN 0
    ELSE ((p_input - p_cached) * p_price_in + p_cached * coalesce(p_price_cached, p_price_in) + p_output * p_price_out) / 1000000 END;
  INSERT INTO ${SCHEMA}.usage (request_id, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens, cost, priced, estimated, provisional)
    VALUES (p_request, p_key, p_group, p_model, p_protocol, p_input, p_output, p_cached, c, p_price_in IS NOT NULL, p_estimated, p_provisional)
    ON CONFLICT (request_id) DO NOTHING;
  IF FOUND THEN
    delta := c;
  ELSE
    SELECT u.cost, u.provisional INTO old_cost, old_provisional FROM ${SCHEMA}.usage u WHERE u.request_id = p_request FOR UPDATE;
    IF NOT old_provisional OR p_provisional THEN
      RETURN QUERY SELECT false, c, (SELECT k.balance FROM ${SCHEMA}.keys k WHERE k.id = p_key);
      RETURN;
    END IF;
    UPDATE ${SCHEMA}.usage u SET time = now(), input_tokens = p_input, output_tokens = p_output, cached_input_tokens = p_cached,
      cost = c, priced = p_price_in IS NOT NULL, estimated = p_estimated, provisional = false
      WHERE u.request_id = p_request;
    delta := c - old_cost;
  END IF;
  IF delta <> 0 THEN
    UPDATE ${SCHEMA}.keys k SET balance = k.balance - delta WHERE k.id = p_key AND k.balance IS NOT NULL RETURNING k.balance INTO b;
  ELSE
    SELECT k.balance INTO b FROM ${SCHEMA}.keys k WHERE k.id = p_key;
  END IF;
  IF p_replica IS NOT NULL AND delta > 0 THEN
    UPDATE ${SCHEMA}.leases l SET amount = greatest(0, l.amount - delta) WHERE l.key_id = p_key AND l.replica = p_replica;
  END IF;
  PERFORM pg_notify('${SETTLED_CHANNEL}', json_build_object('s', json_build_array(json_build_array(p_request, p_replica, c)))::text);
  RETURN QUERY SELECT true, c, b;
END $$;

-- Many settlements in one statement: new ledger rows are inserted together, each key's balance and
-- each lease is updated once, and one notification names them all. A row whose request id is already
-- in the ledger is answered \`conflict\`: the caller settles it alone with debit() (a duplicate, or the
-- replacement of a provisional row).
CREATE FUNCTION debit_many(p jsonb)
RETURNS TABLE (request_id text, applied boolean, conflict boolean, cost numeric, balance numeric) LANGUAGE sql AS $$
  WITH input AS (
    SELECT * FROM jsonb_to_recordset(p) AS x(request_id text, key_id text, group_name text, model text, protocol text,
      input_tokens bigint, output_tokens bigint, cached_input_tokens bigint, price_in numeric, price_out numeric, price_cached numeric,
      estimated text, provisional boolean, replica text)
  ), costed AS (
    SELECT i.*, CASE WHEN i.price_in IS NULL OR i.price_out IS NULL THEN 0
      ELSE ((i.input_tokens - i.cached_input_tokens) * i.price_in + i.cached_input_tokens * coalesce(i.price_cached, i.price_in) + i.output_tokens * i.price_out) / 1000000 END AS cost
    FROM input i
  ), dropped AS (
    DELETE FROM ${SCHEMA}.reservations r USING costed c WHERE r.request_id = c.request_id
  ), inserted AS (
    INSERT INTO ${SCHEMA}.usage (request_id, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens, cost, priced, estimated, provisional)
      SELECT c.request_id, c.key_id, c.group_name, c.model, c.protocol, c.input_tokens, c.output_tokens, c.cached_input_tokens, c.cost,
        c.price_in IS NOT NULL, c.estimated, coalesce(c.provisional, false)
      FROM costed c
      ON CONFLICT (request_id) DO NOTHING
      RETURNING usage.request_id, usage.key_id, usage.cost
  ), settled AS (
    SELECT i.request_id, i.key_id, i.cost, c.replica FROM inserted i JOIN costed c ON c.request_id = i.request_id
  ), updated AS (
    UPDATE ${SCHEMA}.keys k SET balance = k.balance - s.total
      FROM (SELECT st.key_id, sum(st.cost) AS total FROM settled st GROUP BY st.key_id) s
      WHERE k.id = s.key_id AND k.balance IS NOT NULL AND s.total <> 0
      RETURNING k.id, k.balance
  ), leased AS (
    UPDATE ${SCHEMA}.leases l SET amount = greatest(0, l.amount - s.total)
      FROM (SELECT st.key_id, st.replica, sum(st.cost) AS total FROM settled st WHERE st.replica IS NOT NULL GROUP BY st.key_id, st.replica) s
      WHERE l.key_id = s.key_id AND l.replica = s.replica AND s.total > 0
  ), notified AS (
    -- At most 8,000 bytes a notification: 60 settlements each.
    SELECT pg_notify('${SETTLED_CHANNEL}', json_build_object('s', json_agg(json_build_array(g.request_id, g.replica, g.cost)))::text)
    FROM (SELECT st.*, (row_number() OVER ()) / 60 AS chunk FROM settled st) g GROUP BY g.chunk
  )
  SELECT c.request_id, i.request_id IS NOT NULL, i.request_id IS NULL, c.cost,
    CASE WHEN u.id IS NOT NULL THEN u.balance ELSE (SELECT k.balance FROM ${SCHEMA}.keys k WHERE k.id = c.key_id) END
  FROM costed c
    LEFT JOIN inserted i ON i.request_id = c.request_id
    LEFT JOIN updated u ON u.id = c.key_id
    CROSS JOIN (SELECT count(*) FROM notified) n
$$;

-- Reservations past their time settle at what they hold, provisionally: a report that comes
-- later replaces them (debit). Run by every replica now and then; SKIP LOCKED lets them share it.
-- Leases past their time are removed (they already count for nothing).
CREATE FUNCTION expire_reservations(p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  r record;
  n integer := 0;
BEGIN
  FOR r IN SELECT * FROM ${SCHEMA}.reservations x WHERE x.expires_at <= now() ORDER BY x.expires_at LIMIT p_limit FOR UPDATE SKIP LOCKED LOOP
    DELETE FROM ${SCHEMA}.reservations x WHERE x.request_id = r.request_id;
    INSERT INTO ${SCHEMA}.usage (request_id, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens, cost, priced, estimated, provisional)
      VALUES (r.request_id, r.key_id, coalesce(r.group_name, ''), coalesce(r.model, ''), coalesce(r.protocol, ''),
        coalesce(r.input_tokens, 0), coalesce(r.output_tokens, 0), 0, r.amount, true, 'no_report', true)
      ON CONFLICT (request_id) DO NOTHING;
    IF FOUND AND r.amount > 0 THEN
      UPDATE ${SCHEMA}.keys k SET balance = k.balance - r.amount WHERE k.id = r.key_id AND k.balance IS NOT NULL;
    END IF;
    n := n + 1;
  END LOOP;
  DELETE FROM ${SCHEMA}.leases l WHERE l.expires_at <= now() - interval '1 minute';
  RETURN n;
END $$;
`,
  },
  /*
   * Version 6. A long-context price (docs/metering.md, "Long prompts"): a request whose input is over
   * long_context_above tokens is charged these prices for every token. The debit functions take the
   * flat price the request is charged at (meter-store.ts picks it), so they are unchanged.
   */
  {
    version: 6,
    name: 'long-context prices of group models',
    sql: `
ALTER TABLE group_models
  ADD COLUMN long_context_above bigint CHECK (long_context_above > 0),
  ADD COLUMN long_context_input_price numeric CHECK (long_context_input_price >= 0 AND long_context_input_price < 1e12),
  ADD COLUMN long_context_output_price numeric CHECK (long_context_output_price >= 0 AND long_context_output_price < 1e12),
  ADD COLUMN long_context_cached_input_price numeric CHECK (long_context_cached_input_price >= 0 AND long_context_cached_input_price < 1e12),
  -- All of threshold, input and output, or none; and only on a priced model.
  ADD CONSTRAINT group_models_long_context_complete CHECK (
    (long_context_above IS NULL) = (long_context_input_price IS NULL) AND (long_context_above IS NULL) = (long_context_output_price IS NULL)
    AND (long_context_cached_input_price IS NULL OR long_context_above IS NOT NULL)
    AND (long_context_above IS NULL OR input_price IS NOT NULL));
`,
  },
  /*
   * Version 7. Prices of other modalities (meter/modal-cost.ts): audio input, audio output and image
   * output tokens, where the provider bills them above text. NULL: not priced (a request for them is
   * refused unless meter.modalities is allow).
   */
  {
    version: 7,
    name: 'audio and image prices',
    sql: `
ALTER TABLE group_models
  ADD COLUMN audio_input_price numeric CHECK (audio_input_price >= 0 AND audio_input_price < 1e12),
  ADD COLUMN audio_output_price numeric CHECK (audio_output_price >= 0 AND audio_output_price < 1e12),
  ADD COLUMN image_output_price numeric CHECK (image_output_price >= 0 AND image_output_price < 1e12),
  ADD CONSTRAINT group_models_modal_prices_priced CHECK (input_price IS NOT NULL
    OR (audio_input_price IS NULL AND audio_output_price IS NULL AND image_output_price IS NULL));
`,
  },
  /*
   * Version 8. A settlement whose provider counts hold tokens of a modality the meter cannot name
   * (a Gemini enum number it does not know), debited at the highest price of their direction, is
   * marked so in the ledger: estimated = 'unknown_modality'.
   */
  {
    version: 8,
    name: 'ledger mark for tokens of a modality the meter cannot name',
    sql: `
ALTER TABLE usage DROP CONSTRAINT usage_estimated_check;
ALTER TABLE usage ADD CONSTRAINT usage_estimated_check
  CHECK (estimated IN ('stream_without_usage', 'no_usage', 'incomplete', 'undecodable', 'implausible', 'no_report', 'unknown_modality'));
`,
  },
  /*
   * Version 9. Hosted tools priced per call (docs/metering.md, "Hosted tools"): a model's tool prices
   * (a JSON object of tool name -> price per call; NULL: none priced), and a ledger row's calls of
   * hosted tools, their cost (computed by the meter: calls x price per call) added to its tokens'.
   */
  {
    version: 9,
    name: 'hosted tool prices',
    sql: `
ALTER TABLE group_models
  ADD COLUMN tool_prices jsonb CHECK (tool_prices IS NULL OR jsonb_typeof(tool_prices) = 'object'),
  ADD CONSTRAINT group_models_tool_prices_priced CHECK (input_price IS NOT NULL OR tool_prices IS NULL);
ALTER TABLE usage ADD COLUMN tool_calls integer NOT NULL DEFAULT 0 CHECK (tool_calls >= 0);

DROP FUNCTION debit(text, text, text, text, text, bigint, bigint, bigint, numeric, numeric, numeric, text, boolean, text);
DROP FUNCTION debit_many(jsonb);
CREATE FUNCTION debit(p_request text, p_key text, p_group text, p_model text, p_protocol text,
  p_input bigint, p_output bigint, p_cached bigint, p_price_in numeric, p_price_out numeric, p_price_cached numeric,
  p_estimated text, p_provisional boolean, p_replica text, p_tool_calls integer, p_tool_cost numeric)
RETURNS TABLE (applied boolean, cost numeric, balance numeric) LANGUAGE plpgsql AS $$
DECLARE
  c numeric;
  b numeric;
  old_cost numeric;
  old_provisional boolean;
  delta numeric;
BEGIN
  DELETE FROM ${SCHEMA}.reservations r WHERE r.request_id = p_request;
  IF p_tool_calls < 0 OR p_tool_cost < 0 THEN RAISE EXCEPTION 'tool calls and their cost must be >= 0'; END IF;
  c := CASE WHEN p_price_in IS NULL OR p_price_out IS NULL THEN 0
    ELSE ((p_input - p_cached) * p_price_in + p_cached * coalesce(p_price_cached, p_price_in) + p_output * p_price_out) / 1000000 + coalesce(p_tool_cost, 0) END;
  INSERT INTO ${SCHEMA}.usage (request_id, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens, cost, priced, estimated, provisional, tool_calls)
    VALUES (p_request, p_key, p_group, p_model, p_protocol, p_input, p_output, p_cached, c, p_price_in IS NOT NULL, p_estimated, p_provisional, coalesce(p_tool_calls, 0))
    ON CONFLICT (request_id) DO NOTHING;
  IF FOUND THEN
    delta := c;
  ELSE
    SELECT u.cost, u.provisional INTO old_cost, old_provisional FROM ${SCHEMA}.usage u WHERE u.request_id = p_request FOR UPDATE;
    IF NOT old_provisional OR p_provisional THEN
      RETURN QUERY SELECT false, c, (SELECT k.balance FROM ${SCHEMA}.keys k WHERE k.id = p_key);
      RETURN;
    END IF;
    UPDATE ${SCHEMA}.usage u SET time = now(), input_tokens = p_input, output_tokens = p_output, cached_input_tokens = p_cached,
      cost = c, priced = p_price_in IS NOT NULL, estimated = p_estimated, provisional = false, tool_calls = coalesce(p_tool_calls, 0)
      WHERE u.request_id = p_request;
    delta := c - old_cost;
  END IF;
  IF delta <> 0 THEN
    UPDATE ${SCHEMA}.keys k SET balance = k.balance - delta WHERE k.id = p_key AND k.balance IS NOT NULL RETURNING k.balance INTO b;
  ELSE
    SELECT k.balance INTO b FROM ${SCHEMA}.keys k WHERE k.id = p_key;
  END IF;
  IF p_replica IS NOT NULL AND delta > 0 THEN
    UPDATE ${SCHEMA}.leases l SET amount = greatest(0, l.amount - delta) WHERE l.key_id = p_key AND l.replica = p_replica;
  END IF;
  PERFORM pg_notify('${SETTLED_CHANNEL}', json_build_object('s', json_build_array(json_build_array(p_request, p_replica, c)))::text);
  RETURN QUERY SELECT true, c, b;
END $$;

-- Many settlements in one statement: new ledger rows are inserted together, each key's balance and
-- each lease is updated once, and one notification names them all. A row whose request id is already
-- in the ledger is answered \`conflict\`: the caller settles it alone with debit() (a duplicate, or the
-- replacement of a provisional row).
CREATE FUNCTION debit_many(p jsonb)
RETURNS TABLE (request_id text, applied boolean, conflict boolean, cost numeric, balance numeric) LANGUAGE sql AS $$
  WITH input AS (
    SELECT * FROM jsonb_to_recordset(p) AS x(request_id text, key_id text, group_name text, model text, protocol text,
      input_tokens bigint, output_tokens bigint, cached_input_tokens bigint, price_in numeric, price_out numeric, price_cached numeric,
      estimated text, provisional boolean, replica text, tool_calls integer, tool_cost numeric)
  ), costed AS (
    SELECT i.*, CASE WHEN i.price_in IS NULL OR i.price_out IS NULL THEN 0
      ELSE ((i.input_tokens - i.cached_input_tokens) * i.price_in + i.cached_input_tokens * coalesce(i.price_cached, i.price_in) + i.output_tokens * i.price_out) / 1000000
        + greatest(coalesce(i.tool_cost, 0), 0) END AS cost
    FROM input i
  ), dropped AS (
    DELETE FROM ${SCHEMA}.reservations r USING costed c WHERE r.request_id = c.request_id
  ), inserted AS (
    INSERT INTO ${SCHEMA}.usage (request_id, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens, cost, priced, estimated, provisional, tool_calls)
      SELECT c.request_id, c.key_id, c.group_name, c.model, c.protocol, c.input_tokens, c.output_tokens, c.cached_input_tokens, c.cost,
        c.price_in IS NOT NULL, c.estimated, coalesce(c.provisional, false), greatest(coalesce(c.tool_calls, 0), 0)
      FROM costed c
      ON CONFLICT (request_id) DO NOTHING
      RETURNING usage.request_id, usage.key_id, usage.cost
  ), settled AS (
    SELECT i.request_id, i.key_id, i.cost, c.replica FROM inserted i JOIN costed c ON c.request_id = i.request_id
  ), updated AS (
    UPDATE ${SCHEMA}.keys k SET balance = k.balance - s.total
      FROM (SELECT st.key_id, sum(st.cost) AS total FROM settled st GROUP BY st.key_id) s
      WHERE k.id = s.key_id AND k.balance IS NOT NULL AND s.total <> 0
      RETURNING k.id, k.balance
  ), leased AS (
    UPDATE ${SCHEMA}.leases l SET amount = greatest(0, l.amount - s.total)
      FROM (SELECT st.key_id, st.replica, sum(st.cost) AS total FROM settled st WHERE st.replica IS NOT NULL GROUP BY st.key_id, st.replica) s
      WHERE l.key_id = s.key_id AND l.replica = s.replica AND s.total > 0
  ), notified AS (
    -- At most 8,000 bytes a notification: 60 settlements each.
    SELECT pg_notify('${SETTLED_CHANNEL}', json_build_object('s', json_agg(json_build_array(g.request_id, g.replica, g.cost)))::text)
    FROM (SELECT st.*, (row_number() OVER ()) / 60 AS chunk FROM settled st) g GROUP BY g.chunk
  )
  SELECT c.request_id, i.request_id IS NOT NULL, i.request_id IS NULL, c.cost,
    CASE WHEN u.id IS NOT NULL THEN u.balance ELSE (SELECT k.balance FROM ${SCHEMA}.keys k WHERE k.id = c.key_id) END
  FROM costed c
    LEFT JOIN inserted i ON i.request_id = c.request_id
    LEFT JOIN updated u ON u.id = c.key_id
    CROSS JOIN (SELECT count(*) FROM notified) n
$$;
`,
  },
  /*
   * Version 10 (docs/admin-api.md): the admin API's management tokens (hashed, scoped), its audit
   * log, the credits it made (one per idempotency key), and on keys their metadata and a rotated-out
   * secret that keeps working until previous_until (the lookups match it too, as a key that expires
   * then). The key trigger also names the previous secret, so every replica forgets it at once.
   */
  {
    version: 10,
    name: 'admin API: management tokens, audit log, credits, key metadata and rotation grace',
    sql: `
CREATE TABLE admin_tokens (
  id text PRIMARY KEY CHECK (id <> '' AND length(id) <= 128),
  sha256 text NOT NULL UNIQUE CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  scope text NOT NULL CHECK (scope IN ('read', 'keys', 'billing', 'admin')),
  description text,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit (
  id bigserial PRIMARY KEY,
  time timestamptz NOT NULL DEFAULT now(),
  actor text NOT NULL,
  address text,
  request_id text,
  action text NOT NULL,
  target text NOT NULL,
  before jsonb,
  after jsonb
);
CREATE INDEX audit_time ON audit (time DESC);

CREATE TABLE credits (
  idempotency_key text PRIMARY KEY CHECK (idempotency_key <> '' AND length(idempotency_key) <= 200),
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  key_id text NOT NULL,
  amount numeric NOT NULL CHECK (amount <> 0 AND abs(amount) < 1e15),
  balance numeric,
  reason text,
  time timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE keys
  ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
  ADD COLUMN previous_sha256 text UNIQUE CHECK (previous_sha256 ~ '^[0-9a-f]{64}$'),
  ADD COLUMN previous_until timestamptz,
  ADD CONSTRAINT keys_previous_whole CHECK ((previous_sha256 IS NULL) = (previous_until IS NULL));

CREATE OR REPLACE FUNCTION modelgate_notify_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.balance IS DISTINCT FROM OLD.balance
     AND (to_jsonb(NEW) - 'balance') = (to_jsonb(OLD) - 'balance') THEN
    PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'key', 'sha256', NEW.sha256, 'balance', NEW.balance::text)::text);
    IF NEW.previous_sha256 IS NOT NULL THEN
      PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'key', 'sha256', NEW.previous_sha256, 'balance', NEW.balance::text)::text);
    END IF;
    RETURN NULL;
  END IF;
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'key', 'sha256', OLD.sha256)::text);
    IF OLD.previous_sha256 IS NOT NULL THEN
      PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'key', 'sha256', OLD.previous_sha256)::text);
    END IF;
  END IF;
  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.sha256 <> OLD.sha256) THEN
    PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'key', 'sha256', NEW.sha256)::text);
  END IF;
  IF TG_OP = 'UPDATE' AND NEW.previous_sha256 IS NOT NULL AND NEW.previous_sha256 IS DISTINCT FROM OLD.previous_sha256
     AND NEW.previous_sha256 <> OLD.sha256 THEN
    PERFORM pg_notify('${INVALIDATION_CHANNEL}', json_build_object('kind', 'key', 'sha256', NEW.previous_sha256)::text);
  END IF;
  RETURN NULL;
END $$;
`,
  },
  {
    version: 11,
    name: 'budgets per window on keys and groups',
    // The key trigger of migration 10 sends a full invalidation for any change but the balance, and
    // the group trigger one for any change: a budget set or changed reaches every replica at once.
    sql: `
ALTER TABLE keys ADD COLUMN budget jsonb
  CHECK (budget IS NULL OR (jsonb_typeof(budget) = 'object' AND jsonb_typeof(budget->'amount') = 'number' AND (budget->>'amount')::numeric > 0
    AND budget->>'period' IN ('day', 'week', 'month') AND jsonb_typeof(budget->'timeZone') = 'string'));
ALTER TABLE groups ADD COLUMN budget jsonb
  CHECK (budget IS NULL OR (jsonb_typeof(budget) = 'object' AND jsonb_typeof(budget->'amount') = 'number' AND (budget->>'amount')::numeric > 0
    AND budget->>'period' IN ('day', 'week', 'month') AND jsonb_typeof(budget->'timeZone') = 'string'));
`,
  },
  {
    version: 12,
    name: 'budgets per window of a key on one model',
    // An object of model name to budget, each of migration 11's shape (checked by a function: a CHECK
    // takes no subquery). The key trigger sends a full invalidation for any change but the balance.
    sql: `
CREATE FUNCTION model_budgets_valid(m jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT m IS NULL OR (jsonb_typeof(m) = 'object' AND (SELECT count(*) FROM jsonb_object_keys(m)) <= 256 AND NOT EXISTS (
    SELECT 1 FROM jsonb_each(m) AS e(model, b)
    WHERE length(e.model) = 0 OR length(e.model) > 256 OR NOT (jsonb_typeof(b) = 'object' AND jsonb_typeof(b->'amount') = 'number' AND (b->>'amount')::numeric > 0
      AND b->>'period' IN ('day', 'week', 'month') AND jsonb_typeof(b->'timeZone') = 'string')))
$$;
ALTER TABLE keys ADD COLUMN model_budgets jsonb CHECK (model_budgets_valid(model_budgets));
`,
  },
  {
    version: 13,
    name: 'webhook deliveries of budget alerts',
    // One row per event id (the same id from two replicas is one event); never the URL or the secret.
    sql: `
CREATE TABLE webhook_deliveries (
  event_id text PRIMARY KEY CHECK (length(event_id) BETWEEN 1 AND 128),
  type text NOT NULL,
  subject text NOT NULL,
  threshold numeric NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts integer NOT NULL CHECK (attempts >= 0),
  last_status integer,
  last_error text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at DESC, event_id DESC);
`,
  },
  {
    version: 14,
    name: 'webhooks of budget alerts as an admin API resource',
    // The signing secret is kept in the clear (signing needs it); the admin API never answers it after
    // create and rotate-secret. Each replica's sender reads this table when an alert fires and before
    // each retry, and re-reads the thresholds it fires at when the trigger notifies a change. A
    // delivery is one per event and webhook.
    sql: `
CREATE TABLE webhooks (
  id text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 128),
  url text NOT NULL CHECK (url ~ '^https?://' AND length(url) <= 2048),
  secret text NOT NULL CHECK (length(secret) BETWEEN 16 AND 256),
  thresholds jsonb NOT NULL CHECK (jsonb_typeof(thresholds) = 'array' AND jsonb_array_length(thresholds) BETWEEN 1 AND 20),
  subjects jsonb CHECK (subjects IS NULL OR jsonb_typeof(subjects) = 'array'),
  enabled boolean NOT NULL DEFAULT true,
  description text,
  created_at timestamptz NOT NULL DEFAULT now(),
  secret_rotated_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE webhook_deliveries ADD COLUMN webhook_id text NOT NULL DEFAULT 'config';
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_pkey;
ALTER TABLE webhook_deliveries ADD PRIMARY KEY (event_id, webhook_id);
DROP INDEX webhook_deliveries_created;
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at DESC, event_id DESC, webhook_id DESC);

CREATE FUNCTION modelgate_notify_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('${INVALIDATION_CHANNEL}', '{"kind":"webhooks"}');
  RETURN NULL;
END $$;
CREATE TRIGGER webhooks_notify AFTER INSERT OR UPDATE OR DELETE ON webhooks
  FOR EACH STATEMENT EXECUTE FUNCTION modelgate_notify_webhooks();
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
  /** true when tables of an older build were moved from the current schema into SCHEMA. */
  readonly adopted?: boolean;
}

export interface MigrateOptions {
  /**
   * Create modelgate's schema even in a database that already holds tables of other applications.
   * Only `modelgate migrate --allow-foreign-tables` sets it: `serve` and the admin commands never
   * migrate implicitly into someone else's database (a DATABASE_URL exported for another
   * application must not get modelgate's tables and triggers).
   */
  readonly allowForeignTables?: boolean;
}

/** Refused: the database holds other applications' tables and no modelgate schema. */
export class ForeignDatabaseError extends InternalError {
  constructor(readonly tables: readonly string[]) {
    const shown = tables.slice(0, 5).join(', ') + (tables.length > 5 ? `, ... (${tables.length} in all)` : '');
    super(
      'foreign_database',
      `the database already holds tables of another application (${shown}) and no modelgate schema: ` +
        'modelgate will not create its tables there implicitly. If this database is meant for modelgate, run ' +
        '`modelgate migrate --allow-foreign-tables` once (everything modelgate creates goes into the schema "modelgate"); ' +
        'otherwise point modelgate at its own database',
    );
  }
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

/** Tables and views outside the system schemas and modelgate's own (legacy public.modelgate_* included). */
async function foreignTables(client: pg.ClientBase): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>(
    `SELECT n.nspname || '.' || c.relname AS name
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
      AND n.nspname NOT IN ('pg_catalog', 'information_schema', $1) AND n.nspname NOT LIKE 'pg\\_%'
      AND NOT (c.relname LIKE 'modelgate\\_%')
    ORDER BY 1 LIMIT 50`,
    [SCHEMA],
  );
  return rows.map((r) => r.name);
}

/**
 * Tables of a build that created them in the current schema (schema version 1 in public): moved
 * into SCHEMA as they are, with their triggers and data; migration 2 then renames them.
 */
async function adoptLegacyTables(client: pg.ClientBase): Promise<boolean> {
  const { rows } = await client.query<{ schema: string | null }>(
    "SELECT (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass('modelgate_schema_version')) AS schema",
  );
  const from = rows[0].schema;
  if (from === null || from === SCHEMA) return false;
  const q = (name: string): string => `${pg.escapeIdentifier(from)}.${name}`;
  await client.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
  for (const t of ['modelgate_schema_version', 'modelgate_groups', 'modelgate_group_models', 'modelgate_keys']) {
    await client.query(`ALTER TABLE ${q(t)} SET SCHEMA ${SCHEMA}`);
  }
  for (const f of ['modelgate_notify_key', 'modelgate_notify_group', 'modelgate_notify_all']) {
    await client.query(`ALTER FUNCTION ${q(f)}() SET SCHEMA ${SCHEMA}`);
  }
  await client.query(`ALTER TABLE ${SCHEMA}.modelgate_schema_version RENAME TO schema_version`);
  return true;
}

/**
 * Brings the database to SCHEMA_VERSION. Idempotent, and safe when many replicas call it at once:
 * all of it runs in one transaction under an advisory lock, so a second caller waits, then finds
 * nothing left to do. A database newer than this build (a rolling upgrade) is left as it is. An
 * up-to-date database gets no DDL at all (a read-only service role can open it). A database with
 * no modelgate schema but other applications' tables is refused (ForeignDatabaseError) unless
 * `allowForeignTables`.
 */
export async function migrate(db: pg.Pool | pg.ClientBase, options: MigrateOptions = {}): Promise<MigrationResult> {
  return withClient(db, async (client) => {
    await client.query('BEGIN');
    try {
      // A lookup-sized statement_timeout (1 s in the store's pool) must not cancel the wait for
      // another replica's migration, nor a migration itself; LOCAL ends with the transaction.
      await client.query('SET LOCAL statement_timeout = 0');
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      const adopted = await adoptLegacyTables(client);
      // Checked rather than CREATE ... IF NOT EXISTS, which needs the CREATE privilege even when
      // the object exists: an up-to-date database must not require DDL rights from the service role.
      const from = await schemaVersion(client);
      if (from === 0) {
        const foreign = options.allowForeignTables ? [] : await foreignTables(client);
        if (foreign.length > 0) throw new ForeignDatabaseError(foreign);
        const { rows } = await client.query<{ s: string | null }>('SELECT to_regnamespace($1)::text AS s', [SCHEMA]);
        if (rows[0].s === null) await client.query(`CREATE SCHEMA ${SCHEMA}`);
        await client.query(`CREATE TABLE IF NOT EXISTS ${SCHEMA}.schema_version (
          version integer PRIMARY KEY,
          name text NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`);
      }
      const applied: number[] = [];
      if (MIGRATIONS.some((m) => m.version > from)) {
        // Unqualified names in the migrations land in SCHEMA (pg_catalog stays first implicitly).
        await client.query(`SET LOCAL search_path = ${SCHEMA}`);
        for (const m of MIGRATIONS) {
          if (m.version <= from) continue;
          await client.query(m.sql);
          await client.query(`INSERT INTO ${SCHEMA}.schema_version (version, name) VALUES ($1, $2)`, [
            m.version,
            m.name,
          ]);
          applied.push(m.version);
        }
      }
      await client.query('COMMIT');
      return { from, to: Math.max(from, SCHEMA_VERSION), applied, ...(adopted ? { adopted } : {}) };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  });
}

/** The version the database is at: 0 when modelgate's schema was never applied. */
export async function schemaVersion(db: pg.Pool | pg.ClientBase): Promise<number> {
  return withClient(db, async (client) => {
    const { rows } = await client.query<{ t: string | null }>(`SELECT to_regclass('${SCHEMA}.schema_version') AS t`);
    if (rows[0].t !== null) {
      const v = await client.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${SCHEMA}.schema_version`);
      return v.rows[0].v ?? 0;
    }
    // A database of an older build (tables in the current schema) is at version 1 until adopted.
    const legacy = await client.query<{ t: string | null }>("SELECT to_regclass('modelgate_schema_version') AS t");
    return legacy.rows[0].t === null ? 0 : 1;
  });
}

/**
 * Key operations on the PostgreSQL store. A key is generated here, returned to the caller once,
 * and stored only as its SHA-256: after `createKey`/`rotateKey` return, nobody can see it again.
 * Every write fires the table's trigger, so replicas forget the old state within a round trip.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { AdminError, checkName, sqlState } from './errors';
import { generateKey, hashKey } from '../check/key-format';
import type { KeyRow as LookupRow } from '../store/pg/store';

/** A key as an operator sees it: everything but the key itself. */
export interface KeyInfo {
  readonly id: string;
  readonly sha256: string;
  readonly group: string;
  /** `null` = unlimited. */
  readonly balance: number | null;
  readonly disabled: boolean;
  /** ISO 8601, or null for never. */
  readonly expiresAt: string | null;
  readonly createdAt: string;
}

/** A freshly issued key: `key` must be shown once and never stored or logged. */
export interface IssuedKey {
  readonly key: string;
  readonly record: KeyInfo;
}

export interface NewKey {
  readonly group: string;
  /** Default: `key-` and 8 random hex digits. */
  readonly id?: string;
  /** Decimal string (see parseAmount); absent or null = unlimited. */
  readonly balance?: string | null;
  readonly expiresAt?: Date | null;
}

const COLUMNS = `id, sha256, group_name, balance::float8 AS balance, disabled, expires_at, created_at`;

interface KeyRow extends LookupRow {
  created_at: Date;
}

/** ISO 8601 without milliseconds when there are none: what people write in the config. */
export function isoTime(date: Date): string {
  return date.toISOString().replace('.000Z', 'Z');
}

function toInfo(r: KeyRow): KeyInfo {
  return {
    id: r.id,
    sha256: r.sha256,
    group: r.group_name,
    balance: r.balance,
    disabled: r.disabled,
    expiresAt: r.expires_at === null ? null : isoTime(r.expires_at),
    createdAt: isoTime(r.created_at),
  };
}

/** A random id for keys created without --id. */
export function defaultKeyId(): string {
  return `key-${randomBytes(4).toString('hex')}`;
}

function notFound(id: string): AdminError {
  return new AdminError(`no key with id ${JSON.stringify(id)}`);
}

/** Creates a key in `group` and returns it (the only time it exists in the clear). */
export async function createKey(db: pg.Pool, input: NewKey): Promise<IssuedKey> {
  const id = checkName('key id', input.id ?? defaultKeyId());
  const key = generateKey();
  try {
    const { rows } = await db.query<KeyRow>(
      `INSERT INTO modelgate_keys (id, sha256, group_name, balance, expires_at)
       VALUES ($1, $2, $3, $4::numeric, $5) RETURNING ${COLUMNS}`,
      [id, hashKey(key), input.group, input.balance ?? null, input.expiresAt ?? null],
    );
    return { key, record: toInfo(rows[0]) };
  } catch (err) {
    if (sqlState(err) === '23505') throw new AdminError(`a key with id ${JSON.stringify(id)} already exists`);
    if (sqlState(err) === '23503') {
      throw new AdminError(`group ${JSON.stringify(input.group)} does not exist; create it with \`modelgate groups set ${input.group}\``);
    }
    throw err;
  }
}

/** Every key (optionally of one group), by id. */
export async function listKeys(db: pg.Pool, group?: string): Promise<KeyInfo[]> {
  const { rows } = await db.query<KeyRow>(
    `SELECT ${COLUMNS} FROM modelgate_keys WHERE $1::text IS NULL OR group_name = $1 ORDER BY id`,
    [group ?? null],
  );
  return rows.map(toInfo);
}

/** Disables (or re-enables) key `id`; a disabled key is refused with 401 key_disabled. */
export async function setKeyDisabled(db: pg.Pool, id: string, disabled: boolean): Promise<KeyInfo> {
  const { rows } = await db.query<KeyRow>(`UPDATE modelgate_keys SET disabled = $2 WHERE id = $1 RETURNING ${COLUMNS}`, [id, disabled]);
  if (rows.length === 0) throw notFound(id);
  return toInfo(rows[0]);
}

/**
 * Replaces the key of `id` by a fresh one, keeping id, group, balance, state and expiry. The old
 * hash is overwritten in the same statement, so the old key stops working everywhere at once.
 */
export async function rotateKey(db: pg.Pool, id: string): Promise<IssuedKey> {
  const key = generateKey();
  const { rows } = await db.query<KeyRow>(`UPDATE modelgate_keys SET sha256 = $2 WHERE id = $1 RETURNING ${COLUMNS}`, [id, hashKey(key)]);
  if (rows.length === 0) throw notFound(id);
  return { key, record: toInfo(rows[0]) };
}

/** Deletes key `id`; requests with it are then refused with 401 key_unknown. */
export async function deleteKey(db: pg.Pool, id: string): Promise<KeyInfo> {
  const { rows } = await db.query<KeyRow>(`DELETE FROM modelgate_keys WHERE id = $1 RETURNING ${COLUMNS}`, [id]);
  if (rows.length === 0) throw notFound(id);
  return toInfo(rows[0]);
}

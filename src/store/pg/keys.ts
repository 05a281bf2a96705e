/**
 * The keys of the PostgreSQL store, their write side: insert, list, disable, replace the hash,
 * delete. The store only ever sees a key's SHA-256 (the caller generates the key and shows it once:
 * cli/keys.ts). Every write fires the table's trigger, so replicas forget the old state within a
 * round trip.
 */
import type pg from 'pg';
import { StoreRefusal, sqlState } from './refusal';
import type { KeyRow as LookupRow } from './store';

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

/** A key to insert: its hash, never the key. */
export interface KeyInsert {
  readonly id: string;
  readonly sha256: string;
  readonly group: string;
  /** A decimal string computed by PostgreSQL in numeric; null = unlimited. */
  readonly balance: string | null;
  readonly expiresAt: Date | null;
}

const COLUMNS = `id, sha256, group_name, balance::float8 AS balance, disabled, expires_at, created_at`;

interface KeyRow extends LookupRow {
  created_at: Date;
}

/** ISO 8601 without zero milliseconds (as the CLI prints times). */
const isoTime = (date: Date): string => date.toISOString().replace('.000Z', 'Z');

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

const notFound = (id: string): StoreRefusal => new StoreRefusal({ code: 'key_not_found', id });

/** Inserts a key; refuses a taken id or a group that does not exist. */
export async function insertKey(db: pg.Pool, k: KeyInsert): Promise<KeyInfo> {
  try {
    const { rows } = await db.query<KeyRow>(
      `INSERT INTO modelgate.keys (id, sha256, group_name, balance, expires_at)
       VALUES ($1, $2, $3, $4::numeric, $5) RETURNING ${COLUMNS}`,
      [k.id, k.sha256, k.group, k.balance, k.expiresAt],
    );
    return toInfo(rows[0]);
  } catch (err) {
    if (sqlState(err) === '23505') throw new StoreRefusal({ code: 'key_exists', id: k.id });
    if (sqlState(err) === '23503') throw new StoreRefusal({ code: 'key_group_not_found', group: k.group });
    throw err;
  }
}

/** Every key (optionally of one group), by id. */
export async function listKeys(db: pg.Pool, group?: string): Promise<KeyInfo[]> {
  const { rows } = await db.query<KeyRow>(
    `SELECT ${COLUMNS} FROM modelgate.keys WHERE $1::text IS NULL OR group_name = $1 ORDER BY id`,
    [group ?? null],
  );
  return rows.map(toInfo);
}

/** Disables (or re-enables) key `id`; a disabled key is refused with 401 key_disabled. */
export async function setKeyDisabled(db: pg.Pool, id: string, disabled: boolean): Promise<KeyInfo> {
  const { rows } = await db.query<KeyRow>(
    `UPDATE modelgate.keys SET disabled = $2 WHERE id = $1 RETURNING ${COLUMNS}`,
    [id, disabled],
  );
  if (rows.length === 0) throw notFound(id);
  return toInfo(rows[0]);
}

/**
 * Gives key `id` a new hash (a rotation), keeping id, group, balance, state and expiry. The old
 * hash is overwritten in the same statement, so the old key stops working everywhere at once.
 */
export async function replaceKeyHash(db: pg.Pool, id: string, sha256: string): Promise<KeyInfo> {
  const { rows } = await db.query<KeyRow>(`UPDATE modelgate.keys SET sha256 = $2 WHERE id = $1 RETURNING ${COLUMNS}`, [
    id,
    sha256,
  ]);
  if (rows.length === 0) throw notFound(id);
  return toInfo(rows[0]);
}

/** Deletes key `id`; requests with it are then refused with 401 key_unknown. */
export async function deleteKey(db: pg.Pool, id: string): Promise<KeyInfo> {
  const { rows } = await db.query<KeyRow>(`DELETE FROM modelgate.keys WHERE id = $1 RETURNING ${COLUMNS}`, [id]);
  if (rows.length === 0) throw notFound(id);
  return toInfo(rows[0]);
}

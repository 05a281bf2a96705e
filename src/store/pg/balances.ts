/**
 * Key balances on the PostgreSQL store, their write side. Amounts travel as decimal strings and are
 * computed by PostgreSQL in `numeric`, so repeated small debits add up exactly. A debit is one
 * UPDATE (`balance = balance + $delta`), never read-modify-write, so concurrent debits cannot lose
 * each other; the row trigger then invalidates the key on every replica.
 */
import type pg from 'pg';
import { StoreRefusal } from './refusal';

/** A key's balance; `null` = unlimited. */
export interface BalanceInfo {
  readonly id: string;
  readonly balance: number | null;
}

/** What addBalance did: the balance before and after (both null for an unlimited key). */
export interface BalanceChange extends BalanceInfo {
  readonly previous: number | null;
}

const notFound = (id: string): StoreRefusal => new StoreRefusal({ code: 'key_not_found', id });

/** The balance of key `id`. */
export async function showBalance(db: pg.Pool, id: string): Promise<BalanceInfo> {
  const { rows } = await db.query<BalanceInfo>(
    'SELECT id, balance::float8 AS balance FROM modelgate.keys WHERE id = $1',
    [id],
  );
  if (rows.length === 0) throw notFound(id);
  return rows[0];
}

/** Sets the balance of key `id` to a decimal string; null makes it unlimited. */
export async function setBalance(db: pg.Pool, id: string, amount: string | null): Promise<BalanceInfo> {
  const { rows } = await db.query<BalanceInfo>(
    'UPDATE modelgate.keys SET balance = $2::numeric WHERE id = $1 RETURNING id, balance::float8 AS balance',
    [id, amount],
  );
  if (rows.length === 0) throw notFound(id);
  return rows[0];
}

/**
 * Adds `delta` (a decimal string; negative: a debit) to the balance of key `id` in one atomic
 * statement. An unlimited balance stays unlimited (NULL + x is NULL), so a billing job need not
 * special-case it.
 */
export async function addBalance(db: pg.Pool, id: string, delta: string): Promise<BalanceChange> {
  // RETURNING sees the new row; numeric subtraction gives the previous value exactly.
  const { rows } = await db.query<BalanceChange>(
    `UPDATE modelgate.keys SET balance = balance + $2::numeric WHERE id = $1
     RETURNING id, balance::float8 AS balance, (balance - $2::numeric)::float8 AS previous`,
    [id, delta],
  );
  if (rows.length === 0) throw notFound(id);
  return rows[0];
}

/**
 * `modelgate balance ...`: balance operations on the PostgreSQL store. Amounts travel as decimal strings and are computed
 * by PostgreSQL in `numeric`, so repeated small debits add up exactly. A debit is one UPDATE
 * (`balance = balance + $delta`), never read-modify-write, so concurrent debits cannot lose each
 * other; the row trigger then invalidates the key on every replica.
 */
import { Command } from 'commander';
import type pg from 'pg';
import { CliError, usageError } from './errors';
import type { CliRun } from './io';
import { storeCommand, withStore, type StoreOptions } from './store-admin';
import { balanceText } from './text';

/** A key's balance; `null` = unlimited. */
export interface BalanceInfo {
  readonly id: string;
  readonly balance: number | null;
}

/** What `balance add` did: the balance before and after (both null for an unlimited key). */
export interface BalanceChange extends BalanceInfo {
  readonly previous: number | null;
}

const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)$/;

/**
 * Parses an operator's amount into a canonical decimal string for PostgreSQL. `unlimited` (when
 * allowed) gives null. Exponents, NaN, Infinity and thousands separators are refused.
 */
export function parseAmount(text: string, allowUnlimited: boolean): string | null {
  if (allowUnlimited && text === 'unlimited') return null;
  if (!DECIMAL.test(text)) {
    const expected = allowUnlimited ? 'a decimal number or "unlimited"' : 'a decimal number';
    throw usageError(`amount ${JSON.stringify(text)} is not ${expected}`);
  }
  return text.replace(/^\+/, '');
}

function notFound(id: string): CliError {
  return new CliError(`no key with id ${JSON.stringify(id)}`);
}

/** The balance of key `id`. */
export async function showBalance(db: pg.Pool, id: string): Promise<BalanceInfo> {
  const { rows } = await db.query<BalanceInfo>('SELECT id, balance::float8 AS balance FROM modelgate.keys WHERE id = $1', [id]);
  if (rows.length === 0) throw notFound(id);
  return rows[0];
}

/** Sets the balance of key `id`; `amount` null makes it unlimited. */
export async function setBalance(db: pg.Pool, id: string, amount: string | null): Promise<BalanceInfo> {
  const { rows } = await db.query<BalanceInfo>(
    'UPDATE modelgate.keys SET balance = $2::numeric WHERE id = $1 RETURNING id, balance::float8 AS balance',
    [id, amount],
  );
  if (rows.length === 0) throw notFound(id);
  return rows[0];
}

/**
 * Adds `delta` (negative: a debit) to the balance of key `id` in one atomic statement. An
 * unlimited balance stays unlimited (NULL + x is NULL), so a billing job need not special-case it.
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

/** `modelgate balance show|set|add`. */
export function balanceCommand(run: CliRun): Command {
  const balance = new Command('balance').description('show and change key balances (PostgreSQL)');
  balance.addCommand(
    storeCommand('show', "show a key's balance")
      .argument('<id>', 'the key\'s id')
      .action((id: string, options: StoreOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const b = await showBalance(await store.db(), id);
          store.print(`${b.id}: ${balanceText(b.balance)}\n`, b);
        }),
      ),
  );
  balance.addCommand(
    storeCommand('set', "set a key's balance")
      .argument('<id>', 'the key\'s id')
      .argument('<amount>', 'a decimal amount, or unlimited')
      .action((id: string, text: string, options: StoreOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const amount = parseAmount(text, true);
          const b = await setBalance(await store.db(), id, amount);
          store.print(`${b.id}: ${balanceText(b.balance)}\n`, b);
        }),
      ),
  );
  balance.addCommand(
    storeCommand('add', "add to a key's balance in one atomic statement; a negative amount is a debit")
      .argument('<id>', 'the key\'s id')
      .argument('<amount>', 'a decimal amount; < 0: a debit (e.g. -0.25)')
      .action((id: string, text: string, options: StoreOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const delta = parseAmount(text, false) as string;
          const b = await addBalance(await store.db(), id, delta);
          const shown = b.balance === null ? 'unlimited (unchanged: the key has no balance limit)' : `${b.balance} (was ${b.previous})`;
          store.print(`${b.id}: ${shown}\n`, b);
        }),
      ),
  );
  return balance;
}

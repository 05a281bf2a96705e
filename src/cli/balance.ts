/**
 * `modelgate balance ...`: balance operations on the PostgreSQL store (store/pg/balances.ts: decimal
 * strings computed in numeric, one atomic UPDATE per change). Here: the amounts an operator types.
 */
import { Command } from 'commander';
import { addBalance, setBalance, showBalance } from '../store/pg/balances';
import { usageError } from './errors';
import type { CliRun } from './io';
import { storeCommand, withStore, type StoreOptions } from './store-admin';
import { balanceText } from './text';

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

/** `modelgate balance show|set|add`. */
export function balanceCommand(run: CliRun): Command {
  const balance = new Command('balance').description('show and change key balances (PostgreSQL)');
  balance.addCommand(
    storeCommand('show', "show a key's balance")
      .argument('<id>', "the key's id")
      .action((id: string, options: StoreOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const b = await showBalance(await store.db(), id);
          store.print(`${b.id}: ${balanceText(b.balance)}\n`, b);
        }),
      ),
  );
  balance.addCommand(
    storeCommand('set', "set a key's balance")
      .argument('<id>', "the key's id")
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
      .argument('<id>', "the key's id")
      .argument('<amount>', 'a decimal amount; < 0: a debit (e.g. -0.25)')
      .action((id: string, text: string, options: StoreOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const delta = parseAmount(text, false) as string;
          const b = await addBalance(await store.db(), id, delta);
          const shown =
            b.balance === null
              ? 'unlimited (unchanged: the key has no balance limit)'
              : `${b.balance} (was ${b.previous})`;
          store.print(`${b.id}: ${shown}\n`, b);
        }),
      ),
  );
  return balance;
}

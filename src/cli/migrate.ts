/**
 * `modelgate migrate`: brings the PostgreSQL schema up to date (every store command and `serve`
 * also do it first; this one only migrates and says what it did).
 */
import type { Command } from 'commander';
import type { MigrationResult } from '../store/pg/schema';
import type { CliRun } from './io';
import { storeCommand, withStore, type StoreOptions } from './store-admin';

export function migrateCommand(run: CliRun): Command {
  return storeCommand('migrate', 'create or upgrade the PostgreSQL schema (everything in the schema "modelgate")')
    .option(
      '--allow-foreign-tables',
      'create it even though the database holds tables of other applications (never done implicitly)',
    )
    .action((options: StoreOptions, cmd: Command) =>
      withStore(run, cmd, options, true, async (store) => {
        await store.db();
        const m = store.migration() as MigrationResult;
        const moved = m.adopted ? 'Moved the tables of an older modelgate into the schema "modelgate". ' : '';
        const text =
          moved +
          (m.applied.length === 0
            ? `Schema already at version ${m.to}; nothing to do.`
            : `Schema migrated from version ${m.from} to ${m.to}.`);
        store.print(`${text}\n`, m);
      }),
    );
}

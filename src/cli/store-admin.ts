/**
 * What the store commands (keys, groups, balance, migrate) share: where the store is (--store,
 * MODELGATE_STORE, DATABASE_URL), their --store and --json options, one connection brought up to
 * date on first use, printing text or one JSON document, and failures as one line that never
 * holds a key or the store's password.
 */
import { Command } from 'commander';
import { AdminRefusal } from '../admin/refusal';
import { openAdminPool, type AdminDb } from '../store/pg/admin';
import { StoreRefusal, type Refusal } from '../store/pg/refusal';
import { migrate, type MigrationResult } from '../store/pg/schema';
import { redactUrl } from '../store/pg/store';
import { CliError, commandPath, usageError } from './errors';
import type { CliRun } from './io';

/** Where the store commands act: the YAML file (they only print) or a PostgreSQL database. */
export type StoreTarget =
  { readonly mode: 'file' } | { readonly mode: 'postgres'; readonly url: string; readonly source: string };

/**
 * `--store` first, then MODELGATE_STORE, then DATABASE_URL; none (or `file`) means file mode.
 * Empty variables count as unset, so `DATABASE_URL= modelgate ...` forces file mode.
 */
export function resolveStore(flag: string | undefined, env: NodeJS.ProcessEnv): StoreTarget {
  const sources: [string, string | undefined][] = [
    ['--store', flag],
    ['MODELGATE_STORE', env.MODELGATE_STORE],
    ['DATABASE_URL', env.DATABASE_URL],
  ];
  for (const [source, value] of sources) {
    if (value === undefined || value === '') continue;
    if (value === 'file') return { mode: 'file' };
    if (/^postgres(ql)?:\/\//.test(value)) return { mode: 'postgres', url: value, source };
    throw usageError(`${source} (${redactUrl(value)}) is neither "file" nor a postgres:// URL`);
  }
  return { mode: 'file' };
}

/** The options every store command has. */
export interface StoreOptions {
  readonly store?: string;
  readonly json?: boolean;
  /** `migrate --allow-foreign-tables` only: create the schema beside other applications' tables. */
  readonly allowForeignTables?: boolean;
}

/** What a store command's body gets. */
export interface StoreAccess {
  /** false: no store configured (file mode); only `keys new` runs then. */
  readonly hasDb: boolean;
  /** Connects and brings the schema up to date on first call. */
  readonly db: () => Promise<AdminDb>;
  /** What that first db() call migrated. */
  readonly migration: () => MigrationResult | undefined;
  /** Prints `human` text, or `data` as one JSON document with --json. */
  readonly print: (human: string, data: unknown) => void;
}

/** A store command with its --store and --json options. */
export function storeCommand(name: string, description: string): Command {
  return new Command(name)
    .description(description)
    .option('--store <url>', 'postgres://... or file (default: $MODELGATE_STORE, then $DATABASE_URL; none: file mode)')
    .option('--json', 'print one JSON document instead of text');
}

/**
 * Runs the body of store command `cmd` against its store. Commands that need a database refuse
 * file mode with a usage error before anything else; the connection is closed afterwards.
 */
export async function withStore(
  run: CliRun,
  cmd: Command,
  options: StoreOptions,
  needsDb: boolean,
  body: (store: StoreAccess) => Promise<void>,
  configStore?: () => StoreTarget,
): Promise<void> {
  // A config's `store:` (usage --config) counts after --store, MODELGATE_STORE and DATABASE_URL, as for serve.
  const chosen = [options.store, run.env.MODELGATE_STORE, run.env.DATABASE_URL].some(
    (v) => v !== undefined && v !== '',
  );
  const target = !chosen && configStore ? configStore() : resolveStore(options.store, run.env);
  if (target.mode === 'file' && needsDb) {
    throw usageError(
      `\`${commandPath(cmd)}\` needs a PostgreSQL store: pass --store postgres://... or set DATABASE_URL`,
    );
  }
  const url = target.mode === 'postgres' ? target.url : '';
  const source = target.mode === 'postgres' ? target.source : '';
  let pool: AdminDb | undefined;
  let migration: MigrationResult | undefined;
  try {
    await body({
      hasDb: target.mode === 'postgres',
      async db() {
        if (pool === undefined) {
          pool = openAdminPool(url);
          // Store commands bring the schema up to date first, so a fresh database needs no extra step.
          // Never into a database of another application, unless `migrate --allow-foreign-tables`.
          migration = await migrate(pool, { allowForeignTables: options.allowForeignTables === true });
        }
        return pool;
      },
      migration: () => migration,
      print: (human, data) => run.stdout(options.json ? `${JSON.stringify(data, null, 2)}\n` : human),
    });
  } catch (err) {
    if (err instanceof StoreRefusal) throw new CliError(refusalText(err.refusal));
    // The admin API's backend (keys disable|enable|rotate|delete write through it, audited).
    if (err instanceof AdminRefusal) throw new CliError(err.message);
    throw err instanceof CliError ? err : new CliError(describeError(err, url, source));
  } finally {
    await pool?.end().catch(() => {});
  }
}

/** What the store refused, in the operator's words, with the command that fixes it where there is one. */
export function refusalText(r: Refusal): string {
  const q = JSON.stringify;
  switch (r.code) {
    case 'key_exists':
      return `a key with id ${q(r.id)} already exists`;
    case 'key_not_found':
      return `no key with id ${q(r.id)}`;
    case 'group_not_found':
      return `no group named ${q(r.group)}`;
    case 'key_group_not_found':
      return `group ${q(r.group)} does not exist; create it with \`modelgate groups set ${r.group}\``;
    case 'model_not_in_group':
      return `group ${q(r.group)} has no model ${q(r.model)}; add it with \`modelgate groups set ${r.group} --model ...\``;
    case 'group_has_keys': {
      const which = r.ids.length === 0 ? '' : ` (${r.ids.slice(0, 5).join(', ')}${r.ids.length > 5 ? ', ...' : ''})`;
      return `group ${q(r.group)} still has keys${which}; delete them first`;
    }
  }
}

const NETWORK_CODES = ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ECONNRESET'];

/**
 * One line for stderr; never the key, never the store password. Names where the URL came from
 * (`--store`, MODELGATE_STORE, DATABASE_URL), so that a DATABASE_URL exported for another
 * application is recognised as such (docs/security.md).
 */
export function describeError(err: unknown, url: string, source = ''): string {
  const e = err as Error & { code?: string; errors?: Error[] };
  // With several addresses (localhost: ::1 and 127.0.0.1) Node reports an AggregateError with an empty message.
  const message = e?.message || e?.errors?.map((x) => x.message).join('; ') || String(err);
  const network =
    NETWORK_CODES.includes(e?.code ?? '') ||
    /timeout exceeded when trying to connect|Connection terminated/.test(message);
  const from = source ? ` (from ${source})` : '';
  const line = network
    ? `cannot reach PostgreSQL at ${redactUrl(url)}${from}: ${message}`
    : `PostgreSQL at ${redactUrl(url)}${from}: ${message}`;
  return line.replace(/\s*\n\s*/g, ' ');
}

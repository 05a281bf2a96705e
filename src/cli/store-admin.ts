/**
 * `modelgate keys|groups|balance|migrate ...`: the admin commands, dispatched here by main.ts.
 *
 * Every command prints text for people, or one JSON document with `--json`. Failures are one line
 * on stderr with exit code 1 (2 for a wrong command line). A key is printed only by `keys new`
 * and `keys rotate`, and never appears in an error; neither does the store's password.
 */
import pg from 'pg';
import { parseArgs, resolveStore } from './args';
import type { OptionKind } from './args';
import { ADMIN_COMMANDS } from './commands';
import { redactUrl } from '../store/pg/store';
import { AdminError, usageError } from './errors';
import { migrate } from '../store/pg/schema';
import type { MigrationResult } from '../store/pg/schema';

/** Where the admin commands write, and what they read. */
export interface AdminIo {
  readonly stdout: (s: string) => void;
  readonly stderr: (s: string) => void;
  readonly env: NodeJS.ProcessEnv;
}

const GLOBAL_OPTIONS: Readonly<Record<string, OptionKind>> = { store: 'string', json: 'boolean', help: 'boolean' };
const FAMILIES = ['keys', 'groups', 'balance'];

/** Usage text of every admin command, or of one family (`keys`, `groups`, `balance`). */
export function adminUsage(family?: string): string {
  const lines = Object.entries(ADMIN_COMMANDS)
    .filter(([name]) => family === undefined || name.startsWith(`${family} `))
    .map(([, c]) => `  modelgate ${c.usage}`);
  return [
    'Usage:',
    ...lines,
    '',
    'Options for every command:',
    '  --store URL   postgres://... (default: $MODELGATE_STORE, then $DATABASE_URL; none: file mode)',
    '  --json        print one JSON document instead of text',
    '',
  ].join('\n');
}

/**
 * Runs one admin command. `argv` starts at the command word (`keys`, `groups`, `balance`,
 * `migrate`), as in `modelgate keys new --group basic`. Resolves to the exit code; never rejects.
 */
export async function runAdminCommand(argv: string[], io: AdminIo): Promise<number> {
  let pool: pg.Pool | undefined;
  let url = '';
  try {
    const word = argv[0] ?? '';
    if (['help', '--help', '-h'].includes(word)) {
      io.stdout(adminUsage());
      return 0;
    }
    const name = word === 'migrate' ? word : `${word} ${argv[1] ?? ''}`;
    const command = ADMIN_COMMANDS[name];
    if (command === undefined) {
      // `modelgate keys` or `modelgate keys --help`: the usage of that family.
      if (FAMILIES.includes(word) && [undefined, '--help', '-h'].includes(argv[1])) {
        (argv[1] === undefined ? io.stderr : io.stdout)(adminUsage(word));
        return argv[1] === undefined ? 2 : 0;
      }
      throw usageError(`unknown command: ${argv.slice(0, 2).join(' ') || '(none)'}; see \`modelgate help\``);
    }
    const args = parseArgs(argv.slice(word === 'migrate' ? 1 : 2), { ...GLOBAL_OPTIONS, ...command.options }, name);
    if (args.flags.has('help')) {
      io.stdout(`Usage: modelgate ${command.usage}\n`);
      return 0;
    }
    if (args.positionals.length !== command.positionals) throw usageError(`usage: modelgate ${command.usage}`);

    const target = resolveStore(args.strings.get('store'), io.env);
    if (target.mode === 'file' && command.needsDb) {
      throw usageError(`\`${name}\` needs a PostgreSQL store: pass --store postgres://... or set DATABASE_URL`);
    }
    if (target.mode === 'postgres') url = target.url;
    let migration: MigrationResult | undefined;
    const json = args.flags.has('json');
    await command.run({
      args,
      hasDb: target.mode === 'postgres',
      async db() {
        if (pool === undefined) {
          pool = adminPool(url);
          // Admin commands bring the schema up to date first, so a fresh database needs no extra step.
          migration = await migrate(pool);
        }
        return pool;
      },
      migration: () => migration,
      print: (human, data) => io.stdout(json ? `${JSON.stringify(data, null, 2)}\n` : human),
    });
    return 0;
  } catch (err) {
    io.stderr(`modelgate: ${describeError(err, url)}\n`);
    return err instanceof AdminError ? err.exitCode : 1;
  } finally {
    await pool?.end().catch(() => {});
  }
}

function adminPool(url: string): pg.Pool {
  // One connection is all a command needs; generous timeouts, because a person is waiting, not Envoy.
  const pool = new pg.Pool({
    connectionString: url,
    max: 1,
    connectionTimeoutMillis: 5000,
    statement_timeout: 15_000,
    application_name: 'modelgate-admin',
  });
  pool.on('error', () => {});
  return pool;
}

const NETWORK_CODES = ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ECONNRESET'];

/** One line for stderr; never the key, never the store password. */
export function describeError(err: unknown, url: string): string {
  if (err instanceof AdminError) return err.message;
  const e = err as Error & { code?: string; errors?: Error[] };
  // With several addresses (localhost: ::1 and 127.0.0.1) Node reports an AggregateError with an empty message.
  const message = e?.message || e?.errors?.map((x) => x.message).join('; ') || String(err);
  const network = NETWORK_CODES.includes(e?.code ?? '') || /timeout exceeded when trying to connect|Connection terminated/.test(message);
  const line = network ? `cannot reach PostgreSQL at ${redactUrl(url)}: ${message}` : `PostgreSQL: ${message}`;
  return line.replace(/\s*\n\s*/g, ' ');
}

/**
 * `modelgate keys ...`. A key is generated here, returned to the caller once, and stored only as
 * its SHA-256 (the store's write side: store/pg/keys.ts): after `createKey`/`rotateKey` return,
 * nobody can see it again. Without a store, `keys new` writes the key to modelgate's own state beside
 * the config (`<config>.admin.json`) through the admin API's file backend, as `POST /admin/v1/keys`
 * does, and a running service serves it within a second; `--yaml` writes nothing and prints the
 * entry for the YAML file instead (file-key.ts).
 */
import { randomBytes } from 'node:crypto';
import { Command } from 'commander';
import { generateKey, hashKey } from '../contract/key-format';
import { PgAdminBackend } from '../admin/pg-backend';
import { AdminRefusal, keyNotFound } from '../admin/refusal';
import { StoreRefusal } from '../store/pg/refusal';
import type { AdminDb } from '../store/pg/admin';
import { listKeys, type KeyInfo } from '../store/pg/keys';
import { parseAmount } from './balance';
import { checkName, CliError, once, usageError } from './errors';
import { fileKey, type FileKey } from './file-key';
import type { CliRun } from './io';
import { keyLimitsCommand } from './limits';
import { configPathOf } from './envoy';
import type { KeyView } from '../admin/backend';
import { openFileAdmin } from './file-admin';
import { modelBudgetCommand } from './model-budgets';
import { storeCommand, withStore, type StoreOptions } from './store-admin';
import { balanceText, table } from './text';

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

/** A random id for keys created without --id. */
export function defaultKeyId(): string {
  return `key-${randomBytes(4).toString('hex')}`;
}

/** Creates a key in `group` and returns it (the only time it exists in the clear; the store keeps its hash). */
export async function createKey(db: AdminDb, input: NewKey): Promise<IssuedKey> {
  const id = checkName('key id', input.id ?? defaultKeyId());
  const key = generateKey();
  const balance = input.balance ?? null;
  // Through the admin API's backend (audited as cli).
  try {
    await new PgAdminBackend(db).createKey(
      {
        id,
        sha256: hashKey(key),
        group: input.group,
        balance: balance === null ? null : Number(balance),
        expiresAt: input.expiresAt?.getTime() ?? null,
        disabled: false,
        limits: null,
        budget: null,
        modelBudgets: null,
        metadata: {},
      },
      CLI_ACTOR,
    );
  } catch (err) {
    if (err instanceof AdminRefusal && err.code === 'group_not_found')
      throw new StoreRefusal({ code: 'key_group_not_found', group: input.group });
    throw err;
  }
  return { key, record: await keyInfo(db, id) };
}

/** The command line as the admin API's audit log names it. */
const CLI_ACTOR = { tokenId: 'cli', address: null, requestId: null };

/** Key `id` as the operator sees it (after a write through the admin API's backend). */
async function keyInfo(db: AdminDb, id: string): Promise<KeyInfo> {
  const found = (await listKeys(db)).find((k) => k.id === id);
  if (!found) throw keyNotFound(id);
  return found;
}

/**
 * Replaces the key of `id` by a fresh one, keeping id, group, balance, state and expiry; the old key
 * keeps working for `graceSeconds` (0: stops at once). Through the admin API's backend: audited.
 */
export async function rotateKey(
  db: AdminDb,
  id: string,
  graceSeconds = 0,
): Promise<IssuedKey & { previousUntil: string | null }> {
  const key = generateKey();
  const view = await new PgAdminBackend(db).rotateKey(
    id,
    hashKey(key),
    graceSeconds > 0 ? Date.now() + graceSeconds * 1000 : null,
    CLI_ACTOR,
  );
  return { key, record: await keyInfo(db, id), previousUntil: view.previousSecretValidUntil };
}

/** active, disabled or expired, as the decision would see the key at `now`. */
export function keyState(k: KeyInfo, now: Date): string {
  if (k.disabled) return 'disabled';
  if (k.expiresAt !== null && Date.parse(k.expiresAt) <= now.getTime()) return 'expired';
  return 'active';
}

export function keySummary(k: KeyInfo): string {
  return `group ${k.group}, balance ${balanceText(k.balance)}, expires ${k.expiresAt ?? 'never'}`;
}

/** The key itself, once, on a line of its own so it can be copied whole. */
export function keyIssuedText(headline: string, key: string): string {
  return `${headline}\nThe key is shown only this once; store it now:\n\n${key}\n`;
}

export function keyTableText(keys: readonly KeyInfo[], now: Date): string {
  if (keys.length === 0) return 'No keys.\n';
  const rows = keys.map((k) => [
    k.id,
    k.group,
    balanceText(k.balance),
    keyState(k, now),
    k.expiresAt ?? '-',
    k.createdAt.replace(/\.\d+Z$/, 'Z'),
  ]);
  return `${table([['ID', 'GROUP', 'BALANCE', 'STATE', 'EXPIRES', 'CREATED'], ...rows])}\n`;
}

export function fileKeyText(f: FileKey): string {
  return (
    keyIssuedText(`Key ${f.entry.id} for group ${f.entry.group} (file mode: nothing was written).`, f.key) +
    `\nAdd this entry to the keys: list of your modelgate.yaml (it holds only the hash):\n\n${f.yaml}\n`
  );
}

const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

/**
 * Parses `--expires`: an ISO 8601 date or date-time (a bare date is midnight UTC). Date alone
 * would read "2027-02-30" as March 2nd; a day that does not exist is refused instead.
 */
export function parseExpires(text: string): Date {
  const m = ISO_TIME.exec(text);
  const day = m ? new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))) : undefined;
  const date = new Date(text);
  if (
    !m ||
    !day ||
    day.getUTCMonth() !== Number(m[2]) - 1 ||
    day.getUTCDate() !== Number(m[3]) ||
    Number.isNaN(date.getTime())
  ) {
    throw usageError(
      `--expires ${JSON.stringify(text)} is not an ISO 8601 date such as 2026-12-31 or 2026-12-31T23:59:59Z`,
    );
  }
  return date;
}

interface NewKeyOptions extends StoreOptions {
  readonly group?: string;
  readonly id?: string;
  readonly balance?: string;
  readonly expires?: string;
  readonly config?: string;
  readonly yaml?: boolean;
}

/**
 * File store: creates a key in the admin state beside the config (the YAML is never rewritten),
 * through the admin API's file backend (audited with actor `cli`), its groups and keys read from the
 * config and what an id spent before from the meter's state file (read only: the service owns it).
 */
export async function createFileStoreKey(
  configPath: string,
  env: NodeJS.ProcessEnv,
  input: { id: string; group: string; balance: string | null; expiresAt: Date | null },
): Promise<{ key: string; view: KeyView; where: string }> {
  const { backend, where, close } = openFileAdmin(configPath, env);
  try {
    const key = generateKey();
    const view = await backend.createKey(
      {
        id: checkName('key id', input.id),
        sha256: hashKey(key),
        group: input.group,
        balance: input.balance === null ? null : Number(input.balance),
        expiresAt: input.expiresAt?.getTime() ?? null,
        disabled: false,
        limits: null,
        budget: null,
        modelBudgets: null,
        metadata: {},
      },
      CLI_ACTOR,
    );
    return { key, view, where };
  } catch (err) {
    if (err instanceof AdminRefusal) throw new CliError(err.hint ? `${err.message}; ${err.hint}` : err.message);
    throw err;
  } finally {
    await close();
  }
}

function keyStateCommand(run: CliRun, verb: 'disable' | 'enable', disabled: boolean, description: string): Command {
  return storeCommand(verb, description)
    .argument('<id>', "the key's id")
    .action((id: string, options: StoreOptions, cmd: Command) =>
      withStore(run, cmd, options, true, async (store) => {
        const db = await store.db();
        await new PgAdminBackend(db).updateKey(id, { disabled }, CLI_ACTOR);
        const record = await keyInfo(db, id);
        store.print(`${disabled ? 'Disabled' : 'Enabled'} key ${record.id} (${keySummary(record)}).\n`, { record });
      }),
    );
}

/** `modelgate keys new|list|disable|enable|rotate|delete`. */
export function keysCommand(run: CliRun): Command {
  const keys = new Command('keys').description('issue and manage API keys');
  keys.addCommand(
    storeCommand(
      'new',
      "issue a key: prints it once; without a PostgreSQL store it is kept in modelgate's own state beside the config (--yaml: printed as an entry for the keys: list instead)",
    )
      .option('--group <group>', 'the group whose models the key may use (required)', once('--group'))
      .option('--id <id>', "the key's id (default: key- and 8 random hex digits)", once('--id'))
      .option('--balance <amount>', 'a decimal balance, or unlimited (default: unlimited)', once('--balance'))
      .option(
        '--expires <iso-8601>',
        'when it stops working: a date (midnight UTC) or a date-time (default: never)',
        once('--expires'),
      )
      .option(
        '--config <file>',
        'file store: the config beside which the key is kept (default: $MODELGATE_CONFIG, else envoy/modelgate.yaml)',
        once('--config'),
      )
      .option('--yaml', 'file store: write nothing; print the entry to paste into the keys: list of the YAML config')
      .action((options: NewKeyOptions, cmd: Command) =>
        withStore(run, cmd, options, false, async (store) => {
          // Checked here rather than as a required option, so an unknown option is reported first.
          if (options.group === undefined) throw usageError('keys new needs --group G');
          const input = {
            group: options.group,
            id: options.id ?? defaultKeyId(),
            balance: options.balance === undefined ? null : parseAmount(options.balance, true),
            expiresAt: options.expires === undefined ? null : parseExpires(options.expires),
          };
          if (!store.hasDb && options.yaml) {
            const f = fileKey(input);
            store.print(fileKeyText(f), { mode: 'file', key: f.key, entry: f.entry, yaml: `${f.yaml}\n` });
            return;
          }
          if (!store.hasDb) {
            const { key, view, where } = await createFileStoreKey(
              configPathOf(options.config, run.env),
              run.env,
              input,
            );
            const summary = `group ${view.group}, balance ${view.balance === null ? 'unlimited' : view.balance}, expires ${view.expiresAt ?? 'never'}`;
            store.print(
              keyIssuedText(
                `Created key ${view.id} (${summary}) in ${where}; a running modelgate serves it within a second.`,
                key,
              ),
              { mode: 'file', key, record: view, where },
            );
            return;
          }
          if (options.config !== undefined || options.yaml)
            throw usageError('--config and --yaml are for the file store; with a PostgreSQL store leave them out');
          const { key, record } = await createKey(await store.db(), input);
          store.print(keyIssuedText(`Created key ${record.id} (${keySummary(record)}).`, key), {
            mode: 'postgres',
            key,
            record,
          });
        }),
      ),
  );
  keys.addCommand(
    storeCommand('list', 'list keys (never the keys themselves)')
      .option('--group <group>', 'only the keys of this group', once('--group'))
      .action((options: StoreOptions & { group?: string }, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const list = await listKeys(await store.db(), options.group);
          store.print(keyTableText(list, new Date()), { keys: list });
        }),
      ),
  );
  keys.addCommand(keyStateCommand(run, 'disable', true, 'disable a key (401 key_disabled)'));
  keys.addCommand(keyStateCommand(run, 'enable', false, 'enable a disabled key again'));
  keys.addCommand(keyLimitsCommand(run));
  keys.addCommand(modelBudgetCommand(run));
  keys.addCommand(
    storeCommand(
      'rotate',
      'replace a key by a fresh one, keeping its id, group, balance and expiry; prints the new key once',
    )
      .argument('<id>', "the key's id")
      .option(
        '--grace <seconds>',
        'how long the old key keeps working, on every replica (default 0: it stops at once)',
        once('--grace'),
      )
      .action((id: string, options: StoreOptions & { grace?: string }, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const grace = options.grace === undefined ? 0 : Number(options.grace);
          if (!/^\d+$/.test(options.grace ?? '0') || grace > 30 * 86400)
            throw usageError('--grace must be whole seconds from 0 to 2592000 (30 days)');
          const { key, record, previousUntil } = await rotateKey(await store.db(), id, grace);
          const old =
            previousUntil === null ? 'the old key no longer works' : `the old key works until ${previousUntil}`;
          store.print(keyIssuedText(`Rotated key ${record.id} (${keySummary(record)}); ${old}.`, key), {
            key,
            record,
            previousKeyValidUntil: previousUntil,
          });
        }),
      ),
  );
  keys.addCommand(
    storeCommand('delete', 'delete a key (401 key_unknown)')
      .argument('<id>', "the key's id")
      .action((id: string, options: StoreOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const db = await store.db();
          const record = await keyInfo(db, id);
          await new PgAdminBackend(db).deleteKey(id, CLI_ACTOR);
          store.print(`Deleted key ${record.id} (group ${record.group}).\n`, { deleted: record });
        }),
      ),
  );
  return keys;
}

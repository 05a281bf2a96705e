/**
 * `modelgate keys ...`, and the key operations on the PostgreSQL store behind it. A key is
 * generated here, returned to the caller once, and stored only as its SHA-256: after
 * `createKey`/`rotateKey` return, nobody can see it again. Every write fires the table's trigger,
 * so replicas forget the old state within a round trip. Without a store, `keys new` writes nothing
 * and prints the entry for the YAML file (file-key.ts).
 */
import { randomBytes } from 'node:crypto';
import { Command } from 'commander';
import type pg from 'pg';
import { generateKey, hashKey } from '../check/key-format';
import type { KeyRow as LookupRow } from '../store/pg/store';
import { parseAmount } from './balance';
import { CliError, checkName, once, sqlState, usageError } from './errors';
import { fileKey, type FileKey } from './file-key';
import type { CliRun } from './io';
import { keyLimitsCommand } from './limits';
import { storeCommand, withStore, type StoreOptions } from './store-admin';
import { balanceText, isoTime, table } from './text';

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

function notFound(id: string): CliError {
  return new CliError(`no key with id ${JSON.stringify(id)}`);
}

/** Creates a key in `group` and returns it (the only time it exists in the clear). */
export async function createKey(db: pg.Pool, input: NewKey): Promise<IssuedKey> {
  const id = checkName('key id', input.id ?? defaultKeyId());
  const key = generateKey();
  try {
    const { rows } = await db.query<KeyRow>(
      `INSERT INTO modelgate.keys (id, sha256, group_name, balance, expires_at)
       VALUES ($1, $2, $3, $4::numeric, $5) RETURNING ${COLUMNS}`,
      [id, hashKey(key), input.group, input.balance ?? null, input.expiresAt ?? null],
    );
    return { key, record: toInfo(rows[0]) };
  } catch (err) {
    if (sqlState(err) === '23505') throw new CliError(`a key with id ${JSON.stringify(id)} already exists`);
    if (sqlState(err) === '23503') {
      throw new CliError(`group ${JSON.stringify(input.group)} does not exist; create it with \`modelgate groups set ${input.group}\``);
    }
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
  const { rows } = await db.query<KeyRow>(`UPDATE modelgate.keys SET disabled = $2 WHERE id = $1 RETURNING ${COLUMNS}`, [id, disabled]);
  if (rows.length === 0) throw notFound(id);
  return toInfo(rows[0]);
}

/**
 * Replaces the key of `id` by a fresh one, keeping id, group, balance, state and expiry. The old
 * hash is overwritten in the same statement, so the old key stops working everywhere at once.
 */
export async function rotateKey(db: pg.Pool, id: string): Promise<IssuedKey> {
  const key = generateKey();
  const { rows } = await db.query<KeyRow>(`UPDATE modelgate.keys SET sha256 = $2 WHERE id = $1 RETURNING ${COLUMNS}`, [id, hashKey(key)]);
  if (rows.length === 0) throw notFound(id);
  return { key, record: toInfo(rows[0]) };
}

/** Deletes key `id`; requests with it are then refused with 401 key_unknown. */
export async function deleteKey(db: pg.Pool, id: string): Promise<KeyInfo> {
  const { rows } = await db.query<KeyRow>(`DELETE FROM modelgate.keys WHERE id = $1 RETURNING ${COLUMNS}`, [id]);
  if (rows.length === 0) throw notFound(id);
  return toInfo(rows[0]);
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
  const rows = keys.map((k) => [k.id, k.group, balanceText(k.balance), keyState(k, now), k.expiresAt ?? '-', k.createdAt.replace(/\.\d+Z$/, 'Z')]);
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
  if (!m || !day || day.getUTCMonth() !== Number(m[2]) - 1 || day.getUTCDate() !== Number(m[3]) || Number.isNaN(date.getTime())) {
    throw usageError(`--expires ${JSON.stringify(text)} is not an ISO 8601 date such as 2026-12-31 or 2026-12-31T23:59:59Z`);
  }
  return date;
}

interface NewKeyOptions extends StoreOptions {
  readonly group?: string;
  readonly id?: string;
  readonly balance?: string;
  readonly expires?: string;
}

function keyStateCommand(run: CliRun, verb: 'disable' | 'enable', disabled: boolean, description: string): Command {
  return storeCommand(verb, description)
    .argument('<id>', 'the key\'s id')
    .action((id: string, options: StoreOptions, cmd: Command) =>
      withStore(run, cmd, options, true, async (store) => {
        const record = await setKeyDisabled(await store.db(), id, disabled);
        store.print(`${disabled ? 'Disabled' : 'Enabled'} key ${record.id} (${keySummary(record)}).\n`, { record });
      }),
    );
}

/** `modelgate keys new|list|disable|enable|rotate|delete`. */
export function keysCommand(run: CliRun): Command {
  const keys = new Command('keys').description('issue and manage API keys');
  keys.addCommand(
    storeCommand('new', 'issue a key: prints it once (and, without a store, the entry for the keys: list of modelgate.yaml)')
      .option('--group <group>', 'the group whose models the key may use (required)', once('--group'))
      .option('--id <id>', 'the key\'s id (default: key- and 8 random hex digits)', once('--id'))
      .option('--balance <amount>', 'a decimal balance, or unlimited (default: unlimited)', once('--balance'))
      .option('--expires <iso-8601>', 'when it stops working: a date (midnight UTC) or a date-time (default: never)', once('--expires'))
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
          if (!store.hasDb) {
            const f = fileKey(input);
            store.print(fileKeyText(f), { mode: 'file', key: f.key, entry: f.entry, yaml: `${f.yaml}\n` });
            return;
          }
          const { key, record } = await createKey(await store.db(), input);
          store.print(keyIssuedText(`Created key ${record.id} (${keySummary(record)}).`, key), { mode: 'postgres', key, record });
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
  keys.addCommand(
    storeCommand('rotate', 'replace a key by a fresh one, keeping its id, group, balance and expiry; prints the new key once')
      .argument('<id>', 'the key\'s id')
      .action((id: string, options: StoreOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const { key, record } = await rotateKey(await store.db(), id);
          store.print(keyIssuedText(`Rotated key ${record.id} (${keySummary(record)}); the old key no longer works.`, key), { key, record });
        }),
      ),
  );
  keys.addCommand(
    storeCommand('delete', 'delete a key (401 key_unknown)')
      .argument('<id>', 'the key\'s id')
      .action((id: string, options: StoreOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const record = await deleteKey(await store.db(), id);
          store.print(`Deleted key ${record.id} (group ${record.group}).\n`, { deleted: record });
        }),
      ),
  );
  return keys;
}

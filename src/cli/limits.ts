/**
 * `modelgate keys limits ID` and `modelgate groups limits GROUP [--model M]` (issue 25): a key's,
 * a group's or a group model's rate limits in the PostgreSQL store, shown, set or removed one by
 * one. A change fires the tables' triggers, so every replica's next Check carries it.
 *
 *     --rpm N --tpm N --rpd N --tpd N --in-flight N   set (a whole number >= 1)
 *     --rpm none ...                                  remove that one
 *     --clear                                         remove them all
 */
import { Command } from 'commander';
import type pg from 'pg';
import { MAX_LIMIT } from '../config/schema';
import { effectiveLimits } from '../ratelimit/limits';
import { LIMIT_NAMES, type Limits, type LimitName } from '../store/store';
import { CliError, once, usageError } from './errors';
import type { CliRun } from './io';
import { storeCommand, withStore, type StoreOptions } from './store-admin';

/** A change: a number sets, null removes; absent names stay as they are. */
export type LimitsChange = Partial<Record<LimitName, number | null>>;

interface LimitOptions extends StoreOptions {
  readonly rpm?: string;
  readonly tpm?: string;
  readonly rpd?: string;
  readonly tpd?: string;
  readonly inFlight?: string;
  readonly clear?: boolean;
  readonly model?: string;
}

const FLAG: Readonly<Record<LimitName, string>> = { rpm: 'rpm', tpm: 'tpm', rpd: 'rpd', tpd: 'tpd', inFlight: 'in-flight' };
const MAX: Readonly<Record<LimitName, number>> = { rpm: MAX_LIMIT, tpm: MAX_LIMIT, rpd: MAX_LIMIT, tpd: MAX_LIMIT, inFlight: 1_000_000 };

/** The change the options ask for; `undefined` when they ask for none (show only). */
export function parseLimitOptions(o: LimitOptions, allowInFlight = true): LimitsChange | undefined {
  const change: LimitsChange = {};
  for (const name of LIMIT_NAMES) {
    const text = o[name];
    if (text === undefined) continue;
    if (name === 'inFlight' && !allowInFlight) throw usageError('--in-flight is a limit of keys and groups, not of one model');
    if (text === 'none') change[name] = null;
    else if (/^\d{1,10}$/.test(text) && Number(text) >= 1 && Number(text) <= MAX[name]) change[name] = Number(text);
    else throw usageError(`--${FLAG[name]} must be a whole number from 1 to ${MAX[name]}, or none, not ${JSON.stringify(text)}`);
  }
  if (o.clear) {
    if (Object.keys(change).length > 0) throw usageError('give either --clear or limits, not both');
    for (const name of LIMIT_NAMES) change[name] = null;
  }
  return Object.keys(change).length === 0 ? undefined : change;
}

/** Merges a change into a limits column: nulls removed, an empty object stored as NULL. */
const MERGE = `nullif(jsonb_strip_nulls(coalesce(limits, '{}'::jsonb) || $2::jsonb), '{}'::jsonb)`;

/** "3 rpm, 2000 tpm, 2 in flight", or "none". */
export function limitsText(l: Limits | null | undefined): string {
  const parts = LIMIT_NAMES.filter((n) => typeof l?.[n] === 'number').map((n) => `${(l?.[n] as number).toLocaleString('en-US')} ${n === 'inFlight' ? 'in flight' : n}`);
  return parts.length === 0 ? 'none' : parts.join(', ');
}

export interface KeyLimitsInfo {
  readonly id: string;
  readonly group: string;
  /** The key's own. */
  readonly limits: Limits | null;
  /** Its group's (the defaults of its keys). */
  readonly groupLimits: Limits | null;
  /** What applies: each of the key's own, else the group's. */
  readonly effective: Limits;
}

async function keyLimits(db: pg.Pool, id: string): Promise<KeyLimitsInfo> {
  const { rows } = await db.query<{ id: string; group_name: string; limits: Limits | null; group_limits: Limits | null }>(
    'SELECT k.id, k.group_name, k.limits, g.limits AS group_limits FROM modelgate.keys k JOIN modelgate.groups g ON g.name = k.group_name WHERE k.id = $1', [id]);
  if (rows.length === 0) throw new CliError(`no key with id ${JSON.stringify(id)}`);
  const r = rows[0];
  const key = { id: r.id, sha256: '', group: r.group_name, balance: null, disabled: false, expiresAt: null, limits: r.limits };
  const effective = effectiveLimits(key, { name: r.group_name, available: true, models: new Map(), limits: r.group_limits }, undefined).key;
  return { id: r.id, group: r.group_name, limits: r.limits, groupLimits: r.group_limits, effective };
}

/** Shows a key's limits, after applying a change if one is given. */
export async function setKeyLimits(db: pg.Pool, id: string, change: LimitsChange | undefined): Promise<KeyLimitsInfo> {
  if (change) {
    const { rowCount } = await db.query(`UPDATE modelgate.keys SET limits = ${MERGE} WHERE id = $1`, [id, JSON.stringify(change)]);
    if (rowCount === 0) throw new CliError(`no key with id ${JSON.stringify(id)}`);
  }
  return keyLimits(db, id);
}

export interface GroupLimitsInfo {
  readonly group: string;
  readonly model?: string;
  readonly limits: Limits | null;
}

/** Shows a group's (or one of its models') limits, after applying a change if one is given. */
export async function setGroupLimits(db: pg.Pool, group: string, model: string | undefined, change: LimitsChange | undefined): Promise<GroupLimitsInfo> {
  const [table, where, args] = model === undefined
    ? ['modelgate.groups', 'name = $1', [group]]
    : ['modelgate.group_models', 'group_name = $1 AND name = $3', [group, model]];
  if (change) {
    const { rowCount } = await db.query(`UPDATE ${table} SET limits = ${MERGE} WHERE ${where}`, [args[0], JSON.stringify(change), ...args.slice(1)]);
    if (rowCount === 0) throw missing(group, model);
  }
  const { rows } = await db.query<{ limits: Limits | null }>(`SELECT limits FROM ${table} WHERE ${where.replace('$3', '$2')}`, args);
  if (rows.length === 0) throw missing(group, model);
  return { group, ...(model === undefined ? {} : { model }), limits: rows[0].limits };
}

function missing(group: string, model: string | undefined): CliError {
  return new CliError(model === undefined ? `no group named ${JSON.stringify(group)}` : `group ${JSON.stringify(group)} has no model ${JSON.stringify(model)}`);
}

function limitOptions(c: Command, allowInFlight: boolean): Command {
  c.option('--rpm <n|none>', 'requests per minute', once('--rpm'))
    .option('--tpm <n|none>', 'tokens per minute (each response charged its real tokens when it ends)', once('--tpm'))
    .option('--rpd <n|none>', 'requests per day (UTC)', once('--rpd'))
    .option('--tpd <n|none>', 'tokens per day (UTC)', once('--tpd'));
  if (allowInFlight) c.option('--in-flight <n|none>', 'requests in flight at once, per modelgate replica', once('--in-flight'));
  return c.option('--clear', 'remove every limit');
}

/** `modelgate keys limits ID [...]`. */
export function keyLimitsCommand(run: CliRun): Command {
  return limitOptions(storeCommand('limits', "show or set a key's own rate limits (each one overrides its group's; docs/rate-limits.md)")
    .argument('<id>', "the key's id"), true)
    .action((id: string, options: LimitOptions, cmd: Command) =>
      withStore(run, cmd, options, true, async (store) => {
        const info = await setKeyLimits(await store.db(), id, parseLimitOptions(options));
        store.print(`Key ${info.id} (group ${info.group}): its own limits ${limitsText(info.limits)}; its group's ${limitsText(info.groupLimits)}; in force ${limitsText(info.effective)}.\n`, info);
      }));
}

/** `modelgate groups limits GROUP [--model M] [...]`. */
export function groupLimitsCommand(run: CliRun): Command {
  return limitOptions(storeCommand('limits', "show or set a group's rate limits (each key of it counted on its own), or with --model one model's (on top of the key's)")
    .argument('<group>', 'the group')
    .option('--model <name>', 'a model of the group: limits of each key on that model (not --in-flight)', once('--model')), true)
    .action((group: string, options: LimitOptions, cmd: Command) =>
      withStore(run, cmd, options, true, async (store) => {
        const info = await setGroupLimits(await store.db(), group, options.model, parseLimitOptions(options, options.model === undefined));
        store.print(`${options.model === undefined ? `Group ${group}` : `Group ${group}, model ${options.model}`}: ${limitsText(info.limits)}.\n`, info);
      }));
}

/**
 * `modelgate keys limits ID` and `modelgate groups limits GROUP [--model M]` (docs/rate-limits.md): a key's,
 * a group's or a group model's rate limits in the PostgreSQL store (store/pg/limits.ts), shown,
 * set or removed one by one. A change fires the tables' triggers, so every replica's next Check
 * carries it.
 *
 *     --rpm N --tpm N --rpd N --tpd N --in-flight N   set (a whole number >= 1)
 *     --rpm none ...                                  remove that one
 *     --clear                                         remove them all
 */
import { Command } from 'commander';
import { MAX_LIMIT } from '../config/schema';
import { effectiveLimits } from '../ratelimit/limits';
import { LIMIT_NAMES, type Limits, type LimitName } from '../store/store';
import type { AdminDb } from '../store/pg/admin';
import { setGroupLimits, setKeyLimits, type KeyLimitsRow, type LimitsChange } from '../store/pg/limits';
import { once, usageError } from './errors';
import type { CliRun } from './io';
import { storeCommand, withStore, type StoreOptions } from './store-admin';

interface LimitOptions extends StoreOptions {
  readonly rpm?: string;
  readonly tpm?: string;
  readonly rpd?: string;
  readonly tpd?: string;
  readonly inFlight?: string;
  readonly clear?: boolean;
  readonly model?: string;
}

const FLAG: Readonly<Record<LimitName, string>> = {
  rpm: 'rpm',
  tpm: 'tpm',
  rpd: 'rpd',
  tpd: 'tpd',
  inFlight: 'in-flight',
};
const MAX: Readonly<Record<LimitName, number>> = {
  rpm: MAX_LIMIT,
  tpm: MAX_LIMIT,
  rpd: MAX_LIMIT,
  tpd: MAX_LIMIT,
  inFlight: 1_000_000,
};

/** The change the options ask for; `undefined` when they ask for none (show only). */
export function parseLimitOptions(o: LimitOptions, allowInFlight = true): LimitsChange | undefined {
  const change: LimitsChange = {};
  for (const name of LIMIT_NAMES) {
    const text = o[name];
    if (text === undefined) continue;
    if (name === 'inFlight' && !allowInFlight)
      throw usageError('--in-flight is a limit of keys and groups, not of one model');
    if (text === 'none') change[name] = null;
    else if (/^\d{1,10}$/.test(text) && Number(text) >= 1 && Number(text) <= MAX[name]) change[name] = Number(text);
    else
      throw usageError(
        `--${FLAG[name]} must be a whole number from 1 to ${MAX[name]}, or none, not ${JSON.stringify(text)}`,
      );
  }
  if (o.clear) {
    if (Object.keys(change).length > 0) throw usageError('give either --clear or limits, not both');
    for (const name of LIMIT_NAMES) change[name] = null;
  }
  return Object.keys(change).length === 0 ? undefined : change;
}

/** "3 rpm, 2000 tpm, 2 in flight", or "none". */
export function limitsText(l: Limits | null | undefined): string {
  const parts = LIMIT_NAMES.filter((n) => typeof l?.[n] === 'number').map(
    (n) => `${(l?.[n] as number).toLocaleString('en-US')} ${n === 'inFlight' ? 'in flight' : n}`,
  );
  return parts.length === 0 ? 'none' : parts.join(', ');
}

/** A key's limits as shown: its own, its group's, and what applies (each of its own, else the group's). */
export interface KeyLimitsInfo extends KeyLimitsRow {
  readonly effective: Limits;
}

async function keyLimitsInfo(db: AdminDb, id: string, change: LimitsChange | undefined): Promise<KeyLimitsInfo> {
  const r = await setKeyLimits(db, id, change);
  const key = {
    id: r.id,
    sha256: '',
    group: r.group,
    balance: null,
    disabled: false,
    expiresAt: null,
    limits: r.limits,
  };
  const effective = effectiveLimits(
    key,
    { name: r.group, available: true, models: new Map(), limits: r.groupLimits },
    undefined,
  ).key;
  return { ...r, effective };
}

function limitOptions(c: Command, allowInFlight: boolean): Command {
  c.option('--rpm <n|none>', 'requests per minute', once('--rpm'))
    .option('--tpm <n|none>', 'tokens per minute (each response charged its real tokens when it ends)', once('--tpm'))
    .option('--rpd <n|none>', 'requests per day (UTC)', once('--rpd'))
    .option('--tpd <n|none>', 'tokens per day (UTC)', once('--tpd'));
  if (allowInFlight)
    c.option('--in-flight <n|none>', 'requests in flight at once, per modelgate replica', once('--in-flight'));
  return c.option('--clear', 'remove every limit');
}

/** `modelgate keys limits ID [...]`. */
export function keyLimitsCommand(run: CliRun): Command {
  return limitOptions(
    storeCommand(
      'limits',
      "show or set a key's own rate limits (each one overrides its group's; docs/rate-limits.md)",
    ).argument('<id>', "the key's id"),
    true,
  ).action((id: string, options: LimitOptions, cmd: Command) =>
    withStore(run, cmd, options, true, async (store) => {
      const info = await keyLimitsInfo(await store.db(), id, parseLimitOptions(options));
      store.print(
        `Key ${info.id} (group ${info.group}): its own limits ${limitsText(info.limits)}; its group's ${limitsText(info.groupLimits)}; in force ${limitsText(info.effective)}.\n`,
        info,
      );
    }),
  );
}

/** `modelgate groups limits GROUP [--model M] [...]`. */
export function groupLimitsCommand(run: CliRun): Command {
  return limitOptions(
    storeCommand(
      'limits',
      "show or set a group's rate limits (each key of it counted on its own), or with --model one model's (on top of the key's)",
    )
      .argument('<group>', 'the group')
      .option(
        '--model <name>',
        'a model of the group: limits of each key on that model (not --in-flight)',
        once('--model'),
      ),
    true,
  ).action((group: string, options: LimitOptions, cmd: Command) =>
    withStore(run, cmd, options, true, async (store) => {
      const info = await setGroupLimits(
        await store.db(),
        group,
        options.model,
        parseLimitOptions(options, options.model === undefined),
      );
      store.print(
        `${options.model === undefined ? `Group ${group}` : `Group ${group}, model ${options.model}`}: ${limitsText(info.limits)}.\n`,
        info,
      );
    }),
  );
}

/**
 * The table of admin commands: syntax, options, and what each does with the admin operations.
 * Arguments are checked before the database is touched, so a typo never waits on a connection.
 * Run by store-admin.ts, which owns the connection, output mode and error reporting.
 */
import type pg from 'pg';
import { addBalance, parseAmount, setBalance, showBalance } from './balance';
import { parseBoolean, parseExpires } from './args';
import type { OptionKind, ParsedArgs } from './args';
import { AdminError, usageError } from './errors';
import { listGroups, parseModelSpec, removeGroup, setGroup } from './groups';
import { fileKey } from './file-key';
import { createKey, defaultKeyId, deleteKey, listKeys, rotateKey, setKeyDisabled } from './keys';
import { balanceText, fileKeyText, groupListText, groupText, keyIssuedText, keySummary, keyTableText, modelListText } from './text';
import type { MigrationResult } from '../store/pg/schema';

export interface CommandContext {
  readonly args: ParsedArgs;
  /** false: no store configured (file mode); only `keys new` runs then. */
  readonly hasDb: boolean;
  /** Connects and brings the schema up to date on first call. */
  readonly db: () => Promise<pg.Pool>;
  /** What that first db() call migrated. */
  readonly migration: () => MigrationResult | undefined;
  /** Prints `human` text, or `data` as one JSON document with --json. */
  readonly print: (human: string, data: unknown) => void;
}

export interface AdminCommand {
  readonly usage: string;
  readonly positionals: number;
  readonly options: Readonly<Record<string, OptionKind>>;
  /** false: also runs without a store (file mode). */
  readonly needsDb: boolean;
  readonly run: (ctx: CommandContext) => Promise<void>;
}

function keyStateCommand(verb: 'disable' | 'enable', disabled: boolean): AdminCommand {
  return {
    usage: `keys ${verb} ID`,
    positionals: 1,
    options: {},
    needsDb: true,
    async run(ctx) {
      const record = await setKeyDisabled(await ctx.db(), ctx.args.positionals[0], disabled);
      ctx.print(`${disabled ? 'Disabled' : 'Enabled'} key ${record.id} (${keySummary(record)}).\n`, { record });
    },
  };
}

/** Every admin command by its words (`keys new`, `migrate`, ...). */
export const ADMIN_COMMANDS: Readonly<Record<string, AdminCommand>> = {
  'keys new': {
    usage: 'keys new --group G [--id ID] [--balance N|unlimited] [--expires ISO-8601]',
    positionals: 0,
    options: { group: 'string', id: 'string', balance: 'string', expires: 'string' },
    needsDb: false,
    async run(ctx) {
      const { strings } = ctx.args;
      const group = strings.get('group');
      if (group === undefined) throw usageError('keys new needs --group G');
      const balance = strings.get('balance');
      const expires = strings.get('expires');
      const input = {
        group,
        id: strings.get('id') ?? defaultKeyId(),
        balance: balance === undefined ? null : parseAmount(balance, true),
        expiresAt: expires === undefined ? null : parseExpires(expires),
      };
      if (!ctx.hasDb) {
        const f = fileKey(input);
        ctx.print(fileKeyText(f), { mode: 'file', key: f.key, entry: f.entry, yaml: `${f.yaml}\n` });
        return;
      }
      const { key, record } = await createKey(await ctx.db(), input);
      ctx.print(keyIssuedText(`Created key ${record.id} (${keySummary(record)}).`, key), { mode: 'postgres', key, record });
    },
  },
  'keys list': {
    usage: 'keys list [--group G]',
    positionals: 0,
    options: { group: 'string' },
    needsDb: true,
    async run(ctx) {
      const keys = await listKeys(await ctx.db(), ctx.args.strings.get('group'));
      ctx.print(keyTableText(keys, new Date()), { keys });
    },
  },
  'keys disable': keyStateCommand('disable', true),
  'keys enable': keyStateCommand('enable', false),
  'keys rotate': {
    usage: 'keys rotate ID',
    positionals: 1,
    options: {},
    needsDb: true,
    async run(ctx) {
      const { key, record } = await rotateKey(await ctx.db(), ctx.args.positionals[0]);
      ctx.print(keyIssuedText(`Rotated key ${record.id} (${keySummary(record)}); the old key no longer works.`, key), { key, record });
    },
  },
  'keys delete': {
    usage: 'keys delete ID',
    positionals: 1,
    options: {},
    needsDb: true,
    async run(ctx) {
      const record = await deleteKey(await ctx.db(), ctx.args.positionals[0]);
      ctx.print(`Deleted key ${record.id} (group ${record.group}).\n`, { deleted: record });
    },
  },
  'groups set': {
    usage: 'groups set NAME [--available true|false] [--model NAME[:PROTOCOLS][:unavailable]]... [--no-models]',
    positionals: 1,
    options: { available: 'string', model: 'multi', 'no-models': 'boolean' },
    needsDb: true,
    async run(ctx) {
      const { args } = ctx;
      const specs = args.multis.get('model');
      if (specs && args.flags.has('no-models')) throw usageError('give either --model or --no-models, not both');
      const available = args.strings.get('available');
      const change = {
        name: args.positionals[0],
        available: available === undefined ? undefined : parseBoolean('available', available),
        models: args.flags.has('no-models') ? [] : specs?.map(parseModelSpec),
      };
      const { created, group } = await setGroup(await ctx.db(), change);
      const state = group.available ? 'available' : 'unavailable';
      ctx.print(`${created ? 'Created' : 'Updated'} group ${group.name} (${state}): ${modelListText(group)}.\n`, { created, group });
    },
  },
  'groups list': {
    usage: 'groups list',
    positionals: 0,
    options: {},
    needsDb: true,
    async run(ctx) {
      const groups = await listGroups(await ctx.db());
      ctx.print(groupListText(groups), { groups });
    },
  },
  'groups show': {
    usage: 'groups show NAME',
    positionals: 1,
    options: {},
    needsDb: true,
    async run(ctx) {
      const name = ctx.args.positionals[0];
      const [group] = await listGroups(await ctx.db(), name);
      if (group === undefined) throw new AdminError(`no group named ${JSON.stringify(name)}`);
      ctx.print(groupText(group), { group });
    },
  },
  'groups remove': {
    usage: 'groups remove NAME',
    positionals: 1,
    options: {},
    needsDb: true,
    async run(ctx) {
      const name = ctx.args.positionals[0];
      await removeGroup(await ctx.db(), name);
      ctx.print(`Removed group ${name}.\n`, { removed: name });
    },
  },
  'balance show': {
    usage: 'balance show ID',
    positionals: 1,
    options: {},
    needsDb: true,
    async run(ctx) {
      const b = await showBalance(await ctx.db(), ctx.args.positionals[0]);
      ctx.print(`${b.id}: ${balanceText(b.balance)}\n`, b);
    },
  },
  'balance set': {
    usage: 'balance set ID N|unlimited',
    positionals: 2,
    options: {},
    needsDb: true,
    async run(ctx) {
      const amount = parseAmount(ctx.args.positionals[1], true);
      const b = await setBalance(await ctx.db(), ctx.args.positionals[0], amount);
      ctx.print(`${b.id}: ${balanceText(b.balance)}\n`, b);
    },
  },
  'balance add': {
    usage: 'balance add ID N   (N < 0: a debit)',
    positionals: 2,
    options: {},
    needsDb: true,
    async run(ctx) {
      const delta = parseAmount(ctx.args.positionals[1], false) as string;
      const b = await addBalance(await ctx.db(), ctx.args.positionals[0], delta);
      const text = b.balance === null ? 'unlimited (unchanged: the key has no balance limit)' : `${b.balance} (was ${b.previous})`;
      ctx.print(`${b.id}: ${text}\n`, b);
    },
  },
  migrate: {
    usage: 'migrate',
    positionals: 0,
    options: {},
    needsDb: true,
    async run(ctx) {
      await ctx.db();
      const m = ctx.migration() as MigrationResult;
      const text = m.applied.length === 0 ? `Schema already at version ${m.to}; nothing to do.` : `Schema migrated from version ${m.from} to ${m.to}.`;
      ctx.print(`${text}\n`, m);
    },
  },
};

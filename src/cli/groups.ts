/**
 * `modelgate groups ...`: group operations on the PostgreSQL store, and the command-line syntax of
 * a model:
 *
 *     NAME[:PROTOCOLS][:unavailable]      e.g.  gpt-4o   o3:chat,responses   gemini-2.0-flash:generative:unavailable
 *
 * PROTOCOLS is a comma list of src/store/store.ts PROTOCOLS, or `*` for any (the default). Model names may
 * themselves contain colons (`llama3:8b`): only trailing parts that read as a protocol list or an
 * availability are taken as such, so `foo:chat` must be written `foo:chat:*` to mean the model
 * "foo:chat" on any protocol.
 */
import { Command } from 'commander';
import type pg from 'pg';
import { PROTOCOLS, type ModelPrice, type Protocol } from '../store/store';
import { CliError, checkName, once, sqlState, usageError } from './errors';
import type { CliRun } from './io';
import { groupLimitsCommand } from './limits';
import { storeCommand, withStore, type StoreOptions } from './store-admin';
import { table } from './text';

/** A model of a group, as stored. `protocols: null` = any. */
export interface ModelSpec {
  readonly name: string;
  readonly protocols: readonly Protocol[] | null;
  readonly available: boolean;
  /** Per million tokens (`groups price`); null: no price (metered, costs nothing). Kept by `groups set`. */
  readonly price?: ModelPrice | null;
  /** Strict metering: output tokens reserved when a request names no maximum. */
  readonly maxOutputTokens?: number | null;
}

/** A group as an operator sees it. */
export interface GroupInfo {
  readonly name: string;
  readonly available: boolean;
  readonly models: readonly ModelSpec[];
  /** How many keys belong to it. */
  readonly keys: number;
}

export interface GroupChange {
  readonly name: string;
  /** Absent: unchanged (true for a new group). */
  readonly available?: boolean;
  /** Absent: unchanged (none for a new group). Present: replaces the whole list. */
  readonly models?: readonly ModelSpec[];
}

function isProtocolList(part: string): boolean {
  return part === '*' || (part !== '' && part.split(',').every((p) => (PROTOCOLS as readonly string[]).includes(p)));
}

/** Parses `NAME[:PROTOCOLS][:unavailable]` (see the module comment). */
export function parseModelSpec(text: string): ModelSpec {
  const parts = text.split(':');
  let available = true;
  let protocols: Protocol[] | null = null;
  if (parts.length > 1 && (parts[parts.length - 1] === 'unavailable' || parts[parts.length - 1] === 'available')) {
    available = parts.pop() === 'available';
  }
  if (parts.length > 1 && isProtocolList(parts[parts.length - 1])) {
    const list = parts.pop() as string;
    protocols = list === '*' ? null : ([...new Set(list.split(','))] as Protocol[]);
  }
  return { name: checkName('model name', parts.join(':'), 500), protocols, available };
}

/** The inverse of parseModelSpec; adds `:*` only where the end of a name would read as a suffix. */
export function formatModelSpec(m: ModelSpec): string {
  const last = m.name.split(':').pop() as string;
  const misleading = m.name.includes(':') && (isProtocolList(last) || last === 'available' || last === 'unavailable');
  let out = m.name;
  if (m.protocols !== null) out += `:${m.protocols.join(',')}`;
  else if (misleading) out += ':*';
  if (!m.available) out += ':unavailable';
  return out;
}

const LIST_SQL = `SELECT g.name, g.available,
    (SELECT count(*)::int FROM modelgate.keys k WHERE k.group_name = g.name) AS keys,
    coalesce((SELECT json_agg(json_build_object('name', m.name, 'protocols', m.protocols, 'available', m.available,
                                'price', CASE WHEN m.input_price IS NULL THEN NULL ELSE json_build_object(
                                  'input', m.input_price, 'output', m.output_price, 'cachedInput', m.cached_input_price) END,
                                'maxOutputTokens', m.max_output_tokens)
                              ORDER BY m.position, m.name)
              FROM modelgate.group_models m WHERE m.group_name = g.name), '[]') AS models
  FROM modelgate.groups g WHERE $1::text IS NULL OR g.name = $1 ORDER BY g.name`;

/** Every group with its models and key count, by name. */
export async function listGroups(db: pg.Pool | pg.ClientBase, name?: string): Promise<GroupInfo[]> {
  const { rows } = await db.query<GroupInfo>(LIST_SQL, [name ?? null]);
  return rows;
}

/**
 * Creates or updates a group in one transaction. Given models replace the group's list, so the
 * result is exactly what the operator typed; the triggers send one invalidation for the group.
 */
export async function setGroup(db: pg.Pool, change: GroupChange): Promise<{ created: boolean; group: GroupInfo }> {
  const name = checkName('group name', change.name);
  const seen = new Set<string>();
  for (const m of change.models ?? []) {
    if (seen.has(m.name)) throw usageError(`model ${JSON.stringify(m.name)} is given twice`);
    seen.add(m.name);
  }
  const client = await db.connect();
  try {
    await client.query('BEGIN');
    // xmax = 0 only on a freshly inserted row: tells "created" from "updated" in one statement.
    const { rows } = await client.query<{ created: boolean }>(
      `INSERT INTO modelgate.groups (name, available) VALUES ($1, coalesce($2, true))
       ON CONFLICT (name) DO UPDATE SET available = coalesce($2, modelgate.groups.available)
       RETURNING (xmax = 0) AS created`,
      [name, change.available ?? null],
    );
    if (change.models) {
      // A model that stays in the list keeps its price (set with `groups price`).
      const { rows: kept } = await client.query<{ name: string; i: string | null; o: string | null; c: string | null; t: number | null }>(
        'SELECT name, input_price::text AS i, output_price::text AS o, cached_input_price::text AS c, max_output_tokens AS t FROM modelgate.group_models WHERE group_name = $1', [name]);
      const prices = new Map(kept.map((k) => [k.name, k]));
      await client.query('DELETE FROM modelgate.group_models WHERE group_name = $1', [name]);
      for (const [position, m] of change.models.entries()) {
        const p = prices.get(m.name);
        await client.query(
          `INSERT INTO modelgate.group_models (group_name, name, protocols, available, position, input_price, output_price, cached_input_price, max_output_tokens)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
          [name, m.name, m.protocols, m.available, position, p?.i ?? null, p?.o ?? null, p?.c ?? null, p?.t ?? null],
        );
      }
    }
    const [group] = await listGroups(client, name);
    await client.query('COMMIT');
    return { created: rows[0].created, group };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/** What `groups price` changes: a price (or none) and the strict-mode output cap (or none). */
export interface PriceChange {
  readonly price: ModelPrice | null;
  readonly maxOutputTokens?: number | null;
}

/** Sets (or removes) one model's price; the group's trigger tells every replica. */
export async function setPrice(db: pg.Pool, group: string, model: string, change: PriceChange): Promise<GroupInfo> {
  const p = change.price;
  const { rowCount } = await db.query(
    `UPDATE modelgate.group_models SET input_price = $3, output_price = $4, cached_input_price = $5,
       max_output_tokens = CASE WHEN $6::boolean THEN $7::integer ELSE max_output_tokens END
     WHERE group_name = $1 AND name = $2`,
    [group, model, p ? String(p.input) : null, p ? String(p.output) : null, p?.cachedInput != null ? String(p.cachedInput) : null, change.maxOutputTokens !== undefined, change.maxOutputTokens ?? null],
  );
  const [info] = await listGroups(db, group);
  if (info === undefined) throw new CliError(`no group named ${JSON.stringify(group)}`);
  if (rowCount === 0) throw new CliError(`group ${JSON.stringify(group)} has no model ${JSON.stringify(model)}; add it with \`modelgate groups set ${group} --model ...\``);
  return info;
}

/** "2000 in / 8000 out / 1000 cached per 1M tokens", or what no price means. */
export function priceText(m: ModelSpec): string {
  if (!m.price) return 'no price: metered, costs nothing';
  const cached = m.price.cachedInput === null ? '' : ` / ${m.price.cachedInput} cached`;
  return `${m.price.input} in / ${m.price.output} out${cached} per 1M tokens`;
}

/** Removes a group and its models; refuses while keys still belong to it. */
export async function removeGroup(db: pg.Pool, name: string): Promise<void> {
  const { rows } = await db.query<{ id: string }>('SELECT id FROM modelgate.keys WHERE group_name = $1 ORDER BY id LIMIT 6', [name]);
  if (rows.length > 0) throw stillUsed(name, rows.map((r) => r.id));
  try {
    const deleted = await db.query('DELETE FROM modelgate.groups WHERE name = $1', [name]);
    if (deleted.rowCount === 0) throw new CliError(`no group named ${JSON.stringify(name)}`);
  } catch (err) {
    // A key created between the check and the delete: the foreign key refuses, say it the same way.
    if (sqlState(err) === '23503') throw stillUsed(name, []);
    throw err;
  }
}

function stillUsed(name: string, ids: string[]): CliError {
  const which = ids.length === 0 ? '' : ` (${ids.slice(0, 5).join(', ')}${ids.length > 5 ? ', ...' : ''})`;
  return new CliError(`group ${JSON.stringify(name)} still has keys${which}; delete them first`);
}

export function groupText(g: GroupInfo): string {
  const keys = `${g.keys} key${g.keys === 1 ? '' : 's'}`;
  const head = `${g.name} (${g.available ? 'available' : 'unavailable'}, ${keys})`;
  if (g.models.length === 0) return `${head}\n  (no models)\n`;
  const rows = g.models.map((m) => [
    m.name, m.protocols === null ? 'any protocol' : m.protocols.join(','), m.available ? 'available' : 'unavailable', priceText(m),
    ...(m.maxOutputTokens ? [`max output ${m.maxOutputTokens}`] : []),
  ]);
  const body = table(rows)
    .split('\n')
    .map((line) => `  ${line.trimEnd()}`)
    .join('\n');
  return `${head}\n${body}\n`;
}

export function groupListText(groups: readonly GroupInfo[]): string {
  return groups.length === 0 ? 'No groups.\n' : groups.map(groupText).join('\n');
}

/** The models of a group in --model syntax, for a one-line confirmation. */
export function modelListText(g: GroupInfo): string {
  return g.models.length === 0 ? 'no models' : g.models.map(formatModelSpec).join(' ');
}

/** Parses `--available true|false`. */
export function parseBoolean(option: string, text: string): boolean {
  if (text === 'true') return true;
  if (text === 'false') return false;
  throw usageError(`--${option} must be true or false, not ${JSON.stringify(text)}`);
}

/** A price per million tokens on the command line: a plain decimal >= 0 (no NaN, no exponent). */
export function parsePrice(option: string, text: string): number {
  if (!/^\d{1,12}(\.\d{1,12})?$/.test(text)) throw usageError(`--${option} must be a decimal number >= 0 (per million tokens), not ${JSON.stringify(text)}`);
  return Number(text);
}

interface PriceOptions extends StoreOptions {
  readonly input?: string;
  readonly output?: string;
  readonly cachedInput?: string;
  readonly maxOutputTokens?: string;
  readonly none?: boolean;
}

interface SetOptions extends StoreOptions {
  readonly available?: string;
  readonly model?: string[];
  /** false: --no-models was given. */
  readonly models: boolean;
}

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

/** `modelgate groups set|list|show|remove`. */
export function groupsCommand(run: CliRun): Command {
  const groups = new Command('groups').description('manage groups and their models (PostgreSQL)');
  groups.addCommand(
    storeCommand('set', 'create or update a group; --model (repeatable) replaces its whole model list')
      .argument('<name>', 'the group\'s name')
      .option('--available <true|false>', 'false: every key of the group is refused (default for a new group: true)', once('--available'))
      .option('--model <name[:protocols][:unavailable]>', 'a model of the group, e.g. gpt-4o, o3:chat,responses, gemini-2.0-flash:generative:unavailable (repeatable)', collect)
      .option('--no-models', 'empty the model list')
      .action((name: string, options: SetOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          if (options.model && !options.models) throw usageError('give either --model or --no-models, not both');
          const change = {
            name,
            available: options.available === undefined ? undefined : parseBoolean('available', options.available),
            models: !options.models ? [] : options.model?.map(parseModelSpec),
          };
          const { created, group } = await setGroup(await store.db(), change);
          const state = group.available ? 'available' : 'unavailable';
          store.print(`${created ? 'Created' : 'Updated'} group ${group.name} (${state}): ${modelListText(group)}.\n`, { created, group });
        }),
      ),
  );
  groups.addCommand(
    storeCommand('list', 'list groups with their models and key counts').action((options: StoreOptions, cmd: Command) =>
      withStore(run, cmd, options, true, async (store) => {
        const list = await listGroups(await store.db());
        store.print(groupListText(list), { groups: list });
      }),
    ),
  );
  groups.addCommand(
    storeCommand('show', 'show one group')
      .argument('<name>', 'the group\'s name')
      .action((name: string, options: StoreOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const [group] = await listGroups(await store.db(), name);
          if (group === undefined) throw new CliError(`no group named ${JSON.stringify(name)}`);
          store.print(groupText(group), { group });
        }),
      ),
  );
  groups.addCommand(
    storeCommand('price', "set a model's price per million tokens, in the balance's unit (a model without one is metered but costs nothing)")
      .argument('<group>', 'the group')
      .argument('<model>', 'a model of the group')
      .option('--input <n>', 'price of one million input tokens', once('--input'))
      .option('--output <n>', 'price of one million output tokens', once('--output'))
      .option('--cached-input <n>', 'price of one million cached input tokens (default: the input price)', once('--cached-input'))
      .option('--max-output-tokens <n>', 'strict metering: output tokens reserved when a request names no maximum', once('--max-output-tokens'))
      .option('--none', 'remove the price: metered in tokens, costs nothing')
      .action((group: string, model: string, options: PriceOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const given = options.input !== undefined || options.output !== undefined || options.cachedInput !== undefined;
          if (options.none && given) throw usageError('give either --none or prices, not both');
          if (!options.none && (options.input === undefined || options.output === undefined)) throw usageError('give --input and --output (or --none)');
          let maxOutputTokens: number | undefined;
          if (options.maxOutputTokens !== undefined) {
            maxOutputTokens = Number(options.maxOutputTokens);
            if (!/^\d{1,9}$/.test(options.maxOutputTokens) || maxOutputTokens < 1) throw usageError('--max-output-tokens must be a whole number >= 1');
          }
          const price = options.none ? null : {
            input: parsePrice('input', options.input as string),
            output: parsePrice('output', options.output as string),
            cachedInput: options.cachedInput === undefined ? null : parsePrice('cached-input', options.cachedInput),
          };
          const info = await setPrice(await store.db(), group, model, { price, maxOutputTokens });
          const m = info.models.find((x) => x.name === model) as ModelSpec;
          store.print(`${group} ${model}: ${priceText(m)}.\n`, { group: info.name, model: m });
        }),
      ),
  );
  groups.addCommand(groupLimitsCommand(run));
  groups.addCommand(
    storeCommand('remove', 'remove a group and its models (refused while keys belong to it)')
      .argument('<name>', 'the group\'s name')
      .action((name: string, options: StoreOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          await removeGroup(await store.db(), name);
          store.print(`Removed group ${name}.\n`, { removed: name });
        }),
      ),
  );
  return groups;
}

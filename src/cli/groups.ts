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
import { PROTOCOLS, type Protocol } from '../store/store';
import { CliError, checkName, once, sqlState, usageError } from './errors';
import type { CliRun } from './io';
import { storeCommand, withStore, type StoreOptions } from './store-admin';
import { table } from './text';

/** A model of a group, as stored. `protocols: null` = any. */
export interface ModelSpec {
  readonly name: string;
  readonly protocols: readonly Protocol[] | null;
  readonly available: boolean;
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
    coalesce((SELECT json_agg(json_build_object('name', m.name, 'protocols', m.protocols, 'available', m.available)
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
      await client.query('DELETE FROM modelgate.group_models WHERE group_name = $1', [name]);
      for (const [position, m] of change.models.entries()) {
        await client.query(
          'INSERT INTO modelgate.group_models (group_name, name, protocols, available, position) VALUES ($1, $2, $3, $4, $5)',
          [name, m.name, m.protocols, m.available, position],
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
  const rows = g.models.map((m) => [m.name, m.protocols === null ? 'any protocol' : m.protocols.join(','), m.available ? '' : 'unavailable']);
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

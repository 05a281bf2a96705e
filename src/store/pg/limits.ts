/**
 * The rate limits of the PostgreSQL store, their write side: a key's, a group's or one group
 * model's `limits` column, shown, or changed one limit at a time (docs/rate-limits.md). Every write
 * fires the table's trigger, so every replica's next Check carries it.
 */
import type pg from 'pg';
import type { LimitName, Limits } from '../store';
import { StoreRefusal } from './refusal';

/** A change: a number sets, null removes; absent names stay as they are. */
export type LimitsChange = Partial<Record<LimitName, number | null>>;

/** Merges a change into a limits column: nulls removed, an empty object stored as NULL. */
const MERGE = `nullif(jsonb_strip_nulls(coalesce(limits, '{}'::jsonb) || $2::jsonb), '{}'::jsonb)`;

/** A key's own limits and its group's (the defaults of its keys). */
export interface KeyLimitsRow {
  readonly id: string;
  readonly group: string;
  readonly limits: Limits | null;
  readonly groupLimits: Limits | null;
}

async function keyLimits(db: pg.Pool, id: string): Promise<KeyLimitsRow> {
  const { rows } = await db.query<{
    id: string;
    group_name: string;
    limits: Limits | null;
    group_limits: Limits | null;
  }>(
    'SELECT k.id, k.group_name, k.limits, g.limits AS group_limits FROM modelgate.keys k JOIN modelgate.groups g ON g.name = k.group_name WHERE k.id = $1',
    [id],
  );
  if (rows.length === 0) throw new StoreRefusal({ code: 'key_not_found', id });
  const r = rows[0];
  return { id: r.id, group: r.group_name, limits: r.limits, groupLimits: r.group_limits };
}

/** A key's limits, after applying a change if one is given. */
export async function setKeyLimits(db: pg.Pool, id: string, change: LimitsChange | undefined): Promise<KeyLimitsRow> {
  if (change) {
    const { rowCount } = await db.query(`UPDATE modelgate.keys SET limits = ${MERGE} WHERE id = $1`, [
      id,
      JSON.stringify(change),
    ]);
    if (rowCount === 0) throw new StoreRefusal({ code: 'key_not_found', id });
  }
  return keyLimits(db, id);
}

export interface GroupLimitsRow {
  readonly group: string;
  readonly model?: string;
  readonly limits: Limits | null;
}

/** A group's (or one of its models') limits, after applying a change if one is given. */
export async function setGroupLimits(
  db: pg.Pool,
  group: string,
  model: string | undefined,
  change: LimitsChange | undefined,
): Promise<GroupLimitsRow> {
  const [table, where, args] =
    model === undefined
      ? ['modelgate.groups', 'name = $1', [group]]
      : ['modelgate.group_models', 'group_name = $1 AND name = $3', [group, model]];
  const missing = (): StoreRefusal =>
    new StoreRefusal(
      model === undefined ? { code: 'group_not_found', group } : { code: 'model_not_in_group', group, model },
    );
  if (change) {
    const { rowCount } = await db.query(`UPDATE ${table} SET limits = ${MERGE} WHERE ${where}`, [
      args[0],
      JSON.stringify(change),
      ...args.slice(1),
    ]);
    if (rowCount === 0) throw missing();
  }
  const { rows } = await db.query<{ limits: Limits | null }>(
    `SELECT limits FROM ${table} WHERE ${where.replace('$3', '$2')}`,
    args,
  );
  if (rows.length === 0) throw missing();
  return { group, ...(model === undefined ? {} : { model }), limits: rows[0].limits };
}

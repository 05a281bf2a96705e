/**
 * Groups and their models on the PostgreSQL store, their write side: list, create or update (one
 * transaction; the triggers send one invalidation for the group), price a model, remove.
 */
import type pg from 'pg';
import type { ModelPrice, Protocol } from '../store';
import { StoreRefusal, sqlState } from './refusal';

/** A model of a group, as stored. `protocols: null` = any. */
export interface ModelSpec {
  readonly name: string;
  readonly protocols: readonly Protocol[] | null;
  readonly available: boolean;
  /** Per million tokens (setPrice); null: no price (metered, costs nothing). Kept by setGroup. */
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
  /** Absent: unchanged (none for a new group). Present: replaces the whole list (names must differ). */
  readonly models?: readonly ModelSpec[];
}

const LIST_SQL = `SELECT g.name, g.available,
    (SELECT count(*)::int FROM modelgate.keys k WHERE k.group_name = g.name) AS keys,
    coalesce((SELECT json_agg(json_build_object('name', m.name, 'protocols', m.protocols, 'available', m.available,
                                'price', CASE WHEN m.input_price IS NULL THEN NULL ELSE jsonb_build_object(
                                  'input', m.input_price, 'output', m.output_price, 'cachedInput', m.cached_input_price,
                                  'longContext', CASE WHEN m.long_context_above IS NULL THEN NULL ELSE jsonb_build_object(
                                    'above', m.long_context_above, 'input', m.long_context_input_price, 'output', m.long_context_output_price,
                                    'cachedInput', m.long_context_cached_input_price) END)
                                  || jsonb_strip_nulls(jsonb_build_object('audioInput', m.audio_input_price, 'audioOutput', m.audio_output_price, 'imageOutput', m.image_output_price, 'tools', m.tool_prices)) END,
                                'maxOutputTokens', m.max_output_tokens)
                              ORDER BY m.position, m.name)
              FROM modelgate.group_models m WHERE m.group_name = g.name), '[]') AS models
  FROM modelgate.groups g WHERE $1::text IS NULL OR g.name = $1 ORDER BY g.name`;

/** Every group with its models and key count, by name. */
export async function listGroups(db: pg.Pool | pg.ClientBase, name?: string): Promise<GroupInfo[]> {
  const { rows } = await db.query<GroupInfo>(LIST_SQL, [name ?? null]);
  // A price without a long-context one has no such field (as before there was one; as the config reads it).
  for (const g of rows) {
    for (const m of g.models)
      if (m.price && m.price.longContext === null) delete (m.price as { longContext?: unknown }).longContext;
  }
  return rows;
}

/**
 * Creates or updates a group in one transaction. Given models replace the group's list, so the
 * result is exactly what was asked; a model that stays keeps its price.
 */
export async function setGroup(db: pg.Pool, change: GroupChange): Promise<{ created: boolean; group: GroupInfo }> {
  const name = change.name;
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
      const { rows: kept } = await client.query<{
        name: string;
        i: string | null;
        o: string | null;
        c: string | null;
        t: number | null;
        la: string | null;
        li: string | null;
        lo: string | null;
        lc: string | null;
        ai: string | null;
        ao: string | null;
        io: string | null;
        tp: unknown;
      }>(
        `SELECT name, input_price::text AS i, output_price::text AS o, cached_input_price::text AS c, max_output_tokens AS t,
           long_context_above::text AS la, long_context_input_price::text AS li, long_context_output_price::text AS lo, long_context_cached_input_price::text AS lc,
           audio_input_price::text AS ai, audio_output_price::text AS ao, image_output_price::text AS io, tool_prices AS tp
         FROM modelgate.group_models WHERE group_name = $1`,
        [name],
      );
      const prices = new Map(kept.map((k) => [k.name, k]));
      await client.query('DELETE FROM modelgate.group_models WHERE group_name = $1', [name]);
      for (const [position, m] of change.models.entries()) {
        const p = prices.get(m.name);
        await client.query(
          `INSERT INTO modelgate.group_models (group_name, name, protocols, available, position, input_price, output_price, cached_input_price, max_output_tokens,
             long_context_above, long_context_input_price, long_context_output_price, long_context_cached_input_price, audio_input_price, audio_output_price, image_output_price, tool_prices)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17::jsonb)`,
          [
            name,
            m.name,
            m.protocols,
            m.available,
            position,
            p?.i ?? null,
            p?.o ?? null,
            p?.c ?? null,
            p?.t ?? null,
            p?.la ?? null,
            p?.li ?? null,
            p?.lo ?? null,
            p?.lc ?? null,
            p?.ai ?? null,
            p?.ao ?? null,
            p?.io ?? null,
            p?.tp == null ? null : JSON.stringify(p.tp),
          ],
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

/** What setPrice changes: a price (or none) and the strict-mode output cap (absent: unchanged; null: none). */
export interface PriceChange {
  readonly price: ModelPrice | null;
  readonly maxOutputTokens?: number | null;
}

/**
 * Sets (or removes) one model's price, its long-context price included (absent: none); the group's trigger tells every
 * replica.
 */
export async function setPrice(
  db: pg.Pool | pg.ClientBase,
  group: string,
  model: string,
  change: PriceChange,
): Promise<GroupInfo> {
  const p = change.price;
  const long = p?.longContext ?? null;
  const { rowCount } = await db.query(
    `UPDATE modelgate.group_models SET input_price = $3, output_price = $4, cached_input_price = $5,
       max_output_tokens = CASE WHEN $6::boolean THEN $7::integer ELSE max_output_tokens END,
       long_context_above = $8, long_context_input_price = $9, long_context_output_price = $10, long_context_cached_input_price = $11,
       audio_input_price = $12, audio_output_price = $13, image_output_price = $14, tool_prices = $15::jsonb
     WHERE group_name = $1 AND name = $2`,
    [
      group,
      model,
      p ? String(p.input) : null,
      p ? String(p.output) : null,
      p?.cachedInput != null ? String(p.cachedInput) : null,
      change.maxOutputTokens !== undefined,
      change.maxOutputTokens ?? null,
      long ? String(long.above) : null,
      long ? String(long.input) : null,
      long ? String(long.output) : null,
      long?.cachedInput != null ? String(long.cachedInput) : null,
      p?.audioInput != null ? String(p.audioInput) : null,
      p?.audioOutput != null ? String(p.audioOutput) : null,
      p?.imageOutput != null ? String(p.imageOutput) : null,
      p?.tools && Object.keys(p.tools).length > 0 ? JSON.stringify(p.tools) : null,
    ],
  );
  const [info] = await listGroups(db, group);
  if (info === undefined) throw new StoreRefusal({ code: 'group_not_found', group });
  if (rowCount === 0) throw new StoreRefusal({ code: 'model_not_in_group', group, model });
  return info;
}

/** Removes a group and its models; refuses while keys still belong to it. */
export async function removeGroup(db: pg.Pool, name: string): Promise<void> {
  const { rows } = await db.query<{ id: string }>(
    'SELECT id FROM modelgate.keys WHERE group_name = $1 ORDER BY id LIMIT 6',
    [name],
  );
  if (rows.length > 0) throw new StoreRefusal({ code: 'group_has_keys', group: name, ids: rows.map((r) => r.id) });
  try {
    const deleted = await db.query('DELETE FROM modelgate.groups WHERE name = $1', [name]);
    if (deleted.rowCount === 0) throw new StoreRefusal({ code: 'group_not_found', group: name });
  } catch (err) {
    // A key created between the check and the delete: the foreign key refuses, say it the same way.
    if (sqlState(err) === '23503') throw new StoreRefusal({ code: 'group_has_keys', group: name, ids: [] });
    throw err;
  }
}

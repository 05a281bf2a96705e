/**
 * The admin API on PostgreSQL (migration 10): tokens, keys, credits and the audit log in the shared
 * database, each write and its audit entry in one transaction. Every replica sees a change at once:
 * the keys' trigger notifies them (a rotation names the old secret too, which then matches as the
 * same key expiring when its grace ends: store/pg/store.ts).
 */
import type pg from 'pg';
import { groupView } from './file-backend';
import { listGroups, setPrice, type ModelSpec } from '../store/pg/groups';
import { sqlState } from '../store/pg/refusal';
import type { Budget } from '../store/budget-window';
import { toLimits, type GroupRecord, type ModelRecord, type UsageEntry } from '../store/store';
import type {
  Actor,
  AdminBackend,
  AuditView,
  CreditView,
  GroupChange,
  GroupModelChange,
  GroupView,
  KeyChange,
  KeyView,
  NewKeyRecord,
  UsageFilter,
  WebhookDelivery,
} from './backend';
import {
  DELIVERIES_DAYS,
  parseDeliveryCursor,
  isoTime,
  mergeModelBudgets,
  modelBudgetsView,
  tokenView,
  type TokenView,
  type UsageTotals,
} from './backend';
import {
  AdminRefusal,
  groupExists,
  groupHasKeys,
  groupNotFound,
  keyNotFound,
  webhookExists,
  webhookNotFound,
} from './refusal';
import { CONFIG_WEBHOOK_ID, webhookView, type WebhookChange, type WebhookRecord } from './webhooks';
import type { Scope, TokenRecord } from './tokens';

const WEBHOOK_COLUMNS = 'id, url, secret, thresholds, subjects, enabled, description, created_at, secret_rotated_at';

interface WebhookRow {
  id: string;
  url: string;
  secret: string;
  thresholds: number[];
  subjects: string[] | null;
  enabled: boolean;
  description: string | null;
  created_at: Date;
  secret_rotated_at: Date;
}

const webhookRecord = (r: WebhookRow): WebhookRecord => ({
  id: r.id,
  url: r.url,
  secret: r.secret,
  thresholds: r.thresholds,
  subjects: r.subjects,
  enabled: r.enabled,
  description: r.description,
  createdAt: r.created_at.getTime(),
  secretRotatedAt: r.secret_rotated_at.getTime(),
});

const webhookInConfig = (id: string): AdminRefusal =>
  new AdminRefusal(
    409,
    'webhook_in_config',
    `webhook ${JSON.stringify(id)} is meter.budgetAlerts of the config file`,
    'change it in the config file (read at start); or create a webhook through the API',
  );

const KEY_COLUMNS = `id, group_name, balance::float8 AS balance, disabled, expires_at, limits, budget, model_budgets, metadata, created_at, previous_until`;

interface KeyRow {
  id: string;
  group_name: string;
  balance: number | null;
  disabled: boolean;
  expires_at: Date | null;
  limits: Record<string, number> | null;
  budget: Budget | null;
  model_budgets: Record<string, Budget> | null;
  metadata: Record<string, string> | null;
  created_at: Date;
  previous_until: Date | null;
}

/**
 * PostgreSQL's refusal of a value (a NUL character in a text, a number out of range, a CHECK), as
 * the 422 it is: the input, not the store, is at fault. Anything else is passed on.
 */
function asRefusal(err: unknown): unknown {
  const state = sqlState(err);
  if (state !== undefined && (state.startsWith('22') || state === '23514')) {
    return new AdminRefusal(
      422,
      'invalid',
      `a value cannot be stored: ${(err as Error).message}`,
      'text without NUL characters, numbers in range',
    );
  }
  return err;
}

const USAGE_FILTER = `($1::text IS NULL OR key_id = $1) AND ($2::text IS NULL OR group_name = $2) AND ($3::text IS NULL OR model = $3)
  AND ($4::timestamptz IS NULL OR time >= $4) AND ($5::timestamptz IS NULL OR time < $5)`;

function usageParams(f: UsageFilter): unknown[] {
  return [
    f.keyId ?? null,
    f.group ?? null,
    f.model ?? null,
    f.since === undefined ? null : new Date(f.since),
    f.until === undefined ? null : new Date(f.until),
  ];
}

/** The models of a group as listGroups reads them, keyed by name, as groupView takes them. */
function modelRecords(models: readonly ModelSpec[]): Map<string, ModelRecord> {
  return new Map(
    models.map((m) => [
      m.name,
      {
        name: m.name,
        protocols: m.protocols,
        available: m.available,
        price: m.price ?? null,
        maxOutputTokens: m.maxOutputTokens ?? null,
      },
    ]),
  );
}

/**
 * One model's change in a group, in the caller's transaction: removed, or added at the end (any
 * protocol and available unless given) and changed field by field. The group's trigger tells every replica.
 */
async function changeModel(c: pg.ClientBase, group: string, m: GroupModelChange): Promise<void> {
  if (m.remove) {
    const { rowCount } = await c.query('DELETE FROM modelgate.group_models WHERE group_name = $1 AND name = $2', [
      group,
      m.name,
    ]);
    if (rowCount === 0)
      throw new AdminRefusal(
        422,
        'model_not_in_group',
        `group ${JSON.stringify(group)} has no model ${JSON.stringify(m.name)} to remove`,
      );
    return;
  }
  await c.query(
    `INSERT INTO modelgate.group_models AS m (group_name, name, protocols, available, position)
     VALUES ($1, $2, $3, coalesce($4, true), (SELECT coalesce(max(position) + 1, 0) FROM modelgate.group_models WHERE group_name = $1))
     ON CONFLICT (group_name, name) DO UPDATE SET protocols = CASE WHEN $5 THEN $3 ELSE m.protocols END, available = coalesce($4, m.available)`,
    [group, m.name, m.protocols ?? null, m.available ?? null, m.protocols !== undefined],
  );
  if (m.price !== undefined || m.maxOutputTokens !== undefined) {
    if (m.price === undefined) {
      await c.query('UPDATE modelgate.group_models SET max_output_tokens = $3 WHERE group_name = $1 AND name = $2', [
        group,
        m.name,
        m.maxOutputTokens ?? null,
      ]);
    } else {
      await setPrice(c, group, m.name, {
        price: m.price,
        ...(m.maxOutputTokens !== undefined ? { maxOutputTokens: m.maxOutputTokens } : {}),
      });
    }
  }
}

export class PgAdminBackend implements AdminBackend {
  readonly kind = 'postgres';
  constructor(
    private readonly db: pg.Pool,
    private readonly now: () => number = Date.now,
  ) {}

  /** One statement outside a transaction; a value PostgreSQL refuses answers 422 (asRefusal). */
  async #query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>> {
    try {
      return await this.db.query<R>(text, values);
    } catch (err) {
      throw asRefusal(err);
    }
  }

  #view(r: KeyRow): KeyView {
    return {
      id: r.id,
      group: r.group_name,
      balance: r.balance,
      disabled: r.disabled,
      expiresAt: r.expires_at === null ? null : isoTime(r.expires_at.getTime()),
      limits: toLimits(r.limits) as Record<string, number> | null,
      budget: r.budget ?? null,
      modelBudgets: modelBudgetsView(r.model_budgets),
      metadata: r.metadata ?? {},
      source: 'store',
      createdAt: isoTime(r.created_at.getTime()),
      previousSecretValidUntil:
        r.previous_until !== null && r.previous_until.getTime() > this.now()
          ? isoTime(r.previous_until.getTime())
          : null,
    };
  }

  /** Runs `fn` in one transaction and writes its audit entry in it. */
  async #write<T>(
    actor: Actor,
    action: string,
    target: string,
    fn: (c: pg.PoolClient) => Promise<{ result: T; before: unknown; after: unknown }>,
  ): Promise<T> {
    const c = await this.db.connect();
    try {
      await c.query('BEGIN');
      const { result, before, after } = await fn(c);
      await c.query(
        'INSERT INTO modelgate.audit (actor, address, request_id, action, target, before, after) VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [
          actor.tokenId,
          actor.address,
          actor.requestId,
          action,
          target,
          before === null ? null : JSON.stringify(before),
          after === null ? null : JSON.stringify(after),
        ],
      );
      await c.query('COMMIT');
      return result;
    } catch (err) {
      await c.query('ROLLBACK').catch(() => {});
      throw asRefusal(err);
    } finally {
      c.release();
    }
  }

  async #row(c: pg.ClientBase, id: string, lock = false): Promise<KeyRow> {
    const { rows } = await c.query<KeyRow>(
      `SELECT ${KEY_COLUMNS} FROM modelgate.keys WHERE id = $1${lock ? ' FOR UPDATE' : ''}`,
      [id],
    );
    if (rows.length === 0) throw keyNotFound(id);
    return rows[0];
  }

  async findToken(sha256: string): Promise<TokenRecord | null> {
    const { rows } = await this.#query<{
      id: string;
      sha256: string;
      scope: Scope;
      created_at: Date;
      description: string | null;
    }>('SELECT id, sha256, scope, created_at, description FROM modelgate.admin_tokens WHERE sha256 = $1', [sha256]);
    const r = rows[0];
    return r
      ? { id: r.id, sha256: r.sha256, scope: r.scope, createdAt: r.created_at.getTime(), description: r.description }
      : null;
  }

  async createToken(t: TokenRecord, actor: Actor): Promise<void> {
    await this.#write(actor, 'token.create', t.id, async (c) => {
      try {
        await c.query('INSERT INTO modelgate.admin_tokens (id, sha256, scope, description) VALUES ($1, $2, $3, $4)', [
          t.id,
          t.sha256,
          t.scope,
          t.description ?? null,
        ]);
      } catch (err) {
        if (sqlState(err) === '23505')
          throw new AdminRefusal(409, 'token_exists', `a token with id ${JSON.stringify(t.id)} already exists`);
        throw err;
      }
      return { result: undefined, before: null, after: { id: t.id, scope: t.scope } };
    });
  }

  async listTokens(): Promise<TokenView[]> {
    const { rows } = await this.#query<{
      id: string;
      sha256: string;
      scope: Scope;
      created_at: Date;
      description: string | null;
    }>('SELECT id, sha256, scope, created_at, description FROM modelgate.admin_tokens ORDER BY id');
    return rows.map((r) =>
      tokenView({
        id: r.id,
        sha256: r.sha256,
        scope: r.scope,
        createdAt: r.created_at.getTime(),
        description: r.description,
      }),
    );
  }

  async deleteToken(id: string, actor: Actor): Promise<TokenView> {
    return this.#write(actor, 'token.delete', id, async (c) => {
      const { rows } = await c.query<{
        id: string;
        sha256: string;
        scope: Scope;
        created_at: Date;
        description: string | null;
      }>('DELETE FROM modelgate.admin_tokens WHERE id = $1 RETURNING id, sha256, scope, created_at, description', [id]);
      if (rows.length === 0)
        throw new AdminRefusal(
          404,
          'token_not_found',
          `no token with id ${JSON.stringify(id)}`,
          'tokens of the config file (adminTokens) are removed there',
        );
      const r = rows[0];
      return {
        result: tokenView({
          id: r.id,
          sha256: r.sha256,
          scope: r.scope,
          createdAt: r.created_at.getTime(),
          description: r.description,
        }),
        before: { id, scope: r.scope },
        after: null,
      };
    });
  }

  async listKeys(group?: string): Promise<KeyView[]> {
    const { rows } = await this.#query<KeyRow>(
      `SELECT ${KEY_COLUMNS} FROM modelgate.keys WHERE $1::text IS NULL OR group_name = $1 ORDER BY id`,
      [group ?? null],
    );
    return rows.map((r) => this.#view(r));
  }

  async getKey(id: string): Promise<KeyView | null> {
    const { rows } = await this.#query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM modelgate.keys WHERE id = $1`, [id]);
    return rows.length === 0 ? null : this.#view(rows[0]);
  }

  async createKey(k: NewKeyRecord, actor: Actor): Promise<KeyView> {
    return this.#write(actor, 'key.create', k.id, async (c) => {
      try {
        const { rows } = await c.query<KeyRow>(
          `INSERT INTO modelgate.keys (id, sha256, group_name, balance, expires_at, disabled, limits, metadata, budget, model_budgets)
           VALUES ($1, $2, $3, $4::numeric, $5, $6, $7, $8, $9::jsonb, $10::jsonb) RETURNING ${KEY_COLUMNS}`,
          [
            k.id,
            k.sha256,
            k.group,
            k.balance === null ? null : String(k.balance),
            k.expiresAt === null ? null : new Date(k.expiresAt),
            k.disabled,
            k.limits === null ? null : JSON.stringify(k.limits),
            JSON.stringify(k.metadata),
            k.budget ? JSON.stringify(k.budget) : null,
            k.modelBudgets && Object.keys(k.modelBudgets).length > 0
              ? JSON.stringify(modelBudgetsView(k.modelBudgets))
              : null,
          ],
        );
        const view = this.#view(rows[0]);
        return { result: view, before: null, after: view };
      } catch (err) {
        if (sqlState(err) === '23505')
          throw new AdminRefusal(409, 'key_exists', `a key with id ${JSON.stringify(k.id)} already exists`);
        if (sqlState(err) === '23503') throw groupNotFound(k.group);
        throw err;
      }
    });
  }

  async updateKey(id: string, ch: KeyChange, actor: Actor): Promise<KeyView> {
    return this.#write(actor, 'key.update', id, async (c) => {
      const row = await this.#row(c, id, true);
      const before = this.#view(row);
      // Merged here, the row locked: two changes of different models at once both hold.
      const merged = ch.modelBudgets === undefined ? null : mergeModelBudgets(row.model_budgets, ch.modelBudgets);
      const modelBudgetsAfter = merged ? JSON.stringify(modelBudgetsView(merged)) : null;
      try {
        const { rows } = await c.query<KeyRow>(
          `UPDATE modelgate.keys SET
             group_name = CASE WHEN $2 THEN $3 ELSE group_name END,
             expires_at = CASE WHEN $4 THEN $5::timestamptz ELSE expires_at END,
             disabled = CASE WHEN $6 THEN $7 ELSE disabled END,
             limits = CASE WHEN $8 THEN $9::jsonb ELSE limits END,
             metadata = CASE WHEN $10 THEN $11::jsonb ELSE metadata END,
             budget = CASE WHEN $12 THEN $13::jsonb ELSE budget END,
             model_budgets = CASE WHEN $14 THEN $15::jsonb ELSE model_budgets END
           WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
          [
            id,
            ch.group !== undefined,
            ch.group ?? null,
            ch.expiresAt !== undefined,
            ch.expiresAt ? new Date(ch.expiresAt) : null,
            ch.disabled !== undefined,
            ch.disabled ?? false,
            ch.limits !== undefined,
            ch.limits ? JSON.stringify(ch.limits) : null,
            ch.metadata !== undefined,
            JSON.stringify(ch.metadata ?? {}),
            ch.budget !== undefined,
            ch.budget ? JSON.stringify(ch.budget) : null,
            ch.modelBudgets !== undefined,
            modelBudgetsAfter,
          ],
        );
        const after = this.#view(rows[0]);
        return { result: after, before, after };
      } catch (err) {
        if (sqlState(err) === '23503') throw groupNotFound(ch.group ?? '');
        throw err;
      }
    });
  }

  async deleteKey(id: string, actor: Actor): Promise<KeyView> {
    return this.#write(actor, 'key.delete', id, async (c) => {
      const { rows } = await c.query<KeyRow>(`DELETE FROM modelgate.keys WHERE id = $1 RETURNING ${KEY_COLUMNS}`, [id]);
      if (rows.length === 0) throw keyNotFound(id);
      const before = this.#view(rows[0]);
      return { result: before, before, after: null };
    });
  }

  async rotateKey(id: string, sha256: string, previousUntil: number | null, actor: Actor): Promise<KeyView> {
    return this.#write(actor, 'key.rotate', id, async (c) => {
      const before = this.#view(await this.#row(c, id, true));
      const keep = previousUntil !== null && previousUntil > this.now();
      const { rows } = await c.query<KeyRow>(
        `UPDATE modelgate.keys SET previous_sha256 = CASE WHEN $3 THEN sha256 END, previous_until = CASE WHEN $3 THEN $4::timestamptz END, sha256 = $2
         WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
        [id, sha256, keep, keep ? new Date(previousUntil) : null],
      );
      const after = this.#view(rows[0]);
      return { result: after, before, after };
    });
  }

  async credit(
    id: string,
    amount: number,
    idempotencyKey: string,
    reason: string | null,
    actor: Actor,
  ): Promise<CreditView> {
    const replay = async (): Promise<CreditView | undefined> => {
      const { rows } = await this.#query<{
        id: string;
        key_id: string;
        amount: number;
        balance: number | null;
        reason: string | null;
        time: Date;
      }>(
        'SELECT id::text, key_id, amount::float8 AS amount, balance::float8 AS balance, reason, time FROM modelgate.credits WHERE idempotency_key = $1',
        [idempotencyKey],
      );
      const r = rows[0];
      if (!r) return undefined;
      if (r.key_id !== id || r.amount !== amount)
        throw new AdminRefusal(
          409,
          'idempotency_key_reused',
          'this idempotency key was used for another credit',
          'use a new idempotency key for a different credit',
        );
      return {
        id: r.id,
        keyId: r.key_id,
        amount: r.amount,
        balance: r.balance,
        idempotencyKey,
        reason: r.reason,
        time: isoTime(r.time.getTime()),
        replayed: true,
      };
    };
    const earlier = await replay();
    if (earlier) return earlier;
    try {
      return await this.#write(actor, 'key.credit', id, async (c) => {
        const ins = await c.query<{ id: string; time: Date }>(
          'INSERT INTO modelgate.credits (idempotency_key, key_id, amount, reason) VALUES ($1, $2, $3::numeric, $4) RETURNING id::text, time',
          [idempotencyKey, id, String(amount), reason],
        );
        const row = await this.#row(c, id, true);
        if (row.balance === null)
          throw new AdminRefusal(
            409,
            'balance_unlimited',
            `key ${JSON.stringify(id)} has an unlimited balance`,
            'create the key with a balance',
          );
        const { rows } = await c.query<{ balance: number }>(
          'UPDATE modelgate.keys SET balance = balance + $2::numeric WHERE id = $1 RETURNING balance::float8 AS balance',
          [id, String(amount)],
        );
        await c.query('UPDATE modelgate.credits SET balance = $2::numeric WHERE idempotency_key = $1', [
          idempotencyKey,
          String(rows[0].balance),
        ]);
        const credit: CreditView = {
          id: ins.rows[0].id,
          keyId: id,
          amount,
          balance: rows[0].balance,
          idempotencyKey,
          reason,
          time: isoTime(ins.rows[0].time.getTime()),
          replayed: false,
        };
        return {
          result: credit,
          before: { balance: row.balance },
          after: { balance: credit.balance, amount, idempotencyKey, reason },
        };
      });
    } catch (err) {
      // The same idempotency key credited meanwhile (another replica, a retry): its credit is the answer.
      if (sqlState(err) === '23505') {
        const done = await replay();
        if (done) return done;
      }
      throw err;
    }
  }

  async usage(f: UsageFilter): Promise<UsageEntry[]> {
    const { rows } = await this.#query<{
      time: Date;
      request_id: string;
      key_id: string;
      group_name: string;
      model: string;
      protocol: string;
      input_tokens: string;
      output_tokens: string;
      cached_input_tokens: string;
      cost: number;
      priced: boolean;
      estimated: string | null;
      provisional: boolean;
    }>(
      `SELECT time, request_id, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens, cost::float8 AS cost, priced, estimated, provisional
       FROM modelgate.usage WHERE ${USAGE_FILTER} AND ($6::timestamptz IS NULL OR (time, request_id) < ($6, $7::text))
       ORDER BY time DESC, request_id DESC LIMIT $8`,
      [...usageParams(f), f.after === undefined ? null : new Date(f.after.time), f.after?.requestId ?? null, f.limit],
    );
    return rows.map((r) => ({
      time: r.time.getTime(),
      requestId: r.request_id,
      keyId: r.key_id,
      group: r.group_name,
      model: r.model,
      protocol: r.protocol,
      inputTokens: Number(r.input_tokens),
      outputTokens: Number(r.output_tokens),
      cachedInputTokens: Number(r.cached_input_tokens),
      cost: r.cost,
      priced: r.priced,
      estimated: r.estimated as UsageEntry['estimated'],
      provisional: r.provisional,
    }));
  }

  async usageTotals(f: UsageFilter): Promise<UsageTotals> {
    const { rows } = await this.#query<{ requests: number; input: string; output: string; cost: number }>(
      `SELECT count(*)::int AS requests, coalesce(sum(input_tokens), 0)::text AS input, coalesce(sum(output_tokens), 0)::text AS output,
         coalesce(sum(cost), 0)::float8 AS cost FROM modelgate.usage WHERE ${USAGE_FILTER}`,
      usageParams(f),
    );
    return {
      requests: rows[0].requests,
      inputTokens: Number(rows[0].input),
      outputTokens: Number(rows[0].output),
      cost: rows[0].cost,
    };
  }

  async audit(limit: number, before?: string): Promise<AuditView[]> {
    if (before !== undefined && !/^\d{1,18}$/.test(before)) return [];
    const { rows } = await this.#query<{
      id: string;
      time: Date;
      actor: string;
      address: string | null;
      request_id: string | null;
      action: string;
      target: string;
      before: unknown;
      after: unknown;
    }>(
      'SELECT id::text, time, actor, address, request_id, action, target, before, after FROM modelgate.audit a WHERE $2::bigint IS NULL OR a.id < $2 ORDER BY a.id DESC LIMIT $1',
      [limit, before ?? null],
    );
    return rows.map((r) => ({
      id: r.id,
      time: isoTime(r.time.getTime()),
      actor: r.actor,
      address: r.address,
      requestId: r.request_id,
      action: r.action,
      target: r.target,
      before: r.before,
      after: r.after,
    }));
  }

  async listGroups(): Promise<GroupView[]> {
    const groups = await listGroups(this.db).catch((err: unknown) => {
      throw asRefusal(err);
    });
    const { rows } = await this.#query<{ name: string; limits: unknown; budget: Budget | null }>(
      'SELECT name, limits, budget FROM modelgate.groups',
    );
    const limits = new Map(rows.map((r) => [r.name, toLimits(r.limits)]));
    const budgets = new Map(rows.map((r) => [r.name, r.budget]));
    return groups.map((g) =>
      groupView({
        name: g.name,
        available: g.available,
        limits: limits.get(g.name) ?? null,
        budget: budgets.get(g.name) ?? null,
        models: modelRecords(g.models),
      }),
    );
  }

  async recordDelivery(d: WebhookDelivery): Promise<void> {
    // A delivered event stays delivered (another replica may send the same event id); the first creation time is kept.
    await this.#query(
      `INSERT INTO modelgate.webhook_deliveries AS w (event_id, type, subject, threshold, status, attempts, last_status, last_error, created_at, updated_at, webhook_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
       ON CONFLICT (event_id, webhook_id) DO UPDATE SET
         status = CASE WHEN w.status = 'delivered' THEN w.status ELSE EXCLUDED.status END,
         attempts = CASE WHEN w.status = 'delivered' THEN w.attempts ELSE EXCLUDED.attempts END,
         last_status = CASE WHEN w.status = 'delivered' THEN w.last_status ELSE EXCLUDED.last_status END,
         last_error = CASE WHEN w.status = 'delivered' THEN w.last_error ELSE EXCLUDED.last_error END,
         updated_at = greatest(w.updated_at, EXCLUDED.updated_at)`,
      [
        d.eventId,
        d.type,
        d.subject,
        d.threshold,
        d.status,
        d.attempts,
        d.lastStatus,
        d.lastError,
        new Date(d.createdAt),
        new Date(d.updatedAt),
        d.webhookId,
      ],
    );
    if (d.attempts === 0)
      await this.#query(
        `DELETE FROM modelgate.webhook_deliveries WHERE updated_at < now() - interval '${DELIVERIES_DAYS} days'`,
      );
  }

  async listDeliveries(limit: number, before?: string, webhookId?: string): Promise<WebhookDelivery[]> {
    const c = before === undefined ? null : parseDeliveryCursor(before);
    const { rows } = await this.#query<{
      webhook_id: string;
      event_id: string;
      type: string;
      subject: string;
      threshold: number;
      status: WebhookDelivery['status'];
      attempts: number;
      last_status: number | null;
      last_error: string | null;
      created_at: Date;
      updated_at: Date;
    }>(
      `SELECT webhook_id, event_id, type, subject, threshold::float8 AS threshold, status, attempts, last_status, last_error, created_at, updated_at
       FROM modelgate.webhook_deliveries d
       WHERE ($3::text IS NULL OR d.webhook_id = $3) AND ($1::text IS NULL OR (created_at, event_id, webhook_id) <
         (SELECT created_at, event_id, webhook_id FROM modelgate.webhook_deliveries WHERE event_id = $1 AND webhook_id = $4))
       ORDER BY created_at DESC, event_id DESC, webhook_id DESC LIMIT $2`,
      [c?.eventId ?? null, limit, webhookId ?? null, c?.webhookId ?? null],
    );
    return rows.map((r) => ({
      webhookId: r.webhook_id,
      eventId: r.event_id,
      type: r.type,
      subject: r.subject,
      threshold: r.threshold,
      status: r.status,
      attempts: r.attempts,
      lastStatus: r.last_status,
      lastError: r.last_error,
      createdAt: r.created_at.toISOString(),
      updatedAt: r.updated_at.toISOString(),
    }));
  }

  async updateGroup(name: string, ch: GroupChange, actor: Actor): Promise<GroupView> {
    const view = async (): Promise<GroupView> => {
      const g = (await this.listGroups()).find((x) => x.name === name);
      if (!g) throw new AdminRefusal(404, 'group_not_found', `no group named ${JSON.stringify(name)}`);
      return g;
    };
    const before = await view();
    await this.#write(actor, 'group.update', name, async (c) => {
      const { rowCount } = await c.query(
        `UPDATE modelgate.groups SET available = CASE WHEN $2 THEN $3 ELSE available END, limits = CASE WHEN $4 THEN $5::jsonb ELSE limits END,
           budget = CASE WHEN $6 THEN $7::jsonb ELSE budget END WHERE name = $1`,
        [
          name,
          ch.available !== undefined,
          ch.available ?? true,
          ch.limits !== undefined,
          ch.limits ? JSON.stringify(toLimits(ch.limits)) : null,
          ch.budget !== undefined,
          ch.budget ? JSON.stringify(ch.budget) : null,
        ],
      );
      if (rowCount === 0) throw new AdminRefusal(404, 'group_not_found', `no group named ${JSON.stringify(name)}`);
      for (const m of ch.models ?? []) await changeModel(c, name, m);
      const after = ch.models ? (await listGroups(c, name))[0] : undefined;
      return {
        result: undefined,
        before: {
          available: before.available,
          limits: before.limits,
          budget: before.budget,
          ...(ch.models ? { models: before.models } : {}),
        },
        after: {
          available: ch.available ?? before.available,
          limits: ch.limits === undefined ? before.limits : toLimits(ch.limits),
          budget: ch.budget === undefined ? before.budget : ch.budget,
          ...(after
            ? {
                models: groupView({
                  name,
                  available: true,
                  models: modelRecords(after.models),
                }).models,
              }
            : {}),
        },
      };
    });
    return view();
  }

  async createGroup(g: GroupRecord, actor: Actor): Promise<GroupView> {
    await this.#write(actor, 'group.create', g.name, async (c) => {
      try {
        await c.query(
          'INSERT INTO modelgate.groups (name, available, limits, budget) VALUES ($1, $2, $3::jsonb, $4::jsonb)',
          [
            g.name,
            g.available,
            g.limits ? JSON.stringify(toLimits(g.limits)) : null,
            g.budget ? JSON.stringify(g.budget) : null,
          ],
        );
      } catch (err) {
        if (sqlState(err) === '23505') throw groupExists(g.name);
        throw err;
      }
      for (const m of g.models.values())
        await changeModel(c, g.name, {
          name: m.name,
          protocols: m.protocols,
          available: m.available,
          ...(m.price || m.maxOutputTokens != null
            ? { price: m.price ?? null, maxOutputTokens: m.maxOutputTokens ?? null }
            : {}),
        });
      const [info] = await listGroups(c, g.name);
      const after = groupView({
        name: g.name,
        available: g.available,
        limits: toLimits(g.limits),
        budget: g.budget ?? null,
        models: modelRecords(info.models),
      });
      return { result: undefined, before: null, after };
    });
    const view = (await this.listGroups()).find((x) => x.name === g.name);
    if (!view) throw new AdminRefusal(404, 'group_not_found', `no group named ${JSON.stringify(g.name)}`);
    return view;
  }

  async deleteGroup(name: string, actor: Actor): Promise<GroupView> {
    const before = (await this.listGroups()).find((x) => x.name === name);
    if (!before) throw new AdminRefusal(404, 'group_not_found', `no group named ${JSON.stringify(name)}`);
    return this.#write(actor, 'group.delete', name, async (c) => {
      const locked = await c.query('SELECT 1 FROM modelgate.groups WHERE name = $1 FOR UPDATE', [name]);
      if (locked.rowCount === 0)
        throw new AdminRefusal(404, 'group_not_found', `no group named ${JSON.stringify(name)}`);
      const { rows } = await c.query<{ id: string }>(
        'SELECT id FROM modelgate.keys WHERE group_name = $1 ORDER BY id LIMIT 6',
        [name],
      );
      if (rows.length > 0)
        throw groupHasKeys(
          name,
          rows.map((r) => r.id),
        );
      try {
        await c.query('DELETE FROM modelgate.groups WHERE name = $1', [name]);
      } catch (err) {
        // A key created meanwhile on another replica: the foreign key refuses.
        if (sqlState(err) === '23503') throw groupHasKeys(name, []);
        throw err;
      }
      return { result: before, before, after: null };
    });
  }

  async listWebhooks(): Promise<WebhookRecord[]> {
    const { rows } = await this.#query<WebhookRow>(`SELECT ${WEBHOOK_COLUMNS} FROM modelgate.webhooks ORDER BY id`);
    return rows.map(webhookRecord);
  }

  async createWebhook(w: WebhookRecord, actor: Actor): Promise<WebhookRecord> {
    if (w.id === CONFIG_WEBHOOK_ID) throw webhookInConfig(w.id);
    return this.#write(actor, 'webhook.create', w.id, async (c) => {
      try {
        const { rows } = await c.query<WebhookRow>(
          `INSERT INTO modelgate.webhooks (id, url, secret, thresholds, subjects, enabled, description, created_at, secret_rotated_at)
           VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6, $7, $8, $8) RETURNING ${WEBHOOK_COLUMNS}`,
          [
            w.id,
            w.url,
            w.secret,
            JSON.stringify(w.thresholds),
            w.subjects === null ? null : JSON.stringify(w.subjects),
            w.enabled,
            w.description,
            new Date(w.createdAt),
          ],
        );
        const made = webhookRecord(rows[0]);
        return { result: made, before: null, after: webhookView(made) };
      } catch (err) {
        if (sqlState(err) === '23505') throw webhookExists(w.id);
        throw err;
      }
    });
  }

  async #webhookRow(c: pg.ClientBase, id: string): Promise<WebhookRecord> {
    if (id === CONFIG_WEBHOOK_ID) throw webhookInConfig(id);
    const { rows } = await c.query<WebhookRow>(
      `SELECT ${WEBHOOK_COLUMNS} FROM modelgate.webhooks WHERE id = $1 FOR UPDATE`,
      [id],
    );
    if (rows.length === 0) throw webhookNotFound(id);
    return webhookRecord(rows[0]);
  }

  async updateWebhook(id: string, ch: WebhookChange, actor: Actor): Promise<WebhookRecord> {
    return this.#write(actor, 'webhook.update', id, async (c) => {
      const before = await this.#webhookRow(c, id);
      const { rows } = await c.query<WebhookRow>(
        `UPDATE modelgate.webhooks SET
           url = coalesce($2, url),
           thresholds = coalesce($3::jsonb, thresholds),
           subjects = CASE WHEN $4 THEN $5::jsonb ELSE subjects END,
           enabled = coalesce($6, enabled),
           description = CASE WHEN $7 THEN $8 ELSE description END
         WHERE id = $1 RETURNING ${WEBHOOK_COLUMNS}`,
        [
          id,
          ch.url ?? null,
          ch.thresholds === undefined ? null : JSON.stringify(ch.thresholds),
          ch.subjects !== undefined,
          ch.subjects ? JSON.stringify(ch.subjects) : null,
          ch.enabled ?? null,
          ch.description !== undefined,
          ch.description ?? null,
        ],
      );
      const after = webhookRecord(rows[0]);
      return { result: after, before: webhookView(before), after: webhookView(after) };
    });
  }

  async deleteWebhook(id: string, actor: Actor): Promise<WebhookRecord> {
    return this.#write(actor, 'webhook.delete', id, async (c) => {
      const before = await this.#webhookRow(c, id);
      await c.query('DELETE FROM modelgate.webhooks WHERE id = $1', [id]);
      return { result: before, before: webhookView(before), after: null };
    });
  }

  async rotateWebhookSecret(id: string, secret: string, actor: Actor): Promise<WebhookRecord> {
    return this.#write(actor, 'webhook.rotate-secret', id, async (c) => {
      const before = await this.#webhookRow(c, id);
      const { rows } = await c.query<WebhookRow>(
        `UPDATE modelgate.webhooks SET secret = $2, secret_rotated_at = $3 WHERE id = $1 RETURNING ${WEBHOOK_COLUMNS}`,
        [id, secret, new Date(this.now())],
      );
      const after = webhookRecord(rows[0]);
      return { result: after, before: webhookView(before), after: webhookView(after) };
    });
  }

  async close(): Promise<void> {
    await this.db.end();
  }
}

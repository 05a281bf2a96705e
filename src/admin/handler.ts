/**
 * The admin API at /admin/v1/ on modelgate's HTTP port (docs/admin-api.md): JSON in and out,
 * authenticated by a management token (`Authorization: Bearer mg-admin-...`), routed by the
 * operation table (operations.ts). Failed authentications are counted per source address
 * (failures.ts) and logged without the token; every write is audited by the backend.
 */
import { randomUUID } from 'node:crypto';
import type * as http from 'node:http';
import { z } from 'zod';
import { generateKey, hashKey, KEY_PREFIX } from '../contract/key-format';
import type { UsageEntry } from '../store/store';
import type { Actor, AdminBackend, KeyChange } from './backend';
import { deliveryCursor, isoTime, mergeModelBudgets, tokenView } from './backend';
import { toModelPrice } from '../config/load';
import { FailureLimit } from './failures';
import { openApiText } from './openapi';
import { OPERATIONS, type Operation } from './operations';
import { AdminRefusal, keyNotFound, webhookNotFound } from './refusal';
import {
  CreditCreate,
  GroupCreate,
  GroupPatch,
  KeyCreate,
  KeyPatch,
  Rotate,
  TokenCreate,
  WebhookCreate,
  WebhookPatch,
} from './schemas';
import {
  CONFIG_WEBHOOK_ID,
  configWebhookView,
  DEFAULT_WEBHOOK_THRESHOLDS,
  defaultWebhookId,
  generateWebhookSecret,
  webhookView,
  type WebhookView,
} from './webhooks';
import {
  defaultTokenId,
  generateToken,
  hashToken,
  hasTokenShape,
  scopeAllows,
  type Scope,
  type TokenRecord,
} from './tokens';

export const ADMIN_PREFIX = '/admin/v1/';
const MAX_BODY = 64 * 1024;
/** Bytes of an oversized body read and dropped before its connection is cut. */
const DRAIN_MAX = 4 * 1024 * 1024;

export interface AdminLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface AdminApiOptions {
  readonly backend: AdminBackend;
  readonly logger: AdminLogger;
  readonly now?: () => number;
  /** Tokens defined in the config file (`adminTokens`), read at each request so a reload applies. */
  readonly configTokens?: () => readonly { readonly id: string; readonly sha256: string; readonly scope: Scope }[];
  /** The config file's webhook (meter.budgetAlerts), shown read only as the webhook `config`. */
  readonly configWebhook?: () => { readonly url: string; readonly thresholds: readonly number[] } | null;
  /** The config file, named in the hint of a refused write to its webhook. */
  readonly configFile?: string;
  /** Called after a webhook is created, changed or removed here (the sender re-reads its thresholds at once). */
  readonly onWebhooksChanged?: () => void;
  /** Failed authentications an address may make per window (default 20 per minute). */
  readonly failures?: { readonly max: number; readonly windowMs: number };
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Handles every path under /admin/v1/; returns false for anything else. */
export function createAdminHandler(
  o: AdminApiOptions,
): (req: http.IncomingMessage, res: http.ServerResponse) => Promise<boolean> {
  const now = o.now ?? Date.now;
  const failures = new FailureLimit({ ...(o.failures ?? { max: 20, windowMs: 60_000 }), now });
  const document = openApiText();
  const routes = OPERATIONS.map((op) => ({ op, pattern: new RegExp(`^${op.path.replace(/\{\w+\}/, '([^/]+)')}$`) }));

  return async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://admin');
    if (!url.pathname.startsWith(ADMIN_PREFIX) && url.pathname !== '/admin/v1') return false;
    const given = req.headers['x-request-id'];
    const requestId = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    const address = req.socket.remoteAddress ?? 'unknown';
    const send = (status: number, body: unknown, headers: Record<string, string> = {}): true => {
      res
        .writeHead(status, {
          'content-type': 'application/json',
          'cache-control': 'no-store',
          'x-request-id': requestId,
          ...headers,
        })
        .end(`${JSON.stringify(body)}\n`);
      return true;
    };
    const refuse = (r: AdminRefusal, headers?: Record<string, string>): true =>
      send(r.status, { error: { code: r.code, message: r.message, ...(r.hint ? { hint: r.hint } : {}) } }, headers);

    if (url.pathname === `${ADMIN_PREFIX}openapi.json` && req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': requestId }).end(document);
      return true;
    }
    try {
      const blocked = failures.blockedFor(address);
      if (blocked > 0) {
        return refuse(
          new AdminRefusal(
            429,
            'too_many_failures',
            'too many failed authentications from this address',
            `try again in ${blocked} s with a valid management token`,
          ),
          { 'retry-after': String(blocked) },
        );
      }
      const configTokens = o.configTokens?.() ?? [];
      const auth = await authenticate(req, o.backend, configTokens);
      if ('refusal' in auth) {
        failures.fail(address);
        o.logger.warn(
          { address, requestId, reason: auth.refusal.code, method: req.method, path: url.pathname },
          'admin API authentication failed',
        );
        return refuse(auth.refusal, { 'www-authenticate': 'Bearer realm="modelgate-admin"' });
      }
      const token = auth.token;
      // A literal path wins over a template (/webhooks/deliveries is not the webhook `deliveries`).
      const all = routes.filter((r) => r.pattern.test(url.pathname));
      const literal = all.filter((r) => !r.op.path.includes('{'));
      const matches = literal.length > 0 ? literal : all;
      if (matches.length === 0)
        return refuse(
          new AdminRefusal(
            404,
            'not_found',
            `no admin operation at ${url.pathname}`,
            'GET /admin/v1/openapi.json lists them',
          ),
        );
      const route = matches.find((r) => r.op.method === req.method);
      if (!route)
        return refuse(
          new AdminRefusal(405, 'method_not_allowed', `${req.method} is not an operation of ${url.pathname}`),
          { allow: matches.map((r) => r.op.method).join(', ') },
        );
      const op = route.op;
      if (!scopeAllows(token.scope, op.scope)) {
        return refuse(
          new AdminRefusal(
            403,
            'scope_insufficient',
            `token ${token.id} has scope ${token.scope}; ${op.id} needs ${op.scope}`,
            `create a token with --scope ${op.scope} (or admin)`,
          ),
        );
      }
      let param: string;
      try {
        param = decodeURIComponent(route.pattern.exec(url.pathname)![1] ?? '');
      } catch {
        return refuse(new AdminRefusal(404, 'not_found', 'the path holds an escape that is not UTF-8'));
      }
      const body = op.body ? await readJson(req) : undefined;
      const actor: Actor = { tokenId: token.id, address, requestId };
      const answer = await run(op, {
        backend: o.backend,
        param,
        body,
        query: url.searchParams,
        actor,
        now,
        configTokens,
        configWebhook: o.configWebhook?.() ?? null,
        configFile: o.configFile ?? 'the config file',
        header: (n) => header(req, n),
      });
      if (op.method !== 'GET' && /Webhook/.test(op.id)) o.onWebhooksChanged?.();
      if (op.method !== 'GET')
        o.logger.info(
          { tokenId: token.id, operation: op.id, target: param || undefined, requestId, address },
          'admin API change',
        );
      return send(op.status, answer);
    } catch (err) {
      if (err instanceof AdminRefusal) return refuse(err);
      // The store could not do it (PostgreSQL down, a state file that cannot be written): fail closed, say so.
      o.logger.warn(
        {
          requestId,
          address,
          method: req.method,
          path: url.pathname,
          err: err instanceof Error ? err.message : String(err),
        },
        'admin API request failed',
      );
      return refuse(
        new AdminRefusal(
          503,
          'store_unavailable',
          'the store could not complete this request',
          'retry later; a write may or may not have been made: GET it first (a credit retried with its idempotency key is made once)',
        ),
        { 'retry-after': '1' },
      );
    }
  };
}

function header(req: http.IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
}

async function authenticate(
  req: http.IncomingMessage,
  backend: AdminBackend,
  inConfig: readonly { readonly id: string; readonly sha256: string; readonly scope: Scope }[],
): Promise<{ token: TokenRecord } | { refusal: AdminRefusal }> {
  const raw = header(req, 'authorization');
  const deny = (code: string, message: string, hint: string): { refusal: AdminRefusal } => ({
    refusal: new AdminRefusal(401, code, message, hint),
  });
  if (raw === undefined)
    return deny(
      'token_missing',
      'no management token',
      'send Authorization: Bearer <token> (modelgate admin-tokens new --scope read|keys|billing|admin)',
    );
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(raw);
  if (!m)
    return deny(
      'token_malformed',
      'the Authorization header is not Bearer <token>',
      'send Authorization: Bearer <token>, the token alone after one space',
    );
  const token = m[1];
  if (token.startsWith(KEY_PREFIX))
    return deny(
      'model_key_refused',
      'a model key is not a management token',
      'the admin API takes a management token (mg-admin-...), created with modelgate admin-tokens new',
    );
  if (!hasTokenShape(token))
    return deny(
      'token_unknown',
      'not a valid management token',
      'a management token is mg-admin- and 43 characters, created with modelgate admin-tokens new',
    );
  const sha256 = hashToken(token);
  const configured = inConfig.find((t) => t.sha256 === sha256);
  if (configured) return { token: { id: configured.id, sha256, scope: configured.scope, createdAt: 0 } };
  const found = await backend.findToken(sha256);
  if (!found)
    return deny(
      'token_unknown',
      'not a valid management token',
      'the token may have been mistyped or removed; create one with modelgate admin-tokens new',
    );
  return { token: found };
}

async function readJson(req: http.IncomingMessage): Promise<unknown> {
  const type = header(req, 'content-type') ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type))
    throw new AdminRefusal(
      415,
      'content_type',
      'the body must be application/json',
      'send Content-Type: application/json',
    );
  const chunks: Buffer[] = [];
  let size = 0;
  // A body over the limit is read on (up to DRAIN_MAX) and dropped, so its sender gets the 400
  // instead of a reset connection; past DRAIN_MAX the connection is cut.
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > DRAIN_MAX) break;
    if (size <= MAX_BODY) chunks.push(c as Buffer);
  }
  if (size > MAX_BODY) throw new AdminRefusal(400, 'body_too_large', `the body is over ${MAX_BODY} bytes`);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new AdminRefusal(400, 'body_not_json', 'the body is not JSON');
  }
}

function parse<T extends z.ZodType>(schema: T, v: unknown): z.output<T> {
  const r = schema.safeParse(v);
  if (r.success) return r.data;
  const first = r.error.issues
    .slice(0, 5)
    .map((i) => `${i.path.length > 0 ? i.path.join('.') : 'body'}: ${i.message}`)
    .join('; ');
  throw new AdminRefusal(422, 'invalid', first, 'GET /admin/v1/openapi.json has the schema');
}

/**
 * A body whose modelBudgets names `__proto__` is refused before zod reads it (zod drops that key:
 * the budget would be lost without a word).
 */
function protoFree(body: unknown): void {
  const m = typeof body === 'object' && body !== null ? (body as Record<string, unknown>).modelBudgets : undefined;
  if (typeof m === 'object' && m !== null && Object.hasOwn(m, '__proto__'))
    throw new AdminRefusal(422, 'invalid', 'modelBudgets: a model named __proto__ cannot have a budget');
}

/** Budgets per model name models of the key's group (a typo would be a budget that never holds). */
async function modelsOfGroup(b: AdminBackend, group: string, models: readonly string[]): Promise<void> {
  const g = (await b.listGroups()).find((x) => x.name === group);
  if (!g) return; // the write answers group_not_found
  const known = new Set(g.models.map((m) => m.name));
  const unknown = models.filter((m) => !known.has(m));
  if (unknown.length > 0) {
    throw new AdminRefusal(
      422,
      'model_not_in_group',
      `modelBudgets: group ${JSON.stringify(group)} has no model ${unknown
        .slice(0, 3)
        .map((m) => JSON.stringify(m))
        .join(', ')}`,
      `GET /admin/v1/groups/${encodeURIComponent(group)} lists its models (names are exact: case and spaces matter)`,
    );
  }
}

function time(v: string | null | undefined, what: string): number | null | undefined {
  if (v === undefined || v === null) return v;
  const t = Date.parse(v);
  if (!/^\d{4}-\d{2}-\d{2}/.test(v) || Number.isNaN(t))
    throw new AdminRefusal(422, 'invalid', `${what}: not an ISO 8601 date-time`, 'e.g. 2026-12-31T23:59:59Z');
  return t;
}

function limitParam(q: URLSearchParams): number {
  const v = q.get('limit');
  if (v === null) return 100;
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < 1 || n > 1000) throw new AdminRefusal(422, 'invalid', 'limit: an integer from 1 to 1000');
  return n;
}

/** A usage page's cursor: the last entry of the page before, as `[time, request id]` in base64url JSON. */
function usageCursor(v: string | null): { time: number; requestId: string } | undefined {
  if (v === null) return undefined;
  try {
    const [t, id] = JSON.parse(Buffer.from(v, 'base64url').toString('utf8')) as unknown[];
    if (typeof t === 'number' && Number.isFinite(t) && typeof id === 'string') return { time: t, requestId: id };
  } catch {
    // refused below
  }
  throw new AdminRefusal(
    422,
    'invalid',
    'cursor: not a cursor this API gave',
    'pass the nextCursor of the page before, as it is',
  );
}

interface Ctx {
  readonly backend: AdminBackend;
  readonly param: string;
  readonly body: unknown;
  readonly query: URLSearchParams;
  readonly actor: Actor;
  readonly now: () => number;
  readonly configTokens: readonly { readonly id: string; readonly scope: Scope }[];
  readonly configWebhook: { readonly url: string; readonly thresholds: readonly number[] } | null;
  readonly configFile: string;
  header(name: string): string | undefined;
}

const webhookInConfig = (id: string, file: string): AdminRefusal =>
  new AdminRefusal(
    409,
    'webhook_in_config',
    `webhook ${JSON.stringify(id)} is meter.budgetAlerts of ${file}`,
    `change meter.budgetAlerts in ${file} (read at start); or create a webhook through the API`,
  );

async function findWebhook(c: Ctx): Promise<WebhookView> {
  if (c.param === CONFIG_WEBHOOK_ID && c.configWebhook) return configWebhookView(c.configWebhook);
  const w = (await c.backend.listWebhooks()).find((x) => x.id === c.param);
  if (!w) throw webhookNotFound(c.param);
  return webhookView(w);
}

/** A write to the config's webhook is refused before the store is asked. */
function writableWebhook(c: Ctx): void {
  if (c.param === CONFIG_WEBHOOK_ID) {
    if (c.configWebhook) throw webhookInConfig(c.param, c.configFile);
    throw webhookNotFound(c.param);
  }
}

const usageView = (e: UsageEntry) => ({
  time: isoTime(e.time),
  requestId: e.requestId,
  keyId: e.keyId,
  group: e.group,
  model: e.model,
  protocol: e.protocol,
  inputTokens: e.inputTokens,
  outputTokens: e.outputTokens,
  cachedInputTokens: e.cachedInputTokens,
  cost: e.cost,
  priced: e.priced,
  estimated: e.estimated ?? null,
  provisional: e.provisional === true,
});

async function run(op: Operation, c: Ctx): Promise<unknown> {
  const b = c.backend;
  switch (op.id) {
    case 'listKeys':
      return { keys: await b.listKeys(c.query.get('group') ?? undefined) };
    case 'getKey': {
      const k = await b.getKey(c.param);
      if (!k) throw keyNotFound(c.param);
      return k;
    }
    case 'createKey': {
      protoFree(c.body);
      const v = parse(KeyCreate, c.body);
      if (v.modelBudgets) await modelsOfGroup(b, v.group, Object.keys(v.modelBudgets));
      const secret = generateKey();
      const key = await b.createKey(
        {
          id: v.id ?? `key-${randomUUID().slice(0, 8)}`,
          sha256: hashKey(secret),
          group: v.group,
          balance: v.balance ?? null,
          expiresAt: time(v.expiresAt, 'expiresAt') ?? null,
          disabled: v.disabled ?? false,
          limits: v.limits ?? null,
          budget: v.budget ?? null,
          modelBudgets: v.modelBudgets ? mergeModelBudgets(null, v.modelBudgets) : null,
          metadata: v.metadata ?? {},
        },
        c.actor,
      );
      return { key, secret };
    }
    case 'updateKey': {
      protoFree(c.body);
      const v = parse(KeyPatch, c.body);
      const named = v.modelBudgets ? Object.keys(v.modelBudgets).filter((m) => v.modelBudgets?.[m] !== null) : [];
      if (named.length > 0) {
        const group = v.group ?? (await b.getKey(c.param))?.group;
        if (group !== undefined) await modelsOfGroup(b, group, named);
      }
      const change: KeyChange = {
        ...(v.group !== undefined ? { group: v.group } : {}),
        ...(v.expiresAt !== undefined ? { expiresAt: time(v.expiresAt, 'expiresAt') } : {}),
        ...(v.disabled !== undefined ? { disabled: v.disabled } : {}),
        ...(v.limits !== undefined ? { limits: v.limits } : {}),
        ...(v.budget !== undefined ? { budget: v.budget } : {}),
        ...(v.metadata !== undefined ? { metadata: v.metadata } : {}),
        ...(v.modelBudgets !== undefined ? { modelBudgets: v.modelBudgets } : {}),
      };
      return b.updateKey(c.param, change, c.actor);
    }
    case 'deleteKey':
      return b.deleteKey(c.param, c.actor);
    case 'rotateKey': {
      const v = parse(Rotate, c.body);
      const secret = generateKey();
      const grace = v.gracePeriodSeconds ?? 0;
      const key = await b.rotateKey(c.param, hashKey(secret), grace > 0 ? c.now() + grace * 1000 : null, c.actor);
      return { key, secret };
    }
    case 'creditKey': {
      const v = parse(CreditCreate, c.body);
      const fromHeader = c.header('idempotency-key');
      if (fromHeader !== undefined && v.idempotencyKey !== undefined && fromHeader !== v.idempotencyKey) {
        throw new AdminRefusal(422, 'invalid', "the Idempotency-Key header and the body's idempotencyKey differ");
      }
      const idem = v.idempotencyKey ?? fromHeader;
      if (idem === undefined || idem === '' || idem.length > 200)
        throw new AdminRefusal(
          422,
          'invalid',
          'idempotencyKey: required (in the body or as the Idempotency-Key header), 1-200 characters',
          'a ticket or transaction id of yours: a retry with the same one credits once',
        );
      return b.credit(c.param, v.amount, idem, v.reason ?? null, c.actor);
    }
    case 'getUsage': {
      const q = c.query;
      const filter = {
        keyId: q.get('keyId') ?? undefined,
        group: q.get('group') ?? undefined,
        model: q.get('model') ?? undefined,
        since: time(q.get('since'), 'since') ?? undefined,
        until: time(q.get('until'), 'until') ?? undefined,
        limit: limitParam(q),
        after: usageCursor(q.get('cursor')),
      };
      const [entries, totals] = await Promise.all([b.usage(filter), b.usageTotals(filter)]);
      const last = entries.at(-1);
      const nextCursor =
        last && entries.length === filter.limit
          ? Buffer.from(JSON.stringify([last.time, last.requestId])).toString('base64url')
          : null;
      return { entries: entries.map(usageView), totals, nextCursor };
    }
    case 'getAudit': {
      const cursor = c.query.get('cursor') ?? undefined;
      const limit = limitParam(c.query);
      const entries = await b.audit(limit, cursor);
      return { entries, nextCursor: entries.length === limit ? entries.at(-1)!.id : null };
    }
    case 'listGroups':
      return { groups: await b.listGroups() };
    case 'listWebhookDeliveries': {
      const cursor = c.query.get('cursor') ?? undefined;
      const limit = limitParam(c.query);
      const deliveries = await b.listDeliveries(limit, cursor, c.query.get('webhookId') ?? undefined);
      return { deliveries, nextCursor: deliveries.length === limit ? deliveryCursor(deliveries.at(-1)!) : null };
    }
    case 'listWebhooks': {
      const fromConfig = c.configWebhook ? [configWebhookView(c.configWebhook)] : [];
      return { webhooks: [...fromConfig, ...(await b.listWebhooks()).map(webhookView)] };
    }
    case 'getWebhook':
      return findWebhook(c);
    case 'createWebhook': {
      const v = parse(WebhookCreate, c.body);
      const id = v.id ?? defaultWebhookId();
      const secret = generateWebhookSecret();
      const at = c.now();
      const made = await b.createWebhook(
        {
          id,
          url: v.url,
          secret,
          thresholds: v.thresholds ?? [...DEFAULT_WEBHOOK_THRESHOLDS],
          subjects: v.subjects ?? null,
          enabled: v.enabled ?? true,
          description: v.description ?? null,
          createdAt: at,
          secretRotatedAt: at,
        },
        c.actor,
      );
      return { webhook: webhookView(made), secret };
    }
    case 'updateWebhook': {
      writableWebhook(c);
      const v = parse(WebhookPatch, c.body);
      return webhookView(await b.updateWebhook(c.param, v, c.actor));
    }
    case 'deleteWebhook':
      writableWebhook(c);
      return webhookView(await b.deleteWebhook(c.param, c.actor));
    case 'rotateWebhookSecret': {
      writableWebhook(c);
      const secret = generateWebhookSecret();
      return { webhook: webhookView(await b.rotateWebhookSecret(c.param, secret, c.actor)), secret };
    }
    case 'listTokens': {
      const fromConfig = c.configTokens.map((t) => ({
        id: t.id,
        scope: t.scope,
        description: null,
        createdAt: null,
        source: 'config' as const,
      }));
      return { tokens: [...fromConfig, ...(await b.listTokens())] };
    }
    case 'createToken': {
      const v = parse(TokenCreate, c.body);
      const id = v.id ?? defaultTokenId();
      if (c.configTokens.some((t) => t.id === id))
        throw new AdminRefusal(
          409,
          'token_exists',
          `a token with id ${JSON.stringify(id)} already exists (in the config file)`,
        );
      const secret = generateToken();
      const record: TokenRecord = {
        id,
        sha256: hashToken(secret),
        scope: v.scope,
        createdAt: c.now(),
        description: v.description ?? null,
      };
      await b.createToken(record, c.actor);
      return { token: tokenView(record), secret };
    }
    case 'deleteToken':
      if (c.configTokens.some((t) => t.id === c.param))
        throw new AdminRefusal(
          409,
          'token_in_config',
          `token ${JSON.stringify(c.param)} is defined in the config file (adminTokens)`,
          'remove it there; the service reloads the file',
        );
      return b.deleteToken(c.param, c.actor);
    case 'updateGroup': {
      const v = parse(GroupPatch, c.body);
      const models = v.models?.map((m) => ({
        name: m.name,
        ...(m.remove ? { remove: true as const } : {}),
        ...(m.protocols !== undefined ? { protocols: m.protocols } : {}),
        ...(m.available !== undefined ? { available: m.available } : {}),
        ...(m.price !== undefined ? { price: m.price === null ? null : toModelPrice(m.price) } : {}),
        ...(m.maxOutputTokens !== undefined ? { maxOutputTokens: m.maxOutputTokens } : {}),
      }));
      if (models && new Set(models.map((m) => m.name)).size !== models.length)
        throw new AdminRefusal(422, 'invalid', 'models: a model named twice', 'one change per model name');
      return b.updateGroup(
        c.param,
        {
          ...(v.available !== undefined ? { available: v.available } : {}),
          ...(v.limits !== undefined ? { limits: v.limits } : {}),
          ...(v.budget !== undefined ? { budget: v.budget } : {}),
          ...(models ? { models } : {}),
        },
        c.actor,
      );
    }
    case 'createGroup': {
      const v = parse(GroupCreate, c.body);
      return b.createGroup(
        {
          name: v.name,
          available: v.available ?? true,
          models: new Map(
            v.models.map((m) => [
              m.name,
              {
                name: m.name,
                protocols: m.protocols ?? null,
                available: m.available ?? true,
                price: m.price ? toModelPrice(m.price) : null,
                maxOutputTokens: m.maxOutputTokens ?? null,
              },
            ]),
          ),
          limits: v.limits ?? null,
          budget: v.budget ?? null,
        },
        c.actor,
      );
    }
    case 'deleteGroup':
      return b.deleteGroup(c.param, c.actor);
    case 'getGroup': {
      const g = (await b.listGroups()).find((x) => x.name === c.param);
      if (!g) throw new AdminRefusal(404, 'group_not_found', `no group named ${JSON.stringify(c.param)}`);
      return g;
    }
  }
}

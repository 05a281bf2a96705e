/**
 * What the admin API asks of a store (docs/admin-api.md): one interface, one implementation per
 * store (file-backend.ts: modelgate's own state beside the config; pg-backend.ts: PostgreSQL).
 * Every write takes the actor and is audited by the backend in the same step as the change.
 */
import type { z } from 'zod';
import type { Budget } from '../store/budget-window';
import type { GroupRecord, Limits, ModelPrice, Protocol, UsageEntry } from '../store/store';
import type { AuditEntry, Credit, Group, Key, Token } from './schemas';
import type { TokenRecord } from './tokens';
import type { WebhookChange, WebhookRecord } from './webhooks';

export type KeyView = z.infer<typeof Key>;
export type CreditView = z.infer<typeof Credit>;
export type AuditView = z.infer<typeof AuditEntry>;
export type GroupView = z.infer<typeof Group>;
export type TokenView = z.infer<typeof Token>;

/** Who makes a change, for the audit log: never a secret. */
export interface Actor {
  /** The management token's id, or `cli` for the command line. */
  readonly tokenId: string;
  readonly address: string | null;
  readonly requestId: string | null;
}

export interface NewKeyRecord {
  readonly id: string;
  readonly sha256: string;
  readonly group: string;
  readonly balance: number | null;
  /** Epoch milliseconds, or null for never. */
  readonly expiresAt: number | null;
  readonly disabled: boolean;
  readonly limits: Limits | null;
  readonly budget: Budget | null;
  /** Budgets per window by model name; null: none. */
  readonly modelBudgets: Readonly<Record<string, Budget>> | null;
  readonly metadata: Readonly<Record<string, string>>;
}

export interface KeyChange {
  readonly group?: string;
  readonly expiresAt?: number | null;
  readonly disabled?: boolean;
  readonly limits?: Limits | null;
  readonly budget?: Budget | null;
  /**
   * Merged into the key's budgets per model (mergeModelBudgets): a budget sets a model's, null removes it; null removes
   * all.
   */
  readonly modelBudgets?: Readonly<Record<string, Budget | null>> | null;
  readonly metadata?: Readonly<Record<string, string>>;
}

/** One model's change in a group (admin/schemas.ts GroupModelChange): absent fields stay as they are. */
export interface GroupModelChange {
  readonly name: string;
  readonly remove?: true;
  readonly protocols?: readonly Protocol[] | null;
  readonly available?: boolean;
  readonly price?: ModelPrice | null;
  readonly maxOutputTokens?: number | null;
}

export interface GroupChange {
  readonly available?: boolean;
  readonly limits?: Limits | null;
  readonly budget?: Budget | null;
  readonly models?: readonly GroupModelChange[];
}

/**
 * A key's budgets per model after a change (a merge patch, RFC 7396): null (or nothing left) is
 * none. The record has no prototype, so a model may carry any name.
 */
export function mergeModelBudgets(
  current: Readonly<Record<string, Budget>> | null | undefined,
  change: Readonly<Record<string, Budget | null>> | null,
): Record<string, Budget> | null {
  if (change === null) return null;
  const out = Object.create(null) as Record<string, Budget>;
  for (const [model, b] of Object.entries(current ?? {})) out[model] = b;
  for (const [model, b] of Object.entries(change)) {
    if (b === null) delete out[model];
    else out[model] = b;
  }
  return Object.keys(out).length > 0 ? out : null;
}

/** A key's budgets per model as the API shows them: a plain object ({} for none), sorted by model. */
export function modelBudgetsView(m: Readonly<Record<string, Budget>> | null | undefined): Record<string, Budget> {
  const out: Record<string, Budget> = {};
  for (const model of Object.keys(m ?? {}).sort())
    Object.defineProperty(out, model, {
      value: (m as Record<string, Budget>)[model],
      enumerable: true,
      writable: true,
      configurable: true,
    });
  return out;
}

export interface UsageFilter {
  readonly keyId?: string;
  readonly group?: string;
  readonly model?: string;
  /** Epoch milliseconds, inclusive. */
  readonly since?: number;
  /** Epoch milliseconds, exclusive. */
  readonly until?: number;
  /** A page after the first: entries older than this one (newest first: time, then request id, descending). */
  readonly after?: { readonly time: number; readonly requestId: string };
  readonly limit: number;
}

/** The totals of every entry a usage filter selects (not only one page's). */
export interface UsageTotals {
  readonly requests: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cost: number;
}

/**
 * The delivery of one budget alert to the webhook (server/budget-webhook.ts), as the API shows it:
 * never the webhook's URL or secret (an error is a code such as `http_500`, `timeout`, `ECONNREFUSED`).
 */
export interface WebhookDelivery {
  /** The webhook it went to (`config`: meter.budgetAlerts of the config file). */
  readonly webhookId: string;
  readonly eventId: string;
  readonly type: string;
  /** Whose budget: `key:<id>`, `group:<name>` or `model:<key id>:<model>`. */
  readonly subject: string;
  /** Percent of the budget's amount. */
  readonly threshold: number;
  readonly status: 'pending' | 'delivered' | 'failed';
  readonly attempts: number;
  /** The HTTP status of the last attempt, if it got one. */
  readonly lastStatus: number | null;
  readonly lastError: string | null;
  /** ISO 8601 UTC. */
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface AdminBackend {
  readonly kind: 'file' | 'postgres';
  findToken(sha256: string): Promise<TokenRecord | null>;
  createToken(token: TokenRecord, actor: Actor): Promise<void>;
  /** The tokens the store keeps (not the config's). */
  listTokens(): Promise<TokenView[]>;
  /** Revokes a token at once (its next request is 401). */
  deleteToken(id: string, actor: Actor): Promise<TokenView>;
  listKeys(group?: string): Promise<KeyView[]>;
  getKey(id: string): Promise<KeyView | null>;
  createKey(key: NewKeyRecord, actor: Actor): Promise<KeyView>;
  updateKey(id: string, change: KeyChange, actor: Actor): Promise<KeyView>;
  deleteKey(id: string, actor: Actor): Promise<KeyView>;
  /** A new hash for key `id`; the previous one keeps working until `previousUntil` (epoch ms; null: not at all). */
  rotateKey(id: string, sha256: string, previousUntil: number | null, actor: Actor): Promise<KeyView>;
  /** Adds `amount` once per idempotency key; a repeat answers the first credit with replayed: true. */
  credit(id: string, amount: number, idempotencyKey: string, reason: string | null, actor: Actor): Promise<CreditView>;
  /** Newest first (time, then request id, descending), one page. */
  usage(filter: UsageFilter): Promise<UsageEntry[]>;
  /** Of every entry the filter selects (its `after` and `limit` ignored). */
  usageTotals(filter: UsageFilter): Promise<UsageTotals>;
  /** Newest first; `before`: the entries older than the entry of that id. */
  audit(limit: number, before?: string): Promise<AuditView[]>;
  listGroups(): Promise<GroupView[]>;
  /**
   * Keeps a delivery's latest state, one per event and webhook (a delivered one stays delivered: another replica may
   * send the same event).
   */
  recordDelivery(d: WebhookDelivery): Promise<void>;
  /**
   * Newest first (created, then event id, then webhook id); `before`: the deliveries older than the one of that
   * cursor (deliveryCursor); `webhookId`: only those to that webhook.
   */
  listDeliveries(limit: number, before?: string, webhookId?: string): Promise<WebhookDelivery[]>;
  /** The webhooks the store keeps (not the config's), their secrets included (for the sender only), by id. */
  listWebhooks(): Promise<WebhookRecord[]>;
  createWebhook(w: WebhookRecord, actor: Actor): Promise<WebhookRecord>;
  updateWebhook(id: string, change: WebhookChange, actor: Actor): Promise<WebhookRecord>;
  deleteWebhook(id: string, actor: Actor): Promise<WebhookRecord>;
  /** A new signing secret; the previous one signs nothing more (a retry under way signs with the new one). */
  rotateWebhookSecret(id: string, secret: string, actor: Actor): Promise<WebhookRecord>;
  updateGroup(name: string, change: GroupChange, actor: Actor): Promise<GroupView>;
  /** A new group with its models (409 group_exists, or group_in_config on the file store). */
  createGroup(group: GroupRecord, actor: Actor): Promise<GroupView>;
  /** Removes a group; 409 group_has_keys while keys belong to it. */
  deleteGroup(name: string, actor: Actor): Promise<GroupView>;
  close(): Promise<void>;
}

/** Deliveries kept (the file store: the latest; PostgreSQL: those of the last DELIVERIES_DAYS days). */
export const DELIVERIES_MAX = 1000;
export const DELIVERIES_DAYS = 30;

/** A delivery's place in the list, as a page cursor: `<event id>:<webhook id>` (an event id alone: `config`). */
export function deliveryCursor(d: Pick<WebhookDelivery, 'eventId' | 'webhookId'>): string {
  return `${d.eventId}:${d.webhookId}`;
}

export function parseDeliveryCursor(c: string): { eventId: string; webhookId: string } {
  const at = c.indexOf(':');
  return at < 0 ? { eventId: c, webhookId: 'config' } : { eventId: c.slice(0, at), webhookId: c.slice(at + 1) };
}

/** `a` replaced by `b`, the same event's later state: delivered stays delivered. */
export function laterDelivery(a: WebhookDelivery | undefined, b: WebhookDelivery): WebhookDelivery {
  if (!a) return b;
  return a.status === 'delivered'
    ? { ...a, updatedAt: b.updatedAt > a.updatedAt ? b.updatedAt : a.updatedAt }
    : { ...b, createdAt: a.createdAt };
}

export function tokenView(t: TokenRecord): TokenView {
  return {
    id: t.id,
    scope: t.scope,
    description: t.description ?? null,
    createdAt: t.createdAt ? isoTime(t.createdAt) : null,
    source: 'api',
  };
}

/** Newest first: by time, then by request id, both descending. */
export function newerFirst(a: UsageEntry, b: UsageEntry): number {
  return b.time - a.time || (a.requestId < b.requestId ? 1 : a.requestId > b.requestId ? -1 : 0);
}

/** ISO 8601 without zero milliseconds. */
export const isoTime = (ms: number): string => new Date(ms).toISOString().replace('.000Z', 'Z');

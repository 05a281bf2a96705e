/**
 * The admin API's operations, once: method, path, scope, what they take and answer. The handler
 * routes by this table and the OpenAPI document (openapi.ts) is generated from it.
 */
import type { z } from 'zod';
import {
  ApiError,
  Audit,
  Credit,
  CreditCreate,
  DeliveryList,
  Group,
  GroupCreate,
  GroupList,
  GroupPatch,
  IssuedKey,
  Key,
  KeyCreate,
  KeyList,
  KeyPatch,
  IssuedToken,
  Rotate,
  Token,
  TokenCreate,
  TokenList,
  Usage,
  IssuedWebhook,
  Webhook,
  WebhookCreate,
  WebhookList,
  WebhookPatch,
} from './schemas';
import type { Scope } from './tokens';

export type OperationId =
  | 'listKeys'
  | 'createKey'
  | 'getKey'
  | 'updateKey'
  | 'deleteKey'
  | 'rotateKey'
  | 'creditKey'
  | 'getUsage'
  | 'getAudit'
  | 'listGroups'
  | 'getGroup'
  | 'listTokens'
  | 'createToken'
  | 'deleteToken'
  | 'updateGroup'
  | 'listWebhookDeliveries'
  | 'listWebhooks'
  | 'createWebhook'
  | 'getWebhook'
  | 'updateWebhook'
  | 'deleteWebhook'
  | 'rotateWebhookSecret'
  | 'createGroup'
  | 'deleteGroup';

export interface QueryParam {
  readonly name: string;
  readonly description: string;
  readonly type: 'string' | 'integer';
}

export interface Operation {
  readonly id: OperationId;
  readonly method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** With `{id}` or `{name}` for the path parameter. */
  readonly path: string;
  /** The scope it needs (scopeAllows: admin may do everything, every scope may read). */
  readonly scope: Scope;
  readonly summary: string;
  readonly body?: z.ZodType;
  readonly query?: readonly QueryParam[];
  readonly status: number;
  readonly answer: z.ZodType;
  /** Refusals it may answer besides 401, 403, 422 and 429 (which every operation may) and, with a body, 400 and 415. */
  readonly refusals: readonly number[];
}

export const OPERATIONS: readonly Operation[] = [
  {
    id: 'listKeys',
    method: 'GET',
    path: '/admin/v1/keys',
    scope: 'read',
    summary: 'List keys (never their secrets)',
    query: [{ name: 'group', description: 'Only the keys of this group.', type: 'string' }],
    status: 200,
    answer: KeyList,
    refusals: [],
  },
  {
    id: 'createKey',
    method: 'POST',
    path: '/admin/v1/keys',
    scope: 'keys',
    summary: 'Create a key; its secret is in this answer only',
    body: KeyCreate,
    status: 201,
    answer: IssuedKey,
    refusals: [409, 422],
  },
  {
    id: 'getKey',
    method: 'GET',
    path: '/admin/v1/keys/{id}',
    scope: 'read',
    summary: 'A key',
    status: 200,
    answer: Key,
    refusals: [404],
  },
  {
    id: 'updateKey',
    method: 'PATCH',
    path: '/admin/v1/keys/{id}',
    scope: 'keys',
    summary: 'Change a key (group, expiry, disabled, limits, metadata)',
    body: KeyPatch,
    status: 200,
    answer: Key,
    refusals: [404, 409, 422],
  },
  {
    id: 'deleteKey',
    method: 'DELETE',
    path: '/admin/v1/keys/{id}',
    scope: 'keys',
    summary: 'Delete a key (401 key_unknown from then on)',
    status: 200,
    answer: Key,
    refusals: [404, 409],
  },
  {
    id: 'rotateKey',
    method: 'POST',
    path: '/admin/v1/keys/{id}/rotate',
    scope: 'keys',
    summary: 'A new secret for the same key id; the previous one works for gracePeriodSeconds only',
    body: Rotate,
    status: 200,
    answer: IssuedKey,
    refusals: [404, 409, 422],
  },
  {
    id: 'creditKey',
    method: 'POST',
    path: '/admin/v1/keys/{id}/credits',
    scope: 'billing',
    summary: 'Add to (or, negative, take from) a balance, once per idempotency key',
    body: CreditCreate,
    status: 200,
    answer: Credit,
    refusals: [404, 409, 422],
  },
  {
    id: 'getUsage',
    method: 'GET',
    path: '/admin/v1/usage',
    scope: 'read',
    summary: 'Metered requests, newest first, with their totals',
    status: 200,
    answer: Usage,
    refusals: [422],
    query: [
      { name: 'keyId', description: 'Only this key.', type: 'string' },
      { name: 'group', description: 'Only this group.', type: 'string' },
      { name: 'model', description: 'Only this model.', type: 'string' },
      { name: 'since', description: 'ISO 8601: entries at or after it.', type: 'string' },
      { name: 'until', description: 'ISO 8601: entries before it.', type: 'string' },
      { name: 'limit', description: 'At most this many entries (1-1000, default 100).', type: 'integer' },
      { name: 'cursor', description: 'The nextCursor of the page before.', type: 'string' },
    ],
  },
  {
    id: 'getAudit',
    method: 'GET',
    path: '/admin/v1/audit',
    scope: 'read',
    summary: 'Admin changes, newest first',
    query: [
      { name: 'limit', description: 'At most this many entries (1-1000, default 100).', type: 'integer' },
      { name: 'cursor', description: 'The nextCursor of the page before.', type: 'string' },
    ],
    status: 200,
    answer: Audit,
    refusals: [422],
  },
  {
    id: 'listWebhookDeliveries',
    method: 'GET',
    path: '/admin/v1/webhooks/deliveries',
    scope: 'read',
    summary: 'Budget alert deliveries to the webhooks, newest first: status, attempts, last error',
    query: [
      { name: 'webhookId', description: 'Only the deliveries to this webhook.', type: 'string' },
      { name: 'limit', description: 'At most this many deliveries (1-1000, default 100).', type: 'integer' },
      { name: 'cursor', description: 'The nextCursor of the page before.', type: 'string' },
    ],
    status: 200,
    answer: DeliveryList,
    refusals: [422],
  },
  {
    id: 'listWebhooks',
    method: 'GET',
    path: '/admin/v1/webhooks',
    scope: 'read',
    summary: "Webhooks of budget alerts (never their secrets or query strings), the config file's included",
    status: 200,
    answer: WebhookList,
    refusals: [],
  },
  {
    id: 'createWebhook',
    method: 'POST',
    path: '/admin/v1/webhooks',
    scope: 'admin',
    summary: 'Create a webhook of budget alerts; its signing secret is in this answer only',
    body: WebhookCreate,
    status: 201,
    answer: IssuedWebhook,
    refusals: [409],
  },
  {
    id: 'getWebhook',
    method: 'GET',
    path: '/admin/v1/webhooks/{id}',
    scope: 'read',
    summary: 'A webhook',
    status: 200,
    answer: Webhook,
    refusals: [404],
  },
  {
    id: 'updateWebhook',
    method: 'PATCH',
    path: '/admin/v1/webhooks/{id}',
    scope: 'admin',
    summary: 'Change a webhook (URL, thresholds, budgets watched, enabled): every replica sends by it at once',
    body: WebhookPatch,
    status: 200,
    answer: Webhook,
    refusals: [404, 409],
  },
  {
    id: 'deleteWebhook',
    method: 'DELETE',
    path: '/admin/v1/webhooks/{id}',
    scope: 'admin',
    summary: 'Remove a webhook: nothing more is sent to it, retries included',
    status: 200,
    answer: Webhook,
    refusals: [404, 409],
  },
  {
    id: 'rotateWebhookSecret',
    method: 'POST',
    path: '/admin/v1/webhooks/{id}/rotate-secret',
    scope: 'admin',
    summary: 'A new signing secret for a webhook, in this answer only; the previous one signs nothing more',
    status: 200,
    answer: IssuedWebhook,
    refusals: [404, 409],
  },
  {
    id: 'listGroups',
    method: 'GET',
    path: '/admin/v1/groups',
    scope: 'read',
    summary: 'Groups with their models, prices, availability and limits',
    status: 200,
    answer: GroupList,
    refusals: [],
  },
  {
    id: 'createGroup',
    method: 'POST',
    path: '/admin/v1/groups',
    scope: 'admin',
    summary: 'Create a group with its models, prices, availability, limits and budget (every replica at once)',
    body: GroupCreate,
    status: 201,
    answer: Group,
    refusals: [409, 422],
  },
  {
    id: 'getGroup',
    method: 'GET',
    path: '/admin/v1/groups/{name}',
    scope: 'read',
    summary: 'A group',
    status: 200,
    answer: Group,
    refusals: [404],
  },
  {
    id: 'updateGroup',
    method: 'PATCH',
    path: '/admin/v1/groups/{name}',
    scope: 'admin',
    summary:
      "Change a group's availability, default limits, budget, and its models and their prices (every replica at once)",
    body: GroupPatch,
    status: 200,
    answer: Group,
    refusals: [404, 409],
  },
  {
    id: 'deleteGroup',
    method: 'DELETE',
    path: '/admin/v1/groups/{name}',
    scope: 'admin',
    summary: 'Remove a group; refused (409 group_has_keys) while keys belong to it',
    status: 200,
    answer: Group,
    refusals: [404, 409],
  },
  {
    id: 'listTokens',
    method: 'GET',
    path: '/admin/v1/tokens',
    scope: 'admin',
    summary: 'Management tokens (never the tokens themselves), those of the config file included',
    status: 200,
    answer: TokenList,
    refusals: [],
  },
  {
    id: 'createToken',
    method: 'POST',
    path: '/admin/v1/tokens',
    scope: 'admin',
    summary: 'Create a management token; the token is in this answer only',
    body: TokenCreate,
    status: 201,
    answer: IssuedToken,
    refusals: [409],
  },
  {
    id: 'deleteToken',
    method: 'DELETE',
    path: '/admin/v1/tokens/{id}',
    scope: 'admin',
    summary: 'Revoke a management token at once',
    status: 200,
    answer: Token,
    refusals: [404, 409],
  },
];

export { ApiError };

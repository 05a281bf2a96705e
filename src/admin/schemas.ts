/**
 * The admin API's bodies and answers, as zod schemas: the handlers parse with them and the OpenAPI
 * document (openapi.ts) is generated from them, so the two cannot drift. A key's limits and id
 * rule are the config's own (config/schema.ts).
 */
import { z } from 'zod';
import {
  budget,
  GROUP_NAME,
  KEY_ID,
  keyLimits,
  modelBudgets,
  modelName as configModelName,
  price,
} from '../config/schema';
import { PROTOCOLS } from '../store/store';
import { SCOPES } from './tokens';
import { RESERVED_WEBHOOK_IDS, webhookUrlProblem } from './webhooks';

const amount = z.number().refine(Number.isFinite, { error: 'must be a finite number' });
const time = z.string().describe('ISO 8601 date-time (UTC).');

export const KeyId = z
  .string()
  .regex(KEY_ID, { error: 'must be an id of 1-128 characters from A-Z a-z 0-9 . _ @ : -' });

/** Free-form labels an operator's systems keep on a key (team, ticket, owner): strings only, bounded. */
export const Metadata = z
  .record(z.string().max(100), z.string().max(1000))
  .refine((m) => Object.keys(m).length <= 50, { error: 'at most 50 entries' })
  .describe('Labels of your own (at most 50 strings); modelgate never reads them.');

/** A budget per window as the API shows it (docs/metering.md, "Budgets per window"). */
export const BudgetView = z
  .object({
    amount: z.number(),
    period: z.enum(['day', 'week', 'month']),
    timeZone: z.string(),
  })
  .describe(
    'What may be spent per day, ISO week or calendar month in an IANA time zone, beside the balance (403 budget_exhausted).',
  );

const budgetInput = budget
  .nullable()
  .optional()
  .describe('A budget per window {amount, period: day|week|month, timeZone (IANA, default UTC)}; null: none.');

/** A model name as a key of modelBudgets (zod drops a `__proto__` key: the handler refuses it before parsing). */
const modelName = z.string().min(1).max(256);

const modelBudgetsView = z
  .record(z.string(), BudgetView)
  .describe(
    "The key's budgets per window on single models, by the group's exact model name (403 model_budget_exhausted); {}: none.",
  );

const modelBudgetsPatch = z
  .record(modelName, budget.nullable())
  .refine((m) => Object.keys(m).length <= 256, { error: 'at most 256 models' })
  .nullable()
  .optional()
  .describe(
    "Merged into the key's budgets per model: a model with a budget sets it, a model with null removes it; null removes them all.",
  );

export const Key = z.object({
  id: z.string(),
  group: z.string(),
  balance: z.number().nullable().describe('What is left, net of spending; null: unlimited.'),
  disabled: z.boolean(),
  expiresAt: time.nullable(),
  limits: z.record(z.string(), z.number()).nullable(),
  budget: BudgetView.nullable(),
  modelBudgets: modelBudgetsView,
  metadata: z.record(z.string(), z.string()),
  source: z
    .enum(['api', 'config', 'store'])
    .describe(
      'api: created through this API (writable); config: defined in the YAML file (read only here); store: a PostgreSQL key.',
    ),
  createdAt: time.nullable(),
  previousSecretValidUntil: time
    .nullable()
    .describe('After a rotation with a grace period: until when the previous secret still works.'),
});

export const KeyCreate = z.strictObject({
  id: KeyId.optional().describe('Default: key- and 8 random hex digits.'),
  group: z.string().min(1),
  balance: amount.nullable().optional().describe('Absent or null: unlimited.'),
  expiresAt: time.nullable().optional(),
  disabled: z.boolean().optional(),
  limits: keyLimits.nullable().optional(),
  budget: budgetInput,
  modelBudgets: modelBudgets.nullable().optional(),
  metadata: Metadata.optional(),
});

export const KeyPatch = z
  .strictObject({
    group: z.string().min(1).optional(),
    expiresAt: time.nullable().optional(),
    disabled: z.boolean().optional(),
    limits: keyLimits.nullable().optional(),
    budget: budgetInput,
    modelBudgets: modelBudgetsPatch,
    metadata: Metadata.optional(),
  })
  .describe('Fields to change; a balance changes only through credits (never overwritten).');

export const IssuedKey = z.object({
  key: Key,
  secret: z.string().describe('The key itself: shown this once, stored only as its SHA-256.'),
});

export const Rotate = z.strictObject({
  gracePeriodSeconds: z
    .number()
    .int()
    .min(0)
    .max(30 * 86400)
    .optional()
    .describe('How long the previous secret keeps working (default 0: it stops at once).'),
});

export const CreditCreate = z.strictObject({
  amount: amount
    .refine((n) => n !== 0, { error: 'must not be 0' })
    .describe('Added to the balance; negative: a debit.'),
  idempotencyKey: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe(
      'The same key credits once: a retry answers the first credit. Required here or as the Idempotency-Key header.',
    ),
  reason: z.string().max(500).optional(),
});

export const Credit = z.object({
  id: z.string(),
  keyId: z.string(),
  amount: z.number(),
  balance: z.number().nullable().describe('The balance after this credit.'),
  idempotencyKey: z.string(),
  reason: z.string().nullable(),
  time,
  replayed: z.boolean().describe('true: this idempotency key had credited already; nothing moved this time.'),
});

export const UsageEntry = z.object({
  time,
  requestId: z.string(),
  keyId: z.string(),
  group: z.string(),
  model: z.string(),
  protocol: z.string(),
  inputTokens: z.number(),
  outputTokens: z.number(),
  cachedInputTokens: z.number(),
  cost: z.number(),
  priced: z.boolean(),
  estimated: z.string().nullable(),
  provisional: z.boolean(),
});

export const Usage = z.object({
  entries: z.array(UsageEntry),
  totals: z
    .object({ requests: z.number(), inputTokens: z.number(), outputTokens: z.number(), cost: z.number() })
    .describe('Of every entry the filter selects, all pages.'),
  nextCursor: z.string().nullable().describe('The next page: pass it as `cursor`; null: this was the last.'),
});

export const AuditEntry = z.object({
  id: z.string(),
  time,
  actor: z.string().describe('The id of the management token (or `cli`) that made the change.'),
  address: z.string().nullable().describe('The source address of the request.'),
  requestId: z.string().nullable(),
  action: z
    .string()
    .describe(
      'key.create, key.update, key.delete, key.rotate, key.credit, token.create, token.delete, group.create, group.update, group.delete, webhook.create, webhook.update, webhook.delete, webhook.rotate-secret',
    ),
  target: z.string(),
  before: z.unknown().nullable(),
  after: z.unknown().nullable(),
});

export const Audit = z.object({
  entries: z.array(AuditEntry),
  nextCursor: z.string().nullable().describe('The next page: pass it as `cursor`; null: this was the last.'),
});

export const GroupModel = z.object({
  name: z.string(),
  protocols: z.array(z.string()).nullable(),
  available: z.boolean(),
  price: z.object({ input: z.number(), output: z.number(), cachedInput: z.number().nullable() }).nullable(),
  maxOutputTokens: z
    .number()
    .nullable()
    .describe("The provider's output cap: a request naming no maximum is held at it; null: meter.maxOutputTokens."),
});

export const Group = z.object({
  name: z.string(),
  available: z.boolean(),
  models: z.array(GroupModel),
  limits: z.record(z.string(), z.number()).nullable(),
  budget: BudgetView.nullable().describe("What all the group's keys together may spend per window."),
});

/** A model's output cap in a group, as the API writes it. */
const maxOutputTokens = z
  .number()
  .int()
  .min(1)
  .max(100_000_000)
  .nullable()
  .optional()
  .describe("The provider's output cap: a request naming no maximum is held at it; null: meter.maxOutputTokens.");

/** One model's change in a group (by name): added when new, changed field by field, or removed. */
export const GroupModelChange = z
  .strictObject({
    name: configModelName.describe('The model name clients send (exact: case and spaces matter).'),
    remove: z
      .literal(true)
      .optional()
      .describe('true: remove the model from the group (its keys get 403 model_not_in_group); no other field with it.'),
    protocols: z
      .array(z.enum(PROTOCOLS))
      .min(1)
      .nullable()
      .optional()
      .describe('The protocol styles it is served on; null: any (the default of a new model).'),
    available: z
      .boolean()
      .optional()
      .describe('false: in the group, but its channel is down (403 model_unavailable); default of a new model: true.'),
    price: price
      .nullable()
      .optional()
      .describe(
        "Its price per million tokens (the config's schema: input, output, cachedInput, longContext, audioInput, audioOutput, imageOutput, tools); null: none (metered, costs nothing).",
      ),
    maxOutputTokens,
  })
  .refine((m) => !m.remove || Object.keys(m).every((k) => k === 'name' || k === 'remove'), {
    error: 'remove takes no other field',
  });

/** A model of a group created through the API: its name and, optionally, the rest (the defaults of a new model). */
export const GroupModelCreate = z.strictObject({
  name: configModelName.describe('The model name clients send (exact: case and spaces matter).'),
  protocols: z
    .array(z.enum(PROTOCOLS))
    .min(1)
    .nullable()
    .optional()
    .describe('The protocol styles it is served on; null or absent: any.'),
  available: z.boolean().optional().describe('false: in the group, but its channel is down (default true).'),
  price: price
    .nullable()
    .optional()
    .describe("Its price per million tokens (the config's schema); null or absent: none (metered, costs nothing)."),
  maxOutputTokens,
});

export const GroupCreate = z
  .strictObject({
    name: z
      .string()
      .regex(GROUP_NAME, { error: 'must be 1-128 characters from A-Z a-z 0-9 . _ @ : -' })
      .refine((n) => !['__proto__', 'constructor', 'prototype'].includes(n), {
        error: 'JavaScript reserves this name; choose another',
      }),
    available: z.boolean().optional().describe('false: every key of the group gets 403 group_unavailable.'),
    models: z
      .array(GroupModelCreate)
      .max(1000)
      .refine((ms) => new Set(ms.map((m) => m.name)).size === ms.length, { error: 'a model named twice' })
      .describe('Its models, in order.'),
    limits: keyLimits.nullable().optional().describe('The default limits of each key of the group; null: none.'),
    budget: budgetInput,
  })
  .describe("A new group (PostgreSQL; on the file store, kept in modelgate's own state beside the config).");

export const GroupPatch = z
  .strictObject({
    available: z.boolean().optional().describe('false: every key of the group gets 403 group_unavailable.'),
    models: z
      .array(GroupModelChange)
      .min(1)
      .max(1000)
      .optional()
      .describe(
        'Changes of models by name, in order: a new name is added (at the end), a known one changed, `remove: true` removes it; the others are kept as they are.',
      ),
    limits: keyLimits.nullable().optional().describe('The default limits of each key of the group; null: none.'),
    budget: budgetInput,
  })
  .describe(
    "Fields to change (PostgreSQL, or a group created through the API on the file store; the config file's groups change there).",
  );

export const Delivery = z.object({
  webhookId: z.string().describe("The webhook it went to (`config`: the config file's meter.budgetAlerts)."),
  eventId: z
    .string()
    .describe("The alert's id (also the x-modelgate-event-id header): stable per budget, window and threshold."),
  type: z.string().describe('budget.threshold'),
  subject: z.string().describe('Whose budget: key:<id>, group:<name> or model:<key id>:<model>.'),
  threshold: z.number().describe("Percent of the budget's amount."),
  status: z
    .enum(['pending', 'delivered', 'failed'])
    .describe('pending: queued or retrying; failed: every attempt failed.'),
  attempts: z.number().int(),
  lastStatus: z.number().int().nullable().describe('The HTTP status of the last attempt, if it got one.'),
  lastError: z
    .string()
    .nullable()
    .describe('http_<status>, timeout, or a system error code (never the URL or the secret).'),
  createdAt: time,
  updatedAt: time,
});

export const DeliveryList = z.object({
  deliveries: z.array(Delivery),
  nextCursor: z.string().nullable().describe('The next page: pass it as `cursor`; null: this was the last.'),
});

const webhookUrl = z
  .string()
  .min(1)
  .max(2048)
  .superRefine((v, ctx) => {
    const why = webhookUrlProblem(v);
    if (why) ctx.addIssue({ code: 'custom', message: why });
  })
  .describe(
    'Where alerts are POSTed: http:// or https://, no user or password, no fragment. A query string is kept for delivery but never answered, audited or logged.',
  );

const thresholds = z
  .array(z.number().gt(0).max(1000))
  .min(1)
  .max(20)
  .describe(
    "Percentages of a budget's amount at which an alert fires, each once per window (default 50, 80, 95, 100).",
  );

const subjects = z
  .array(z.string().regex(/^(key|group):[^\u0000]{1,256}$/, { error: 'must be key:<key id> or group:<group name>' }))
  .min(1)
  .max(100)
  .nullable()
  .describe(
    "The budgets it watches: key:<id> (the key's budget and its budgets per model) or group:<name>; null or absent: every budget.",
  );

export const WebhookCreate = z.strictObject({
  id: KeyId.refine((v) => !RESERVED_WEBHOOK_IDS.includes(v), { error: 'config and deliveries are reserved ids' })
    .optional()
    .describe('Default: wh- and 8 random hex digits.'),
  url: webhookUrl,
  thresholds: thresholds.optional(),
  subjects: subjects.optional(),
  enabled: z.boolean().optional().describe('false: kept, but sent nothing (default true).'),
  description: z.string().max(500).nullable().optional(),
});

export const WebhookPatch = z
  .strictObject({
    url: webhookUrl.optional(),
    thresholds: thresholds.optional(),
    subjects: subjects.optional(),
    enabled: z.boolean().optional(),
    description: z.string().max(500).nullable().optional(),
  })
  .describe('Fields to change; the secret changes only through rotate-secret.');

export const Webhook = z.object({
  id: z.string(),
  url: z.string().describe('Scheme, host, port and path: never the query string.'),
  urlHasQuery: z.boolean().describe('true: the URL has a query string (kept for delivery, never shown).'),
  thresholds: z.array(z.number()),
  subjects: z.array(z.string()).nullable(),
  enabled: z.boolean(),
  description: z.string().nullable(),
  source: z
    .enum(['api', 'config'])
    .describe('api: created through this API; config: meter.budgetAlerts of the config file (read only here).'),
  createdAt: time.nullable(),
  secretRotatedAt: time.nullable(),
});

export const WebhookList = z.object({ webhooks: z.array(Webhook) });

export const IssuedWebhook = z.object({
  webhook: Webhook,
  secret: z
    .string()
    .describe(
      'The signing secret (x-modelgate-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">): shown this once.',
    ),
});

export const KeyList = z.object({ keys: z.array(Key) });
export const GroupList = z.object({ groups: z.array(Group) });

export const Token = z.object({
  id: z.string(),
  scope: z.enum(SCOPES),
  description: z.string().nullable(),
  createdAt: time.nullable(),
  source: z
    .enum(['api', 'config'])
    .describe('api: made by `modelgate admin-tokens new` (revocable here); config: adminTokens in the config file.'),
});

export const TokenList = z.object({ tokens: z.array(Token) });

export const TokenCreate = z.strictObject({
  id: KeyId.optional().describe('Default: tok- and 8 random hex digits.'),
  scope: z.enum(SCOPES),
  description: z.string().max(500).optional(),
});

export const IssuedToken = z.object({
  token: Token,
  secret: z.string().describe('The management token itself: shown this once, stored only as its SHA-256.'),
});

export const ApiError = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    hint: z.string().optional(),
  }),
});

export const ScopeName = z.enum(SCOPES);

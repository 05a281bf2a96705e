/**
 * The admin API's OpenAPI 3.1 document, generated from the operation table and its zod schemas
 * (z.toJSONSchema). The same document is committed as docs/admin-api.openapi.json (a test checks
 * it equals what GET /admin/v1/openapi.json serves) and the tests' typed client is generated from it.
 */
import { z } from 'zod';
import { OPERATIONS, type Operation } from './operations';
import {
  ApiError,
  Audit,
  AuditEntry,
  Credit,
  CreditCreate,
  Delivery,
  DeliveryList,
  Group,
  GroupCreate,
  GroupList,
  GroupModel,
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
  UsageEntry,
  IssuedWebhook,
  Webhook,
  WebhookCreate,
  WebhookList,
  WebhookPatch,
} from './schemas';

const REF = (id: string): string => `#/components/schemas/${id}`;

type Json = Record<string, unknown>;

/** The component schemas: request bodies as zod reads them (input), answers as they are written (output). */
function components(): Record<string, Json> {
  const requests = z.registry<{ id: string }>();
  for (const [id, s] of Object.entries({
    KeyCreate,
    KeyPatch,
    Rotate,
    CreditCreate,
    GroupPatch,
    GroupCreate,
    TokenCreate,
    WebhookCreate,
    WebhookPatch,
  }))
    requests.add(s, { id });
  const answers = z.registry<{ id: string }>();
  for (const [id, s] of Object.entries({
    Key,
    IssuedKey,
    KeyList,
    Credit,
    UsageEntry,
    Usage,
    AuditEntry,
    Audit,
    GroupModel,
    Group,
    GroupList,
    Token,
    TokenList,
    IssuedToken,
    Delivery,
    DeliveryList,
    Webhook,
    WebhookList,
    IssuedWebhook,
    Error: ApiError,
  }))
    answers.add(s, { id });
  const out: Record<string, Json> = {};
  for (const [registry, io] of [
    [requests, 'input'],
    [answers, 'output'],
  ] as const) {
    const { schemas } = z.toJSONSchema(registry, { target: 'draft-2020-12', io, uri: REF, unrepresentable: 'any' });
    for (const [id, s] of Object.entries(schemas)) {
      const { $schema: _s, $id: _i, ...rest } = s as Json;
      out[id] = rest;
    }
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : 1)));
}

const idOf = (schema: z.ZodType, ids: Record<string, z.ZodType>): string => {
  const found = Object.entries(ids).find(([, s]) => s === schema);
  if (!found) throw new Error('an operation names a schema without a component id');
  return found[0];
};

const REASON_TEXT: Record<number, string> = {
  400: 'Not JSON, or the body is too large',
  401: 'No management token, or not a valid one (a model key is not one)',
  403: "The token's scope does not allow this",
  404: 'Not found',
  409: 'Conflicts with the current state (a key, group or webhook defined in the config file, an id taken, an idempotency key used for another credit, a group that still has keys)',
  415: 'Not application/json',
  422: 'A field or parameter is not valid',
  429: 'Too many failed attempts from this address',
  503: 'The store could not complete the request',
};

function operation(op: Operation): Json {
  const ids = {
    KeyCreate,
    KeyPatch,
    Rotate,
    CreditCreate,
    GroupPatch,
    GroupCreate,
    TokenCreate,
    IssuedToken,
    Key,
    IssuedKey,
    KeyList,
    Credit,
    Usage,
    Audit,
    Group,
    GroupList,
    Token,
    TokenList,
    DeliveryList,
    WebhookCreate,
    WebhookPatch,
    Webhook,
    WebhookList,
    IssuedWebhook,
  };
  const pathParam = /\{(\w+)\}/.exec(op.path)?.[1];
  const parameters = [
    ...(pathParam ? [{ name: pathParam, in: 'path', required: true, schema: { type: 'string', minLength: 1 } }] : []),
    ...(op.query ?? []).map((q) => ({
      name: q.name,
      in: 'query',
      required: false,
      description: q.description,
      schema: q.type === 'integer' ? { type: 'integer', minimum: 1, maximum: 1000 } : { type: 'string' },
    })),
    ...(op.id === 'creditKey'
      ? [
          {
            name: 'Idempotency-Key',
            in: 'header',
            required: false,
            description: "The idempotency key, instead of the body's idempotencyKey.",
            schema: { type: 'string', minLength: 1, maxLength: 200 },
          },
        ]
      : []),
  ];
  const error = { content: { 'application/json': { schema: { $ref: REF('Error') } } } };
  const responses: Json = {
    [String(op.status)]: {
      description: op.summary,
      content: { 'application/json': { schema: { $ref: REF(idOf(op.answer, ids)) } } },
    },
  };
  // 422 on every operation: any parameter may hold what no store can keep (a NUL character).
  const statuses = [...new Set([...(op.body ? [400, 415] : []), 401, 403, ...op.refusals, 422, 429, 503])].sort(
    (x, y) => x - y,
  );
  for (const status of statuses) responses[String(status)] = { description: REASON_TEXT[status], ...error };
  return {
    operationId: op.id,
    summary: op.summary,
    description: `Scope: ${op.scope}${op.scope === 'read' ? ' (every scope)' : op.scope === 'admin' ? '' : ' or admin'}.`,
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(op.body
      ? {
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: REF(idOf(op.body, ids)) } } },
          },
        }
      : {}),
    responses,
  };
}

/** The document. */
export function openApiDocument(): Json {
  const paths: Record<string, Json> = {};
  for (const op of OPERATIONS) (paths[op.path] ??= {})[op.method.toLowerCase()] = operation(op);
  return {
    openapi: '3.1.0',
    info: {
      title: 'modelgate admin API',
      version: '1',
      description:
        "Keys, balances, usage and the audit log of a modelgate gateway (docs/admin-api.md). Served on modelgate's HTTP port; authenticated by a management token (`modelgate admin-tokens new`), never by a model key.",
    },
    servers: [{ url: 'http://127.0.0.1:9192' }],
    security: [{ managementToken: [] }],
    paths,
    components: {
      securitySchemes: {
        managementToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'A management token: mg-admin- and 43 characters.',
        },
      },
      schemas: components(),
    },
  };
}

/** The document as committed and served: JSON, two-space indents, a final newline. */
export function openApiText(): string {
  return `${JSON.stringify(openApiDocument(), null, 2)}\n`;
}

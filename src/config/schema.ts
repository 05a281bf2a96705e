/**
 * The shape of modelgate.yaml, declared once: the TypeScript types (ConfigFile), the validation
 * (load.ts turns its issues into one problem per line, each with its path) and the published JSON
 * Schema (modelgate.schema.json, `npm run gen:schema`, which editors use to complete and check the
 * file) all come from here.
 *
 * Conventions of the file, kept from the hand-written validator this replaced: an optional setting
 * that is absent, or `null` (a key with no value in YAML), takes its default, except where `null`
 * was always refused (routes.altPrefix, routes.queryKeyParams, log.level, a credential's prefix, a
 * model's protocols); header names and key hashes are read case-insensitively and kept lowercase;
 * every mapping refuses unknown fields. Rules across fields (duplicates, a key's group, the
 * version prefixes, a credential's variable being set) are refinements that run even when other
 * parts are invalid, so one read lists every problem.
 */
import { z } from 'zod';
import { HEADER_PREFIX } from '../contract/headers';
import { BUDGET_PERIODS, isTimeZone } from '../store/budget-window';
import { PROTOCOLS, type Protocol } from '../store/store';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
/** An HTTP field name (RFC 9110 token), at most 128 characters; read in any case, kept lowercase. */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/;
export const KEY_ID = /^[A-Za-z0-9._@:-]{1,128}$/;
const SHA256_HEX = /^[0-9a-fA-F]{64}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const ALT_PREFIX = /^\/[A-Za-z0-9._~-]{1,31}$/;
const STORE = /^(file$|postgres(ql)?:\/\/)/;
/** host:port; an IPv6 host in brackets. */
const HOST_PORT = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/;
/** An upstream: scheme and host (and port), no path: routes forward the client's path as it is. */
const UPSTREAM_URL = /^https?:\/\/(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?\/?$/;
/** The gateway's public address as clients see it; no "%" (Envoy header values are format strings). */
const BASE_URL = /^https?:\/\/[^\s%/?#]+(\/[^\s%?#]*[^\s%?#/])?$/;
/**
 * Model and group names become upstream header values (x-modelgate-model, x-modelgate-group), and
 * Envoy with validate_mutations answers 500 to an invalid one: printable ASCII, no edge spaces.
 */
export const MODEL_NAME = /^[\x21-\x7e](?:[\x20-\x7e]{0,254}[\x21-\x7e])?$/;
export const GROUP_NAME = /^[A-Za-z0-9._@:-]{1,128}$/;
const NAME_RULE = 'printable ASCII without leading or trailing spaces, at most 256 characters';
const ISO_RULE = 'must be an ISO 8601 date-time such as 2027-01-01T00:00:00Z';
const NON_EMPTY = 'must be a non-empty string';

/**
 * Date.parse alone reads "1" as the year 2001 and "2027-02-30" as March 2nd: accept only the ISO
 * 8601 forms the admin CLI accepts (cli/keys.ts parseExpires), with a day that exists.
 */
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

/** Epoch milliseconds of an expiresAt value, NaN when it is not one. */
export function expiryTime(v: string | Date): number {
  if (v instanceof Date) return v.getTime();
  const m = ISO_TIME.exec(v);
  if (!m) return NaN;
  const day = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  if (day.getUTCMonth() !== Number(m[2]) - 1 || day.getUTCDate() !== Number(m[3])) return NaN;
  return Date.parse(v);
}

/*
 * One problem per value: no check is marked `abort` (an aborted issue would also stop the
 * cross-field rules below), so checks that could fail together either share one message (load.ts
 * lists a repeated line once) or are one check.
 */

/** A non-empty string, optionally matching `pattern` (none matches ''; `what` completes "must be ..."). */
function text(pattern?: RegExp, what?: string) {
  const s = z.string({ error: NON_EMPTY });
  return pattern
    ? s.regex(pattern, { error: (iss) => (iss.input === '' ? NON_EMPTY : `must be ${what}`) })
    : s.min(1, { error: NON_EMPTY });
}

/** (zod's own `.int()` marks its issue as aborting, hence `multipleOf(1)`, shown as an integer.) */
function integer(min: number, max: number) {
  const error = `must be an integer from ${min} to ${max}`;
  return z.number({ error }).multipleOf(1, { error }).min(min, { error }).max(max, { error }).meta({ type: 'integer' });
}

const flag = () => z.boolean({ error: 'must be true or false' });

/** Absent or null: `dflt` (which editors see as the default). */
function orDefault<T extends z.ZodType>(schema: T, dflt: z.input<T>) {
  return schema
    .nullish()
    .transform((v) => v ?? (schema.parse(dflt) as z.output<T>))
    .prefault(dflt as never);
}

/** A mapping with exactly these fields; the message lists them for an unknown one (see load.ts). */
function mapping<S extends z.ZodRawShape>(shape: S, notAMapping = 'must be a mapping') {
  const expected = `unknown field (expected one of: ${Object.keys(shape).join(', ')})`;
  return z.strictObject(shape, { error: (iss) => (iss.code === 'unrecognized_keys' ? expected : notAMapping) });
}

/**
 * Cross-field rules run even when parts failed (zod skips a refinement after a type error by
 * default), so they look at whatever parsed so far and check its type themselves.
 */
const always = { when: () => true };

const isMapping = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);

const headerList = (dflt: string[], description: string) =>
  orDefault(
    z
      .array(text(HEADER_NAME, 'an HTTP header name of at most 128 characters').toLowerCase(), {
        error: 'must be a non-empty list of header names',
      })
      .min(1, { error: 'must be a non-empty list of header names' }),
    dflt,
  ).describe(description);

const routes = mapping({
  altPrefix: text(ALT_PREFIX, 'one path segment of at most 32 characters with a leading / and no trailing /, e.g. /alt')
    .refine((p) => p !== '/v1' && p !== '/v1beta', { error: 'must differ from /v1 and /v1beta' })
    .prefault('/alt')
    .describe(
      "The alternate route prefix (a neutral stand-in for a vendor-named segment); must match Envoy's routes. Not /v1 or /v1beta.",
    ),
  bearerHeaders: headerList(
    ['authorization', 'x-api-key'],
    'Headers that carry the key where `Authorization: Bearer <key>` is expected (chat, responses, embeddings, messages, model lists, the alternate prefix). `authorization` is read as "Bearer <key>", the others as the key itself.',
  ),
  vendorHeaders: headerList(
    ['x-vendor-api-key', 'x-goog-api-key'],
    'Headers that carry the key on /v1beta (x-goog-api-key is what Gemini SDKs send); {altPrefix}/v1beta accepts both lists.',
  ),
  queryKeyParams: z
    .array(text().toLowerCase(), { error: 'must be a list of query parameter names' })
    .prefault([
      'key',
      'api_key',
      'apikey',
      'api-key',
      'access_token',
      'x-api-key',
      'x-goog-api-key',
      'x-vendor-api-key',
    ])
    .describe('Query parameters that mean "a key in the URL" (401 key_in_url). Case-insensitive.'),
  maxJsonDepth: orDefault(integer(2, 100_000), 256).describe(
    'Bodies nested deeper than this are refused (400 body_invalid).',
  ),
});

const log = mapping({
  level: z
    .enum(LOG_LEVELS, {
      error: (iss) =>
        typeof iss.input === 'string' && iss.input !== '' ? `must be one of ${LOG_LEVELS.join(', ')}` : NON_EMPTY,
    })
    .prefault('info')
    .describe('pino log level.'),
  allows: orDefault(flag(), true).describe('false: log denials only (allows are still counted in /metrics).'),
});

const cache = mapping({
  maxEntries: orDefault(integer(1, 10_000_000), 100_000).describe(
    'Cached answers for existing keys and groups, per kind.',
  ),
  maxNotFound: orDefault(integer(1, 10_000_000), 20_000).describe(
    '"Not found" answers, per kind, in their own LRU: a flood of random keys stays within this bound and cannot evict real keys.',
  ),
  ttlSeconds: orDefault(integer(0, 86_400), 5).describe('How long a cached answer is used without asking the store.'),
  staleSeconds: orDefault(integer(0, 86_400), 300).describe(
    'How long a cached answer may stand in while the store cannot answer (PostgreSQL down).',
  ),
});

/** The gRPC secret: visible, header-safe characters (no "%": Envoy reads header values as format strings). */
export const GRPC_SECRET = /^[A-Za-z0-9._~+/=-]{32,512}$/;
export const GRPC_SECRET_RULE = '32 to 512 characters from A-Z a-z 0-9 . _ ~ + / = - (e.g. openssl rand -base64 32)';

const grpcSecret = mapping({
  env: text(ENV_NAME, 'an environment variable name')
    .nullish()
    .describe('The environment variable holding the secret (read at start).'),
  file: text()
    .nullish()
    .describe(
      'A file holding the secret (read at start; one trailing newline ignored); relative paths from the config file. Keep it mode 0600.',
    ),
}).superRefine((v, ctx) => {
  if (!isMapping(v as unknown)) return;
  const given = [v.env, v.file].filter((x) => x != null);
  if (given.length !== 1) ctx.addIssue({ code: 'custom', message: 'must name exactly one of env or file' });
}, always);

const grpcTls = mapping({
  certFile: text().describe(
    "modelgate's certificate (PEM, chain included) for its gRPC port; relative paths from the config file.",
  ),
  keyFile: text().describe('Its private key (PEM).'),
  clientCaFile: text().describe(
    "The CA (PEM) that signed Envoy's client certificate (gateway.authzTls.certFile): a connection without a certificate it signed is refused in the TLS handshake. Use a CA of its own for this port.",
  ),
});

const grpc = mapping({
  secret: grpcSecret
    .nullish()
    .describe(
      `A shared secret Envoy sends with every gRPC call (authorization: Bearer <secret>, rendered into the bundle as grpc_service initial_metadata): a call without it gets no decision (a Check is denied with 503 authz_unauthenticated, a meter stream or health call fails UNAUTHENTICATED). {env: NAME} or {file: path}; ${GRPC_SECRET_RULE}. Unset with no grpc.tls: \`modelgate up\` uses a secret of its own install, <config name>.grpc-secret beside the config (mode 0600, made once; docs/security.md); \`modelgate serve\` none.`,
    ),
  tls: grpcTls
    .nullish()
    .describe(
      "mTLS: the gRPC port speaks TLS and requires a client certificate signed by clientCaFile. Envoy's side is gateway.authzTls (both or neither).",
    ),
  maxReceiveMessageBytes: orDefault(integer(1024 * 1024, 1024 * 1024 * 1024), 40 * 1024 * 1024).describe(
    "Largest CheckRequest accepted; keep it above Envoy's with_request_body.max_request_bytes (32 MiB in envoy/envoy.yaml).",
  ),
  transport: z
    .enum(['builtin', 'node'], { error: 'must be builtin or node' })
    .prefault('builtin')
    .describe(
      "The gRPC port's HTTP/2: builtin (modelgate's own, one write per answer, about a third of node's CPU per Check) or node (node:http2).",
    ),
});

const credential = mapping({
  header: text(HEADER_NAME, 'an HTTP header name')
    .toLowerCase()
    .refine((h) => !h.startsWith(HEADER_PREFIX), {
      error: `must not be one of modelgate's own ${HEADER_PREFIX}* headers`,
    })
    .describe('The upstream header to set, e.g. authorization.'),
  prefix: z.string({ error: 'must be a string' }).prefault('').describe('Written before the secret, e.g. "Bearer ".'),
  env: text(ENV_NAME, 'an environment variable name').describe(
    'The environment variable holding the secret, read at start and on reload; it must be set and non-empty.',
  ),
});

/**
 * The upstream each protocol style's requests go to under the root (its `alt` twins all go to
 * upstream alt; config/load.ts upstreamOf, envoy/render-routes.ts routes them so).
 */
export const UPSTREAM_OF_STYLE: Readonly<Record<Protocol, 'chat' | 'messages' | 'generative'>> = {
  chat: 'chat',
  responses: 'chat',
  embeddings: 'chat',
  messages: 'messages',
  generative: 'generative',
};

/**
 * The form of earlier versions: one credential per protocol style, set on that style's requests under
 * the root and the alternate prefix alike, so the operator's provider keys reached the alt upstream.
 * It cannot be read as it was meant (the alt upstream would keep getting every provider's key), so
 * each entry is refused with the place it belongs now.
 */
const legacyCredentials = z.unknown().superRefine((v, ctx) => {
  if (v == null || (isMapping(v) && Object.keys(v).length === 0)) return;
  if (!isMapping(v)) {
    ctx.addIssue({
      code: 'custom',
      message:
        'removed: credentials are set per upstream, as gateway.upstreams.<chat|messages|generative|alt>.credential',
    });
    return;
  }
  for (const [style, c] of Object.entries(v)) {
    if (c == null) continue;
    const family = Object.hasOwn(UPSTREAM_OF_STYLE, style) ? UPSTREAM_OF_STYLE[style as Protocol] : undefined;
    ctx.addIssue({
      code: 'custom',
      path: [style],
      message: family
        ? `credentials are set per upstream now, so that a credential reaches only the provider it belongs to (this one also went to the alternate upstream): move it to gateway.upstreams.${family}.credential (the upstream then written as {url, credential}); the alt upstream gets a credential only from gateway.upstreams.alt.credential`
        : 'removed: credentials are set per upstream, as gateway.upstreams.<chat|messages|generative|alt>.credential',
    });
  }
}, always);

const upstream = mapping({
  credentials: legacyCredentials
    .optional()
    .meta({ deprecated: true, anyOf: [{ type: 'object', maxProperties: 0 }, { type: 'null' }] })
    .describe(
      'Removed: a credential is set per upstream, as gateway.upstreams.<name>.credential. An entry here is refused with the place it belongs now.',
    ),
});

const hostPort = (dflt: string, what: string) =>
  orDefault(text(HOST_PORT, 'host:port, e.g. 127.0.0.1:9191'), dflt).describe(what);

const server = mapping({
  grpc: hostPort(
    '127.0.0.1:9191',
    'Where `modelgate serve` listens for gRPC (ext_authz Check, health); --grpc and MODELGATE_GRPC_ADDR override it.',
  ),
  http: hostPort(
    '127.0.0.1:9192',
    'Where `modelgate serve` listens for HTTP (model lists, console, /metrics, /healthz, /readyz); --http and MODELGATE_HTTP_ADDR override it.',
  ),
});

const upstreamTarget = z
  .union(
    [
      text(UPSTREAM_URL, 'an http:// or https:// URL of a host (and port), without a path'),
      mapping({
        url: text(UPSTREAM_URL, 'an http:// or https:// URL of a host (and port), without a path').describe(
          'The provider, e.g. https://api.openai.com.',
        ),
        caFile: text()
          .nullish()
          .describe(
            "CA bundle that checks the provider's certificate (https only). Default /etc/ssl/certs/ca-certificates.crt.",
          ),
        credential: credential
          .nullish()
          .describe(
            'The operator\'s credential for this upstream, set by modelgate on every allowed request that goes to it (and to no other upstream), e.g. {header: authorization, prefix: "Bearer ", env: OPENAI_API_KEY}. Absent: requests to it carry no credential. Never written into Envoy\'s config.',
          ),
        cluster: text(/^[A-Za-z0-9_.:-]{1,200}$/, 'an Envoy cluster name')
          .nullish()
          .describe(
            'An Envoy cluster of your own that reaches this provider for `modelgate adopt`: its routes go there, so your TLS, retries and outlier detection apply, and adopt adds no cluster for this upstream. Absent: adopt adds the cluster upstream_<name>, rendered from url. The bundle (`envoy-config`, `up`) always renders its own.',
          ),
      }),
    ],
    { error: 'must be a URL or {url, caFile, credential, cluster}' },
  )
  .describe(
    'An upstream provider: a URL such as https://api.openai.com (TLS with certificate checking, SNI and Host from the name) or http://127.0.0.1:9300 (plain HTTP), or {url, caFile, credential}.',
  );

const authzTls = mapping({
  certFile: text().describe(
    "Envoy's client certificate (PEM) for modelgate's gRPC port, signed by grpc.tls.clientCaFile. Written into the bundle as given: use absolute paths.",
  ),
  keyFile: text().describe('Its private key (PEM).'),
  caFile: text().describe("The CA (PEM) that signed modelgate's certificate (grpc.tls.certFile)."),
  serverName: text(/^[A-Za-z0-9.-]{1,253}$/, 'a DNS name')
    .nullish()
    .describe(
      "The DNS name in modelgate's certificate: sent as SNI and required among its subject alternative names. Absent: any certificate caFile signed is accepted (give the port a CA of its own).",
    ),
});

const upstreams = mapping({
  chat: upstreamTarget
    .prefault('https://api.openai.com')
    .describe('Upstream of POST /v1/chat/completions, /v1/responses and /v1/embeddings (cluster upstream_chat).'),
  messages: upstreamTarget
    .prefault('https://api.anthropic.com')
    .describe('Upstream of POST /v1/messages and /v1/messages/count_tokens (cluster upstream_messages).'),
  generative: upstreamTarget
    .prefault('https://generativelanguage.googleapis.com')
    .describe('Upstream of POST /v1beta/models/{model}:{method} (cluster upstream_generative).'),
  alt: upstreamTarget
    .prefault('https://alt-upstream.example')
    .describe(
      'Upstream of every endpoint under routes.altPrefix (cluster upstream_alt); the path is forwarded as sent, prefix included. The default is a placeholder that never resolves: set it.',
    ),
});

const gateway = mapping({
  listen: hostPort(
    '0.0.0.0:10000',
    "Envoy's public listener: the {base_url} clients are configured with (HTTP/1.1 and h2c).",
  ),
  admin: hostPort('127.0.0.1:9901', "Envoy's admin interface (stats, clusters, config dump); keep it on loopback."),
  publicBaseUrl: text(
    BASE_URL,
    'an http:// or https:// URL without a trailing /, query or "%", e.g. https://llm.example.com',
  )
    .nullish()
    .describe(
      'The base address clients use, written into hints and the console instead of "{base_url}". Absent: hints say {base_url}.',
    ),
  authz: text(HOST_PORT, 'host:port, e.g. 127.0.0.1:9191')
    .nullish()
    .describe("Where Envoy reaches modelgate's gRPC listener; default server.grpc."),
  authzTls: authzTls
    .nullish()
    .describe(
      "Envoy's side of grpc.tls (mTLS to modelgate's gRPC port): its client certificate and the CA of modelgate's. Set with grpc.tls, or neither.",
    ),
  trustedProxyHops: orDefault(integer(0, 10), 0).describe(
    "Proxies in front of Envoy (load balancers) that append the client's address to x-forwarded-for, rendered as the connection manager's xff_num_trusted_hops: Envoy then takes the client's address that many hops from the right, for its access log and the console's per-address limit. 0: the address that connects to Envoy. Set it only when every request comes through those proxies (a client reaching Envoy directly could claim any address).",
  ),
  http: text(HOST_PORT, 'host:port, e.g. 127.0.0.1:9192')
    .nullish()
    .describe("Where Envoy reaches modelgate's HTTP listener; default server.http."),
  maxRequestBytes: orDefault(integer(1024, 1024 * 1024 * 1024), 32 * 1024 * 1024).describe(
    'Largest request body (ext_authz with_request_body.max_request_bytes): a bigger one is answered 413 body_too_large before any Check. grpc.maxReceiveMessageBytes must be at least this + 1 MiB.',
  ),
  authzTimeoutMs: orDefault(integer(50, 60_000), 1000).describe(
    'How long Envoy waits for a Check; past it the request is refused 503 authz_unavailable (fail closed).',
  ),
  maxConnections: orDefault(integer(1, 10_000_000), 50_000).describe(
    "Cap on Envoy's downstream connections (overload manager).",
  ),
  upstreamIdleTimeoutSeconds: orDefault(integer(1, 86_400), 300).describe(
    "How long an allowed request may go without a byte from the provider (route idle_timeout and the listener's stream_idle_timeout); past it the client gets 504 upstream_timeout. There is no total timeout: long streams are never cut.",
  ),
  upstreams: orDefault(upstreams, {}).describe('The provider behind each protocol family.'),
});

const consoleLimits = mapping({
  perAddressPerMinute: orDefault(integer(1, 1_000_000), 120).describe(
    'Console API requests one client address may make per minute (the address Envoy appended to x-forwarded-for); over it: 429 console_rate_limited.',
  ),
  perKeyPerMinute: orDefault(integer(1, 1_000_000), 60).describe(
    'Console API requests one key may make per minute, from any address; over it: 429 console_rate_limited.',
  ),
  maxTracked: orDefault(integer(100, 10_000_000), 10_000).describe(
    'Addresses and keys tracked at once (a bounded LRU each).',
  ),
});

const consoleSection = mapping({
  rateLimit: orDefault(consoleLimits, {}).describe('Per-minute limits of the console API (/console/api/...).'),
});

const postgres = mapping({
  queryTimeoutMs: orDefault(integer(10, 60_000), 1000).describe(
    'Bound on one lookup (server statement_timeout; the client gives up 100 ms later).',
  ),
  connectTimeoutMs: orDefault(integer(10, 60_000), 1000).describe(
    'Bound on opening a connection, and on waiting for a free one in a full pool.',
  ),
  poolSize: orDefault(integer(1, 1000), 10).describe('Connections per replica for lookups (plus one for LISTEN).'),
  heartbeatMs: orDefault(integer(100, 60_000), 1000).describe(
    'How long a silently dead LISTEN connection can go unnoticed.',
  ),
});

const usageCeiling = mapping({
  inputTokens: orDefault(integer(1, 1_000_000_000), 10_000_000).describe(
    'Most input tokens one request may report; more is implausible: the meter estimates instead.',
  ),
  outputTokens: orDefault(integer(1, 1_000_000_000), 1_000_000).describe(
    'Most output tokens one request may report; more is implausible: the meter estimates instead.',
  ),
});

const meter = mapping({
  enabled: orDefault(flag(), true).describe(
    "Meter responses and debit balances by tokens x price: Envoy's meter filter keeps each response's last bytes and its gRPC access log reports every request's end to modelgate's gRPC port.",
  ),
  mode: z
    .enum(['soft', 'strict'], { error: 'must be soft or strict' })
    .prefault('soft')
    .describe(
      "soft: no store round trip at Check time; a key's requests in flight on this replica are held against its cached balance at their maximum cost, and one request may always run while the balance is positive (overspend: at most one request's maximum per replica). strict: the maximum cost is reserved in the store first and the balance never goes below zero while the upstream honours the request's maximum.",
    ),
  unmeteredStreams: z
    .enum(['estimate', 'deny', 'allow'], { error: 'must be estimate or deny' })
    .prefault('estimate')
    .describe(
      'A streamed chat completion without stream_options.include_usage reports no usage. estimate: serve it and debit an estimate (allow is an older name for it); deny: 400 stream_usage_required with a hint.',
    ),
  hostedTools: z
    .enum(['deny', 'allow'], { error: 'must be deny or allow' })
    .prefault('deny')
    .describe(
      "A request declaring a tool the provider runs and bills per call besides tokens (web search, file search, code containers, image generation, Gemini's grounding) that the model's price (price.tools) does not name. deny: 400 hosted_tool_unpriced with a hint; allow: serve it, that tool's per-call fees unpriced (neither debited nor in the overspend bound). Priced tools are served and debited per call either way.",
    ),
  maxHostedToolCalls: orDefault(integer(1, 10_000), 10).describe(
    "Calls of hosted tools a request that declares priced ones may make at most, when it names no maximum itself (Responses max_tool_calls, Anthropic max_uses): in its maximum cost (strict mode's reservation, soft mode's hold), and what it is debited when its answer is cut or unreadable.",
  ),
  serviceTiers: z
    .enum(['deny', 'allow'], { error: 'must be deny or allow' })
    .prefault('deny')
    .describe(
      "A request asking for a tier the provider bills above the model's price (OpenAI service_tier priority or scale, Anthropic speed fast, inference_geo other than global). deny: 400 service_tier_unpriced with a hint; allow: serve it, debited at the model's standard price (the difference is outside the overspend bound).",
    ),
  modalities: z
    .enum(['deny', 'allow'], { error: 'must be deny or allow' })
    .prefault('deny')
    .describe(
      'A request to a priced model that sends audio (chat input_audio, a Gemini part whose mimeType is audio/* or video/*) or asks for audio or image output (chat modalities or audio, Gemini responseModalities or speechConfig), whose price names no audioInput, audioOutput or imageOutput. deny: 400 modality_unpriced with a hint; allow: serve it, its tokens of that modality debited at the highest price the model has for their direction (logged as a warning).',
    ),
  reasoningModels: orDefault(z.array(z.string().min(1).max(200)).max(1000), [
    'o1*',
    'o3*',
    'o4*',
    'gpt-5*',
    'gpt-6*',
    'gpt-oss*',
    'codex*',
    'gemini-2.5*',
    'gemini-3*',
    'gemini-*latest',
    '*thinking*',
    '*reasoner*',
    'deepseek-r*',
    'qwq*',
    'qwen3*',
    'magistral*',
    'grok-3-mini*',
    'grok-4*',
  ]).describe(
    "Models that reason without being asked (glob patterns, * any characters, matched against the name and its last / segment without an ft: prefix): when their usage is missing (a stream without include_usage, a cut stream, an answer without usage) the output is debited at the request's maximum, since reasoning tokens are billed and never shown. A request that asks for reasoning (reasoning_effort, reasoning, thinking, thinkingConfig) is treated so on any model.",
  ),
  maxOutputTokens: orDefault(integer(1, 100_000_000), 32768).describe(
    "Output tokens a request may produce when neither the request (max_tokens and its aliases) nor the model (maxOutputTokens) names a maximum: its maximum cost (strict mode's reservation, soft mode's hold).",
  ),
  referencedInputTokens: orDefault(integer(0, 100_000_000), 200_000).describe(
    'Input tokens counted for input the body only references (previous_response_id, conversation, cachedContent, a stored prompt) and for each part the provider counts beyond its bytes (an image, audio, a file or document, a file id or URL, fetched pages, a remote MCP server): in the maximum cost, and (once) in an estimate when the provider reports no input.',
  ),
  usageCeiling: orDefault(usageCeiling, {}).describe(
    "The most usage one request may report; above it (or negative, or not a number) the provider's figures are replaced by an estimate (marked implausible).",
  ),
  leases: orDefault(flag(), true).describe(
    "Strict mode on PostgreSQL: each replica leases a slice of a key's balance in one statement and reserves from it in memory (no round trip per request); false: one reservation statement per request, which also settles a request whose replica died before any report reached another one.",
  ),
  reservationSeconds: orDefault(integer(1, 86_400), 900).describe(
    'A request whose end is not reported within this long settles at its maximum cost, provisionally (a later report replaces it); in strict mode its reservation does the same.',
  ),
  drainSeconds: orDefault(integer(0, 3600), 25).describe(
    'On shutdown, how long modelgate waits for the reports of requests still running before it settles them at their maximum, provisionally.',
  ),
  budgetAlerts: mapping(
    {
      url: z
        .string({ error: 'must be an http:// or https:// URL' })
        .regex(/^https?:\/\/[^\s]+$/, { error: 'must be an http:// or https:// URL' })
        .describe('Where alerts are POSTed (JSON).'),
      secretEnv: text(ENV_NAME, 'an environment variable name').describe(
        'The environment variable holding the HMAC-SHA256 secret each delivery is signed with (x-modelgate-signature: t=<unix seconds>,v1=<hex of HMAC over "<t>.<body>">).',
      ),
      thresholds: orDefault(
        z
          .array(
            z
              .number({ error: 'must be a percentage' })
              .gt(0, { error: 'must be above 0' })
              .max(1000, { error: 'must be at most 1000' }),
            { error: 'must be a list of percentages' },
          )
          .min(1)
          .max(20),
        [50, 80, 95, 100],
      ).describe("Percentages of a budget's amount at which an alert fires, each once per window."),
    },
    'must be a mapping {url, secretEnv, thresholds}',
  )
    .nullish()
    .describe(
      'Alerts when a budget per window (of a key or group) reaches its thresholds, by webhook: signed, retried with backoff, each event with an id stable per budget, window and threshold (docs/metering.md, "Budget alerts"). Read at start.',
    ),
  stateFile: text()
    .nullish()
    .describe(
      'File store: where balances spent are kept (JSON, written atomically); relative paths from the config file. Default: beside the config, <name>.state.json.',
    ),
});

/** The largest limit: the rate limit service's counters and limits are 32-bit. */
export const MAX_LIMIT = 4_294_967_295;

/** Rate limits (docs/rate-limits.md): absent or null, none. */
const limitFields = {
  rpm: integer(1, MAX_LIMIT)
    .nullish()
    .describe(
      'Requests per minute (a fixed window, counted across every replica by the rate limit engine); over it: 429 rate_limited.',
    ),
  tpm: integer(1, MAX_LIMIT)
    .nullish()
    .describe(
      'Tokens per minute: each response is charged its real token count when it ends; once the tokens used in the window reach it, 429 tokens_rate_limited until the window resets.',
    ),
  rpd: integer(1, MAX_LIMIT).nullish().describe('Requests per day (UTC); over it: 429 rate_limited.'),
  tpd: integer(1, MAX_LIMIT).nullish().describe('Tokens per day (UTC); once reached: 429 tokens_rate_limited.'),
};

export const keyLimits = mapping(
  {
    ...limitFields,
    inFlight: integer(1, 1_000_000)
      .nullish()
      .describe(
        'Requests in flight at once, per modelgate replica (released when the response ends); over it: 429 concurrency_limited. With R replicas a key can have up to R x inFlight.',
      ),
  },
  'must be a mapping of limits {rpm, tpm, rpd, tpd, inFlight}',
);

/** A budget per window (meter/budgets.ts): admin API resources use the same schema (admin/schemas.ts). */
export const budget = mapping(
  {
    amount: z
      .number({ error: 'must be a number > 0' })
      .positive({ error: 'must be a number > 0' })
      .refine(Number.isFinite, { error: 'must be a finite number' })
      .describe(
        "What the window may spend, in the balance's unit: over it, 403 budget_exhausted (beside the balance: the tighter refuses).",
      ),
    period: z
      .enum(BUDGET_PERIODS, { error: `must be one of ${BUDGET_PERIODS.join(', ')}` })
      .describe('day, week (ISO: Monday to Monday) or month (calendar month: 28 to 31 days).'),
    timeZone: z
      .string({ error: 'must be an IANA time zone name' })
      .refine(isTimeZone, { error: 'must be an IANA time zone name such as UTC or Europe/Berlin' })
      .prefault('UTC')
      .describe(
        'The IANA time zone whose midnight starts a window (a day across a daylight saving change lasts 23 or 25 hours); default UTC.',
      ),
  },
  'must be a mapping {amount, period, timeZone}',
);

/** The most models one key may have budgets of. */
export const MAX_MODEL_BUDGETS = 256;

/** A key's budgets per model (meter/budgets.ts): the admin API uses the same schema (admin/schemas.ts). */
export const modelBudgets = z
  .record(
    z
      .string()
      .min(1, { error: 'must be a model name' })
      .max(256, { error: 'must be a model name of at most 256 characters' }),
    budget,
    { error: 'must be a mapping of model name to budget {amount, period, timeZone}' },
  )
  .refine((m) => Object.keys(m).length <= MAX_MODEL_BUDGETS, { error: `at most ${MAX_MODEL_BUDGETS} models` })
  .describe(
    "What the key may spend per window on one model, by the group's exact model name (403 model_budget_exhausted), beside its budget and balance: all hold.",
  );

const modelLimits = mapping(limitFields, 'must be a mapping of limits {rpm, tpm, rpd, tpd}');

const rateLimits = mapping({
  engine: z
    .enum(['embedded', 'global'], { error: 'must be embedded or global' })
    .prefault('embedded')
    .describe(
      'embedded: modelgate itself counts (in memory, one modelgate process: npm start); global: envoyproxy/ratelimit with Redis, shared by every Envoy and replica (rateLimits.service).',
    ),
  failureMode: z
    .enum(['allow', 'deny'], { error: 'must be allow or deny' })
    .prefault('allow')
    .describe(
      "When the rate limit service cannot answer (down, Redis down, past timeoutMs): allow (serve the request unlimited and count it in Envoy's failure_mode_allowed) or deny (503 rate_limit_unavailable).",
    ),
  service: hostPort(
    '127.0.0.1:8081',
    "global engine: envoyproxy/ratelimit's gRPC address (Envoy's rate limit filter and modelgate's token charges); `modelgate up` starts it there.",
  ),
  redis: hostPort(
    '127.0.0.1:6379',
    'global engine: the Redis envoyproxy/ratelimit counts in; `modelgate up` starts redis-server there.',
  ),
  domain: orDefault(
    text(/^[A-Za-z0-9._-]{1,64}$/, 'a domain of 1-64 characters from A-Z a-z 0-9 . _ -'),
    'modelgate',
  ).describe("The rate limit service's domain for modelgate's descriptors (its config must declare it)."),
  timeoutMs: orDefault(integer(5, 10_000), 100).describe(
    'How long Envoy waits for the rate limit service before failureMode applies.',
  ),
});

const protocol = z.enum(PROTOCOLS, { error: `must be one of: ${PROTOCOLS.join(', ')}` });

/** A price per million tokens: a finite number >= 0 (zod's number refuses NaN and the infinities). */
const perMillion = (what: string) =>
  z
    .number({ error: 'must be a number >= 0 (per million tokens)' })
    .min(0, { error: 'must be a number >= 0 (per million tokens)' })
    .max(1e12, { error: 'must be at most 1e12' })
    .describe(what);

/**
 * A long-context price (docs/metering.md, "Long prompts"): Gemini 2.5 Pro and 3 Pro, and Claude
 * Sonnet 4 and 4.5 with the 1M window, bill every token of a request whose prompt is over 200,000
 * tokens at a higher input and output price.
 */
const longContext = mapping(
  {
    above: integer(1, 100_000_000).describe(
      'Input tokens (cached ones included, as the provider counts them): a request with more is charged this price for every token, input, cached and output.',
    ),
    input: perMillion('Price of one million input tokens of such a request.'),
    output: perMillion('Price of one million output tokens of such a request.'),
    cachedInput: perMillion(
      'Price of one million cached input tokens of such a request; absent: its input price.',
    ).nullish(),
  },
  'must be a mapping {above, input, output, cachedInput}',
);

/** A price per call of a hosted tool: a finite number >= 0. */
const perCall = (what: string) =>
  z
    .number({ error: 'must be a number >= 0 (per call)' })
    .min(0, { error: 'must be a number >= 0 (per call)' })
    .max(1e12, { error: 'must be at most 1e12' })
    .describe(what);

/** Per-call prices of hosted tools (docs/metering.md, "Hosted tools"). */
const toolPrices = mapping(
  {
    web_search: perCall(
      "One web search: OpenAI's web_search tool (a web_search_call output item) and chat search models (per request with web_search_options), Anthropic's web_search server tool (usage.server_tool_use.web_search_requests).",
    ).optional(),
    file_search: perCall(
      "One call of OpenAI's file_search tool (a file_search_call output item); Gemini's fileSearch tool, counted at the request's maximum.",
    ).optional(),
    code_interpreter: perCall(
      "One call of OpenAI's code_interpreter tool (a code_interpreter_call output item; OpenAI bills per container).",
    ).optional(),
    code_execution: perCall(
      "Anthropic's code execution tool (billed by container time), counted at the request's maximum of calls.",
    ).optional(),
    image_generation: perCall(
      "One call of OpenAI's image_generation tool (an image_generation_call output item).",
    ).optional(),
    google_search: perCall(
      'One grounded prompt with Google Search (googleSearch, googleSearchRetrieval): a response with groundingMetadata.',
    ).optional(),
    google_maps: perCall(
      'One grounded prompt with Google Maps (googleMaps): a response with groundingMetadata.',
    ).optional(),
    enterprise_web_search: perCall(
      'One grounded prompt with Web Grounding for Enterprise (enterpriseWebSearch): a response with groundingMetadata.',
    ).optional(),
  },
  'must be a mapping of hosted tools to prices per call: web_search, file_search, code_interpreter, code_execution, image_generation, google_search, google_maps, enterprise_web_search',
);

/** A model's price (groups' models; the admin API's group changes use the same schema: admin/schemas.ts). */
export const price = mapping(
  {
    input: perMillion("Price of one million input tokens, in the balance's unit."),
    output: perMillion('Price of one million output tokens.'),
    cachedInput: perMillion(
      'Price of one million cached input tokens, where the provider reports them; absent: the input price.',
    ).nullish(),
    longContext: longContext
      .nullish()
      .describe(
        "The price of a request whose input is over `above` tokens, for every token of it (the provider's long-context price: Gemini 2.5/3 Pro, Claude Sonnet 4/4.5 with the 1M window); absent: one price at any length.",
      ),
    audioInput: perMillion(
      'Price of one million audio input tokens (OpenAI prompt_tokens_details.audio_tokens, Gemini promptTokensDetails AUDIO: audio parts and the sound of video); absent: a request sending audio is refused (400 modality_unpriced) unless meter.modalities is allow.',
    ).nullish(),
    audioOutput: perMillion(
      'Price of one million audio output tokens (OpenAI completion_tokens_details.audio_tokens, Gemini candidatesTokensDetails AUDIO); absent: a request asking for audio output is refused (400 modality_unpriced) unless meter.modalities is allow.',
    ).nullish(),
    imageOutput: perMillion(
      'Price of one million image output tokens (Gemini candidatesTokensDetails IMAGE); absent: a request asking for image output is refused (400 modality_unpriced) unless meter.modalities is allow.',
    ).nullish(),
    tools: toolPrices
      .nullish()
      .describe(
        "Prices per call of the hosted tools the provider runs and bills besides tokens, in the balance's unit (OpenAI and Anthropic list web search at 10 per 1,000 calls: web_search: 0.01 in dollars); a tool absent: a request declaring it is refused (400 hosted_tool_unpriced) unless meter.hostedTools is allow.",
      ),
  },
  'must be a mapping {input, output, cachedInput, longContext, audioInput, audioOutput, imageOutput, tools}',
)
  // The store debits a modality's premium as text tokens (meter/modal-cost.ts): a text price must carry it.
  .refine(
    (p) =>
      p.input > 0 || p.output > 0 || !((p.audioInput ?? 0) > 0 || (p.audioOutput ?? 0) > 0 || (p.imageOutput ?? 0) > 0),
    { error: 'a price of audio or image tokens needs an input or output price above 0' },
  );

/** The rule of a model's name (the admin API's group changes use it too). */
export const modelName = text(MODEL_NAME, `a model name: ${NAME_RULE}`);

const modelObject = mapping({
  name: modelName.describe('The model name clients send.'),
  price: price
    .nullish()
    .describe(
      "Price per million tokens (input, output, cachedInput, and audioInput, audioOutput, imageOutput where the provider bills those higher), in the balance's unit; absent: metered in tokens, costs nothing.",
    ),
  maxOutputTokens: integer(1, 100_000_000)
    .nullish()
    .describe(
      "The model's output cap (its provider's maximum output tokens): a request's maximum cost uses it when the request names no max_tokens, and never more (absent: meter.maxOutputTokens).",
    ),
  protocols: z
    .array(protocol, { error: `must be a non-empty list of: ${PROTOCOLS.join(', ')}` })
    .min(1, { error: `must be a non-empty list of: ${PROTOCOLS.join(', ')}` })
    .optional()
    .describe('The protocol styles it is served on; absent: any.'),
  available: orDefault(flag(), true).describe('false: in the group, but its channel is down (403 model_unavailable).'),
  limits: modelLimits
    .nullish()
    .describe("Limits of each key on this model (requests and tokens per minute and day), on top of the key's own."),
});

/** A plain name (any protocol, available) or {name, protocols, available}. */
const model = z.union([z.string().regex(MODEL_NAME, { error: `must be a model name: ${NAME_RULE}` }), modelObject], {
  error: 'must be a model name or {name, protocols, available, price, maxOutputTokens, limits}',
});

/** The name a models[] entry declares, if it is a valid one (for the duplicate check). */
function declaredName(m: unknown): string | undefined {
  const name = isMapping(m) ? m.name : m;
  return typeof name === 'string' && MODEL_NAME.test(name) ? name : undefined;
}

const group = mapping(
  {
    available: orDefault(flag(), true).describe('false: every key of the group is refused (403 group_unavailable).'),
    models: z
      .array(model, { error: 'must be a list of model names or {name, protocols, available}' })
      .superRefine((models, ctx) => {
        if (!Array.isArray(models)) return;
        const seen = new Set<string>();
        models.forEach((m, i) => {
          const name = declaredName(m);
          if (name === undefined) return;
          if (seen.has(name))
            ctx.addIssue({ code: 'custom', path: [i], message: `duplicate model ${JSON.stringify(name)}` });
          seen.add(name);
        });
      }, always)
      .describe(
        'The models keys of this group may use: a name (any protocol) or {name, protocols, available, price, maxOutputTokens, limits}.',
      ),
    limits: keyLimits
      .nullish()
      .describe(
        "The default limits of each key of the group (each key counted on its own); a key's own limits override them one by one.",
      ),
    budget: budget
      .nullish()
      .describe(
        "What all keys of the group together may spend per day, week or month (403 budget_exhausted), beside each key's balance and budget.",
      ),
  },
  'must be a mapping with models',
);

const groups = orDefault(
  z
    .record(z.string(), group, { error: 'must be a mapping' })
    .superRefine((g, ctx) => {
      if (!isMapping(g)) return;
      for (const name of Object.keys(g)) {
        if (!GROUP_NAME.test(name))
          ctx.addIssue({
            code: 'custom',
            path: [name],
            message: 'a group name must be 1-128 characters from A-Z a-z 0-9 . _ @ : -',
          });
      }
    }, always)
    // Checked by the refinement above (so a bad name does not hide its group's problems); shown to editors here.
    .meta({ propertyNames: { type: 'string', pattern: GROUP_NAME.source } }),
  {},
).describe('The embedded file store: groups by name (1-128 characters from A-Z a-z 0-9 . _ @ : -).');

/**
 * An expiry: a string, or a timestamp when the file declares %YAML 1.1 (whose timestamps YAML
 * parses as dates). JSON has no dates, so the JSON Schema shows it as a string (json-schema.ts).
 */
export const expiryValue = z
  .union([z.string(), z.date()], { error: ISO_RULE })
  .refine((v) => !Number.isNaN(expiryTime(v)), { error: ISO_RULE });

const expiresAt = expiryValue
  .nullish()
  .describe('When the key stops working (401 key_expired): an ISO 8601 date (midnight UTC) or date-time.');

const key = mapping(
  {
    id: text(KEY_ID, 'an id of 1-128 characters from A-Z a-z 0-9 . _ @ : -').describe(
      'The key id: logged and sent upstream as x-modelgate-key-id (never the key).',
    ),
    sha256: text(SHA256_HEX, 'the 64-hex-digit SHA-256 of the full key')
      .toLowerCase()
      .describe('SHA-256 of the full key, in hex (`modelgate keys new` prints it).'),
    group: text().describe('The group whose models the key may use.'),
    balance: z
      .number({ error: 'must be a number (omit it for unlimited)' })
      .nullish()
      .describe('Balance: 0 or less is refused (403 balance_insufficient); absent: unlimited.'),
    // Not orDefault: a key list can be long, and a default through a transform costs every entry (load.ts reads null as
    // false).
    disabled: flag().nullish().default(false).describe('true: refused (401 key_disabled).'),
    expiresAt,
    limits: keyLimits.nullish().describe("The key's own limits: each one given overrides its group's."),
    budget: budget
      .nullish()
      .describe(
        'What the key may spend per day, week or month (403 budget_exhausted), beside its lifetime balance: both hold.',
      ),
    modelBudgets: modelBudgets.nullish(),
  },
  'must be a mapping with id, sha256 and group',
);

/** The admin API's scopes (admin/tokens.ts SCOPES, which a test checks against these). */
export const ADMIN_SCOPES = ['read', 'keys', 'billing', 'admin'] as const;

const adminToken = mapping(
  {
    id: text(KEY_ID, 'an id of 1-128 characters from A-Z a-z 0-9 . _ @ : -').describe(
      'The token id, in the audit log and the logs (never the token).',
    ),
    sha256: text(SHA256_HEX, 'the 64-hex-digit SHA-256 of the full token')
      .toLowerCase()
      .describe('SHA-256 of the full management token, in hex.'),
    scope: z
      .enum(ADMIN_SCOPES, { error: `must be one of ${ADMIN_SCOPES.join(', ')}` })
      .describe('read: every GET; keys: also key writes; billing: also credits; admin: everything.'),
  },
  'must be a mapping with id, sha256 and scope',
);

const adminTokens = orDefault(z.array(adminToken, { error: 'must be a list' }), []).describe(
  "Management tokens of the admin API defined here, each stored only as its SHA-256 (docs/admin-api.md); `modelgate admin-tokens new` keeps others in modelgate's own state. Reloads.",
);

const keys = orDefault(
  z.array(key, { error: 'must be a list' }).superRefine((list, ctx) => {
    if (!Array.isArray(list)) return;
    // With no problem in the list, every entry is valid and its hash already lowercase: no retesting.
    const clean = ctx.issues.length === 0;
    const ids = new Set<string>();
    const hashes = new Set<string>();
    for (let i = 0; i < list.length; i++) {
      const k: unknown = list[i];
      if (!isMapping(k)) continue;
      const id = clean || (typeof k.id === 'string' && KEY_ID.test(k.id)) ? (k.id as string) : undefined;
      const sha = clean
        ? (k.sha256 as string)
        : typeof k.sha256 === 'string' && SHA256_HEX.test(k.sha256)
          ? k.sha256.toLowerCase()
          : undefined;
      if (id !== undefined) {
        if (ids.has(id))
          ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `duplicate id ${JSON.stringify(id)}` });
        else ids.add(id);
      }
      if (sha !== undefined) {
        if (hashes.has(sha))
          ctx.addIssue({
            code: 'custom',
            path: [i, 'sha256'],
            message: 'duplicate sha256 (the same key listed twice)',
          });
        else hashes.add(sha);
      }
    }
  }, always),
  [],
).describe('The embedded file store: keys, each stored only as the SHA-256 of the key.');

/** With the file store, the groups a key may name: those the file declares (as mappings). */
function fileStoreGroups(root: Record<string, unknown>): Set<string> | undefined {
  if (typeof root.store === 'string' && /^postgres(ql)?:\/\//.test(root.store)) return undefined;
  return new Set(
    isMapping(root.groups)
      ? Object.keys(root.groups).filter((g) => isMapping((root.groups as Record<string, unknown>)[g]))
      : [],
  );
}

/** modelgate.yaml. */
export const configFileSchema = mapping({
  routes: orDefault(routes, {}).describe('Which requests are which, and where keys are read.'),
  log: orDefault(log, {}).describe('Decision log settings.'),
  cache: orDefault(cache, {}).describe('Store cache (takes effect at the next start).'),
  grpc: orDefault(grpc, {}).describe('gRPC listener settings (take effect at the next start).'),
  upstream: orDefault(upstream, {})
    .meta({ deprecated: true })
    .describe('Removed: upstream credentials are set per upstream, as gateway.upstreams.<name>.credential.'),
  store: text(STORE, '"file" or a postgres:// URL')
    .nullish()
    .describe(
      '"file" (default: the groups and keys below) or a postgres:// URL; --store, MODELGATE_STORE and DATABASE_URL override it. Takes effect at the next start.',
    ),
  postgres: orDefault(postgres, {}).describe(
    'Bounds of the PostgreSQL store: an outage is a prompt 503, never a stall (take effect at the next start).',
  ),
  server: orDefault(server, {}).describe("modelgate's own listeners (take effect at the next start)."),
  meter: orDefault(meter, {}).describe(
    'Balances that move: usage read from responses, debited at tokens x price (mode, unmeteredStreams and hostedTools reload; enabled and stateFile take effect at the next start).',
  ),
  rateLimits: orDefault(rateLimits, {}).describe(
    'Rate limits of model traffic (limits themselves are set on groups, models and keys): the engine that counts them and what happens when it cannot answer (docs/rate-limits.md). engine and the addresses take effect at the next start and `envoy-config`.',
  ),
  console: orDefault(consoleSection, {}).describe(
    'The console at {base_url}/console/ (src/console): sign in with a key, see its access, set up a client, check a setup.',
  ),
  gateway: orDefault(gateway, {}).describe(
    'The Envoy bundle `modelgate envoy-config` renders from this file (and `modelgate up` runs): listener, limits, upstreams.',
  ),
  groups,
  keys,
  adminTokens,
})
  .superRefine((root, ctx) => {
    if (!isMapping(root)) return;
    const serverTls = isMapping(root.grpc) && root.grpc.tls != null;
    const envoyTls = isMapping(root.gateway) && root.gateway.authzTls != null;
    if (serverTls && !envoyTls)
      ctx.addIssue({
        code: 'custom',
        path: ['gateway', 'authzTls'],
        message: "must be set with grpc.tls: Envoy needs a client certificate for modelgate's TLS port",
      });
    if (envoyTls && !serverTls)
      ctx.addIssue({
        code: 'custom',
        path: ['grpc', 'tls'],
        message: "must be set with gateway.authzTls: modelgate's gRPC port speaks TLS only with it",
      });
  }, always)
  .superRefine((root, ctx) => {
    if (!isMapping(root)) return;
    const known = fileStoreGroups(root);
    if (known === undefined || !Array.isArray(root.keys)) return;
    (root.keys as unknown[]).forEach((k, i) => {
      const g = isMapping(k) ? k.group : undefined;
      if (typeof g === 'string' && g !== '' && !known.has(g))
        ctx.addIssue({ code: 'custom', path: ['keys', i, 'group'], message: `unknown group ${JSON.stringify(g)}` });
    });
  }, always)
  .meta({
    title: 'modelgate configuration',
    description:
      'modelgate.yaml: service settings and the embedded file store (groups and keys). Every section is optional. See docs/configuration.md.',
  });

/**
 * The schema with the one rule that needs the environment: every upstream credential's variable is
 * set and non-empty (gateway.upstreams.<name>.credential.env). (The gRPC secret is read where it is
 * used, at start: config/grpc-secret.ts.) (Its value is never echoed, only the variable's name.)
 */
export function configSchemaFor(env: NodeJS.ProcessEnv) {
  let schema = byEnvironment.get(env);
  if (schema === undefined) byEnvironment.set(env, (schema = withEnvironment(env)));
  return schema;
}

/** One schema per environment object (a service reloads with the same one), so zod compiles it once. */
const byEnvironment = new WeakMap<NodeJS.ProcessEnv, ReturnType<typeof withEnvironment>>();

function withEnvironment(env: NodeJS.ProcessEnv) {
  return configFileSchema.superRefine((root, ctx) => {
    const gateway = isMapping(root) && isMapping(root.gateway) ? root.gateway : undefined;
    const upstreams = gateway && isMapping(gateway.upstreams) ? gateway.upstreams : undefined;
    const meter = isMapping(root) && isMapping(root.meter) ? root.meter : undefined;
    const alerts = meter && isMapping(meter.budgetAlerts) ? meter.budgetAlerts : undefined;
    if (alerts && typeof alerts.secretEnv === 'string' && ENV_NAME.test(alerts.secretEnv) && !env[alerts.secretEnv]) {
      ctx.addIssue({
        code: 'custom',
        path: ['meter', 'budgetAlerts', 'secretEnv'],
        message: `environment variable ${alerts.secretEnv} is not set or empty`,
      });
    }
    if (!upstreams) return;
    for (const [family, target] of Object.entries(upstreams)) {
      const cred = isMapping(target) && isMapping(target.credential) ? target.credential : undefined;
      const name = cred?.env;
      if (typeof name === 'string' && ENV_NAME.test(name) && !env[name]) {
        ctx.addIssue({
          code: 'custom',
          path: ['gateway', 'upstreams', family, 'credential', 'env'],
          message: `environment variable ${name} is not set or empty`,
        });
      }
    }
  }, always);
}

/** A config file after validation: defaults filled in, names lowercased. */
export type ConfigFile = z.output<typeof configFileSchema>;

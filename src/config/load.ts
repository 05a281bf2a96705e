/**
 * modelgate's configuration: read once, validated all at once against schema.ts (every problem
 * listed with its path), then frozen. Nothing downstream reads environment variables or the file
 * again; a reload builds a whole new Config and swaps it in (watch.ts).
 *
 * The file is YAML; its `groups`/`keys` sections are the embedded file store (see envoy/modelgate.yaml).
 */
import { parseDocument } from 'yaml';
import type { z } from 'zod';
import {
  modalPrices,
  toLimits,
  toolPrices,
  type GroupRecord,
  type KeyRecord,
  type Limits,
  type ModelPrice,
  type ModelRecord,
  type Protocol,
} from '../store/store';
import type { Budget } from '../store/budget-window';
import { configSchemaFor, expiryTime, price as priceSchema, UPSTREAM_OF_STYLE, type ConfigFile } from './schema';
import { InternalError } from '../errors/internal-error';

export interface UpstreamCredential {
  readonly header: string;
  /** The full header value (prefix + secret). Never logged. */
  readonly value: string;
}

/** A listener or peer address. */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/** An upstream provider, from its URL. */
export interface UpstreamTarget extends HostPort {
  readonly tls: boolean;
  /** CA bundle for the provider's certificate (tls only). */
  readonly caFile: string;
  /**
   * An Envoy cluster of the operator's that reaches it (gateway.upstreams.<name>.cluster), or null: upstream_<name>.
   */
  readonly cluster: string | null;
}

/** The upstream protocol families, each one Envoy cluster (`upstream_<family>`). */
export const UPSTREAM_FAMILIES = ['chat', 'messages', 'generative', 'alt'] as const;
export type UpstreamFamily = (typeof UPSTREAM_FAMILIES)[number];

/**
 * The upstream a protocol request goes to: its style's, or under the alternate prefix the alt upstream, whatever the
 * style.
 */
export function upstreamOf(style: Protocol, alt: boolean): UpstreamFamily {
  return alt ? 'alt' : UPSTREAM_OF_STYLE[style];
}

/** What `modelgate envoy-config` renders the Envoy bundle from (schema.ts `gateway`). */
export interface GatewaySettings {
  readonly listen: HostPort;
  readonly admin: HostPort;
  readonly publicBaseUrl: string | null;
  /** Where Envoy reaches modelgate (default: server.grpc and server.http). */
  readonly authz: HostPort;
  /** Envoy's client certificate for modelgate's gRPC port, when it speaks TLS (grpc.tls). */
  readonly authzTls: AuthzTls | null;
  /** Proxies in front of Envoy that append to x-forwarded-for (the connection manager's xff_num_trusted_hops). */
  readonly trustedProxyHops: number;
  readonly http: HostPort;
  readonly maxRequestBytes: number;
  readonly authzTimeoutMs: number;
  readonly maxConnections: number;
  /** Route idle_timeout and HCM stream_idle_timeout (504 upstream_timeout past it). */
  readonly upstreamIdleTimeoutSeconds: number;
  readonly upstreams: Readonly<Record<UpstreamFamily, UpstreamTarget>>;
}

/** schema.ts `rateLimits`, addresses parsed. */
export interface RateLimitSettings {
  readonly engine: 'embedded' | 'global';
  readonly failureMode: 'allow' | 'deny';
  readonly service: HostPort;
  readonly redis: HostPort;
  readonly domain: string;
  readonly timeoutMs: number;
}

/** The limits given (nulls dropped), or null when none is. */
/** Envoy's side of mTLS to modelgate's gRPC port (schema.ts `gateway.authzTls`). */
export interface AuthzTls {
  readonly certFile: string;
  readonly keyFile: string;
  readonly caFile: string;
  readonly serverName: string | null;
}

const DEFAULT_CA_FILE = '/etc/ssl/certs/ca-certificates.crt';

/** "127.0.0.1:9191" or "[::1]:9191" (validated by the schema). */
export function parseHostPort(text: string): HostPort {
  const i = text.lastIndexOf(':');
  return { host: text.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(text.slice(i + 1)) };
}

/** Whether a listener's host is reachable from this machine only (127.0.0.0/8, ::1, localhost). */
export function isLoopback(host: string): boolean {
  return /^127(\.\d{1,3}){3}$/.test(host) || host === '::1' || host.toLowerCase() === 'localhost';
}

function upstreamTarget(v: string | { url: string; caFile?: string | null; cluster?: string | null }): UpstreamTarget {
  const url = new URL(typeof v === 'string' ? v : v.url);
  const tls = url.protocol === 'https:';
  return {
    tls,
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: url.port ? Number(url.port) : tls ? 443 : 80,
    caFile: (typeof v === 'string' ? null : v.caFile) ?? DEFAULT_CA_FILE,
    cluster: (typeof v === 'string' ? null : v.cluster) ?? null,
  };
}

/** Plain data made read-only all the way down (as deepFreeze makes it at run time). */
type Frozen<T> = T extends readonly (infer U)[]
  ? readonly Frozen<U>[]
  : T extends object
    ? { readonly [K in keyof T]: Frozen<T[K]> }
    : T;

/**
 * The running configuration: the file's sections as validated (schema.ts), with the shapes the
 * service reads fastest (milliseconds, Maps by name, resolved credentials, epoch expiries).
 */
export interface Config {
  readonly routes: Frozen<ConfigFile['routes']>;
  readonly log: Frozen<ConfigFile['log']>;
  readonly cache: {
    readonly maxEntries: number;
    readonly maxNotFound: number;
    readonly ttlMs: number;
    readonly staleMs: number;
  };
  readonly grpc: Frozen<ConfigFile['grpc']>;
  /**
   * The operator's credential of each upstream that has one (gateway.upstreams.<name>.credential),
   * resolved from its variable: set on allowed requests to that upstream and to no other.
   */
  readonly upstream: { readonly credentials: Readonly<Partial<Record<UpstreamFamily, UpstreamCredential>>> };
  readonly store: { readonly kind: 'file' } | { readonly kind: 'postgres'; readonly url: string };
  /** Bounds of the PostgreSQL store (every wait is bounded, so an outage is a prompt 503, not a stall). */
  readonly postgres: Frozen<ConfigFile['postgres']>;
  /** modelgate's own listeners ("host:port"). */
  readonly server: Frozen<ConfigFile['server']>;
  /** Metering (docs/metering.md). */
  readonly meter: Frozen<ConfigFile['meter']>;
  /** Budget alerts by webhook (meter.budgetAlerts), the secret read from its variable; null: none. */
  readonly budgetAlerts: {
    readonly url: string;
    readonly secret: string;
    readonly thresholds: readonly number[];
  } | null;
  readonly gateway: GatewaySettings;
  /** Rate limits of model traffic: the engine and its failure mode (docs/rate-limits.md). */
  readonly rateLimits: RateLimitSettings;
  /** The console's API limits (schema.ts `console`). */
  readonly console: Frozen<ConfigFile['console']>;
  readonly groups: ReadonlyMap<string, GroupRecord>;
  readonly keys: readonly KeyRecord[];
  /** Management tokens of the admin API defined in the file (by hash; docs/admin-api.md). */
  readonly adminTokens: Frozen<ConfigFile['adminTokens']>;
}

/** Thrown by parseConfig with every problem found, one per line, each naming its path. */
export class ConfigError extends InternalError {
  constructor(readonly problems: readonly string[]) {
    super('config_invalid', `invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

/** The environment when none is given: no variable is set. */
const NO_ENV: NodeJS.ProcessEnv = Object.freeze({});

/**
 * Parses and validates a whole configuration file. `env` supplies the upstream credential
 * variables named in the file. Throws ConfigError listing every problem.
 */
export function parseConfig(text: string, env: NodeJS.ProcessEnv = NO_ENV): Config {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false });
  // Without prettyErrors the yaml library sets no linePos; the offset gives the line.
  if (doc.errors.length > 0)
    throw new ConfigError(
      doc.errors.map((e) => `line ${text.slice(0, e.pos[0]).split('\n').length}: ${e.message.split('\n')[0]}`),
    );
  return configFromData(doc.toJS() ?? {}, env);
}

/** Validates the data of a parsed file (YAML's plain values) and builds the frozen Config. */
export function configFromData(data: unknown, env: NodeJS.ProcessEnv = NO_ENV): Config {
  const reserved = reservedNames(data);
  const result = configSchemaFor(env).safeParse(data);
  if (!result.success || reserved.length > 0)
    throw new ConfigError([...new Set([...reserved, ...(result.success ? [] : problemLines(result.error.issues))])]);
  return deepFreeze(runtimeConfig(result.data, env));
}

/** Names JavaScript gives a meaning on every object: zod drops `__proto__` from a record without a word. */
const RESERVED_NAMES = ['__proto__', 'constructor', 'prototype'];

/**
 * Each record of the file keyed by a group or model name (`groups`, a key's `modelBudgets`) that
 * holds a reserved name, as a problem line: refused at load rather than silently dropped.
 */
function reservedNames(data: unknown): string[] {
  const own = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  const out: string[] = [];
  const check = (record: unknown, path: string, what: string): void => {
    if (!own(record)) return;
    for (const name of RESERVED_NAMES)
      if (Object.hasOwn(record, name))
        out.push(`${path}: a ${what} cannot be named ${name} (JavaScript reserves the name); rename it`);
  };
  if (!own(data)) return out;
  check(data.groups, 'groups', 'group');
  if (Array.isArray(data.keys))
    data.keys.forEach((k, i) => {
      if (own(k)) check(k.modelBudgets, `keys[${i}].modelBudgets`, 'model');
    });
  return out;
}

/** `routes.bearerHeaders[1]`, `groups.basic.models[0].name`; the root is `$`. */
function pathText(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? String(p) : `.${String(p)}`;
  return out === '' ? '$' : out;
}

/**
 * One line per problem, `path: message`. An unknown field is reported at its own path (`$.x` at
 * the top level). A value that matches neither form of a union (a model is a name or a mapping)
 * reports the problems of the form it has, or the union's message when it has neither.
 */
function problemLines(issues: readonly z.core.$ZodIssue[], prefix: readonly PropertyKey[] = []): string[] {
  const out: string[] = [];
  for (const issue of issues) {
    const path = [...prefix, ...issue.path];
    if (issue.code === 'unrecognized_keys') {
      for (const k of issue.keys)
        out.push(`${path.length === 0 ? `$.${k}` : pathText([...path, k])}: ${issue.message}`);
      continue;
    }
    if (issue.code === 'invalid_union') {
      const fitting = issue.errors.filter(
        (branch) => !branch.some((i) => i.path.length === 0 && i.code === 'invalid_type'),
      );
      if (fitting.length === 1) {
        out.push(...problemLines(fitting[0], path));
        continue;
      }
    }
    out.push(`${pathText(path)}: ${issue.message}`);
  }
  return out;
}

function runtimeConfig(f: ConfigFile, env: NodeJS.ProcessEnv): Config {
  const credentials: Partial<Record<UpstreamFamily, UpstreamCredential>> = {};
  for (const family of UPSTREAM_FAMILIES) {
    const target = f.gateway.upstreams[family];
    const c = typeof target === 'string' ? undefined : target.credential;
    if (c) credentials[family] = { header: c.header, value: c.prefix + (env[c.env] as string) };
  }
  const groups = new Map<string, GroupRecord>();
  for (const [name, g] of Object.entries(f.groups)) {
    const models = new Map<string, ModelRecord>();
    for (const m of g.models) {
      const model: ModelRecord =
        typeof m === 'string'
          ? { name: m, protocols: null, available: true, price: null, maxOutputTokens: null }
          : {
              name: m.name,
              protocols: m.protocols ?? null,
              available: m.available,
              price: m.price ? toModelPrice(m.price) : null,
              maxOutputTokens: m.maxOutputTokens ?? null,
              ...(m.limits ? { limits: toLimits(m.limits) } : {}),
            };
      models.set(model.name, model);
    }
    groups.set(name, {
      name,
      available: g.available,
      models,
      ...(g.limits ? { limits: toLimits(g.limits) } : {}),
      ...(g.budget
        ? { budget: { amount: g.budget.amount, period: g.budget.period, timeZone: g.budget.timeZone } }
        : {}),
    });
  }
  const keys: KeyRecord[] = new Array(f.keys.length);
  for (let i = 0; i < f.keys.length; i++) {
    const k = f.keys[i];
    keys[i] = {
      id: k.id,
      sha256: k.sha256,
      group: k.group,
      balance: k.balance ?? null,
      disabled: k.disabled === true,
      expiresAt: k.expiresAt == null ? null : expiryTime(k.expiresAt),
      ...(k.limits ? { limits: toLimits(k.limits) } : {}),
      ...(k.budget
        ? { budget: { amount: k.budget.amount, period: k.budget.period, timeZone: k.budget.timeZone } }
        : {}),
      ...(k.modelBudgets && Object.keys(k.modelBudgets).length > 0
        ? { modelBudgets: copyModelBudgets(k.modelBudgets) }
        : {}),
    };
  }
  return {
    routes: f.routes,
    log: f.log,
    cache: {
      maxEntries: f.cache.maxEntries,
      maxNotFound: f.cache.maxNotFound,
      ttlMs: f.cache.ttlSeconds * 1000,
      staleMs: f.cache.staleSeconds * 1000,
    },
    grpc: f.grpc,
    upstream: { credentials },
    store: f.store == null || f.store === 'file' ? { kind: 'file' } : { kind: 'postgres', url: f.store },
    postgres: f.postgres,
    server: f.server,
    meter: f.meter,
    budgetAlerts: f.meter.budgetAlerts
      ? {
          url: f.meter.budgetAlerts.url,
          secret: env[f.meter.budgetAlerts.secretEnv] as string,
          thresholds: f.meter.budgetAlerts.thresholds,
        }
      : null,
    console: f.console,
    rateLimits: {
      ...f.rateLimits,
      service: parseHostPort(f.rateLimits.service),
      redis: parseHostPort(f.rateLimits.redis),
    },
    gateway: {
      listen: parseHostPort(f.gateway.listen),
      admin: parseHostPort(f.gateway.admin),
      publicBaseUrl: f.gateway.publicBaseUrl ?? null,
      authz: parseHostPort(f.gateway.authz ?? f.server.grpc),
      authzTls: f.gateway.authzTls
        ? { ...f.gateway.authzTls, serverName: f.gateway.authzTls.serverName ?? null }
        : null,
      trustedProxyHops: f.gateway.trustedProxyHops,
      http: parseHostPort(f.gateway.http ?? f.server.http),
      maxRequestBytes: f.gateway.maxRequestBytes,
      authzTimeoutMs: f.gateway.authzTimeoutMs,
      maxConnections: f.gateway.maxConnections,
      upstreamIdleTimeoutSeconds: f.gateway.upstreamIdleTimeoutSeconds,
      upstreams: {
        chat: upstreamTarget(f.gateway.upstreams.chat),
        messages: upstreamTarget(f.gateway.upstreams.messages),
        generative: upstreamTarget(f.gateway.upstreams.generative),
        alt: upstreamTarget(f.gateway.upstreams.alt),
      },
    },
    groups,
    keys,
    adminTokens: f.adminTokens,
  };
}

function readOnlyMap(): never {
  throw new TypeError('the configuration is frozen: its maps are read-only');
}

/** Object.freeze does not stop Map#set/delete/clear, so frozen maps get throwing ones of their own. */
function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object' && !Object.isFrozen(o)) {
    if (o instanceof Map) {
      for (const v of o.values()) deepFreeze(v);
      for (const name of ['set', 'delete', 'clear']) Object.defineProperty(o, name, { value: readOnlyMap });
    } else for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

/** A key's budgets per model as a record without a prototype (a model named `__proto__` is a model). */
export function copyModelBudgets(
  m: Readonly<Record<string, { amount: number; period: 'day' | 'week' | 'month'; timeZone: string }>>,
): Readonly<Record<string, Budget>> {
  const out: Record<string, Budget> = Object.create(null) as Record<string, Budget>;
  for (const [model, b] of Object.entries(m)) out[model] = { amount: b.amount, period: b.period, timeZone: b.timeZone };
  return out;
}

/** A price of the config's schema (config/schema.ts `price`) as the store keeps it. */
export function toModelPrice(p: z.output<typeof priceSchema>): ModelPrice {
  return {
    input: p.input,
    output: p.output,
    cachedInput: p.cachedInput ?? null,
    ...modalPrices(p),
    ...(p.tools ? { tools: toolPrices(p.tools) } : {}),
    ...(p.longContext
      ? {
          longContext: {
            above: p.longContext.above,
            input: p.longContext.input,
            output: p.longContext.output,
            cachedInput: p.longContext.cachedInput ?? null,
          },
        }
      : {}),
  };
}

/**
 * modelgate's configuration: read once, validated all at once (every problem listed with its path),
 * then frozen. Nothing downstream reads environment variables or the file again; a reload builds a
 * whole new Config and swaps it in (config-watcher.ts).
 *
 * The file is YAML; its `groups`/`keys` sections are the embedded file store (see envoy/modelgate.yaml).
 */
import { parseDocument } from 'yaml';
import { PROTOCOLS, type GroupRecord, type KeyRecord, type ModelRecord, type Protocol } from '../store/store';

export interface UpstreamCredential {
  readonly header: string;
  /** The full header value (prefix + secret). Never logged. */
  readonly value: string;
}

export interface Config {
  readonly routes: {
    readonly altPrefix: string;
    readonly bearerHeaders: readonly string[];
    readonly vendorHeaders: readonly string[];
    readonly queryKeyParams: readonly string[];
    readonly maxJsonDepth: number;
  };
  readonly log: { readonly level: string; readonly allows: boolean };
  readonly cache: { readonly maxEntries: number; readonly maxNotFound: number; readonly ttlMs: number; readonly staleMs: number };
  readonly grpc: { readonly maxReceiveMessageBytes: number };
  readonly upstream: { readonly credentials: Readonly<Partial<Record<Protocol, UpstreamCredential>>> };
  readonly store: { readonly kind: 'file' } | { readonly kind: 'postgres'; readonly url: string };
  /** Bounds of the PostgreSQL store (every wait is bounded, so an outage is a prompt 503, not a stall). */
  readonly postgres: { readonly queryTimeoutMs: number; readonly connectTimeoutMs: number; readonly poolSize: number; readonly heartbeatMs: number };
  readonly groups: ReadonlyMap<string, GroupRecord>;
  readonly keys: readonly KeyRecord[];
}

/** Thrown by parseConfig with every problem found, one per line, each naming its path. */
export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
/** An HTTP field name (RFC 9110 token, lowercase), at most 128 characters. */
const HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]{1,128}$/;
const KEY_ID = /^[A-Za-z0-9._@:-]{1,128}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/**
 * Model and group names become upstream header values (x-modelgate-model, x-modelgate-group), and
 * Envoy with validate_mutations answers 500 to an invalid one: printable ASCII, no edge spaces.
 */
const NAME = /^[\x21-\x7e](?:[\x20-\x7e]{0,254}[\x21-\x7e])?$/;
const GROUP_NAME = /^[A-Za-z0-9._@:-]{1,128}$/;
const NAME_RULE = 'printable ASCII without leading or trailing spaces, at most 256 characters';

type Obj = Record<string, unknown>;

function isMapping(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Collects problems while walking the document; every check records and continues. */
class Checker {
  readonly problems: string[] = [];

  fail(path: string, message: string): void {
    this.problems.push(`${path}: ${message}`);
  }

  object(v: unknown, path: string, allowed: readonly string[]): Obj | undefined {
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'object' || Array.isArray(v)) {
      this.fail(path, 'must be a mapping');
      return undefined;
    }
    for (const k of Object.keys(v)) if (!allowed.includes(k)) this.fail(`${path}.${k}`, `unknown field (expected one of: ${allowed.join(', ')})`);
    return v as Obj;
  }

  bool(v: unknown, path: string, dflt: boolean): boolean {
    if (v === undefined || v === null) return dflt;
    if (typeof v !== 'boolean') this.fail(path, 'must be true or false');
    return typeof v === 'boolean' ? v : dflt;
  }

  int(v: unknown, path: string, dflt: number, min: number, max: number): number {
    if (v === undefined || v === null) return dflt;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
      this.fail(path, `must be an integer from ${min} to ${max}`);
      return dflt;
    }
    return v;
  }

  string(v: unknown, path: string, pattern?: RegExp, what?: string): string | undefined {
    if (typeof v !== 'string' || v.length === 0) {
      this.fail(path, 'must be a non-empty string');
      return undefined;
    }
    if (pattern && !pattern.test(v)) {
      this.fail(path, `must be ${what ?? `a string matching ${pattern}`}`);
      return undefined;
    }
    return v;
  }

  headerList(v: unknown, path: string, dflt: readonly string[]): readonly string[] {
    if (v === undefined || v === null) return dflt;
    if (!Array.isArray(v) || v.length === 0) {
      this.fail(path, 'must be a non-empty list of header names');
      return dflt;
    }
    return v.map((h, i) => this.string(typeof h === 'string' ? h.toLowerCase() : h, `${path}[${i}]`, HEADER_NAME, 'an HTTP header name of at most 128 characters') ?? '');
  }
}

const DEFAULTS = {
  altPrefix: '/alt',
  bearerHeaders: ['authorization', 'x-api-key'],
  vendorHeaders: ['x-vendor-api-key', 'x-goog-api-key'],
  queryKeyParams: ['key', 'api_key', 'apikey', 'api-key', 'access_token', 'x-api-key', 'x-goog-api-key', 'x-vendor-api-key'],
};

/**
 * Parses and validates a whole configuration file. `env` supplies the upstream credential
 * variables named in the file. Throws ConfigError listing every problem.
 */
export function parseConfig(text: string, env: NodeJS.ProcessEnv = {}): Config {
  const c = new Checker();
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false });
  // Without prettyErrors the yaml library sets no linePos; the offset gives the line.
  for (const e of doc.errors) c.fail(`line ${text.slice(0, e.pos[0]).split('\n').length}`, e.message.split('\n')[0]);
  if (doc.errors.length > 0) throw new ConfigError(c.problems);
  const root = c.object(doc.toJS() ?? {}, '$', ['routes', 'log', 'cache', 'grpc', 'upstream', 'store', 'postgres', 'groups', 'keys']) ?? {};

  const r = c.object(root.routes, 'routes', ['altPrefix', 'bearerHeaders', 'vendorHeaders', 'queryKeyParams', 'maxJsonDepth']) ?? {};
  const altPrefix = r.altPrefix === undefined ? DEFAULTS.altPrefix : c.string(r.altPrefix, 'routes.altPrefix', /^\/[A-Za-z0-9._~-]+$/, 'one path segment with a leading / and no trailing /, e.g. /alt') ?? DEFAULTS.altPrefix;
  if (['/v1', '/v1beta'].includes(altPrefix)) c.fail('routes.altPrefix', 'must differ from /v1 and /v1beta');
  const queryKeyParams = r.queryKeyParams === undefined ? DEFAULTS.queryKeyParams
    : Array.isArray(r.queryKeyParams) ? r.queryKeyParams.map((p, i) => c.string(p, `routes.queryKeyParams[${i}]`) ?? '')
    : (c.fail('routes.queryKeyParams', 'must be a list of query parameter names'), DEFAULTS.queryKeyParams);
  const routes = {
    altPrefix,
    bearerHeaders: c.headerList(r.bearerHeaders, 'routes.bearerHeaders', DEFAULTS.bearerHeaders),
    vendorHeaders: c.headerList(r.vendorHeaders, 'routes.vendorHeaders', DEFAULTS.vendorHeaders),
    queryKeyParams: queryKeyParams.map((p) => p.toLowerCase()),
    maxJsonDepth: c.int(r.maxJsonDepth, 'routes.maxJsonDepth', 256, 2, 100_000),
  };

  const l = c.object(root.log, 'log', ['level', 'allows']) ?? {};
  const level = l.level === undefined ? 'info' : c.string(l.level, 'log.level') ?? 'info';
  if (!LOG_LEVELS.includes(level)) c.fail('log.level', `must be one of ${LOG_LEVELS.join(', ')}`);
  const log = { level, allows: c.bool(l.allows, 'log.allows', true) };

  const ca = c.object(root.cache, 'cache', ['maxEntries', 'maxNotFound', 'ttlSeconds', 'staleSeconds']) ?? {};
  const cache = {
    maxEntries: c.int(ca.maxEntries, 'cache.maxEntries', 100_000, 1, 10_000_000),
    maxNotFound: c.int(ca.maxNotFound, 'cache.maxNotFound', 20_000, 1, 10_000_000),
    ttlMs: c.int(ca.ttlSeconds, 'cache.ttlSeconds', 5, 0, 86_400) * 1000,
    staleMs: c.int(ca.staleSeconds, 'cache.staleSeconds', 300, 0, 86_400) * 1000,
  };

  const g = c.object(root.grpc, 'grpc', ['maxReceiveMessageBytes']) ?? {};
  const grpc = { maxReceiveMessageBytes: c.int(g.maxReceiveMessageBytes, 'grpc.maxReceiveMessageBytes', 40 * 1024 * 1024, 1024 * 1024, 1024 * 1024 * 1024) };

  const upstream = { credentials: parseCredentials(c, root.upstream, env) };

  let store: Config['store'] = { kind: 'file' };
  // `store:` with no value is absent, like every other optional section.
  if (root.store !== undefined && root.store !== null && root.store !== 'file') {
    const url = c.string(root.store, 'store', /^postgres(ql)?:\/\//, '"file" or a postgres:// URL');
    if (url) store = { kind: 'postgres', url };
  }

  const pgo = c.object(root.postgres, 'postgres', ['queryTimeoutMs', 'connectTimeoutMs', 'poolSize', 'heartbeatMs']) ?? {};
  const postgres = {
    queryTimeoutMs: c.int(pgo.queryTimeoutMs, 'postgres.queryTimeoutMs', 1000, 10, 60_000),
    connectTimeoutMs: c.int(pgo.connectTimeoutMs, 'postgres.connectTimeoutMs', 1000, 10, 60_000),
    poolSize: c.int(pgo.poolSize, 'postgres.poolSize', 10, 1, 1000),
    heartbeatMs: c.int(pgo.heartbeatMs, 'postgres.heartbeatMs', 1000, 100, 60_000),
  };

  const groups = parseGroups(c, root.groups);
  const keys = parseKeys(c, root.keys, groups, store.kind === 'file');

  if (c.problems.length > 0) throw new ConfigError(c.problems);
  return deepFreeze({ routes, log, cache, grpc, upstream, store, postgres, groups, keys });
}

function parseCredentials(c: Checker, v: unknown, env: NodeJS.ProcessEnv): Partial<Record<Protocol, UpstreamCredential>> {
  const u = c.object(v, 'upstream', ['credentials']) ?? {};
  const creds = c.object(u.credentials, 'upstream.credentials', PROTOCOLS) ?? {};
  const out: Partial<Record<Protocol, UpstreamCredential>> = {};
  for (const p of PROTOCOLS) {
    const path = `upstream.credentials.${p}`;
    const cr = c.object(creds[p], path, ['header', 'prefix', 'env']);
    if (!cr) continue;
    const header = c.string(typeof cr.header === 'string' ? cr.header.toLowerCase() : cr.header, `${path}.header`, HEADER_NAME, 'an HTTP header name');
    const prefix = cr.prefix === undefined ? '' : typeof cr.prefix === 'string' ? cr.prefix : (c.fail(`${path}.prefix`, 'must be a string'), '');
    const name = c.string(cr.env, `${path}.env`, ENV_NAME, 'an environment variable name');
    const secret = name ? env[name] : undefined;
    // The secret's value is never echoed, only the variable's name.
    if (name && !secret) c.fail(`${path}.env`, `environment variable ${name} is not set or empty`);
    if (header && name && secret) out[p] = { header, value: prefix + secret };
  }
  return out;
}

function parseGroups(c: Checker, v: unknown): Map<string, GroupRecord> {
  const groups = new Map<string, GroupRecord>();
  const g = c.object(v ?? {}, 'groups', Object.keys((v as Obj) ?? {}));
  for (const [name, raw] of Object.entries(g ?? {})) {
    const path = `groups.${name}`;
    if (!GROUP_NAME.test(name)) c.fail(path, 'a group name must be 1-128 characters from A-Z a-z 0-9 . _ @ : -');
    // One problem per entry: a wrong type is reported here, not also by c.object.
    if (!isMapping(raw)) {
      c.fail(path, 'must be a mapping with models');
      continue;
    }
    const o = c.object(raw, path, ['available', 'models'])!;
    const models = new Map<string, ModelRecord>();
    if (!Array.isArray(o.models)) c.fail(`${path}.models`, 'must be a list of model names or {name, protocols, available}');
    else o.models.forEach((m: unknown, i: number) => {
      const model = parseModel(c, m, `${path}.models[${i}]`);
      if (!model) return;
      if (models.has(model.name)) c.fail(`${path}.models[${i}]`, `duplicate model ${JSON.stringify(model.name)}`);
      models.set(model.name, model);
    });
    groups.set(name, { name, available: c.bool(o.available, `${path}.available`, true), models });
  }
  return groups;
}

function parseModel(c: Checker, m: unknown, path: string): ModelRecord | undefined {
  if (typeof m === 'string') return NAME.test(m) ? { name: m, protocols: null, available: true } : (c.fail(path, `must be a model name: ${NAME_RULE}`), undefined);
  if (!isMapping(m)) return (c.fail(path, 'must be a model name or {name, protocols, available}'), undefined);
  const o = c.object(m, path, ['name', 'protocols', 'available'])!;
  const name = c.string(o.name, `${path}.name`, NAME, `a model name: ${NAME_RULE}`);
  let protocols: Protocol[] | null = null;
  if (o.protocols !== undefined) {
    if (!Array.isArray(o.protocols) || o.protocols.length === 0) c.fail(`${path}.protocols`, `must be a non-empty list of: ${PROTOCOLS.join(', ')}`);
    else {
      protocols = [];
      o.protocols.forEach((p: unknown, i: number) => {
        if (PROTOCOLS.includes(p as Protocol)) protocols!.push(p as Protocol);
        else c.fail(`${path}.protocols[${i}]`, `must be one of: ${PROTOCOLS.join(', ')}`);
      });
    }
  }
  return name ? { name, protocols, available: c.bool(o.available, `${path}.available`, true) } : undefined;
}

function parseKeys(c: Checker, v: unknown, groups: ReadonlyMap<string, GroupRecord>, fileStore: boolean): KeyRecord[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) return (c.fail('keys', 'must be a list'), []);
  const keys: KeyRecord[] = [];
  const ids = new Set<string>();
  const hashes = new Set<string>();
  v.forEach((raw: unknown, i: number) => {
    const path = `keys[${i}]`;
    if (!isMapping(raw)) return c.fail(path, 'must be a mapping with id, sha256 and group');
    const o = c.object(raw, path, ['id', 'sha256', 'group', 'balance', 'disabled', 'expiresAt'])!;
    const id = c.string(o.id, `${path}.id`, KEY_ID, 'an id of 1-128 characters from A-Z a-z 0-9 . _ @ : -');
    const sha256 = c.string(typeof o.sha256 === 'string' ? o.sha256.toLowerCase() : o.sha256, `${path}.sha256`, SHA256_HEX, 'the 64-hex-digit SHA-256 of the full key');
    const group = c.string(o.group, `${path}.group`);
    if (group && fileStore && !groups.has(group)) c.fail(`${path}.group`, `unknown group ${JSON.stringify(group)}`);
    let balance: number | null = null;
    if (o.balance !== undefined && o.balance !== null) {
      if (typeof o.balance === 'number' && Number.isFinite(o.balance)) balance = o.balance;
      else c.fail(`${path}.balance`, 'must be a number (omit it for unlimited)');
    }
    let expiresAt: number | null = null;
    if (o.expiresAt !== undefined && o.expiresAt !== null) {
      const t = o.expiresAt instanceof Date ? o.expiresAt.getTime() : typeof o.expiresAt === 'string' ? parseIsoTime(o.expiresAt) : NaN;
      if (Number.isNaN(t)) c.fail(`${path}.expiresAt`, 'must be an ISO 8601 date-time such as 2027-01-01T00:00:00Z');
      else expiresAt = t;
    }
    // Read before the id/sha256/group test below, so a bad value is reported even when those are bad too.
    const disabled = c.bool(o.disabled, `${path}.disabled`, false);
    if (id && ids.has(id)) c.fail(`${path}.id`, `duplicate id ${JSON.stringify(id)}`);
    if (sha256 && hashes.has(sha256)) c.fail(`${path}.sha256`, 'duplicate sha256 (the same key listed twice)');
    if (id) ids.add(id);
    if (sha256) hashes.add(sha256);
    if (id && sha256 && group) keys.push({ id, sha256, group, balance, disabled, expiresAt });
  });
  return keys;
}

/**
 * Date.parse alone reads "1" as the year 2001 and "2027-02-30" as March 2nd: accept only the ISO
 * 8601 forms the admin CLI accepts (admin-cli-args.ts parseExpires), with a day that exists.
 */
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

function parseIsoTime(text: string): number {
  const m = ISO_TIME.exec(text);
  if (!m) return NaN;
  const day = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  if (day.getUTCMonth() !== Number(m[2]) - 1 || day.getUTCDate() !== Number(m[3])) return NaN;
  return Date.parse(text);
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

/**
 * Strict validation of an Envoy bootstrap (YAML) against Envoy's own v3 API protos (shipped by
 * @grpc/grpc-js-xds, Envoy ~1.31), for `modelgate envoy-check FILE`; no Envoy binary needed.
 *
 * protobufjs `fromObject` silently drops unknown fields, so this walks the JSON itself, as Envoy
 * does at load time: protobuf's JSON parser (unknown fields, scalar types, enum names, oneofs,
 * proto3 JSON of well-known types, `Any` payloads by "@type"), then protoc-gen-validate (PGV):
 * required messages and oneofs, string lengths, patterns and header-name rules, const/in/not_in,
 * numeric, enum and duration bounds, enum defined_only, repeated and map sizes, ignore_empty.
 * Not checked: other string formats (email, hostname, ip, uri), timestamp rules, repeated `unique`,
 * TypedStruct contents, RE2 compilation and size of `safe_regex`, and whether your Envoy build
 * has each extension a typed_config names.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as protobuf from 'protobufjs';
import { parseDocument } from 'yaml';
import { includeDirs } from '../../proto/include-dirs.js';

/** The message an Envoy `-c` file holds. */
export const BOOTSTRAP_TYPE = 'envoy.config.bootstrap.v3.Bootstrap';

/** Outcome of {@link checkEnvoyConfig}. Every error and warning starts with the path it is about. */
export interface EnvoyCheckResult {
  ok: boolean;
  errors: string[];
  /** Accepted by Envoy but suspect: deprecated fields, `null` values, work-in-progress APIs. */
  warnings: string[];
}

/** Outcome of {@link parseEnvoyConfig}. */
export interface ParsedEnvoyConfig extends EnvoyCheckResult {
  /**
   * The config in proto3 JSON form as Envoy reads it: proto field names, enum names, wrappers as
   * plain values, `Any` payloads inline beside their "@type". Set whenever the YAML parsed.
   */
  config?: Record<string, unknown>;
  /** The config as a protobufjs message of the requested type (Any payloads packed); only when ok. */
  message?: protobuf.Message;
}

type Obj = Record<string, unknown>;
type Rules = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const LOAD_OPTIONS = { keepCase: true };
// google/protobuf/descriptor.proto (imported by validate.proto) is not in the grpc-js-xds deps.
const SEARCH_DIRS = [...includeDirs, path.dirname(require.resolve('protobufjs/package.json'))];
const WKT = '.google.protobuf.';
const WRAPPERS: Record<string, string> = {
  DoubleValue: 'double', FloatValue: 'float', Int64Value: 'int64', UInt64Value: 'uint64', Int32Value: 'int32',
  UInt32Value: 'uint32', BoolValue: 'bool', StringValue: 'string', BytesValue: 'bytes',
};
const SCALAR_JSON_WKT = new Set(['Duration', 'Timestamp', 'FieldMask', 'Struct', 'Value', 'ListValue', ...Object.keys(WRAPPERS)]);
const INT_RANGES: Record<string, [bigint, bigint]> = Object.fromEntries(
  ['int32', 'sint32', 'sfixed32', 'uint32', 'fixed32', 'int64', 'sint64', 'sfixed64', 'uint64', 'fixed64'].map((k) => {
    const bits = k.endsWith('32') ? 32n : 64n;
    return [k, /^u|^f/.test(k) ? [0n, 2n ** bits - 1n] : [-(2n ** (bits - 1n)), 2n ** (bits - 1n) - 1n]];
  }),
);
// PGV's regexes for well_known_regex (validate.proto, KnownRegex); `strict: false` relaxes both.
const HEADER_REGEX: Record<string, [RegExp, RegExp]> = {
  HTTP_HEADER_NAME: [/^:?[0-9a-zA-Z!#$%&'*+-.^_|~`]+$/, /^[^\u0000\n\r]*$/],
  HTTP_HEADER_VALUE: [/^[^\u0000-\u0008\u000A-\u001F\u007F]*$/, /^[^\u0000\n\r]*$/],
};

/** Proto files loaded so far; a Root is rebuilt from them when a file fails to load. */
const loadedFiles = ['envoy/config/bootstrap/v3/bootstrap.proto', 'envoy/extensions/filters/http/ratelimit/v3/rate_limit.proto'];
let root: protobuf.Root | undefined;

function protoRoot(): protobuf.Root {
  if (!root) {
    const r = new protobuf.Root();
    r.resolvePath = (_origin, target) => SEARCH_DIRS.map((d) => path.join(d, target)).find((f) => fs.existsSync(f)) ?? target;
    r.loadSync(loadedFiles, LOAD_OPTIONS);
    addNewerFields(r);
    r.resolveAll();
    root = r;
  }
  return root;
}

/**
 * Fields of Envoy's API newer than the bundled protos that the bundle uses, declared here as the
 * newer protos declare them (so they are checked, not waved through). The rate limit filters'
 * per-route `rate_limits` entries carry `hits_addend` (Envoy 1.33+: the entry's hits; the
 * bundle's token checks send 0, render-ratelimit.ts).
 */
function addNewerFields(r: protobuf.Root): void {
  const t = r.lookup('envoy.extensions.filters.http.ratelimit.v3.RateLimitConfig');
  if (t instanceof protobuf.Type && !t.fields.hits_addend) {
    const hits = new protobuf.Type('HitsAddend')
      .add(new protobuf.Field('number', 1, '.google.protobuf.UInt64Value'))
      .add(new protobuf.Field('format', 2, 'string'));
    t.add(hits);
    t.add(new protobuf.Field('hits_addend', 5, 'HitsAddend'));
  }
}

/**
 * Finds a message type by full name, loading the protos of its package on first use. Envoy's API
 * keeps one package per directory (envoy.extensions.filters.http.ext_authz.v3 lives in
 * envoy/extensions/filters/http/ext_authz/v3/), so a type URL names the files to load. A file whose
 * imports are not shipped (opencensus, opentelemetry) is skipped; the rest of its package loads.
 */
export function lookupEnvoyType(fullName: string): protobuf.Type | undefined {
  const find = (): protobuf.Type | undefined => {
    const t = protoRoot().lookup(fullName);
    return t instanceof protobuf.Type ? t : undefined;
  };
  const parts = fullName.split('.');
  for (let i = parts.length - 1; i > 0 && !find(); i--) {
    const dir = parts.slice(0, i).join('/');
    const full = SEARCH_DIRS.map((d) => path.join(d, dir)).find((d) => fs.existsSync(d) && fs.statSync(d).isDirectory());
    if (!full) continue;
    for (const f of fs.readdirSync(full).filter((n) => n.endsWith('.proto')).map((n) => `${dir}/${n}`)) {
      if (loadedFiles.includes(f)) continue;
      try {
        protoRoot().loadSync(f, LOAD_OPTIONS).resolveAll();
        loadedFiles.push(f);
      } catch {
        root = undefined; // drop what the failed file added
      }
    }
    break;
  }
  return find();
}

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const describe = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'a list' : typeof v === 'object' ? 'an object' : `${typeof v} ${JSON.stringify(v)}`);
const join = (at: string, key: string): string => (at ? `${at}.${key}` : key);
const camel = (s: string): string => s.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
const typeName = (t: protobuf.Type): string => t.fullName.slice(1);
/** "Duration" for .google.protobuf.Duration, "" for any other type. */
const wktOf = (t: protobuf.Type): string => (t.fullName.startsWith(WKT) ? t.fullName.slice(WKT.length) : '');
/** Well-known types whose JSON is not an object sit under "value" inside an Any. */
const anyHoldsValue = (t: protobuf.Type): boolean => SCALAR_JSON_WKT.has(wktOf(t));

function optionsOf(o: protobuf.ReflectionObject, name: string): Rules | undefined {
  const all = (o.parsedOptions ?? []) as Obj[];
  const found = all.filter((p) => name in p).map((p) => p[name] as Rules);
  return found.length ? Object.assign({}, ...found) : undefined;
}

/** Seconds (with fraction) of a proto3 JSON duration ("0.5s"), or undefined if malformed. */
function durationSeconds(v: unknown): number | undefined {
  const m = typeof v === 'string' ? /^(-?)(\d+)(?:\.(\d{1,9}))?s$/.exec(v) : null;
  if (!m) return undefined;
  return (m[1] ? -1 : 1) * (Number(m[2]) + Number(`0.${m[3] ?? '0'}`));
}

const ruleSeconds = (d: Rules | undefined): number | undefined =>
  d === undefined ? undefined : Number(d.seconds ?? 0) + Number(d.nanos ?? 0) / 1e9;

/** Walks one JSON value against a message type, collecting errors and a normalised copy. */
class Walker {
  readonly errors: string[] = [];
  readonly warnings: string[] = [];
  /** Cluster names defined, and cluster references with their paths (checked after the walk). */
  readonly clusters: string[] = [];
  readonly clusterRefs: Array<[string, string]> = [];

  private err(at: string, msg: string): undefined {
    this.errors.push(`${at || '(root)'}: ${msg}`);
    return undefined;
  }

  private warnIfWip(o: protobuf.ReflectionObject, at: string, what: string): void {
    if (Object.entries(o.options ?? {}).some(([k, v]) => k.endsWith('work_in_progress') && v === true)) {
      this.warnings.push(`${at}: ${what} is marked work_in_progress in Envoy's API (may change)`);
    }
  }

  message(t: protobuf.Type, v: unknown, at: string): unknown {
    const wkt = wktOf(t);
    if (wkt in WRAPPERS) return this.scalar(WRAPPERS[wkt], v, at);
    switch (wkt) {
      case 'Any': return this.any(v, at);
      case 'Duration':
        return durationSeconds(v) !== undefined && Math.abs(durationSeconds(v)!) <= 315576000000
          ? v : this.err(at, `expected a duration string like "0.5s", got ${describe(v)}`);
      case 'Timestamp':
        return typeof v === 'string' && !Number.isNaN(Date.parse(v)) ? v : this.err(at, `expected an RFC 3339 timestamp, got ${describe(v)}`);
      case 'FieldMask': return typeof v === 'string' ? v : this.err(at, `expected a field mask string, got ${describe(v)}`);
      case 'Struct': return isObj(v) ? v : this.err(at, `expected an object, got ${describe(v)}`);
      case 'ListValue': return Array.isArray(v) ? v : this.err(at, `expected a list, got ${describe(v)}`);
      case 'Value': return v;
    }
    if (!isObj(v)) return this.err(at, `expected an object (${typeName(t)}), got ${describe(v)}`);
    this.warnIfWip(t, at, typeName(t));
    const out: Obj = {};
    const used = new Map<string, string>();
    for (const [key, value] of Object.entries(v)) {
      const p = join(at, key);
      const f = t.fields[key] ?? t.fieldsArray.find((x) => camel(x.name) === key);
      if (!f) {
        this.err(p, `unknown field "${key}" in ${typeName(t)}`);
        continue;
      }
      if (used.has(f.name)) {
        this.err(p, `field "${f.name}" is set twice (as "${used.get(f.name)}" and "${key}")`);
        continue;
      }
      used.set(f.name, key);
      if (value === null && f.resolvedType?.fullName !== `${WKT}Value`) {
        this.warnings.push(`${p}: null leaves the field unset; write {} for an empty message`);
        continue;
      }
      if (f.options?.deprecated) this.warnings.push(`${p}: deprecated field ${typeName(t)}.${f.name}`);
      this.warnIfWip(f, p, `field ${f.name}`);
      const normalised = this.field(f, value, p);
      if (normalised !== undefined) out[f.name] = normalised;
      else out[f.name] = INVALID;
    }
    for (const o of t.oneofsArray) {
      const set = o.fieldsArray.filter((f) => f.name in out).map((f) => f.name);
      if (set.length > 1) this.err(at, `oneof "${o.name}" of ${typeName(t)} has ${set.length} members set (${set.join(', ')}); set only one`);
      if (set.length === 0 && o.options?.['(validate.required)']) this.err(at, `one of ${o.oneof.join(', ')} is required (oneof "${o.name}")`);
    }
    if (!t.options?.['(validate.disabled)'] && !t.options?.['(validate.ignored)']) {
      for (const f of t.fieldsArray) if (out[f.name] !== INVALID) this.fieldRules(f, out[f.name], join(at, used.get(f.name) ?? f.name));
    }
    for (const k of Object.keys(out)) if (out[k] === INVALID) delete out[k];
    this.collectClusterNames(t, out, at);
    return out;
  }

  private collectClusterNames(t: protobuf.Type, out: Obj, at: string): void {
    const ref = { 'envoy.config.route.v3.RouteAction': out.cluster, 'envoy.config.route.v3.WeightedCluster.ClusterWeight': out.name,
      'envoy.config.core.v3.GrpcService.EnvoyGrpc': out.cluster_name }[typeName(t)];
    if (typeof ref === 'string') this.clusterRefs.push([at, ref]);
    if (typeName(t) === 'envoy.config.cluster.v3.Cluster' && typeof out.name === 'string') this.clusters.push(out.name);
  }

  private field(f: protobuf.Field, v: unknown, at: string): unknown {
    if (f.map) {
      if (!isObj(v)) return this.err(at, `expected a map (object), got ${describe(v)}`);
      const out: Obj = {};
      for (const [k, x] of Object.entries(v)) {
        const keyType = (f as unknown as protobuf.MapField).keyType;
        if (keyType !== 'string' && keyType !== 'bool') this.scalar(keyType, k, `${at}["${k}"]`);
        out[k] = this.single(f, x, `${at}["${k}"]`);
      }
      return out;
    }
    if (f.repeated) {
      if (!Array.isArray(v)) return this.err(at, `expected a list, got ${describe(v)}`);
      return v.map((x, i) => this.single(f, x, `${at}[${i}]`));
    }
    return this.single(f, v, at);
  }

  private single(f: protobuf.Field, v: unknown, at: string): unknown {
    const rt = f.resolvedType;
    if (v === null && rt?.fullName !== `${WKT}Value`) return this.err(at, 'null is not allowed here');
    if (rt instanceof protobuf.Type) return this.message(rt, v, at);
    if (rt instanceof protobuf.Enum) {
      if (typeof v === 'number' && Number.isInteger(v)) return rt.valuesById[v] ?? v;
      if (typeof v !== 'string') return this.err(at, `expected an enum name of ${rt.fullName.slice(1)}, got ${describe(v)}`);
      if (!(v in rt.values)) return this.err(at, `unknown enum value "${v}" for ${rt.fullName.slice(1)} (expected one of ${Object.keys(rt.values).join(', ')})`);
      if (rt.valuesOptions?.[v]?.deprecated) this.warnings.push(`${at}: deprecated enum value ${v}`);
      return v;
    }
    return this.scalar(f.type, v, at);
  }

  private scalar(kind: string, v: unknown, at: string): unknown {
    const bad = (what: string): undefined => this.err(at, `expected ${what} (${kind}), got ${describe(v)}`);
    switch (kind) {
      case 'string': return typeof v === 'string' ? v : bad('a string');
      case 'bool': return typeof v === 'boolean' ? v : bad('true or false');
      case 'bytes': return typeof v === 'string' && /^[A-Za-z0-9+/_-]*={0,2}$/.test(v) ? v : bad('base64 text');
      case 'double': case 'float':
        return typeof v === 'number' || (typeof v === 'string' && (/^(NaN|-?Infinity)$/.test(v) || Number.isFinite(Number(v)))) ? Number(v) : bad('a number');
    }
    const range = INT_RANGES[kind];
    if (!range) return bad('a known scalar');
    const text = typeof v === 'number' && Number.isInteger(v) ? String(v) : typeof v === 'string' && /^-?\d+$/.test(v) ? v : undefined;
    if (text === undefined) return bad('an integer');
    const n = BigInt(text);
    if (n < range[0] || n > range[1]) return this.err(at, `${text} is out of range for ${kind}`);
    return Number.isSafeInteger(Number(n)) ? Number(n) : text;
  }

  private any(v: unknown, at: string): unknown {
    if (!isObj(v)) return this.err(at, `expected an object with "@type", got ${describe(v)}`);
    const url = v['@type'];
    if (typeof url !== 'string') return this.err(at, 'an Any needs a "@type" string');
    const name = url.slice(url.lastIndexOf('/') + 1);
    const t = url.includes('/') && name ? lookupEnvoyType(name) : undefined;
    if (!t) return this.err(`${at}["@type"]`, `cannot resolve type URL "${url}" in Envoy's API protos`);
    const { '@type': _type, ...rest } = v;
    const valueForm = anyHoldsValue(t);
    if (valueForm) {
      const extra = Object.keys(rest).filter((k) => k !== 'value');
      if (extra.length) return this.err(at, `an Any of ${typeName(t)} holds only "@type" and "value", not ${extra.join(', ')}`);
    }
    const inner = this.message(t, valueForm ? rest.value : rest, at);
    if (inner === undefined) return undefined;
    return valueForm ? { '@type': url, value: inner } : { '@type': url, ...(inner as Obj) };
  }

  /** Applies a field's `(validate.rules)` as PGV would: to the value, or to the default when unset. */
  private fieldRules(f: protobuf.Field, value: unknown, at: string): void {
    const r = optionsOf(f, '(validate.rules)');
    if (!r) return;
    if (value === undefined) {
      if (f.partOf) return; // an unset oneof member (or proto3 `optional`) is not validated
      if (r.message?.required || r.duration?.required || r.any?.required || r.timestamp?.required) {
        this.err(at, 'is required');
        return;
      }
      if (f.resolvedType instanceof protobuf.Type) return;
      value = f.map ? {} : f.repeated ? [] : f.resolvedType instanceof protobuf.Enum ? 0 : f.type === 'string' || f.type === 'bytes' ? '' : f.type === 'bool' ? false : 0;
    }
    if (f.map) {
      const entries = Object.entries(value as Obj);
      this.bounds(entries.length, r.map?.min_pairs, r.map?.max_pairs, at, 'entries');
      for (const [k, x] of entries) {
        if (r.map?.keys) this.check(r.map.keys, 'string', k, `${at}["${k}"] (key)`);
        if (r.map?.values) this.check(r.map.values, this.kindOf(f), x, `${at}["${k}"]`, f);
      }
    } else if (f.repeated) {
      const items = value as unknown[];
      this.bounds(items.length, r.repeated?.min_items, r.repeated?.max_items, at, 'items');
      if (r.repeated?.items) items.forEach((x, i) => this.check(r.repeated.items, this.kindOf(f), x, `${at}[${i}]`, f));
    } else {
      this.check(r, this.kindOf(f), value, at, f);
    }
  }

  private kindOf(f: protobuf.Field): string {
    const rt = f.resolvedType;
    if (rt instanceof protobuf.Enum) return 'enum';
    if (rt instanceof protobuf.Type) return WRAPPERS[wktOf(rt)] ?? (wktOf(rt).toLowerCase() || 'message');
    return f.type;
  }

  private bounds(n: number, min: unknown, max: unknown, at: string, what: string): void {
    if (min !== undefined && n < Number(min)) this.err(at, `needs at least ${min} ${what}, has ${n}`);
    if (max !== undefined && n > Number(max)) this.err(at, `allows at most ${max} ${what}, has ${n}`);
  }

  /** One value against the rule set of its kind (`r.string`, `r.uint32`, `r.duration`, ...). */
  private check(r: Rules, kind: string, v: unknown, at: string, f?: protobuf.Field): void {
    const k = r[kind] as Rules | undefined;
    if (!k || (k.ignore_empty && (v === '' || v === 0 || v === false))) return;
    const fail = (why: string): void => void this.err(at, `violates (validate.rules).${kind}: ${why}`);
    if (kind === 'any') {
      const url = (v as Obj)['@type'];
      if (k.in?.length && !k.in.includes(url)) fail(`type must be one of ${k.in.join(', ')}`);
      if (k.not_in?.includes(url)) fail(`type ${String(url)} is not allowed`);
      return;
    }
    if (kind === 'string' || kind === 'bytes') {
      const s = String(v);
      const len = kind === 'bytes' ? Buffer.from(s, 'base64').length : [...s].length; // PGV counts runes
      const bytes = kind === 'bytes' ? len : Buffer.byteLength(s);
      if (k.min_len !== undefined && len < Number(k.min_len)) fail(`min_len ${k.min_len}`);
      if (k.max_len !== undefined && len > Number(k.max_len)) fail(`max_len ${k.max_len}`);
      if (k.min_bytes !== undefined && bytes < Number(k.min_bytes)) fail(`min_bytes ${k.min_bytes}`);
      if (k.max_bytes !== undefined && bytes > Number(k.max_bytes)) fail(`max_bytes ${k.max_bytes}`);
      let re: RegExp | undefined;
      try { re = k.pattern === undefined ? undefined : new RegExp(k.pattern, 'u'); } catch { /* RE2-only syntax: not checked */ }
      if (re && !re.test(s)) fail(`must match ${k.pattern}`);
      const wk = HEADER_REGEX[k.well_known_regex as string];
      if (wk && !(k.strict === false ? wk[1] : wk[0]).test(s)) fail(`not a valid ${k.well_known_regex}`);
    }
    const num = (x: unknown): number | undefined =>
      x === undefined ? undefined : kind === 'duration' ? ruleSeconds(x as Rules) : kind === 'enum' ? this.enumNumber(f, x) : Number(x);
    const n = kind === 'duration' ? durationSeconds(v)! : num(v)!;
    const same = (x: unknown): boolean => (kind === 'string' || kind === 'bool' ? x === v : num(x) === n);
    if (k.const !== undefined && !same(k.const)) fail(`must be ${JSON.stringify(k.const)}`);
    if (k.in !== undefined && ![k.in].flat().some(same)) fail(`must be one of ${[k.in].flat().join(', ')}`);
    if (k.not_in !== undefined && [k.not_in].flat().some(same)) fail(`must not be ${String(v)}`);
    if (kind === 'enum' && k.defined_only && !(f?.resolvedType instanceof protobuf.Enum && n in f.resolvedType.valuesById)) fail('must be a defined enum value');
    const [gt, gte, lt, lte] = [num(k.gt), num(k.gte), num(k.lt), num(k.lte)];
    const lo = gt ?? gte;
    const hi = lt ?? lte;
    if (lo === undefined && hi === undefined) return;
    const above = gt !== undefined ? n > gt : gte === undefined || n >= gte;
    const below = lt !== undefined ? n < lt : lte === undefined || n <= lte;
    // PGV: a lower bound above the upper one means "outside the range".
    if (lo !== undefined && hi !== undefined && lo > hi ? !(above || below) : !(above && below)) {
      const limits = [['>', gt], ['>=', gte], ['<', lt], ['<=', lte]].filter(([, x]) => x !== undefined);
      fail(`must be ${limits.map(([op, x]) => `${op} ${x}`).join(' and ')}`);
    }
  }

  private enumNumber(f: protobuf.Field | undefined, v: unknown): number {
    const e = f?.resolvedType;
    return typeof v === 'string' && e instanceof protobuf.Enum ? e.values[v] : Number(v);
  }
}

/** Marks a field whose value was invalid, so PGV rules do not report it a second time as unset. */
const INVALID = Symbol('invalid');

/** Converts the normalised JSON to the object form protobufjs `fromObject` expects (Any packed). */
function toProtoObject(t: protobuf.Type, v: unknown): unknown {
  const wkt = wktOf(t);
  if (wkt in WRAPPERS) return { value: v };
  const toValue = (x: unknown): unknown =>
    x === null ? { nullValue: 0 } : typeof x === 'number' ? { numberValue: x } : typeof x === 'string' ? { stringValue: x }
      : typeof x === 'boolean' ? { boolValue: x } : Array.isArray(x) ? { listValue: { values: x.map(toValue) } }
        : { structValue: { fields: Object.fromEntries(Object.entries(x as Obj).map(([k, y]) => [k, toValue(y)])) } };
  switch (wkt) {
    case 'Duration': {
      const s = durationSeconds(v)!;
      return { seconds: Math.trunc(s), nanos: Math.round((s - Math.trunc(s)) * 1e9) };
    }
    case 'Timestamp': {
      const ms = Date.parse(String(v));
      return { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 };
    }
    case 'FieldMask': return { paths: String(v).split(',').filter(Boolean) };
    case 'Struct': return (toValue(v) as { structValue: unknown }).structValue;
    case 'ListValue': return { values: (v as unknown[]).map(toValue) };
    case 'Value': return toValue(v);
    case 'Any': {
      const { '@type': url, ...rest } = v as Obj;
      const inner = lookupEnvoyType(String(url).slice(String(url).lastIndexOf('/') + 1))!;
      const payload = toProtoObject(inner, anyHoldsValue(inner) ? rest.value : rest) as Obj;
      return { type_url: url, value: inner.encode(inner.fromObject(payload)).finish() };
    }
  }
  const out: Obj = {};
  for (const [k, x] of Object.entries(v as Obj)) {
    const f = t.fields[k];
    const conv = (y: unknown): unknown => (f.resolvedType instanceof protobuf.Type ? toProtoObject(f.resolvedType, y) : y);
    out[k] = f.map ? Object.fromEntries(Object.entries(x as Obj).map(([mk, y]) => [mk, conv(y)])) : f.repeated ? (x as unknown[]).map(conv) : conv(x);
  }
  return out;
}

/**
 * Parses YAML text as an Envoy message (the bootstrap by default) and validates it strictly.
 * Returns the normalised JSON form (`config`) and, when valid, the protobufjs message.
 */
export function parseEnvoyConfig(yamlText: string, type: string = BOOTSTRAP_TYPE): ParsedEnvoyConfig {
  // YAML 1.2 core schema, duplicate keys rejected, no `<<` merge keys: Envoy's yaml-cpp has none
  // (envoyproxy/envoy#12926), so a merge key would be an unknown field there too.
  const doc = parseDocument(yamlText, { uniqueKeys: true, merge: false, prettyErrors: true });
  if (doc.errors.length) return { ok: false, errors: doc.errors.map((e) => `yaml: ${e.message}`), warnings: [] };
  const json: unknown = doc.toJS({ maxAliasCount: 10_000 });
  const t = lookupEnvoyType(type);
  if (!t) return { ok: false, errors: [`unknown message type ${type}`], warnings: [] };
  const w = new Walker();
  const config = w.message(t, json, '');
  if (type === BOOTSTRAP_TYPE && isObj(json) && !json.dynamic_resources) {
    // Static clusters only: Envoy rejects a route or gRPC service naming a cluster that does not exist.
    const names = new Set(w.clusters);
    for (const c of names) if (w.clusters.indexOf(c) !== w.clusters.lastIndexOf(c)) w.errors.push(`static_resources.clusters: duplicate cluster name "${c}"`);
    for (const [at, ref] of w.clusterRefs) if (!names.has(ref)) w.errors.push(`${at}: unknown cluster "${ref}"`);
  }
  const result: ParsedEnvoyConfig = { ok: w.errors.length === 0, errors: w.errors, warnings: w.warnings };
  if (isObj(config)) result.config = config;
  if (result.ok) result.message = t.fromObject(toProtoObject(t, config) as Obj);
  return result;
}

/** Validates an Envoy bootstrap in YAML (or JSON) text; `ok` is false when Envoy would reject it. */
export function checkEnvoyConfig(yamlText: string): EnvoyCheckResult {
  const { ok, errors, warnings } = parseEnvoyConfig(yamlText);
  return { ok, errors, warnings };
}

/**
 * Serialised CheckResponses, cached. A response is a pure function of a few decision fields (and the
 * config), while encoding one with protobufjs costs several microseconds per Check — more than the
 * whole decision. So each distinct answer is encoded once and its bytes are reused from a bounded
 * LRU per config (a reload starts a fresh one); gRPC sends the bytes as they are.
 */
import { LRUCache } from 'lru-cache';
import type { CheckResponse } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import { allowPlan, meteredRequest, meterMarkFields, writeCheckResponse, type AllowPlan } from './write-response';
import type { Config } from '../config/load';
import type { Decision } from './decision';
import type { Route } from './routes';
import { loggedModel, logPath } from './decision-log';

export type Serialize = (response: CheckResponse) => Buffer;

interface PerConfig {
  readonly plan: AllowPlan;
  readonly bytes: LRUCache<string, Buffer>;
  /**
   * The common answer, an allowed request on a fixed endpoint, found without building a key
   * string: by endpoint, key id, group, then model. Bounded by counting: full, it starts over.
   */
  readonly allowed: Map<number, Map<string, Map<string, Map<string, Buffer>>>>;
  allowedCount: number;
}

/** Every field name of any kind of Route. */
type FieldOfAny<T> = T extends unknown ? keyof T : never;
type RouteField = FieldOfAny<Route>;
/** Every field name of either kind of Decision. */
type DecisionField = FieldOfAny<Decision>;

/**
 * How each field of a Decision enters the cache key: `key` (as it is), a projection of it,
 * `unwritten` (writeCheckResponse never reads it, which test/check/response-encoder.test.ts
 * checks), or `appended` (each request's own: written after the cached bytes, never in them). The type names every
 * field of Decision and of Route: a field added there does not
 * compile until it is placed here, so the cache cannot return bytes built without it.
 */
const DECISION_KEY: { readonly [F in DecisionField]-?: 'key' | 'unwritten' | 'appended' | ((d: Decision) => string) } =
  {
    allowed: 'key',
    reason: 'key',
    hint: 'key',
    route: (d) => {
      let out = '';
      for (const f of ROUTE_FIELDS) out += `${text((d.route as Partial<Record<RouteField, unknown>>)[f])}\0`;
      return out;
    },
    keyId: 'key',
    keySha256: 'unwritten', // the meter's balance updates only
    group: 'key',
    // Written as logged (decision-log.ts loggedModel): a model of the group as is, another bounded and
    // redacted, a model that is a key never (so it never enters the cache key either).
    model: (d) => text(loggedModel(d)),
    modelKnown: 'key',
    modelIsKey: 'key',
    stale: 'unwritten', // the log line only
    balance: 'unwritten', // the meter's admission only
    budget: 'unwritten', // the meter's admission only
    modelBudget: 'unwritten', // the meter's admission only
    bodyFields: 'unwritten', // the meter's admission only (where the body's fields sit)
    // The rate limit metadata: its values change every second (their resets) and with the limits.
    rateLimit: (d) => (d.rateLimit ? JSON.stringify(d.rateLimit.fields) : ''),
    inFlightLimit: 'unwritten', // the in-flight cap's admission only
    retryAfter: 'key',
    removeQuery: (d) => (d.removeQuery ? d.removeQuery.join('&') : ''),
    // A metered request's maxima (its body's bytes, its max_tokens): nearly every request's differ, so
    // they are appended to the cached bytes (appendToMetadata) instead of keying them.
    meterMarks: 'appended',
  };
const ROUTE_KEY: { readonly [F in RouteField]-?: 'key' } = {
  kind: 'key',
  style: 'key',
  family: 'key',
  keys: 'key',
  alt: 'key',
  model: 'key',
  fixedId: 'key',
  allow: 'key',
  detail: 'key',
};
const ROUTE_FIELDS = Object.keys(ROUTE_KEY) as RouteField[];
const KEYED = (Object.entries(DECISION_KEY) as [DecisionField, (typeof DECISION_KEY)[DecisionField]][]).filter(
  ([, how]) => how !== 'unwritten' && how !== 'appended',
);

/** Decision fields the response never carries (for the test that checks it). */
export const UNWRITTEN_FIELDS = (Object.keys(DECISION_KEY) as DecisionField[]).filter(
  (f) => DECISION_KEY[f] === 'unwritten',
);

const text = (v: unknown): string => (v === undefined ? '' : String(v));

const varintLength = (n: number): number => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5);
function writeVarint(out: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    out[at++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  out[at++] = n;
  return at;
}
function readVarint(b: Buffer, at: number): [number, number] {
  let n = 0;
  for (let shift = 0; at < b.length && shift < 35; shift += 7) {
    const x = b[at++];
    n += (x & 0x7f) * 2 ** shift;
    if (x < 0x80) return [n, at];
  }
  return [-1, at];
}

/**
 * The bytes of a google.protobuf.Struct map entry (fields = 1) up to its Value's payload, for a
 * number (number_value = 2, a double: 8 bytes follow) or a bool (bool_value = 4, a varint: 1 byte
 * follows). Built once per name (the marks' few names, each shorter than 100 bytes).
 */
const ENTRY_HEADS = new Map<string, readonly [Buffer, Buffer]>();
function entryHeads(name: string): readonly [Buffer, Buffer] {
  let heads = ENTRY_HEADS.get(name);
  if (!heads) {
    const key = Buffer.from(name, 'utf8');
    const head = (valueTag: number, payload: number) => {
      const value = 1 + payload;
      const inner = 1 + varintLength(key.length) + key.length + 1 + varintLength(value) + value;
      const out = Buffer.alloc(1 + varintLength(inner) + inner - payload);
      let at = writeVarint(out, 1, inner);
      out[0] = 0x0a;
      out[at++] = 0x0a;
      at = writeVarint(out, at, key.length);
      at += key.copy(out, at);
      out[at++] = 0x12;
      at = writeVarint(out, at, value);
      out[at] = valueTag;
      return out;
    };
    heads = [head(0x11, 8), head(0x20, 1)];
    if (ENTRY_HEADS.size < 64) ENTRY_HEADS.set(name, heads);
  }
  return heads;
}

type MarkFields = Record<string, { boolValue: boolean } | { numberValue: number } | { stringValue: string }>;

/**
 * The length of a Struct map entry whose Value is a string (string_value = 3), whose head depends on
 * the string's length (so it is not cached as the others' are).
 */
function stringEntryLength(name: string, value: string): number {
  const key = Buffer.byteLength(name, 'utf8');
  const text = Buffer.byteLength(value, 'utf8');
  const inner =
    1 + varintLength(key) + key + 1 + varintLength(1 + varintLength(text) + text) + 1 + varintLength(text) + text;
  return 1 + varintLength(inner) + inner;
}

function writeStringEntry(out: Buffer, at: number, name: string, value: string): number {
  const key = Buffer.byteLength(name, 'utf8');
  const text = Buffer.byteLength(value, 'utf8');
  const valueLength = 1 + varintLength(text) + text;
  out[at++] = 0x0a;
  at = writeVarint(out, at, 1 + varintLength(key) + key + 1 + varintLength(valueLength) + valueLength);
  out[at++] = 0x0a;
  at = writeVarint(out, at, key);
  at += out.write(name, at, 'utf8');
  out[at++] = 0x12;
  at = writeVarint(out, at, valueLength);
  out[at++] = 0x1a;
  at = writeVarint(out, at, text);
  return at + out.write(value, at, 'utf8');
}

/** The length of google.protobuf.Struct map entries (fields = 1) for a few bool, number or string Values. */
function entriesLength(fields: MarkFields): number {
  let n = 0;
  for (const name in fields) {
    const v = fields[name];
    n +=
      'numberValue' in v
        ? entryHeads(name)[0].length + 8
        : 'stringValue' in v
          ? stringEntryLength(name, v.stringValue)
          : entryHeads(name)[1].length + 1;
  }
  return n;
}

/** Writes those entries at `at`. */
function writeEntries(out: Buffer, at: number, fields: MarkFields): number {
  for (const name in fields) {
    const v = fields[name];
    if ('numberValue' in v) {
      at += entryHeads(name)[0].copy(out, at);
      at = out.writeDoubleLE(v.numberValue, at);
    } else if ('stringValue' in v) {
      at = writeStringEntry(out, at, name, v.stringValue);
    } else {
      at += entryHeads(name)[1].copy(out, at);
      out[at++] = v.boolValue ? 1 : 0;
    }
  }
  return at;
}

/**
 * A CheckResponse's bytes with more Struct entries in its dynamic_metadata (field 4, which the
 * encoder writes last): the same message as one written with them. Undefined when the bytes do
 * not end with that field (the caller then encodes the whole response). One allocation.
 */
function appendToMetadata(bytes: Buffer, fields: MarkFields): Buffer | undefined {
  let at = 0;
  while (at < bytes.length) {
    const start = at;
    const [tag, next] = readVarint(bytes, at);
    if (tag < 0) return undefined;
    at = next;
    const wire = tag & 7;
    if (wire === 0) {
      const [v, after] = readVarint(bytes, at);
      if (v < 0) return undefined;
      at = after;
    } else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const [length, content] = readVarint(bytes, at);
      if (length < 0) return undefined;
      at = content + length;
      if (tag === 0x22 && at === bytes.length) {
        const total = length + entriesLength(fields);
        const out = Buffer.allocUnsafe(start + 1 + varintLength(total) + total);
        bytes.copy(out, 0, 0, start);
        out[start] = 0x22;
        let w = writeVarint(out, start + 1, total);
        w += bytes.copy(out, w, content, at);
        writeEntries(out, w, fields);
        return out;
      }
    } else return undefined;
  }
  return undefined;
}

/**
 * The cache key of a decision's response: every written field of the decision (DECISION_KEY), then
 * the path (logged through the metadata): a fixed endpoint's path by its route's number (routes.ts
 * fixedId: one per path), any other path as it is. '\0' cannot occur in any field but the path,
 * which comes last.
 */
function responseKey(d: Decision, path: string): string {
  let out = '';
  for (const [field, how] of KEYED) out += `${how === 'key' ? text(d[field]) : (how as (d: Decision) => string)(d)}\0`;
  const r = d.route;
  return (r.kind === 'protocol' || r.kind === 'models') && r.fixedId !== undefined ? out : `${out}/${path}`;
}

export class ResponseEncoder {
  readonly #perConfig = new WeakMap<Config, PerConfig>();

  /**
   * @param replica this process's name, in the metadata of metered requests in strict mode (the
   *   meter's leases: whoever settles a request debits its replica's lease)
   */
  constructor(
    readonly serialize: Serialize,
    readonly maxEntries = 10_000,
    readonly replica?: string,
  ) {}

  /**
   * The cached bytes the last encode() returned, or extended with its request's own marks: the
   * same for every request of one answer (pipeline.ts keys what it derives from an answer by it).
   */
  base: Buffer = Buffer.alloc(0);

  /** The serialised CheckResponse for a decision on a request with this path (without query). */
  encode(d: Decision, config: Config, path = ''): Buffer {
    const base = this.#encodeCached(d, config, path);
    this.base = base;
    // A metered request's own marks (its maxima) follow the cached bytes, never enter them.
    if (!d.meterMarks || !meteredRequest(d, logPath(d, path))) return base;
    const marks = meterMarkFields(d);
    if (Object.keys(marks).length === 0) return base;
    const out = appendToMetadata(base, marks);
    if (out) return out;
    const c = this.#perConfig.get(config) as PerConfig;
    return this.serialize(writeCheckResponse(d, config, c.plan, loggedModel(d), logPath(d, path), this.replica));
  }

  #encodeCached(d: Decision, config: Config, path: string): Buffer {
    let c = this.#perConfig.get(config);
    if (!c)
      this.#perConfig.set(
        config,
        (c = {
          plan: allowPlan(config),
          bytes: new LRUCache({ max: this.maxEntries }),
          allowed: new Map(),
          allowedCount: 0,
        }),
      );
    const r = d.route;
    // Answers with rate limit metadata change every second (their resets): keyed by it below.
    if (
      d.allowed &&
      r.kind === 'protocol' &&
      r.fixedId !== undefined &&
      d.keyId !== undefined &&
      d.group !== undefined &&
      !d.modelIsKey &&
      !d.removeQuery &&
      !d.rateLimit
    ) {
      return this.#encodeAllowed(
        c,
        d,
        config,
        path,
        r.fixedId,
        d.keyId,
        d.group,
        d.modelKnown && d.model !== undefined ? d.model : '',
      );
    }
    return this.#encodeAny(c, d, config, path);
  }

  #encodeAllowed(
    c: PerConfig,
    d: Decision,
    config: Config,
    path: string,
    fixedId: number,
    keyId: string,
    group: string,
    model: string,
  ): Buffer {
    let byKey = c.allowed.get(fixedId);
    if (!byKey) c.allowed.set(fixedId, (byKey = new Map()));
    let byGroup = byKey.get(keyId);
    if (!byGroup) byKey.set(keyId, (byGroup = new Map()));
    let byModel = byGroup.get(group);
    if (!byModel) byGroup.set(group, (byModel = new Map()));
    let bytes = byModel.get(model);
    if (!bytes) {
      if (c.allowedCount >= this.maxEntries) {
        c.allowed.clear();
        c.allowedCount = 0;
        return this.#encodeAllowed(c, d, config, path, fixedId, keyId, group, model);
      }
      bytes = this.#encodeAny(c, d, config, path);
      byModel.set(model, bytes);
      c.allowedCount++;
    }
    return bytes;
  }

  #encodeAny(c: PerConfig, d: Decision, config: Config, path: string): Buffer {
    const key = responseKey(d, path);
    let bytes = c.bytes.get(key);
    if (!bytes) {
      // Without the request's own marks (encode appends them).
      const unmarked = d.meterMarks ? { ...d, meterMarks: undefined } : d;
      bytes = this.serialize(
        writeCheckResponse(unmarked, config, c.plan, loggedModel(d), logPath(d, path), this.replica),
      );
      c.bytes.set(key, bytes);
    }
    return bytes;
  }
}

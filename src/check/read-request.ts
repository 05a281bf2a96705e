/**
 * Stage 1 of the pipeline on the gRPC path: the bytes of an `envoy.service.auth.v3.CheckRequest`
 * become a RequestView directly, reading only what modelgate decides on. A generic protobuf
 * decoder (protobufjs, as grpc-js's proto-loader uses) builds every field of every message (peer
 * addresses, timestamps, every header as a string pair, 64-bit sizes as strings) and then a second
 * plain-object copy of it all; under load that was a tenth of a whole Check's CPU and much of its
 * garbage. This reader walks the wire format once (src/wire/wire-reader.ts) and keeps:
 *
 *   CheckRequest.attributes(1) -> AttributeContext.request(4) -> Request.http(2) -> HttpRequest:
 *     method(2), headers(3, map<string,string>), path(4), body(11), raw_body(12),
 *     header_map(13) -> HeaderMap.headers(1) -> HeaderValue: key(1), value(2), raw_value(3)
 *
 * and of the headers only those `wanted` says the decision reads (the rest are skipped without
 * being decoded). Everything else is skipped by wire type, without looking inside. Semantics
 * follow the protobuf encoding spec: the last value of a scalar field wins, a repeated embedded
 * message merges (as if concatenated; protobufjs keeps only the last, Envoy never sends either),
 * later map entries replace earlier ones with the same key, a field whose wire type does not match
 * its declaration is treated as unknown. A malformed encoding on the path read (any fault of the
 * wire reader's limits: a truncated field, a length past its end, wire types 6/7, a stray
 * end-group, field number 0, groups nested too deep) makes the whole request undecodable: the
 * caller denies it (check_request_malformed), never guesses. The contents of skipped fields are not checked.
 *
 * `headers` (the map Envoy fills by default) is used when it has entries, else `header_map`
 * (`encode_raw_headers: true`, Envoy 1.30+), whose keys are lowercased and repeats joined with ','
 * as Envoy joins them in the map. The body is `raw_body` (pack_as_bytes) when non-empty, else the
 * bytes of `body` as they came (invalid UTF-8 there stays invalid, and the model reader refuses it).
 */
import type { Config } from '../config/load';
import type { RequestView } from './request-view';
import { WIRE, WIRE_FAULT, WireError, WireReader } from '../wire/wire-reader';
import { HEADER, decisionHeaders } from '../contract/headers';

/** A wanted header name: its bytes, to compare against the wire, and the string to key it by. */
interface WantedName {
  readonly bytes: Uint8Array;
  readonly name: string;
}

/** Which header names to keep (lowercase ASCII), grouped by length. */
export interface HeaderFilter {
  /** `byLength[n]`: the wanted names n bytes long (most names on the wire are rejected by length alone). */
  readonly byLength: readonly (readonly WantedName[])[];
}

/** Header names longer than this are never wanted (config/schema.ts allows at most 128 characters). */
const MAX_NAME_BYTES = 255;
const NONE: readonly WantedName[] = [];

export function headerFilter(names: Iterable<string>): HeaderFilter {
  const byLength: WantedName[][] = Array.from({ length: MAX_NAME_BYTES + 1 }, () => []);
  for (const n of names) {
    const name = n.toLowerCase();
    if (!/^[\x21-\x7e]+$/.test(name) || name.length > MAX_NAME_BYTES)
      throw new RangeError(`not a header name to match: ${JSON.stringify(name)}`);
    const list = byLength[name.length];
    if (!list.some((w) => w.name === name)) list.push({ bytes: Buffer.from(name, 'latin1'), name });
  }
  return { byLength: byLength.map((l) => (l.length === 0 ? NONE : l)) };
}

/** The decoder's filter for a config's routes (built once per config). */
export function requestHeaderFilter(routes: Config['routes']): HeaderFilter {
  return headerFilter(decisionHeaders(routes));
}

/**
 * The wanted name the bytes [start, end) spell, if any, without making a string of them. With
 * `foldCase`, ASCII upper-case letters on the wire match (header_map keeps the client's case);
 * HTTP field names are ASCII tokens, so nothing else is folded.
 */
function wantedName(f: HeaderFilter, buf: Buffer, start: number, end: number, foldCase: boolean): string | undefined {
  const len = end - start;
  if (len > MAX_NAME_BYTES) return undefined;
  const candidates = f.byLength[len];
  for (let k = 0; k < candidates.length; k++) {
    const want = candidates[k].bytes;
    let i = 0;
    for (; i < len; i++) {
      const b = buf[start + i];
      if (b !== want[i] && !(foldCase && b >= 0x41 && b <= 0x5a && b + 32 === want[i])) break;
    }
    if (i === len) return candidates[k].name;
  }
  return undefined;
}

/** What the walk collects; one per request. */
class Collected {
  /**
   * Byte ranges of HttpRequest.method and .path: decoded only when the pseudo-headers are absent (Envoy sends both).
   */
  methodStart = 0;
  methodEnd = 0;
  pathStart = 0;
  pathEnd = 0;
  /** Byte range of attributes.source.address.socket_address.address. */
  sourceStart = 0;
  sourceEnd = 0;
  /** From the `headers` map (no prototype: a header named `constructor` or `__proto__` is just a name). */
  readonly map: Record<string, string> = Object.create(null) as Record<string, string>;
  mapEntries = 0;
  /** From `header_map`, joined. */
  readonly raw: Record<string, string> = Object.create(null) as Record<string, string>;
  body: Uint8Array | undefined = undefined;
  rawBody: Uint8Array | undefined = undefined;
}

/**
 * The decode in progress: the wire reader (src/wire/), what it collects and the header filter. A
 * decode runs synchronously to its end, so no two ever interleave and this is module state: the
 * reader stays one class of object for the wire module (the meter's reader is the same class).
 * Between decodes it holds no request's bytes.
 */
const c = new WireReader();
/** What `out` is between decodes: it holds nothing of a request. */
const IDLE = new Collected();
let out = IDLE;
let filter: HeaderFilter = { byLength: [] };
type Cursor = WireReader;
// Module constants (an imported name is a property load at each use in CommonJS).
const LEN = WIRE.LEN;
const FIELD_0 = WIRE_FAULT.field_number_0;
const PAST_END = WIRE_FAULT.length_past_end;

/**
 * Walks the fields of one message in [c.pos, end), calling `field` for each (which must consume
 * the field when it returns true) and skipping the rest.
 */
function walk(c: Cursor, end: number, field: FieldHandler): void {
  while (c.pos < end) {
    // c.tag(end), one call less on the hottest loop
    const tag = c.varint32(end);
    if (tag < 8) throw FIELD_0;
    if (!field(c, tag >>> 3, tag & 7, end)) c.skip(tag & 7, end);
  }
  if (c.pos !== end) throw PAST_END;
}

type FieldHandler = (c: Cursor, num: number, wire: number, end: number) => boolean;

const checkRequest: FieldHandler = (c, num, wire, end) => {
  if (num !== 1 || wire !== LEN) return false; // attributes
  walk(c, c.lengthEnd(end), attributes);
  return true;
};

const attributes: FieldHandler = (c, num, wire, end) => {
  if (wire !== LEN) return false;
  if (num === 4) walk(c, c.lengthEnd(end), request);
  else if (num === 1)
    walk(c, c.lengthEnd(end), peer); // source
  else return false;
  return true;
};

/**
 * Peer.address (1) -> Address.socket_address (1) -> SocketAddress.address (2): the client's IP as Envoy determined it.
 */
const peer: FieldHandler = (c, num, wire, end) => {
  if (num !== 1 || wire !== LEN) return false;
  walk(c, c.lengthEnd(end), address);
  return true;
};

const address: FieldHandler = (c, num, wire, end) => {
  if (num !== 1 || wire !== LEN) return false;
  walk(c, c.lengthEnd(end), socketAddress);
  return true;
};

const socketAddress: FieldHandler = (c, num, wire, end) => {
  if (num !== 2 || wire !== LEN) return false;
  const stop = c.lengthEnd(end);
  out.sourceStart = c.pos;
  out.sourceEnd = stop;
  c.pos = stop;
  return true;
};

const request: FieldHandler = (c, num, wire, end) => {
  if (num !== 2 || wire !== LEN) return false; // http
  walk(c, c.lengthEnd(end), http);
  return true;
};

const http: FieldHandler = (c, num, wire, end) => {
  if (wire !== LEN) return false;
  const o = out;
  switch (num) {
    case 2: {
      // method
      const stop = c.lengthEnd(end);
      o.methodStart = c.pos;
      o.methodEnd = stop;
      c.pos = stop;
      return true;
    }
    case 3: // headers map entry
      mapEntry(c, c.lengthEnd(end));
      return true;
    case 4: {
      // path
      const stop = c.lengthEnd(end);
      o.pathStart = c.pos;
      o.pathEnd = stop;
      c.pos = stop;
      return true;
    }
    case 11: {
      // body
      const stop = c.lengthEnd(end);
      o.body = c.buf.subarray(c.pos, stop);
      c.pos = stop;
      return true;
    }
    case 12: {
      // raw_body
      const stop = c.lengthEnd(end);
      o.rawBody = c.buf.subarray(c.pos, stop);
      c.pos = stop;
      return true;
    }
    case 13: // header_map
      walk(c, c.lengthEnd(end), headerMap);
      return true;
    default:
      return false;
  }
};

const headerMap: FieldHandler = (c, num, wire, end) => {
  if (num !== 1 || wire !== LEN) return false; // headers (repeated HeaderValue)
  headerValue(c, c.lengthEnd(end));
  return true;
};

/**
 * The string fields 1..`fields` of a small message in [c.pos, stop) as [start, end) offsets into
 * `spans` (0,0 when absent; the last occurrence wins); other fields are skipped.
 */
function stringFields(c: Cursor, stop: number, fields: number, spans: Int32Array): void {
  spans.fill(0);
  while (c.pos < stop) {
    const tag = c.varint32(stop);
    if (tag < 8) throw FIELD_0;
    const num = tag >>> 3;
    if (num <= fields && (tag & 7) === LEN) {
      const e = c.lengthEnd(stop);
      spans[2 * num - 2] = c.pos;
      spans[2 * num - 1] = e;
      c.pos = e;
    } else c.skip(tag & 7, stop);
  }
  if (c.pos !== stop) throw PAST_END;
}

/** Scratch for stringFields, shared: a decode runs synchronously to its end, so no two ever interleave. */
const spans = new Int32Array(6);

/** A map<string,string> entry: key(1), value(2); either may be absent (""). */
function mapEntry(c: Cursor, stop: number): void {
  out.mapEntries++;
  const buf = c.buf;
  const p = c.pos;
  let keyStart: number;
  let keyEnd: number;
  let valueStart: number;
  // The shape Envoy (any protobuf encoder) writes: key then value, each shorter than 128 bytes.
  const fastKeyEnd = p + 2 + buf[p + 1];
  if (
    buf[p] === 0x0a &&
    buf[p + 1] < 0x80 &&
    fastKeyEnd + 2 <= stop &&
    buf[fastKeyEnd] === 0x12 &&
    buf[fastKeyEnd + 1] < 0x80 &&
    fastKeyEnd + 2 + buf[fastKeyEnd + 1] === stop
  ) {
    c.pos = stop;
    keyStart = p + 2;
    keyEnd = fastKeyEnd;
    valueStart = fastKeyEnd + 2;
  } else {
    stringFields(c, stop, 2, spans);
    keyStart = spans[0];
    keyEnd = spans[1];
    valueStart = spans[2];
    stop = spans[3];
  }
  const name = wantedName(filter, buf, keyStart, keyEnd, false);
  if (name !== undefined) out.map[name] = common(buf, valueStart, stop) ?? c.utf8(valueStart, stop);
}

/** Values nearly every request carries, as constant strings: no string is built for them. */
const COMMON_VALUES = ['application/json', 'POST', 'GET', 'false', 'true'].map((s) => ({
  s,
  bytes: Buffer.from(s, 'latin1'),
}));

/** The common value the bytes [start, end) spell, if any (compared by length, then byte by byte). */
function common(buf: Buffer, start: number, end: number): string | undefined {
  const len = end - start;
  for (let k = 0; k < COMMON_VALUES.length; k++) {
    const v = COMMON_VALUES[k].bytes;
    if (v.length !== len) continue;
    let i = 0;
    while (i < len && buf[start + i] === v[i]) i++;
    if (i === len) return COMMON_VALUES[k].s;
  }
  return undefined;
}

/** HeaderValue: key(1), value(2), raw_value(3, preferred when non-empty). Names are matched case-insensitively. */
function headerValue(c: Cursor, stop: number): void {
  stringFields(c, stop, 3, spans);
  const name = wantedName(filter, c.buf, spans[0], spans[1], true);
  if (name === undefined) return;
  const value = spans[5] > spans[4] ? c.utf8(spans[4], spans[5]) : c.utf8(spans[2], spans[3]);
  const raw = out.raw;
  raw[name] = name in raw ? `${raw[name]},${value}` : value;
}

/**
 * The RequestView of a serialised CheckRequest, keeping the headers `filter` names; undefined
 * when the bytes are not a well-formed protobuf message.
 */
export function decodeCheckRequest(bytes: Buffer, wanted: HeaderFilter): RequestView | undefined {
  c.reset(bytes);
  const o = (out = new Collected());
  filter = wanted;
  try {
    walk(c, bytes.length, checkRequest);
    return view(o);
  } catch (err) {
    if (err instanceof WireError) return undefined;
    throw err;
  } finally {
    // Nothing here keeps the request's bytes once read: the gRPC server reuses them (check/README.md).
    c.reset();
    out = IDLE;
  }
}

function view(o: Collected): RequestView {
  const headers = o.mapEntries > 0 ? o.map : o.raw;
  const fullPath = headers[':path'] || c.utf8(o.pathStart, o.pathEnd);
  const q = fullPath.indexOf('?');
  return {
    method: headers[':method'] || c.utf8(o.methodStart, o.methodEnd),
    path: q === -1 ? fullPath : fullPath.slice(0, q),
    query: q === -1 ? '' : fullPath.slice(q + 1),
    headers,
    body:
      o.rawBody !== undefined && o.rawBody.length > 0
        ? o.rawBody
        : o.body !== undefined && o.body.length > 0
          ? o.body
          : undefined,
    partialBody: headers['x-envoy-auth-partial-body'] === 'true',
    // The identity Envoy minted on modelgate's route (envoy/request-mark.ts); a Check sent to the
    // gRPC port directly (modelgate explain) has only its x-request-id.
    requestId: headers[HEADER.request] ?? headers['x-request-id'] ?? '',
    client: o.sourceEnd > o.sourceStart ? c.utf8(o.sourceStart, o.sourceEnd) : undefined,
  };
}

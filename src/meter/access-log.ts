/**
 * The meter's input: Envoy's gRPC access log (`envoy.service.accesslog.v3.AccessLogService`,
 * StreamAccessLogs), one entry per allowed, metered request when its stream ends, whatever the
 * reason it ended (and one per request that ended before a Check's answer reached it: no Check
 * metadata) (a complete response, a client that walked away, an upstream reset). Envoy
 * batches entries on one long-lived stream per worker, so a report costs Envoy a few microseconds
 * instead of a gRPC stream per request.
 *
 * What a report holds (envoy/data/accesslog/v3/accesslog.proto):
 *
 *   StreamAccessLogsMessage.http_logs(2).log_entry(1) -> HTTPAccessLogEntry:
 *     common_properties(1) -> AccessLogCommon.metadata(17) -> Metadata.filter_metadata(1):
 *       "envoy.filters.http.ext_authz": the Check's metadata (keyId, group, model, style, metered)
 *       "modelgate": `request`, the identity Envoy minted for the request (envoy/request-mark.ts)
 *       "modelgate.meter": what the meter's Lua filter kept of the response body (`tail` on the way, `final` at its
 * end, when
 *         `tail` becomes false so that the entry carries one copy)
 *     request(3) -> HTTPRequestProperties: request_id(9), path(5), request_body_bytes(12)
 *     response(4) -> HTTPResponseProperties: response_code(1, UInt32Value), response_body_bytes(3),
 *       response_headers(4, map: content-type and content-encoding, as the bundle asks)
 *
 * Pure: bytes in, plain reports out. The wire format is walked once (src/wire/wire-reader.ts, with
 * its limits) and everything else is skipped by wire type. A malformed message yields the reports read before the fault
 * and a count of the
 * entries lost (the caller logs it; the requests concerned then settle when their deadline passes,
 * never free).
 */

import { asBuffer, WireError, WireReader } from '../wire/wire-reader';

/** One metered request's end, as Envoy saw it. */
export interface MeterReport {
  /**
   * The request's identity (the ledger's key): the `x-modelgate-request` Envoy minted on
   * modelgate's route, from the `modelgate` metadata (envoy/request-mark.ts; no client can set it),
   * else the entry's x-request-id (an Envoy config without that filter: `modelgate adopt --check`
   * reports it).
   */
  readonly requestId: string;
  /** The path as sent, query included. */
  readonly path: string;
  /** The Check's dynamic metadata the meter reads: keyId, group, model, style, path; `metered` on billable requests. */
  readonly authz: Readonly<Record<string, string | number | boolean>>;
  /** HTTP status sent to the client; 0 when no response started. */
  readonly status: number;
  readonly requestBodyBytes: number;
  /** Response body bytes sent to the client (after Envoy's decompression). */
  readonly responseBodyBytes: number;
  readonly contentType: string;
  /** The response's content-encoding as the client got it ('' when none: Envoy decompressed gzip). */
  readonly contentEncoding: string;
  /** The last bytes of the body the meter's filter kept (undefined: it kept nothing). */
  readonly tail: Uint8Array | undefined;
  /** The filter saw the end of the response body (false: the stream was cut, or the filter failed). */
  readonly ended: boolean;
  /**
   * The calls of hosted tools the filter counted in the whole body (`1=2,9=1`: meter/tool-calls.ts); undefined: none.
   */
  readonly calls?: string;
  /** A byte of the request went upstream (Envoy's time_to_first_upstream_tx_byte). */
  readonly upstreamSent: boolean;
  /** A byte of an answer came back from upstream (Envoy's time_to_first_upstream_rx_byte). */
  readonly upstreamAnswered: boolean;
}

export interface ReadResult {
  readonly reports: MeterReport[];
  /** Entries that could not be read (malformed bytes). */
  readonly lost: number;
}

export const AUTHZ_NAMESPACE = 'envoy.filters.http.ext_authz';
export const METER_NAMESPACE = 'modelgate.meter';
/** The namespace of the request's minted identity (envoy/request-mark.ts MARK_NAMESPACE). */
export const MARK_NAMESPACE = 'modelgate';

/**
 * The wire walk (src/wire/). One message at a time (the meter reads them one after another), so the
 * reader is module state: no object per field or sub-message, which at thousands of entries a
 * second was most of the reader's cost (garbage).
 */
const r = new WireReader();

/** A google.protobuf.Value of a Struct field: strings, numbers and booleans; the tail string as bytes. */
type FieldValue = string | number | boolean | Uint8Array;

function readValue(end: number, asBytes: boolean): FieldValue | undefined {
  let v: FieldValue | undefined;
  while (r.pos < end) {
    const t = r.tag(end);
    if (t === ((2 << 3) | 1)) {
      v = r.double(end);
    } else if (t === ((3 << 3) | 2)) {
      const e = r.lengthEnd(end);
      // The message is not reused once read, so the tail is a view of it, not a copy.
      v = asBytes ? r.buf.subarray(r.pos, e) : r.utf8(r.pos, e);
      r.pos = e;
    } else if (t === ((4 << 3) | 0)) v = r.varint(end) !== 0;
    else r.skip(t & 7, end);
  }
  return v;
}

/** Keys of a metadata namespace the meter reads, as bytes (others are skipped without decoding). */
type Wanted = readonly (readonly [string, Uint8Array])[];
const wanted = (...keys: string[]): Wanted => keys.map((k) => [k, Buffer.from(k)] as const);
const AUTHZ_KEYS = wanted(
  'metered',
  'keyId',
  'group',
  'model',
  'style',
  'path',
  'replica',
  'maxInput',
  'maxOutput',
  'hiddenOutput',
  'referencedInput',
  'inputExtra',
  'inputFactor',
  'price',
  'tools',
);
/**
 * `tail`: what the filter had kept when it last published on the way; `final`: what it kept at the end; `calls`: hosted
 * tools' calls it counted (meter/tool-calls.ts).
 */
const METER_KEYS = wanted('tail', 'final', 'calls');
const MARK_KEYS = wanted('request');

function keyAt(s: number, e: number, keys: Wanted): string | undefined {
  for (const [name, bytes] of keys) if (r.equals(s, e, bytes)) return name;
  return undefined;
}

/**
 * google.protobuf.Struct: fields(1) map<string, Value>, only the `keys` asked for. `asBytes`: string
 * values are kept as bytes (the meter's body tail).
 */
function readStruct(end: number, into: Record<string, FieldValue>, keys: Wanted, asBytes: boolean): void {
  while (r.pos < end) {
    const t = r.tag(end);
    if (t !== ((1 << 3) | 2)) {
      r.skip(t & 7, end);
      continue;
    }
    const entryEnd = r.lengthEnd(end);
    let key: string | undefined;
    let valueStart = -1;
    let valueEnd = -1;
    while (r.pos < entryEnd) {
      const et = r.tag(entryEnd);
      if (et === ((1 << 3) | 2)) {
        const e = r.lengthEnd(entryEnd);
        key = keyAt(r.pos, e, keys);
        r.pos = e;
      } else if (et === ((2 << 3) | 2)) {
        valueEnd = r.lengthEnd(entryEnd);
        valueStart = r.pos;
        r.pos = valueEnd;
      } else r.skip(et & 7, entryEnd);
    }
    if (key !== undefined && valueStart >= 0) {
      r.pos = valueStart;
      const v = readValue(valueEnd, asBytes);
      if (v !== undefined) into[key] = v;
    }
    r.pos = entryEnd;
  }
}

interface Draft {
  requestId: string;
  mark: Record<string, FieldValue>;
  path: string;
  authz: Record<string, FieldValue>;
  meter: Record<string, FieldValue>;
  status: number;
  requestBodyBytes: number;
  responseBodyBytes: number;
  contentType: string;
  contentEncoding: string;
  upstreamSent: boolean;
  upstreamAnswered: boolean;
}

const AUTHZ_NS = Buffer.from(AUTHZ_NAMESPACE);
const METER_NS = Buffer.from(METER_NAMESPACE);
const MARK_NS = Buffer.from(MARK_NAMESPACE);

/**
 * AccessLogCommon: metadata(17) -> Metadata.filter_metadata(1) map<string, Struct>, and whether
 * time_to_first_upstream_tx_byte(7) is there (a byte of the request went upstream), and
 * time_to_first_upstream_rx_byte(9) (a byte of an answer came back).
 */
function readCommon(end: number, d: Draft): void {
  while (r.pos < end) {
    const t = r.tag(end);
    if (t !== ((17 << 3) | 2)) {
      if (t === ((7 << 3) | 2)) d.upstreamSent = true;
      else if (t === ((9 << 3) | 2)) d.upstreamAnswered = true;
      r.skip(t & 7, end);
      continue;
    }
    const mdEnd = r.lengthEnd(end);
    while (r.pos < mdEnd) {
      const mt = r.tag(mdEnd);
      if (mt !== ((1 << 3) | 2)) {
        r.skip(mt & 7, mdEnd);
        continue;
      }
      const entryEnd = r.lengthEnd(mdEnd);
      let ns = 0;
      let structStart = -1;
      let structEnd = -1;
      while (r.pos < entryEnd) {
        const et = r.tag(entryEnd);
        if (et === ((1 << 3) | 2)) {
          const e = r.lengthEnd(entryEnd);
          ns = r.equals(r.pos, e, AUTHZ_NS)
            ? 1
            : r.equals(r.pos, e, METER_NS)
              ? 2
              : r.equals(r.pos, e, MARK_NS)
                ? 3
                : 0;
          r.pos = e;
        } else if (et === ((2 << 3) | 2)) {
          structEnd = r.lengthEnd(entryEnd);
          structStart = r.pos;
          r.pos = structEnd;
        } else r.skip(et & 7, entryEnd);
      }
      if (ns !== 0 && structStart >= 0) {
        r.pos = structStart;
        if (ns === 1) readStruct(structEnd, d.authz, AUTHZ_KEYS, false);
        else if (ns === 2) readStruct(structEnd, d.meter, METER_KEYS, true);
        else readStruct(structEnd, d.mark, MARK_KEYS, false);
      }
      r.pos = entryEnd;
    }
  }
}

function readRequest(end: number, d: Draft): void {
  while (r.pos < end) {
    const t = r.tag(end);
    if (t === ((9 << 3) | 2)) {
      const e = r.lengthEnd(end);
      d.requestId = r.utf8(r.pos, e);
      r.pos = e;
    } else if (t === ((5 << 3) | 2)) {
      const e = r.lengthEnd(end);
      d.path = r.utf8(r.pos, e);
      r.pos = e;
    } else if (t === ((12 << 3) | 0)) d.requestBodyBytes = r.varint(end);
    else r.skip(t & 7, end);
  }
}

const CONTENT_TYPE = Buffer.from('content-type');
const CONTENT_ENCODING = Buffer.from('content-encoding');

function readResponse(end: number, d: Draft): void {
  while (r.pos < end) {
    const t = r.tag(end);
    if (t === ((1 << 3) | 2)) {
      // google.protobuf.UInt32Value: value(1)
      const vEnd = r.lengthEnd(end);
      while (r.pos < vEnd) {
        const vt = r.tag(vEnd);
        if (vt === ((1 << 3) | 0)) d.status = r.varint(vEnd);
        else r.skip(vt & 7, vEnd);
      }
    } else if (t === ((3 << 3) | 0)) d.responseBodyBytes = r.varint(end);
    else if (t === ((4 << 3) | 2)) {
      const entryEnd = r.lengthEnd(end);
      let which = 0;
      let v = '';
      while (r.pos < entryEnd) {
        const et = r.tag(entryEnd);
        if (et === ((1 << 3) | 2)) {
          const e = r.lengthEnd(entryEnd);
          // Envoy logs header names in lower case, as HTTP/2 carries them.
          which = r.equals(r.pos, e, CONTENT_TYPE) ? 1 : r.equals(r.pos, e, CONTENT_ENCODING) ? 2 : 0;
          r.pos = e;
        } else if (et === ((2 << 3) | 2)) {
          const e = r.lengthEnd(entryEnd);
          v = r.utf8(r.pos, e);
          r.pos = e;
        } else r.skip(et & 7, entryEnd);
      }
      if (which === 1) d.contentType = v;
      else if (which === 2) d.contentEncoding = v;
    } else r.skip(t & 7, end);
  }
}

function readEntry(end: number): MeterReport {
  const d: Draft = {
    requestId: '',
    mark: {},
    path: '',
    authz: {},
    meter: {},
    status: 0,
    requestBodyBytes: 0,
    responseBodyBytes: 0,
    contentType: '',
    contentEncoding: '',
    upstreamSent: false,
    upstreamAnswered: false,
  };
  while (r.pos < end) {
    const t = r.tag(end);
    if ((t & 7) !== 2) {
      r.skip(t & 7, end);
      continue;
    }
    const e = r.lengthEnd(end);
    const field = t >>> 3;
    if (field === 1) readCommon(e, d);
    else if (field === 3) readRequest(e, d);
    else if (field === 4) readResponse(e, d);
    r.pos = e;
  }
  const final = d.meter.final;
  const tail = final ?? d.meter.tail;
  const minted = d.mark.request;
  return {
    requestId: typeof minted === 'string' && minted !== '' ? minted : d.requestId,
    path: d.path,
    authz: d.authz as Record<string, string | number | boolean>,
    status: d.status,
    requestBodyBytes: d.requestBodyBytes,
    responseBodyBytes: d.responseBodyBytes,
    contentType: d.contentType,
    contentEncoding: d.contentEncoding,
    tail: tail instanceof Uint8Array ? tail : typeof tail === 'string' ? Buffer.from(tail) : undefined,
    ended: final !== undefined,
    ...(d.meter.calls instanceof Uint8Array
      ? { calls: Buffer.from(d.meter.calls).toString('latin1') }
      : typeof d.meter.calls === 'string'
        ? { calls: d.meter.calls }
        : {}),
    upstreamSent: d.upstreamSent,
    upstreamAnswered: d.upstreamAnswered,
  };
}

/** Reads one StreamAccessLogsMessage. Never throws. */
export function readAccessLogMessage(bytes: Uint8Array): ReadResult {
  const reports: MeterReport[] = [];
  let lost = 0;
  r.reset(asBuffer(bytes));
  const end = r.buf.length;
  try {
    while (r.pos < end) {
      const t = r.tag(end);
      if (t !== ((2 << 3) | 2)) {
        r.skip(t & 7, end);
        continue;
      }
      // HTTPAccessLogEntries: log_entry(1), repeated.
      const logsEnd = r.lengthEnd(end);
      while (r.pos < logsEnd) {
        const lt = r.tag(logsEnd);
        if (lt !== ((1 << 3) | 2)) {
          r.skip(lt & 7, logsEnd);
          continue;
        }
        const entryEnd = r.lengthEnd(logsEnd);
        try {
          reports.push(readEntry(entryEnd));
        } catch (err) {
          if (!(err instanceof WireError)) throw err;
          lost++;
        }
        r.pos = entryEnd;
      }
    }
  } catch (err) {
    if (!(err instanceof WireError)) throw err;
    lost++;
  } finally {
    r.reset();
  }
  return { reports, lost };
}

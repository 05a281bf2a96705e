/**
 * The meter's input: Envoy's gRPC access log (`envoy.service.accesslog.v3.AccessLogService`,
 * StreamAccessLogs), one entry per allowed, metered request when its stream ends, whatever the
 * reason it ended (a complete response, a client that walked away, an upstream reset). Envoy
 * batches entries on one long-lived stream per worker, so a report costs Envoy a few microseconds
 * instead of a gRPC stream per request.
 *
 * What a report holds (envoy/data/accesslog/v3/accesslog.proto):
 *
 *   StreamAccessLogsMessage.http_logs(2).log_entry(1) -> HTTPAccessLogEntry:
 *     common_properties(1) -> AccessLogCommon.metadata(17) -> Metadata.filter_metadata(1):
 *       "envoy.filters.http.ext_authz": the Check's metadata (keyId, group, model, style, metered)
 *       "modelgate.meter": what the meter's Lua filter kept of the response body (tail, seen, end)
 *     request(3) -> HTTPRequestProperties: request_id(9), path(5), request_body_bytes(12)
 *     response(4) -> HTTPResponseProperties: response_code(1, UInt32Value), response_body_bytes(3),
 *       response_headers(4, map: content-type and content-encoding, as the bundle asks)
 *
 * Pure: bytes in, plain reports out. The wire format is walked once and everything else is skipped
 * by wire type. A malformed message yields the reports read before the fault and a count of the
 * entries lost (the caller logs it; the requests concerned then settle when their deadline passes,
 * never free).
 */

/** One metered request's end, as Envoy saw it. */
export interface MeterReport {
  /** Envoy's x-request-id (the ledger's key). */
  readonly requestId: string;
  /** The path as sent, query included. */
  readonly path: string;
  /** The Check's dynamic metadata: keyId, group, model, style; `metered` on billable requests. */
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
  /** Body bytes the filter had seen when it last published the tail. */
  readonly seen: number;
  /** The filter saw the end of the response body (false: the stream was cut, or the filter failed). */
  readonly ended: boolean;
}

export interface ReadResult {
  readonly reports: MeterReport[];
  /** Entries that could not be read (malformed bytes). */
  readonly lost: number;
}

export const AUTHZ_NAMESPACE = 'envoy.filters.http.ext_authz';
export const METER_NAMESPACE = 'modelgate.meter';

class Malformed extends Error {}

/** A cursor over one protobuf message's bytes. */
class Wire {
  pos: number;
  constructor(readonly buf: Uint8Array, start: number, readonly end: number) {
    this.pos = start;
  }

  get more(): boolean {
    return this.pos < this.end;
  }

  varint(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      if (this.pos >= this.end) throw new Malformed('truncated varint');
      const b = this.buf[this.pos++];
      // Past 2^53 precision is lost, never the framing: lengths and counts are far below it.
      result += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return result;
      shift += 7;
      if (shift > 63) throw new Malformed('varint too long');
    }
  }

  /** The next field's number and wire type. */
  tag(): [number, number] {
    const t = this.varint();
    const field = Math.floor(t / 8);
    if (field === 0) throw new Malformed('field number 0');
    return [field, t & 7];
  }

  /** [start, end) of a length-delimited field's bytes. */
  bytes(): [number, number] {
    const len = this.varint();
    const start = this.pos;
    if (len > this.end - start) throw new Malformed('length past the end');
    this.pos = start + len;
    return [start, start + len];
  }

  double(): number {
    if (this.pos + 8 > this.end) throw new Malformed('truncated double');
    const v = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 8).getFloat64(0, true);
    this.pos += 8;
    return v;
  }

  skip(wireType: number): void {
    switch (wireType) {
      case 0: this.varint(); return;
      case 1: this.advance(8); return;
      case 2: this.bytes(); return;
      case 5: this.advance(4); return;
      default: throw new Malformed(`wire type ${wireType}`);
    }
  }

  advance(n: number): void {
    if (this.pos + n > this.end) throw new Malformed('truncated field');
    this.pos += n;
  }

  sub([start, end]: [number, number]): Wire {
    return new Wire(this.buf, start, end);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: false });
const text = (w: Wire, [s, e]: [number, number]): string => utf8.decode(w.buf.subarray(s, e));

/** A google.protobuf.Value of a Struct field: strings, numbers and booleans; the tail string as bytes. */
type FieldValue = string | number | boolean | Uint8Array;

function readValue(w: Wire, asBytes: boolean): FieldValue | undefined {
  let v: FieldValue | undefined;
  while (w.more) {
    const [f, t] = w.tag();
    if (f === 2 && t === 1) v = w.double();
    else if (f === 3 && t === 2) {
      const span = w.bytes();
      // A copy: the report outlives the message it came in (settling is asynchronous).
      v = asBytes ? Uint8Array.prototype.slice.call(w.buf, span[0], span[1]) : text(w, span);
    } else if (f === 4 && t === 0) v = w.varint() !== 0;
    else w.skip(t);
  }
  return v;
}

/** google.protobuf.Struct: fields(1) map<string, Value>. `bytesFor`: keys whose string value is kept as bytes. */
function readStruct(w: Wire, into: Map<string, FieldValue>, bytesFor?: string): void {
  while (w.more) {
    const [f, t] = w.tag();
    if (f !== 1 || t !== 2) {
      w.skip(t);
      continue;
    }
    const entry = w.sub(w.bytes());
    let key = '';
    let valueSpan: [number, number] | undefined;
    while (entry.more) {
      const [ef, et] = entry.tag();
      if (ef === 1 && et === 2) key = text(entry, entry.bytes());
      else if (ef === 2 && et === 2) valueSpan = entry.bytes();
      else entry.skip(et);
    }
    if (valueSpan) {
      const v = readValue(w.sub(valueSpan), key === bytesFor);
      if (v !== undefined) into.set(key, v);
    }
  }
}

interface Draft {
  requestId: string;
  path: string;
  authz: Map<string, FieldValue>;
  meter: Map<string, FieldValue>;
  status: number;
  requestBodyBytes: number;
  responseBodyBytes: number;
  contentType: string;
  contentEncoding: string;
}

/** AccessLogCommon: only metadata(17) -> Metadata.filter_metadata(1) map<string, Struct>. */
function readCommon(w: Wire, d: Draft): void {
  while (w.more) {
    const [f, t] = w.tag();
    if (f !== 17 || t !== 2) {
      w.skip(t);
      continue;
    }
    const md = w.sub(w.bytes());
    while (md.more) {
      const [mf, mt] = md.tag();
      if (mf !== 1 || mt !== 2) {
        md.skip(mt);
        continue;
      }
      const entry = md.sub(md.bytes());
      let ns = '';
      let struct: [number, number] | undefined;
      while (entry.more) {
        const [ef, et] = entry.tag();
        if (ef === 1 && et === 2) ns = text(entry, entry.bytes());
        else if (ef === 2 && et === 2) struct = entry.bytes();
        else entry.skip(et);
      }
      if (!struct) continue;
      if (ns === AUTHZ_NAMESPACE) readStruct(md.sub(struct), d.authz);
      else if (ns === METER_NAMESPACE) readStruct(md.sub(struct), d.meter, 'tail');
    }
  }
}

function readRequest(w: Wire, d: Draft): void {
  while (w.more) {
    const [f, t] = w.tag();
    if (f === 9 && t === 2) d.requestId = text(w, w.bytes());
    else if (f === 5 && t === 2) d.path = text(w, w.bytes());
    else if (f === 12 && t === 0) d.requestBodyBytes = w.varint();
    else w.skip(t);
  }
}

function readResponse(w: Wire, d: Draft): void {
  while (w.more) {
    const [f, t] = w.tag();
    if (f === 1 && t === 2) {
      // google.protobuf.UInt32Value: value(1)
      const v = w.sub(w.bytes());
      while (v.more) {
        const [vf, vt] = v.tag();
        if (vf === 1 && vt === 0) d.status = v.varint();
        else v.skip(vt);
      }
    } else if (f === 3 && t === 0) d.responseBodyBytes = w.varint();
    else if (f === 4 && t === 2) {
      const entry = w.sub(w.bytes());
      let k = '';
      let v = '';
      while (entry.more) {
        const [ef, et] = entry.tag();
        if (ef === 1 && et === 2) k = text(entry, entry.bytes()).toLowerCase();
        else if (ef === 2 && et === 2) v = text(entry, entry.bytes());
        else entry.skip(et);
      }
      if (k === 'content-type') d.contentType = v;
      else if (k === 'content-encoding') d.contentEncoding = v;
    } else w.skip(t);
  }
}

function readEntry(w: Wire): MeterReport {
  const d: Draft = { requestId: '', path: '', authz: new Map(), meter: new Map(), status: 0, requestBodyBytes: 0, responseBodyBytes: 0, contentType: '', contentEncoding: '' };
  while (w.more) {
    const [f, t] = w.tag();
    if (t !== 2) w.skip(t);
    else if (f === 1) readCommon(w.sub(w.bytes()), d);
    else if (f === 3) readRequest(w.sub(w.bytes()), d);
    else if (f === 4) readResponse(w.sub(w.bytes()), d);
    else w.skip(t);
  }
  const authz: Record<string, string | number | boolean> = {};
  for (const [k, v] of d.authz) if (!(v instanceof Uint8Array)) authz[k] = v;
  const tail = d.meter.get('tail');
  const seen = d.meter.get('seen');
  return {
    requestId: d.requestId,
    path: d.path,
    authz,
    status: d.status,
    requestBodyBytes: d.requestBodyBytes,
    responseBodyBytes: d.responseBodyBytes,
    contentType: d.contentType,
    contentEncoding: d.contentEncoding,
    tail: tail instanceof Uint8Array ? tail : typeof tail === 'string' ? Buffer.from(tail) : undefined,
    seen: typeof seen === 'number' && Number.isFinite(seen) && seen >= 0 ? seen : 0,
    ended: d.meter.get('end') !== undefined,
  };
}

/** Reads one StreamAccessLogsMessage. Never throws. */
export function readAccessLogMessage(bytes: Uint8Array): ReadResult {
  const reports: MeterReport[] = [];
  let lost = 0;
  try {
    const w = new Wire(bytes, 0, bytes.length);
    while (w.more) {
      const [f, t] = w.tag();
      if (f !== 2 || t !== 2) {
        w.skip(t);
        continue;
      }
      // HTTPAccessLogEntries: log_entry(1), repeated.
      const logs = w.sub(w.bytes());
      while (logs.more) {
        const [lf, lt] = logs.tag();
        if (lf !== 1 || lt !== 2) {
          logs.skip(lt);
          continue;
        }
        const span = logs.bytes();
        try {
          reports.push(readEntry(logs.sub(span)));
        } catch (err) {
          if (!(err instanceof Malformed)) throw err;
          lost++;
        }
      }
    }
  } catch (err) {
    if (!(err instanceof Malformed)) throw err;
    lost++;
  }
  return { reports, lost };
}

/**
 * The wire format of Envoy's rate limit service (envoy.service.ratelimit.v3.RateLimitService,
 * rls.proto), the few fields modelgate uses, read and written by hand: these messages are small,
 * and the fields a token charge needs are few (the per-descriptor `hits_addend`, field 3 of
 * RateLimitDescriptor, a UInt64Value, that Envoy 1.40 sends); a codec of its own is shorter than
 * loading the whole rate limit API.
 *
 *   RateLimitRequest: domain(1) string, descriptors(2) RateLimitDescriptor, hits_addend(3) uint32
 *   RateLimitDescriptor: entries(1) {key(1), value(2)}, limit(2) {requests_per_unit(1), unit(2)},
 *     hits_addend(3) UInt64Value {value(1)}
 *   RateLimitResponse: overall_code(1), statuses(2) DescriptorStatus
 *   DescriptorStatus: code(1), current_limit(2) {name(3), requests_per_unit(1), unit(2)},
 *     limit_remaining(3), duration_until_reset(4) Duration {seconds(1), nanos(2)}
 *
 * Unknown fields are skipped by wire type; a malformed message throws (the caller answers the
 * call with an error: Envoy then applies its failure mode).
 */

/** envoy.type.v3.RateLimitUnit / RateLimitResponse.RateLimit.Unit. */
export const UNIT = { SECOND: 1, MINUTE: 2, HOUR: 3, DAY: 4 } as const;

export const CODE = { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 } as const;

export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

export interface Descriptor {
  readonly entries: readonly DescriptorEntry[];
  /** The limit carried by the descriptor (Envoy's per-descriptor override). */
  readonly limit?: { readonly requestsPerUnit: number; readonly unit: number };
  /** Per-descriptor hits; absent: the request's hits_addend (0 there means 1). */
  readonly hitsAddend?: number;
}

export interface RateLimitRequest {
  readonly domain: string;
  readonly descriptors: readonly Descriptor[];
  readonly hitsAddend: number;
}

export interface DescriptorStatus {
  readonly code: number;
  readonly limit?: { readonly requestsPerUnit: number; readonly unit: number };
  readonly remaining: number;
  /** Seconds until the window resets. */
  readonly resetSeconds: number;
}

export interface RateLimitResponse {
  readonly overallCode: number;
  readonly statuses: readonly DescriptorStatus[];
}

class Reader {
  pos: number;
  constructor(readonly buf: Uint8Array, start = 0, readonly end = buf.length) {
    this.pos = start;
  }

  get done(): boolean {
    return this.pos >= this.end;
  }

  varint(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      if (this.pos >= this.end) throw new RangeError('truncated varint');
      const b = this.buf[this.pos++];
      // Past 2^53 precision is lost; counts and limits here are 32-bit or token totals far below.
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return result;
      shift += 7;
      if (shift > 63) throw new RangeError('varint too long');
    }
  }

  /** The bounds of a length-delimited field. */
  bytes(): [number, number] {
    const len = this.varint();
    const start = this.pos;
    if (start + len > this.end) throw new RangeError('length past the end of the message');
    this.pos = start + len;
    return [start, this.pos];
  }

  string(): string {
    const [s, e] = this.bytes();
    return Buffer.from(this.buf.buffer, this.buf.byteOffset + s, e - s).toString('utf8');
  }

  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.advance(8);
    else if (wire === 2) this.bytes();
    else if (wire === 5) this.advance(4);
    else throw new RangeError(`unsupported wire type ${wire}`);
  }

  advance(n: number): void {
    if (this.pos + n > this.end) throw new RangeError('truncated field');
    this.pos += n;
  }

  /** Field number and wire type of the next tag. */
  tag(): [number, number] {
    const t = this.varint();
    if (t >>> 3 === 0) throw new RangeError('field number 0');
    return [t >>> 3, t & 7];
  }

  sub([s, e]: [number, number]): Reader {
    return new Reader(this.buf, s, e);
  }
}

function readEntry(r: Reader): DescriptorEntry {
  let key = '';
  let value = '';
  while (!r.done) {
    const [f, w] = r.tag();
    if (f === 1 && w === 2) key = r.string();
    else if (f === 2 && w === 2) value = r.string();
    else r.skip(w);
  }
  return { key, value };
}

function readLimit(r: Reader, perUnitField: number, unitField: number): { requestsPerUnit: number; unit: number } {
  let requestsPerUnit = 0;
  let unit = 0;
  while (!r.done) {
    const [f, w] = r.tag();
    if (f === perUnitField && w === 0) requestsPerUnit = r.varint();
    else if (f === unitField && w === 0) unit = r.varint();
    else r.skip(w);
  }
  return { requestsPerUnit, unit };
}

function readDescriptor(r: Reader): Descriptor {
  const entries: DescriptorEntry[] = [];
  let limit: Descriptor['limit'];
  let hitsAddend: number | undefined;
  while (!r.done) {
    const [f, w] = r.tag();
    if (f === 1 && w === 2) entries.push(readEntry(r.sub(r.bytes())));
    else if (f === 2 && w === 2) limit = readLimit(r.sub(r.bytes()), 1, 2);
    else if (f === 3 && w === 2) {
      // UInt64Value: present (even empty) means "this many", 0 included.
      const v = r.sub(r.bytes());
      hitsAddend = 0;
      while (!v.done) {
        const [vf, vw] = v.tag();
        if (vf === 1 && vw === 0) hitsAddend = v.varint();
        else v.skip(vw);
      }
    } else r.skip(w);
  }
  return { entries, ...(limit ? { limit } : {}), ...(hitsAddend !== undefined ? { hitsAddend } : {}) };
}

/** Decodes a RateLimitRequest. Throws on a malformed message. */
export function decodeRequest(buf: Uint8Array): RateLimitRequest {
  const r = new Reader(buf);
  let domain = '';
  const descriptors: Descriptor[] = [];
  let hitsAddend = 0;
  while (!r.done) {
    const [f, w] = r.tag();
    if (f === 1 && w === 2) domain = r.string();
    else if (f === 2 && w === 2) descriptors.push(readDescriptor(r.sub(r.bytes())));
    else if (f === 3 && w === 0) hitsAddend = r.varint();
    else r.skip(w);
  }
  return { domain, descriptors, hitsAddend };
}

function readStatus(r: Reader): DescriptorStatus {
  let code = 0;
  let limit: DescriptorStatus['limit'];
  let remaining = 0;
  let resetSeconds = 0;
  while (!r.done) {
    const [f, w] = r.tag();
    if (f === 1 && w === 0) code = r.varint();
    else if (f === 2 && w === 2) limit = readLimit(r.sub(r.bytes()), 1, 2);
    else if (f === 3 && w === 0) remaining = r.varint();
    else if (f === 4 && w === 2) {
      const d = r.sub(r.bytes());
      while (!d.done) {
        const [df, dw] = d.tag();
        if (df === 1 && dw === 0) resetSeconds = d.varint();
        else d.skip(dw);
      }
    } else r.skip(w);
  }
  return { code, ...(limit ? { limit } : {}), remaining, resetSeconds };
}

/** Decodes a RateLimitResponse (what a rate limit service answers). */
export function decodeResponse(buf: Uint8Array): RateLimitResponse {
  const r = new Reader(buf);
  let overallCode = 0;
  const statuses: DescriptorStatus[] = [];
  while (!r.done) {
    const [f, w] = r.tag();
    if (f === 1 && w === 0) overallCode = r.varint();
    else if (f === 2 && w === 2) statuses.push(readStatus(r.sub(r.bytes())));
    else r.skip(w);
  }
  return { overallCode, statuses };
}

/** A growable byte buffer for encoding. */
class Writer {
  readonly parts: number[] = [];

  varint(n: number): this {
    let v = n;
    while (v >= 0x80) {
      this.parts.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.parts.push(v);
    return this;
  }

  tag(field: number, wire: number): this {
    return this.varint(field * 8 + wire);
  }

  uint(field: number, n: number): this {
    return n === 0 ? this : this.tag(field, 0).varint(n);
  }

  bytes(field: number, b: Uint8Array | readonly number[]): this {
    this.tag(field, 2).varint(b.length);
    for (const x of b) this.parts.push(x);
    return this;
  }

  string(field: number, s: string): this {
    return this.bytes(field, Buffer.from(s, 'utf8'));
  }

  message(field: number, w: Writer): this {
    return this.bytes(field, w.parts);
  }

  finish(): Buffer {
    return Buffer.from(this.parts);
  }
}

function descriptorWriter(d: Descriptor): Writer {
  const w = new Writer();
  for (const e of d.entries) w.message(1, new Writer().string(1, e.key).string(2, e.value));
  if (d.limit) w.message(2, new Writer().uint(1, d.limit.requestsPerUnit).uint(2, d.limit.unit));
  if (d.hitsAddend !== undefined) w.message(3, new Writer().uint(1, d.hitsAddend));
  return w;
}

/** Encodes a RateLimitRequest (modelgate's token charges to a rate limit service). */
export function encodeRequest(req: RateLimitRequest): Buffer {
  const w = new Writer().string(1, req.domain);
  for (const d of req.descriptors) w.message(2, descriptorWriter(d));
  return w.uint(3, req.hitsAddend).finish();
}

/** Encodes a RateLimitResponse (the embedded engine's answers to Envoy). */
export function encodeResponse(res: RateLimitResponse): Buffer {
  const w = new Writer().uint(1, res.overallCode);
  for (const s of res.statuses) {
    const sw = new Writer().uint(1, s.code);
    if (s.limit) sw.message(2, new Writer().uint(1, s.limit.requestsPerUnit).uint(2, s.limit.unit));
    sw.uint(3, s.remaining);
    sw.message(4, new Writer().uint(1, s.resetSeconds));
    w.message(2, sw);
  }
  return w.finish();
}

/**
 * Reading the protobuf wire format (https://protobuf.dev/programming-guides/encoding/) in place:
 * a cursor over one message's bytes that reads tags, varints and length-delimited fields, and skips
 * what its caller does not read by wire type, without decoding it. The hot readers
 * (check/read-request.ts, meter/access-log.ts) walk their messages with it and keep only the
 * fields they use; everything else reads messages with protobufjs.
 *
 * Limits: a tag or a length is a varint of at most 5 bytes and 32 bits; any other varint at most 10
 * bytes; no field runs past the end of the message holding it; field number 0, wire types 6 and 7
 * and an end-group without its start are malformed; groups nest at most MAX_GROUP_DEPTH deep. A
 * fault throws one of the constant WireErrors below (no stack captured per throw: a flood of
 * malformed messages costs no more than well-formed ones).
 */
import { InternalError } from '../errors/internal-error';

// Module-local constants: compiled to CommonJS, an exported one is read as `exports.X` at each use.
const VARINT = 0;
const I64 = 1;
const LEN = 2;
const SGROUP = 3;
const EGROUP = 4;
const I32 = 5;

/** Wire types (the low 3 bits of a tag). */
export const WIRE = { VARINT, I64, LEN, SGROUP, EGROUP, I32 } as const;

/** How deep groups may nest inside a skipped field. */
export const MAX_GROUP_DEPTH = 64;
const MAX_DEPTH = MAX_GROUP_DEPTH;

export type WireFault =
  'truncated' | 'varint_too_long' | 'length_past_end' | 'field_number_0' | 'wire_type' | 'too_deep';

/** Bytes that are not a well-formed protobuf message; `fault` says which rule they broke. */
export class WireError extends InternalError {
  constructor(
    readonly fault: WireFault,
    message: string,
  ) {
    super('wire_malformed', message);
  }
}

/** The one instance of each fault, thrown as is. */
const FAULT: { readonly [F in WireFault]: WireError } = {
  truncated: new WireError('truncated', 'a field is cut short by the end of its message'),
  varint_too_long: new WireError('varint_too_long', 'a varint is longer than its type allows'),
  length_past_end: new WireError('length_past_end', 'a length runs past the end of its message'),
  field_number_0: new WireError('field_number_0', 'a field has number 0'),
  wire_type: new WireError('wire_type', 'a field has wire type 6 or 7, or an end-group without its start'),
  too_deep: new WireError('too_deep', `groups nest deeper than ${MAX_GROUP_DEPTH}`),
};
export const WIRE_FAULT = FAULT;

const EMPTY = Buffer.alloc(0);

/** Node's own UTF-8 slice (what buf.toString('utf8', s, e) ends in, without its argument handling). */
const utf8Slice = (Buffer.prototype as unknown as { utf8Slice?: (this: Buffer, start: number, end: number) => string })
  .utf8Slice;

/**
 * A position in one message's bytes. `end` arguments bound the message being read (a sub-message's
 * end while inside it); nothing is ever read at or past it.
 */
export class WireReader {
  buf: Buffer;
  pos: number;

  constructor(buf: Buffer = EMPTY, pos = 0) {
    this.buf = buf;
    this.pos = pos;
  }

  /** Points the reader at the start of `buf` (readers reused across messages; EMPTY lets the last one go). */
  reset(buf: Buffer = EMPTY): void {
    this.buf = buf;
    this.pos = 0;
  }

  /** A tag or a length: an unsigned varint of at most 32 bits in at most 5 bytes. */
  varint32(end: number): number {
    const buf = this.buf;
    let pos = this.pos;
    if (pos < end && buf[pos] < 0x80) {
      this.pos = pos + 1;
      return buf[pos];
    }
    let result = 0;
    for (let shift = 0; shift < 28; shift += 7) {
      if (pos >= end) throw FAULT.truncated;
      const b = buf[pos++];
      result |= (b & 0x7f) << shift;
      if (b < 0x80) {
        this.pos = pos;
        return result >>> 0;
      }
    }
    if (pos >= end) throw FAULT.truncated;
    const last = buf[pos++];
    if (last > 0x0f) throw FAULT.varint_too_long;
    this.pos = pos;
    return (result | (last << 28)) >>> 0;
  }

  /** An unsigned varint of up to 64 bits, as a number (exact up to 2^53: sizes and counts are far below). */
  varint(end: number): number {
    const buf = this.buf;
    let pos = this.pos;
    if (pos < end && buf[pos] < 0x80) {
      this.pos = pos + 1;
      return buf[pos];
    }
    let result = 0;
    let mul = 1;
    for (let n = 0; n < 10; n++) {
      if (pos >= end) throw FAULT.truncated;
      const b = buf[pos++];
      result += (b & 0x7f) * mul;
      if (b < 0x80) {
        this.pos = pos;
        return result;
      }
      mul *= 128;
    }
    throw FAULT.varint_too_long;
  }

  /** Skips a varint of up to 10 bytes. */
  skipVarint(end: number): void {
    const buf = this.buf;
    let pos = this.pos;
    for (let i = 0; i < 10; i++) {
      if (pos >= end) throw FAULT.truncated;
      if (buf[pos++] < 0x80) {
        this.pos = pos;
        return;
      }
    }
    throw FAULT.varint_too_long;
  }

  /** The next tag (field number << 3 | wire type); field number 0 is malformed. */
  tag(end: number): number {
    const t = this.varint32(end);
    if (t < 8) throw FAULT.field_number_0;
    return t;
  }

  /** Reads a length and returns where the field it prefixes ends; the reader is then at its first byte. */
  lengthEnd(end: number): number {
    const len = this.varint32(end);
    if (len > end - this.pos) throw FAULT.length_past_end;
    return this.pos + len;
  }

  /** Moves past `n` bytes of a fixed-size field. */
  advance(n: number, end: number): void {
    if (this.pos + n > end) throw FAULT.truncated;
    this.pos += n;
  }

  /** A double (wire type I64, little-endian). */
  double(end: number): number {
    this.advance(8, end);
    return this.buf.readDoubleLE(this.pos - 8);
  }

  /** Skips the value of a field of wire type `wire` whose tag was just read (a group to its end-group). */
  skip(wire: number, end: number, depth = 0): void {
    switch (wire) {
      case VARINT:
        this.skipVarint(end);
        return;
      case I64:
        this.advance(8, end);
        return;
      case LEN:
        this.pos = this.lengthEnd(end);
        return;
      case I32:
        this.advance(4, end);
        return;
      case SGROUP:
        if (depth >= MAX_DEPTH) throw FAULT.too_deep;
        for (;;) {
          const t = this.tag(end);
          if ((t & 7) === EGROUP) return;
          this.skip(t & 7, end, depth + 1);
        }
      default:
        throw FAULT.wire_type; // a stray end-group, or wire types 6 and 7
    }
  }

  /** The bytes [start, end) as UTF-8 text (invalid sequences become U+FFFD, as Buffer#toString does). */
  utf8(start: number, end: number): string {
    if (end === start) return '';
    return utf8Slice ? utf8Slice.call(this.buf, start, end) : this.buf.toString('utf8', start, end);
  }

  /** Whether the bytes [start, end) are `want`. */
  equals(start: number, end: number, want: Uint8Array): boolean {
    if (end - start !== want.length) return false;
    const buf = this.buf;
    for (let i = 0; i < want.length; i++) if (buf[start + i] !== want[i]) return false;
    return true;
  }
}

/** A Buffer view of any Uint8Array, without copying. */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * HPACK (RFC 7541) as this server needs it: a full decoder (static and dynamic tables, every
 * representation, Huffman strings), and the few header blocks it sends, written as literals that
 * never touch the peer's dynamic table.
 */
import { huffmanDecode } from './huffman';

/** A header block that breaks RFC 7541: a connection error (COMPRESSION_ERROR, RFC 9113 §4.3). */
export class HpackError extends Error {}

/** RFC 7541 Appendix A. */
const STATIC: readonly (readonly [string, string])[] = [
  [':authority', ''],
  [':method', 'GET'],
  [':method', 'POST'],
  [':path', '/'],
  [':path', '/index.html'],
  [':scheme', 'http'],
  [':scheme', 'https'],
  [':status', '200'],
  [':status', '204'],
  [':status', '206'],
  [':status', '304'],
  [':status', '400'],
  [':status', '404'],
  [':status', '500'],
  ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'],
  ['accept-language', ''],
  ['accept-ranges', ''],
  ['accept', ''],
  ['access-control-allow-origin', ''],
  ['age', ''],
  ['allow', ''],
  ['authorization', ''],
  ['cache-control', ''],
  ['content-disposition', ''],
  ['content-encoding', ''],
  ['content-language', ''],
  ['content-length', ''],
  ['content-location', ''],
  ['content-range', ''],
  ['content-type', ''],
  ['cookie', ''],
  ['date', ''],
  ['etag', ''],
  ['expect', ''],
  ['expires', ''],
  ['from', ''],
  ['host', ''],
  ['if-match', ''],
  ['if-modified-since', ''],
  ['if-none-match', ''],
  ['if-range', ''],
  ['if-unmodified-since', ''],
  ['last-modified', ''],
  ['link', ''],
  ['location', ''],
  ['max-forwards', ''],
  ['proxy-authenticate', ''],
  ['proxy-authorization', ''],
  ['range', ''],
  ['referer', ''],
  ['refresh', ''],
  ['retry-after', ''],
  ['server', ''],
  ['set-cookie', ''],
  ['strict-transport-security', ''],
  ['transfer-encoding', ''],
  ['user-agent', ''],
  ['vary', ''],
  ['via', ''],
  ['www-authenticate', ''],
];

/** No integer this server accepts (an index, a length, a table size) is anywhere near this. */
const MAX_INTEGER = 1 << 24;
/** How many recently decoded Huffman strings are remembered, and up to what encoded length. */
const RECENT = 4;
const RECENT_MAX_BYTES = 256;
/** Per-entry overhead of the dynamic table's size (§4.1). */
const ENTRY_OVERHEAD = 32;

export class HpackDecoder {
  /** Dynamic table, newest first (index 62 is [0]). */
  readonly #names: string[] = [];
  readonly #values: string[] = [];
  #size = 0;
  #maxSize: number;
  readonly #limit: number;
  #pos = 0;
  #buf: Buffer = Buffer.alloc(0);
  /** The last few Huffman strings decoded, by their encoded bytes. */
  readonly #recent: { bytes: Buffer; text: string }[] = [];
  #recentNext = 0;

  /** @param limit our SETTINGS_HEADER_TABLE_SIZE: the largest table size the peer may choose */
  constructor(limit = 4096) {
    this.#limit = limit;
    this.#maxSize = limit;
  }

  /** Decodes one whole header block, calling `field` for each header in order. Throws HpackError. */
  decode(block: Buffer, field: (name: string, value: string) => void): void {
    this.#buf = block;
    this.#pos = 0;
    let first = true;
    while (this.#pos < block.length) {
      const b = block[this.#pos];
      if (b & 0x80) {
        const [name, value] = this.#entry(this.#integer(7));
        field(name, value);
      } else if (b & 0x40) {
        const [name, value] = this.#literal(6);
        this.#insert(name, value);
        field(name, value);
      } else if (b & 0x20) {
        // Dynamic table size update: only at the start of a block (§4.2).
        if (!first) throw new HpackError('a table size update after a header field');
        const size = this.#integer(5);
        if (size > this.#limit) throw new HpackError(`table size ${size} over the limit ${this.#limit}`);
        this.#maxSize = size;
        this.#evict(0);
        continue;
      } else {
        // Literal without indexing (0000) or never indexed (0001): 4-bit name index.
        const [name, value] = this.#literal(4);
        field(name, value);
      }
      first = false;
    }
    this.#buf = Buffer.alloc(0);
  }

  #integer(prefixBits: number): number {
    const buf = this.#buf;
    const mask = (1 << prefixBits) - 1;
    let value = buf[this.#pos++] & mask;
    if (value < mask) return value;
    // At most 4 continuation octets (28 bits): MAX_INTEGER needs fewer, and zero octets (0x80)
    // cannot stretch an integer out until the scale overflows (0 × Infinity is NaN, which no
    // comparison would catch).
    for (let scale = 1; scale <= 2 ** 21; scale *= 128) {
      if (this.#pos >= buf.length) throw new HpackError('a truncated integer');
      const b = buf[this.#pos++];
      value += (b & 0x7f) * scale;
      if (value > MAX_INTEGER) throw new HpackError('an integer too large');
      if ((b & 0x80) === 0) return value;
    }
    throw new HpackError('an integer too long');
  }

  #string(): string {
    const buf = this.#buf;
    if (this.#pos >= buf.length) throw new HpackError('a missing string');
    const huffman = (buf[this.#pos] & 0x80) !== 0;
    const length = this.#integer(7);
    const start = this.#pos;
    const end = start + length;
    if (end > buf.length) throw new HpackError('a truncated string');
    this.#pos = end;
    if (!huffman) return buf.toString('latin1', start, end);
    // Envoy sends `:path` as a literal it never indexes: the same Huffman bytes on every Check.
    for (const m of this.#recent)
      if (m.bytes.length === length && buf.compare(m.bytes, 0, length, start, end) === 0) return m.text;
    const text = huffmanDecode(buf, start, end);
    if (text === undefined) throw new HpackError('an invalid Huffman string');
    if (length <= RECENT_MAX_BYTES)
      this.#recent[this.#recentNext++ % RECENT] = { bytes: Buffer.from(buf.subarray(start, end)), text };
    return text;
  }

  #literal(prefixBits: number): readonly [string, string] {
    const index = this.#integer(prefixBits);
    const name = index === 0 ? this.#string() : this.#entry(index)[0];
    return [name, this.#string()];
  }

  #entry(index: number): readonly [string, string] {
    if (index === 0) throw new HpackError('index 0');
    if (index <= STATIC.length) return STATIC[index - 1];
    const i = index - STATIC.length - 1;
    if (i >= this.#names.length) throw new HpackError(`index ${index} beyond the tables`);
    return [this.#names[i], this.#values[i]];
  }

  #insert(name: string, value: string): void {
    const size = name.length + value.length + ENTRY_OVERHEAD;
    // An entry larger than the table empties it and is not added (§4.4).
    this.#evict(size);
    if (size > this.#maxSize) return;
    this.#names.unshift(name);
    this.#values.unshift(value);
    this.#size += size;
  }

  /** Evicts the oldest entries until `room` more octets fit. */
  #evict(room: number): void {
    while (this.#names.length > 0 && this.#size + room > this.#maxSize) {
      const name = this.#names.pop()!;
      const value = this.#values.pop()!;
      this.#size -= name.length + value.length + ENTRY_OVERHEAD;
    }
  }
}

/** An HPACK integer with an N-bit prefix, the prefix's other bits set to `flags` (§5.1). */
export function encodeInteger(value: number, prefixBits: number, flags: number): number[] {
  const mask = (1 << prefixBits) - 1;
  if (value < mask) return [flags | value];
  const out = [flags | mask];
  let rest = value - mask;
  while (rest >= 128) {
    out.push((rest % 128) | 0x80);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

/**
 * A header field as "literal without indexing" (§6.2.2), the value raw: the peer's dynamic table
 * is never touched, so nothing here depends on its state. `nameIndex` is a static-table index
 * for the name, or 0 to write the name itself.
 */
export function literalField(name: string | number, value: string): Buffer {
  const parts: number[] = [];
  if (typeof name === 'number') parts.push(...encodeInteger(name, 4, 0));
  else {
    parts.push(0, ...encodeInteger(name.length, 7, 0));
    for (let i = 0; i < name.length; i++) parts.push(name.charCodeAt(i));
  }
  parts.push(...encodeInteger(value.length, 7, 0));
  for (let i = 0; i < value.length; i++) parts.push(value.charCodeAt(i) & 0xff);
  return Buffer.from(parts);
}

/** A Dynamic Table Size Update (§6.3). */
export function tableSizeUpdate(size: number): Buffer {
  return Buffer.from(encodeInteger(size, 5, 0x20));
}

/** Static-table indexes this server writes. */
export const STATIC_INDEX = { status200: 8, status: 8, contentType: 31 } as const;

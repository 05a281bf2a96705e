/**
 * The wire reader (src/wire/wire-reader.ts) against protobufjs's writer: every field protobufjs
 * writes reads back the same, every field skips to its end, and malformed bytes throw the WireError
 * that names the rule they break, never anything else.
 */
import fc from 'fast-check';
import * as protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { InternalError } from '../../src/errors/internal-error';
import { MAX_GROUP_DEPTH, WIRE, WIRE_FAULT, WireError, WireReader, type WireFault } from '../../src/wire/wire-reader';

/** One field as a test writes it and expects it back. */
type Field =
  | { readonly kind: 'uint32'; readonly num: number; readonly value: number }
  | { readonly kind: 'uint64'; readonly num: number; readonly value: bigint }
  | { readonly kind: 'string'; readonly num: number; readonly value: string }
  | { readonly kind: 'bytes'; readonly num: number; readonly value: Uint8Array }
  | { readonly kind: 'double'; readonly num: number; readonly value: number }
  | { readonly kind: 'fixed32'; readonly num: number; readonly value: number }
  | { readonly kind: 'group'; readonly num: number; readonly value: readonly Field[] };

function write(w: protobuf.Writer, f: Field): void {
  switch (f.kind) {
    case 'uint32':
      w.uint32((f.num << 3) | WIRE.VARINT).uint32(f.value);
      return;
    case 'uint64':
      w.uint32((f.num << 3) | WIRE.VARINT).uint64(Number(f.value));
      return;
    case 'string':
      w.uint32((f.num << 3) | WIRE.LEN).string(f.value);
      return;
    case 'bytes':
      w.uint32((f.num << 3) | WIRE.LEN).bytes(f.value);
      return;
    case 'double':
      w.uint32((f.num << 3) | WIRE.I64).double(f.value);
      return;
    case 'fixed32':
      w.uint32((f.num << 3) | WIRE.I32).fixed32(f.value);
      return;
    case 'group':
      w.uint32((f.num << 3) | WIRE.SGROUP);
      for (const g of f.value) write(w, g);
      w.uint32((f.num << 3) | WIRE.EGROUP);
  }
}

const encode = (fields: readonly Field[]): Buffer => {
  const w = protobuf.Writer.create();
  for (const f of fields) write(w, f);
  return Buffer.from(w.finish());
};

const fieldNumber = fc.integer({ min: 1, max: 2 ** 29 - 1 });
const leaf: fc.Arbitrary<Field> = fc.oneof(
  fc.record({ kind: fc.constant('uint32' as const), num: fieldNumber, value: fc.nat({ max: 2 ** 32 - 1 }) }),
  fc.record({
    kind: fc.constant('uint64' as const),
    num: fieldNumber,
    value: fc.bigInt({ min: 0n, max: 2n ** 53n - 1n }),
  }),
  fc.record({
    kind: fc.constant('string' as const),
    num: fieldNumber,
    value: fc.string({ unit: 'grapheme', maxLength: 40 }),
  }),
  fc.record({ kind: fc.constant('bytes' as const), num: fieldNumber, value: fc.uint8Array({ maxLength: 300 }) }),
  fc.record({ kind: fc.constant('double' as const), num: fieldNumber, value: fc.double({ noNaN: true }) }),
  fc.record({ kind: fc.constant('fixed32' as const), num: fieldNumber, value: fc.nat({ max: 2 ** 32 - 1 }) }),
);
const field: fc.Arbitrary<Field> = fc.oneof(
  { weight: 6, arbitrary: leaf },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('group' as const),
      num: fieldNumber,
      value: fc.array(leaf, { maxLength: 4 }),
    }),
  },
);
const message = fc.array(field, { maxLength: 12 });

/** Reads back the fields of [r.pos, end) as the test wrote them (groups skipped and checked by their end). */
function readBack(r: WireReader, end: number, expected: readonly Field[]): void {
  for (const f of expected) {
    const tag = r.tag(end);
    expect(tag >>> 3).toBe(f.num);
    switch (f.kind) {
      case 'uint32':
        expect(tag & 7).toBe(WIRE.VARINT);
        expect(r.varint32(end)).toBe(f.value);
        break;
      case 'uint64':
        expect(r.varint(end)).toBe(Number(f.value));
        break;
      case 'string': {
        const e = r.lengthEnd(end);
        expect(r.utf8(r.pos, e)).toBe(Buffer.from(f.value, 'utf8').toString('utf8'));
        r.pos = e;
        break;
      }
      case 'bytes': {
        const e = r.lengthEnd(end);
        expect(r.equals(r.pos, e, f.value)).toBe(true);
        r.pos = e;
        break;
      }
      case 'double':
        expect(tag & 7).toBe(WIRE.I64);
        expect(r.double(end)).toBe(f.value);
        break;
      case 'fixed32':
        expect(tag & 7).toBe(WIRE.I32);
        r.skip(tag & 7, end);
        expect(r.buf.readUInt32LE(r.pos - 4)).toBe(f.value);
        break;
      case 'group':
        expect(tag & 7).toBe(WIRE.SGROUP);
        r.skip(tag & 7, end);
        // The group's end-group tag is the last varint before the reader.
        expect(r.buf[r.pos - 1] & 0x80).toBe(0);
        break;
    }
  }
  expect(r.pos).toBe(end);
}

/** Skips every field of the message; returns how many there were. */
function skipAll(r: WireReader, end: number): number {
  let n = 0;
  while (r.pos < end) {
    const tag = r.tag(end);
    r.skip(tag & 7, end);
    n++;
  }
  return n;
}

describe('WireReader on what protobufjs writes', () => {
  it('reads every field back as written (varints up to 2^53, strings, bytes, doubles, fixed32, groups)', () => {
    fc.assert(
      fc.property(message, (fields) => {
        const bytes = encode(fields);
        readBack(new WireReader(bytes), bytes.length, fields);
      }),
      { numRuns: 2000 },
    );
  });

  it('skips every field to its end, whatever its wire type', () => {
    fc.assert(
      fc.property(message, (fields) => {
        const bytes = encode(fields);
        const r = new WireReader(bytes);
        expect(skipAll(r, bytes.length)).toBe(fields.length);
        expect(r.pos).toBe(bytes.length);
      }),
      { numRuns: 2000 },
    );
  });

  it('reads an embedded message within its length, never past it', () => {
    fc.assert(
      fc.property(message, message, (inner, after) => {
        const w = protobuf.Writer.create();
        w.uint32((1 << 3) | WIRE.LEN).bytes(encode(inner));
        for (const f of after) write(w, f);
        const bytes = Buffer.from(w.finish());
        const r = new WireReader(bytes);
        r.tag(bytes.length);
        const innerEnd = r.lengthEnd(bytes.length);
        readBack(r, innerEnd, inner);
        readBack(r, bytes.length, after);
      }),
      { numRuns: 1000 },
    );
  });

  it('on any cut or changed byte of a message, either reads on or throws a WireError, never anything else', () => {
    fc.assert(
      fc.property(
        message.filter((m) => m.length > 0),
        fc.nat(),
        fc.nat({ max: 255 }),
        fc.boolean(),
        (fields, at, byte, cut) => {
          const bytes = encode(fields);
          const i = at % bytes.length;
          const mutated = cut ? bytes.subarray(0, i) : Buffer.from(bytes);
          if (!cut) mutated[i] = byte;
          const r = new WireReader(mutated);
          try {
            skipAll(r, mutated.length);
            expect(r.pos).toBe(mutated.length);
          } catch (err) {
            expect(err).toBeInstanceOf(WireError);
          }
        },
      ),
      { numRuns: 5000 },
    );
  });
});

describe('WireReader on malformed bytes', () => {
  /** [what, bytes, how it is read, the fault]. */
  const cases: [string, number[], (r: WireReader, end: number) => unknown, WireFault][] = [
    ['an empty tag', [], (r, e) => r.tag(e), 'truncated'],
    ['a tag cut in its varint', [0x88], (r, e) => r.tag(e), 'truncated'],
    ['field number 0 (varint)', [0x00, 0x01], (r, e) => r.tag(e), 'field_number_0'],
    ['field number 0 (length-delimited)', [0x02, 0x00], (r, e) => r.tag(e), 'field_number_0'],
    ['a tag longer than 32 bits', [0xff, 0xff, 0xff, 0xff, 0x1f], (r, e) => r.tag(e), 'varint_too_long'],
    ['a tag in 6 bytes', [0x88, 0x80, 0x80, 0x80, 0x80, 0x00], (r, e) => r.tag(e), 'varint_too_long'],
    ['a length of 2^32', [0x80, 0x80, 0x80, 0x80, 0x10], (r, e) => r.lengthEnd(e), 'varint_too_long'],
    ['a length past the end', [0x05, 0x61, 0x62], (r, e) => r.lengthEnd(e), 'length_past_end'],
    ['a length of 2^32 - 1', [0xff, 0xff, 0xff, 0xff, 0x0f], (r, e) => r.lengthEnd(e), 'length_past_end'],
    ['a varint of 11 bytes', [...Array(10).fill(0x80), 0x01], (r, e) => r.varint(e), 'varint_too_long'],
    ['a varint cut short', [0x80, 0x80], (r, e) => r.varint(e), 'truncated'],
    [
      'a skipped varint of 11 bytes',
      [0x08, ...Array(10).fill(0x80), 0x01],
      (r, e) => r.skip(r.tag(e) & 7, e),
      'varint_too_long',
    ],
    ['a fixed64 cut short', [0x09, 1, 2, 3, 4, 5, 6, 7], (r, e) => r.skip(r.tag(e) & 7, e), 'truncated'],
    ['a double cut short', [1, 2, 3], (r, e) => r.double(e), 'truncated'],
    ['a fixed32 cut short', [0x0d, 1, 2, 3], (r, e) => r.skip(r.tag(e) & 7, e), 'truncated'],
    ['wire type 6', [0x0e], (r, e) => r.skip(r.tag(e) & 7, e), 'wire_type'],
    ['wire type 7', [0x0f], (r, e) => r.skip(r.tag(e) & 7, e), 'wire_type'],
    ['an end-group without its start', [0x0c], (r, e) => r.skip(r.tag(e) & 7, e), 'wire_type'],
    ['a group never ended', [0x0b, 0x08, 0x01], (r, e) => r.skip(r.tag(e) & 7, e), 'truncated'],
    [
      `groups nested ${MAX_GROUP_DEPTH + 1} deep`,
      [...Array(MAX_GROUP_DEPTH + 1).fill(0x0b), ...Array(MAX_GROUP_DEPTH + 1).fill(0x0c)],
      (r, e) => r.skip(r.tag(e) & 7, e),
      'too_deep',
    ],
  ];

  it.each(cases)('%s throws the WireError %4$s', (_what, bytes, read, fault) => {
    const buf = Buffer.from(bytes);
    let thrown: unknown;
    try {
      read(new WireReader(buf), buf.length);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBe(WIRE_FAULT[fault]);
    expect(thrown).toBeInstanceOf(InternalError);
    expect((thrown as WireError).code).toBe('wire_malformed');
  });

  it(`skips groups nested ${MAX_GROUP_DEPTH} deep`, () => {
    const buf = Buffer.from([...Array(MAX_GROUP_DEPTH).fill(0x0b), ...Array(MAX_GROUP_DEPTH).fill(0x0c)]);
    const r = new WireReader(buf);
    r.skip(r.tag(buf.length) & 7, buf.length);
    expect(r.pos).toBe(buf.length);
  });

  it('never reads past the end it is given, even when the buffer goes on', () => {
    const buf = Buffer.from([0x0a, 0x03, 0x61, 0x62, 0x63]);
    const r = new WireReader(buf);
    r.tag(3);
    expect(() => r.lengthEnd(3)).toThrow(WIRE_FAULT.length_past_end);
    expect(() => new WireReader(buf, 2).advance(4, 5)).toThrow(WIRE_FAULT.truncated);
  });

  it('reads a 32-bit varint at its limits: 2^32 - 1 in five bytes', () => {
    const buf = Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]);
    expect(new WireReader(buf).varint32(buf.length)).toBe(2 ** 32 - 1);
  });
});

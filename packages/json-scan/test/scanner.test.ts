/**
 * The scanner alone: which bodies are JSON (a table of malformed and well-formed ones, UTF-8, depth),
 * agreement with JSON.parse on random documents and random mutations of them (fast-check), and what
 * the hooks report: every member of the top-level object with its value's bytes, as JSON.parse reads them.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { asBuffer, JsonScanner, scanJson, type ScanProblem, type ScanResult } from '../src/scanner';

type Outcome = 'object' | 'not_object' | ScanProblem;

function outcome(r: ScanResult): Outcome {
  return r.ok ? (r.object ? 'object' : 'not_object') : r.problem;
}

/** The messages `why` can hold: expectations, never bytes of the body. */
const WHY =
  /^(expected a value|expected a string key|expected ':'|expected ',' or '\}'|expected ',' or '\]'|expected a digit|invalid number|invalid escape|invalid \\u escape|unterminated string|unexpected data after the JSON value|empty or only whitespace|not valid UTF-8|nested deeper than \d+ levels)$/;

function scan(body: string | Buffer, maxDepth?: number): Outcome {
  const r = scanJson(typeof body === 'string' ? Buffer.from(body) : body, maxDepth);
  if (!r.ok) expect(r.why).toMatch(WHY);
  return outcome(r);
}

const bytes = (...parts: (string | number[])[]): Buffer => Buffer.concat(parts.map((p) => Buffer.from(p as string)));

const TABLE: [string, string | Buffer, Outcome][] = [
  ['an object', '{"a":1}', 'object'],
  ['whitespace everywhere', ' \t\r\n{ \n"a" \t:\r\n "b" \n, "x" : [ 1 , { } , [ ] ] }\n\t ', 'object'],
  ['every kind of number', '{"n":[0,-0,1,-12,0.5,-0.5e10,1E+2,3e-4,10.25E-07]}', 'object'],
  ['escapes of every kind', '{"a":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\ude80"}', 'object'],
  ['a string ending in an escaped backslash', '{"a":"a\\\\","b":"c"}', 'object'],
  ['an escaped backslash then an escaped quote', '{"a":"\\\\\\"","b":1}', 'object'],
  ['a raw control character inside a string (the leniency)', '{"a":"x\u0001y\nz"}', 'object'],
  ['a top-level array', '[{"a":1}]', 'not_object'],
  ['a top-level string', '"a"', 'not_object'],
  ['a top-level number', ' 12 ', 'not_object'],
  ['a top-level null', 'null', 'not_object'],
  ['an empty body', '', 'empty'],
  ['a whitespace-only body', ' \t\r\n ', 'empty'],
  ['a UTF-8 byte order mark', '\ufeff{"a":1}', 'invalid_json'],
  ['an invalid top-level array', '[1,]', 'invalid_json'],
  ['trailing garbage', '{"a":1}x', 'invalid_json'],
  ['a second value after the object', '{"a":1} {}', 'invalid_json'],
  ['an extra closing brace', '{"a":1}}', 'invalid_json'],
  ['a trailing comma in an object', '{"a":1,}', 'invalid_json'],
  ['a trailing comma in an array', '{"m":[1,]}', 'invalid_json'],
  ['a missing comma', '{"a":1 "b":1}', 'invalid_json'],
  ['a missing colon', '{"a" 1}', 'invalid_json'],
  ['a non-string key', '{1:2}', 'invalid_json'],
  ['single quotes', "{'a':'b'}", 'invalid_json'],
  ['an unclosed object', '{"a":1', 'invalid_json'],
  ['an unclosed array', '{"m":[1', 'invalid_json'],
  ['leading zeros', '{"n":01}', 'invalid_json'],
  ['leading zeros after a minus', '{"n":-01}', 'invalid_json'],
  ['no digits after the dot', '{"n":1.}', 'invalid_json'],
  ['a number starting with a dot', '{"n":.5}', 'invalid_json'],
  ['a plus sign', '{"n":+1}', 'invalid_json'],
  ['an exponent without digits', '{"n":1e+}', 'invalid_json'],
  ['a lone minus', '{"n":-}', 'invalid_json'],
  ['hex numbers', '{"n":0x10}', 'invalid_json'],
  ['NaN and Infinity', '{"n":[NaN,Infinity]}', 'invalid_json'],
  ['a misspelt literal', '{"b":tru}', 'invalid_json'],
  ['a capitalised literal', '{"b":True}', 'invalid_json'],
  ['a literal cut at the end', '{"b":nul', 'invalid_json'],
  ['an unknown escape', '{"b":"\\x41"}', 'invalid_json'],
  ['a short \\u escape', '{"b":"\\u12"}', 'invalid_json'],
  ['a \\u escape with a non-hex digit', '{"b":"\\u12G4"}', 'invalid_json'],
  ['a control byte among \\u digits (0x12 | 0x20 would be "2")', '{"b":"\\u0\u00125d"}', 'invalid_json'],
  ['an uppercase \\U escape', '{"b":"\\U0041"}', 'invalid_json'],
  ['a bad escape in a key', '{"mod\\el":"a"}', 'invalid_json'],
  ['an unterminated string', '{"a":"b', 'invalid_json'],
  ['a string whose closing quote is escaped', '{"a":"b\\"}', 'invalid_json'],
  ['a body ending in a backslash', '{"a":"b\\', 'invalid_json'],
  ['a body ending inside a \\u escape', '{"a":"b\\u00', 'invalid_json'],
  ['a raw control character outside strings', '{\u0001"a":1}', 'invalid_json'],
  ['form feed and vertical tab as whitespace', '{\f"a":1\u000b}', 'invalid_json'],
  ['a non-breaking space as whitespace', '{\u00a0"a":1}', 'invalid_json'],
  ['an overlong encoding', bytes('{"a":"', [0xc0, 0xaf], '"}'), 'not_utf8'],
  ['a lone continuation byte', bytes('{"a":"', [0x80], '"}'), 'not_utf8'],
  ['a truncated sequence', bytes('{"a":"', [0xe2, 0x82], '"}'), 'not_utf8'],
  ['a surrogate encoded in UTF-8', bytes('{"a":"', [0xed, 0xa0, 0x80], '"}'), 'not_utf8'],
  ['a code point above U+10FFFF', bytes('{"a":"', [0xf4, 0x90, 0x80, 0x80], '"}'), 'not_utf8'],
  ['invalid UTF-8 outside strings', bytes('{"a":1}', [0xff]), 'not_utf8'],
];

describe('scanJson', () => {
  it.each(TABLE)('%s: %j is %s', (_name, body, expected) => {
    expect(scan(body)).toBe(expected);
  });

  it('gives the byte position and the expectation of a syntax error', () => {
    expect(scanJson(Buffer.from('{"a":1 "b":2}'))).toEqual({
      ok: false,
      problem: 'invalid_json',
      at: 7,
      why: "expected ',' or '}'",
    });
    expect(scanJson(Buffer.from('{"a":[1,2'))).toEqual({
      ok: false,
      problem: 'invalid_json',
      at: 9,
      why: "expected ',' or ']'",
    });
  });

  it('refuses 10,000 levels of nesting as too deep without throwing, and accepts them with the limit raised', () => {
    const deep = Buffer.from('['.repeat(10_000) + ']'.repeat(10_000));
    expect(scan(deep)).toBe('too_deep');
    expect(scan(deep, 10_000)).toBe('not_object');
    expect(scan(Buffer.from('{"a":'.repeat(200) + '1' + '}'.repeat(200)))).toBe('object');
  });

  it('counts a top-level container as depth 1', () => {
    expect(scan('{}', 1)).toBe('object');
    expect(scan('{"a":{}}', 1)).toBe('too_deep');
    expect(scan('{"a":{}}', 2)).toBe('object');
  });

  it('throws on a maxDepth that is not a positive integer', () => {
    for (const d of [0, -1, 1.5, Number.NaN]) expect(() => scanJson(Buffer.from('{}'), d)).toThrow(RangeError);
  });

  it('reads a plain Uint8Array, and only the bytes it views', () => {
    const backing = Buffer.from('xx{"a":1}yy');
    const view = new Uint8Array(backing.buffer, backing.byteOffset + 2, 7);
    expect(outcome(scanJson(view))).toBe('object');
    expect(asBuffer(view).toString()).toBe('{"a":1}');
  });

  it('finds an error at the very end of a 1 MiB body of long escaped strings', () => {
    const item = JSON.stringify('a "quoted" word, C:\\path, '.repeat(40));
    const body = Buffer.from(`{"m":[${Array.from({ length: 1100 }, () => item).join(',')}]`);
    expect(body.length).toBeGreaterThan(1024 * 1024);
    expect(scanJson(body)).toEqual({ ok: false, problem: 'invalid_json', at: body.length, why: "expected ',' or '}'" });
  });
});

/** JSON.parse's answer, with raw control characters neutralised as the scanner's leniency treats them. */
function reference(body: Buffer): Outcome {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(body);
  } catch {
    return 'not_utf8';
  }
  if (/^[ \t\n\r]*$/.test(text)) return 'empty';
  text = text.replace(/[\t\n\r]/g, ' ').replace(/[\u0000-\u001f]/g, 'g');
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? 'object' : 'not_object';
  } catch {
    return 'invalid_json';
  }
}

const MUTATION_BYTES = [...'{}[]:,"\\ \t\n\r0123456789-+.eEtrufalsn/gx'].map((c) => c.charCodeAt(0));

describe('scanJson against JSON.parse (fast-check)', () => {
  // Any JSON value, serialised with and without indentation, strings with any code points.
  const json = fc
    .tuple(fc.jsonValue({ maxDepth: 6 }), fc.constantFrom(undefined, 1, '\t'))
    .map(([v, indent]) => Buffer.from(JSON.stringify(v, null, indent)));

  it('accepts every document JSON.stringify writes, as an object or not', () => {
    fc.assert(
      fc.property(json, (body) => {
        expect(scan(body)).toBe(reference(body));
      }),
      { numRuns: 3000 },
    );
  });

  it('agrees on one-byte insertions, deletions and replacements in those documents', () => {
    const mutation = fc.tuple(
      json,
      fc.nat(),
      fc.constantFrom('insert', 'delete', 'replace'),
      fc.oneof(
        fc.constantFrom(...MUTATION_BYTES),
        fc.integer({ min: 0, max: 0x1f }),
        fc.integer({ min: 0x80, max: 0xff }),
      ),
    );
    let invalid = 0;
    fc.assert(
      fc.property(mutation, ([doc, where, kind, byte]) => {
        const at = where % (doc.length + 1);
        const b = Buffer.from([byte]);
        const body =
          kind === 'insert'
            ? Buffer.concat([doc.subarray(0, at), b, doc.subarray(at)])
            : Buffer.concat([doc.subarray(0, at), kind === 'replace' ? b : Buffer.alloc(0), doc.subarray(at + 1)]);
        const expected = reference(body);
        if (expected === 'invalid_json') invalid++;
        expect(scan(body)).toBe(expected);
      }),
      { numRuns: 20_000 },
    );
    expect(invalid).toBeGreaterThan(1000); // the mutations do reach broken documents
  });

  it('never throws on random bytes, and agrees with JSON.parse on them', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (body) => {
        expect(outcome(scanJson(body))).toBe(reference(Buffer.from(body)));
      }),
      { numRuns: 5000 },
    );
  });
});

/** A subclass reading every member of the top-level object: its key decoded and its value's bytes. */
class Members extends JsonScanner {
  readonly members: [string, string][] = [];
  readonly strings: string[] = [];
  #key = '';
  protected override onMember(start: number, end: number, valueStart: number, topLevel: boolean): void {
    if (!topLevel) return;
    this.#key = JSON.parse(this.buf.toString('utf8', start, end)) as string;
    this.topLevelValueAt = valueStart;
    if (this.buf[valueStart] === 0x22) this.stringValueAt = valueStart;
  }
  protected override onStringValue(start: number, end: number): number {
    this.strings.push(this.buf.toString('utf8', start, end));
    return end;
  }
  protected override onTopLevelValueEnd(start: number, end: number): void {
    this.members.push([this.#key, this.buf.toString('utf8', start, end)]);
  }
}

describe('the hooks', () => {
  it('report each top-level member with its value as written, as JSON.parse reads them', () => {
    const object = fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 }));
    fc.assert(
      fc.property(object, fc.constantFrom(undefined, 2), (o, indent) => {
        const scanner = new Members(Buffer.from(JSON.stringify(o, null, indent)));
        expect(scanner.run(256)).toEqual({ ok: true, object: true });
        expect(Object.fromEntries(scanner.members.map(([k, v]) => [k, JSON.parse(v) as unknown]))).toEqual(
          JSON.parse(JSON.stringify(o)),
        );
        expect(scanner.strings).toEqual(
          Object.values(o)
            .filter((v) => typeof v === 'string')
            .map((v) => JSON.stringify(v)),
        );
      }),
      { numRuns: 1000 },
    );
  });

  it('let a subclass refuse a body from onStringValue, at the byte it names', () => {
    class NoX extends JsonScanner {
      protected override onMember(_s: number, _e: number, valueStart: number): void {
        this.stringValueAt = valueStart;
      }
      protected override onStringValue(start: number, end: number): number {
        return this.buf.includes('x', start) && this.buf.indexOf('x', start) < end ? this.fail(start, 'no x') : end;
      }
    }
    expect(new NoX(Buffer.from('{"a":"b","c":{"d":"xyz"}}')).run(8)).toEqual({
      ok: false,
      problem: 'invalid_json',
      at: 18,
      why: 'no x',
    });
    expect(new NoX(Buffer.from('{"a":"b","c":{"d":"yz"}}')).run(8)).toEqual({ ok: true, object: true });
  });
});

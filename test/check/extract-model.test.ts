import { describe, expect, it } from 'vitest';
import { extractModel, type ExtractProblem, type ModelExtraction } from '../../src/check/extract-model';

/** What a body must give: the model, or the problem. */
type Expected = { model: string } | { problem: ExtractProblem };

function bytes(...parts: (string | number[])[]): Buffer {
  return Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part) : Buffer.from(part))));
}

function summary(r: ModelExtraction): Expected {
  return r.ok ? { model: r.model } : { problem: r.problem };
}

/**
 * Every detail extractModel can produce. Matching one of these templates proves that no byte of
 * the body (which may hold secrets) leaks into a detail.
 */
const DETAIL = new RegExp(
  '^(' +
    [
      "invalid JSON at byte \\d+: (expected a value|expected a string key|expected ':'|expected ',' or '\\}'|" +
        "expected ',' or '\\]'|expected a digit|invalid number|invalid escape|invalid \\\\u escape|unterminated string|" +
        'unexpected data after the JSON value|control character in the model string)',
      'body is empty or only whitespace',
      'body is not valid UTF-8',
      'JSON body is not an object',
      'JSON nested deeper than \\d+ levels',
      '\\d+ top-level "model" keys, not all the same string',
      'the top-level key "[A-Za-z]{5}" is "model" in another case, which case-insensitive parsers read as the model',
      'no top-level "model" key',
      '"model" is (a number|an object|an array|a boolean|null), not a string',
    ].join('|') +
    ')$',
);

function check(body: Uint8Array, maxDepth?: number): ModelExtraction {
  const r = extractModel(body, maxDepth);
  if (!r.ok) expect(r.detail).toMatch(DETAIL);
  return r;
}

interface Case {
  readonly name: string;
  readonly body: string | Buffer;
  readonly expected: Expected;
}

const ok = (model: string) => ({ model });
const no = (problem: ExtractProblem) => ({ problem });

const CASES: Case[] = [
  // Where the model is, and how it is written.
  { name: 'finds model as the first field', body: '{"model":"gpt-4o","messages":[]}', expected: ok('gpt-4o') },
  {
    name: 'finds model as the last field',
    body: '{"messages":[{"role":"user","content":"hi"}],"model":"gpt-4o"}',
    expected: ok('gpt-4o'),
  },
  {
    name: 'finds model between other fields',
    body: '{"a":1,"model":"gpt-4o","b":[true,false,null]}',
    expected: ok('gpt-4o'),
  },
  {
    name: 'accepts whitespace everywhere',
    body: ' \t\r\n{ \n"model" \t:\r\n "gpt-4o" \n, "x" : [ 1 , { } , [ ] ] }\n\t ',
    expected: ok('gpt-4o'),
  },
  { name: 'accepts an empty model (the caller decides)', body: '{"model":""}', expected: ok('') },
  { name: 'compares an escaped key decoded', body: '{"mod\\u0065l":"gpt-4o"}', expected: ok('gpt-4o') },
  {
    name: 'compares a fully escaped key decoded, in any hex case',
    body: '{"\\u006D\\u006f\\u0064\\u0065\\u006C":"a"}',
    expected: ok('a'),
  },
  { name: 'decodes an escaped value', body: '{"model":"gpt\\u002d4o"}', expected: ok('gpt-4o') },
  { name: 'decodes short escapes in the value', body: '{"model":"a\\"b\\\\c\\/d\\n"}', expected: ok('a"b\\c/d\n') },
  { name: 'decodes a surrogate pair in the value', body: '{"model":"\\ud83d\\ude80"}', expected: ok('🚀') },
  { name: 'keeps a lone surrogate like JSON.parse does', body: '{"model":"x\\ud800"}', expected: ok('x\ud800') },
  { name: 'decodes raw UTF-8 in the value', body: '{"model":"модель-🚀"}', expected: ok('модель-🚀') },
  {
    name: 'finds model after a string ending in an escaped backslash',
    body: '{"a":"a\\\\","model":"m"}',
    expected: ok('m'),
  },
  {
    name: 'finds model after a string ending in two escaped backslashes',
    body: '{"a":"a\\\\\\\\","model":"m"}',
    expected: ok('m'),
  },
  {
    name: 'finds model after an escaped backslash then an escaped quote',
    body: '{"a":"\\\\\\"","model":"m"}',
    expected: ok('m'),
  },
  {
    name: 'accepts every kind of number',
    body: '{"n":[0,-0,1,-12,0.5,-0.5e10,1E+2,3e-4,10.25E-07],"model":"m"}',
    expected: ok('m'),
  },

  // Only the top-level object counts.
  {
    name: 'ignores model keys inside messages',
    body: '{"messages":[{"role":"user","model":"evil"}],"model":"good"}',
    expected: ok('good'),
  },
  {
    name: 'ignores model keys inside metadata objects',
    body: '{"model":"good","metadata":{"model":"evil","x":{"model":"worse"}}}',
    expected: ok('good'),
  },
  {
    name: 'ignores model keys inside arrays',
    body: '{"a":[["model"],{"model":1},[{"model":"evil"}]],"model":"good"}',
    expected: ok('good'),
  },
  {
    name: 'ignores "model" as a value',
    body: '{"name":"model","tags":["model"],"model":"good"}',
    expected: ok('good'),
  },
  {
    name: 'reports model absent when only nested objects have it',
    body: '{"metadata":{"model":"x"},"messages":[{"model":"y"}]}',
    expected: no('model_absent'),
  },
  { name: 'reports model absent for an empty object', body: '{}', expected: no('model_absent') },
  // Go's encoding/json (and Jackson with case-insensitive properties) bind "MODEL" to a field named
  // Model: the model it reads is not the one checked. Refused, beside "model" or alone.
  { name: 'refuses "model" in another case beside it', body: '{"model":"a","MODEL":"b"}', expected: no('model_case') },
  {
    name: 'refuses "model" in another case after it with the same value',
    body: '{"model":"a","Model":"a"}',
    expected: no('model_case'),
  },
  { name: 'refuses "model" in another case alone', body: '{"Model":"a","MODEL":"b"}', expected: no('model_case') },
  {
    name: 'refuses "model" in another case spelled with escapes',
    body: '{"model":"a","\\u004DODEL":"b"}',
    expected: no('model_case'),
  },
  { name: 'ignores "MODEL" in nested objects', body: '{"model":"a","x":{"MODEL":"b"}}', expected: ok('a') },
  { name: 'does not trim keys', body: '{"model ":"a"," model":"b"}', expected: no('model_absent') },
  {
    name: 'does not take a key with an escaped NUL for model',
    body: '{"model\\u0000":"a"}',
    expected: no('model_absent'),
  },

  // Duplicates.
  {
    name: 'accepts duplicate model keys with equal values',
    body: '{"model":"a","x":1,"model":"a"}',
    expected: ok('a'),
  },
  {
    name: 'accepts duplicate model keys equal after decoding',
    body: '{"model":"a-b","mod\\u0065l":"a\\u002db"}',
    expected: ok('a-b'),
  },
  {
    name: 'refuses duplicate model keys with different values',
    body: '{"model":"allowed","model":"expensive"}',
    expected: no('duplicate_model'),
  },
  {
    name: 'refuses a string model duplicated by null',
    body: '{"model":"a","model":null}',
    expected: no('duplicate_model'),
  },
  {
    name: 'refuses null duplicated by a string model',
    body: '{"model":null,"model":"a"}',
    expected: no('duplicate_model'),
  },
  { name: 'refuses two equal non-string models', body: '{"model":1,"model":1}', expected: no('duplicate_model') },

  // A model that is not a string.
  { name: 'refuses a number model', body: '{"model":4}', expected: no('model_not_string') },
  { name: 'refuses a null model', body: '{"model":null}', expected: no('model_not_string') },
  { name: 'refuses an object model', body: '{"model":{"name":"a"}}', expected: no('model_not_string') },
  { name: 'refuses an array model', body: '{"model":["a"]}', expected: no('model_not_string') },
  { name: 'refuses a boolean model', body: '{"model":true}', expected: no('model_not_string') },

  // Not a JSON object.
  { name: 'reports an empty body', body: '', expected: no('empty') },
  { name: 'reports a whitespace-only body as empty', body: ' \t\r\n ', expected: no('empty') },
  { name: 'refuses a UTF-8 byte order mark', body: '\ufeff{"model":"a"}', expected: no('invalid_json') },
  { name: 'reports a top-level array', body: '[{"model":"a"}]', expected: no('not_object') },
  { name: 'reports a top-level string', body: '"model"', expected: no('not_object') },
  { name: 'reports a top-level number', body: ' 12 ', expected: no('not_object') },
  { name: 'reports a top-level null', body: 'null', expected: no('not_object') },
  {
    name: 'refuses an invalid top-level array as invalid, not as not-an-object',
    body: '[1,]',
    expected: no('invalid_json'),
  },

  // Invalid JSON.
  { name: 'refuses trailing garbage', body: '{"model":"a"}x', expected: no('invalid_json') },
  { name: 'refuses a second value after the object', body: '{"model":"a"} {}', expected: no('invalid_json') },
  { name: 'refuses an extra closing brace', body: '{"model":"a"}}', expected: no('invalid_json') },
  { name: 'refuses a trailing comma in an object', body: '{"model":"a",}', expected: no('invalid_json') },
  { name: 'refuses a trailing comma in an array', body: '{"model":"a","m":[1,]}', expected: no('invalid_json') },
  { name: 'refuses a missing comma', body: '{"model":"a" "b":1}', expected: no('invalid_json') },
  { name: 'refuses a missing colon', body: '{"model" "a"}', expected: no('invalid_json') },
  { name: 'refuses a non-string key', body: '{1:2,"model":"a"}', expected: no('invalid_json') },
  { name: 'refuses single quotes', body: "{'model':'a'}", expected: no('invalid_json') },
  { name: 'refuses an unclosed object', body: '{"model":"a"', expected: no('invalid_json') },
  { name: 'refuses an unclosed array', body: '{"model":"a","m":[1', expected: no('invalid_json') },
  { name: 'refuses leading zeros', body: '{"model":"a","n":01}', expected: no('invalid_json') },
  { name: 'refuses leading zeros after a minus', body: '{"model":"a","n":-01}', expected: no('invalid_json') },
  { name: 'refuses a number without digits after the dot', body: '{"model":"a","n":1.}', expected: no('invalid_json') },
  { name: 'refuses a number starting with a dot', body: '{"model":"a","n":.5}', expected: no('invalid_json') },
  { name: 'refuses a plus sign', body: '{"model":"a","n":+1}', expected: no('invalid_json') },
  { name: 'refuses an exponent without digits', body: '{"model":"a","n":1e+}', expected: no('invalid_json') },
  { name: 'refuses a lone minus', body: '{"model":"a","n":-}', expected: no('invalid_json') },
  { name: 'refuses hex numbers', body: '{"model":"a","n":0x10}', expected: no('invalid_json') },
  { name: 'refuses NaN and Infinity', body: '{"model":"a","n":[NaN,Infinity]}', expected: no('invalid_json') },
  { name: 'refuses a misspelt literal', body: '{"model":"a","b":tru}', expected: no('invalid_json') },
  { name: 'refuses a capitalised literal', body: '{"model":"a","b":True}', expected: no('invalid_json') },
  { name: 'refuses a literal cut at the end', body: '{"model":"a","b":nul', expected: no('invalid_json') },
  { name: 'refuses an unknown escape', body: '{"model":"a","b":"\\x41"}', expected: no('invalid_json') },
  { name: 'refuses a short \\u escape', body: '{"model":"a","b":"\\u12"}', expected: no('invalid_json') },
  {
    name: 'refuses a \\u escape with a non-hex digit',
    body: '{"model":"a","b":"\\u12G4"}',
    expected: no('invalid_json'),
  },
  {
    name: 'refuses a control byte among \\u digits (0x12 | 0x20 would be "2")',
    body: '{"model":"a","b":"\\u0\u00125d"}',
    expected: no('invalid_json'),
  },
  { name: 'refuses an uppercase \\U escape', body: '{"model":"a","b":"\\U0041"}', expected: no('invalid_json') },
  { name: 'refuses a bad escape in a key', body: '{"mod\\el":"a"}', expected: no('invalid_json') },
  { name: 'refuses a bad escape in the model', body: '{"model":"gpt\\-4o"}', expected: no('invalid_json') },
  { name: 'refuses an unterminated string', body: '{"model":"a', expected: no('invalid_json') },
  { name: 'refuses a string whose closing quote is escaped', body: '{"model":"a\\"}', expected: no('invalid_json') },
  { name: 'refuses a body ending in a backslash', body: '{"model":"a\\', expected: no('invalid_json') },
  { name: 'refuses a body ending inside a \\u escape', body: '{"model":"a\\u00', expected: no('invalid_json') },

  // Raw control characters: the documented leniency, and where it stops.
  {
    name: 'accepts a raw control character inside another string (documented leniency)',
    body: '{"content":"a\u0001b\nc\td","model":"m"}',
    expected: ok('m'),
  },
  {
    name: 'refuses a raw control character inside the model',
    body: '{"model":"gpt-4o\n"}',
    expected: no('invalid_json'),
  },
  {
    name: 'refuses a raw control character inside an escaped model',
    body: '{"model":"gpt\\u002d4o\u0000"}',
    expected: no('invalid_json'),
  },
  {
    name: 'refuses a raw control character outside strings',
    body: '{\u0001"model":"a"}',
    expected: no('invalid_json'),
  },
  {
    name: 'does not take a key with a raw control character for model',
    body: '{"mo\u0001del":"a"}',
    expected: no('model_absent'),
  },
  {
    name: 'refuses form feed and vertical tab as whitespace',
    body: '{\f"model":"a"\u000b}',
    expected: no('invalid_json'),
  },
  { name: 'refuses a non-breaking space as whitespace', body: '{\u00a0"model":"a"}', expected: no('invalid_json') },

  // Invalid UTF-8, anywhere.
  { name: 'refuses an overlong encoding', body: bytes('{"model":"', [0xc0, 0xaf], '"}'), expected: no('not_utf8') },
  {
    name: 'refuses a lone continuation byte',
    body: bytes('{"content":"', [0x80], '","model":"a"}'),
    expected: no('not_utf8'),
  },
  {
    name: 'refuses a truncated sequence',
    body: bytes('{"model":"a","x":"', [0xe2, 0x82], '"}'),
    expected: no('not_utf8'),
  },
  {
    name: 'refuses a surrogate encoded in UTF-8',
    body: bytes('{"model":"', [0xed, 0xa0, 0x80], '"}'),
    expected: no('not_utf8'),
  },
  {
    name: 'refuses a code point above U+10FFFF',
    body: bytes('{"model":"', [0xf4, 0x90, 0x80, 0x80], '"}'),
    expected: no('not_utf8'),
  },
  { name: 'refuses invalid UTF-8 outside strings', body: bytes('{"model":"a"}', [0xff]), expected: no('not_utf8') },
];

describe('extractModel', () => {
  it.each(CASES)('$name', ({ body, expected }) => {
    expect(summary(check(typeof body === 'string' ? Buffer.from(body) : body))).toEqual(expected);
  });

  it('names the JSON type of a model that is not a string', () => {
    const detail = (value: string) => {
      const r = extractModel(Buffer.from(`{"model":${value}}`));
      return r.ok ? '' : r.detail;
    };
    expect(detail('12.5')).toBe('"model" is a number, not a string');
    expect(detail('{}')).toBe('"model" is an object, not a string');
    expect(detail('[]')).toBe('"model" is an array, not a string');
    expect(detail('null')).toBe('"model" is null, not a string');
    expect(detail('false')).toBe('"model" is a boolean, not a string');
  });

  it('gives the byte position and the expectation of a JSON error', () => {
    expect(extractModel(Buffer.from('{"model":"a" "b":1}'))).toEqual({
      ok: false,
      problem: 'invalid_json',
      detail: "invalid JSON at byte 13: expected ',' or '}'",
    });
  });

  it('never puts bytes of the body in a detail', () => {
    const secret = 'sk-SECRET0123456789';
    for (const body of [
      `{"${secret}`,
      `{"model":"a","k":${secret}}`,
      `{"model":"${secret}"}x`,
      `["${secret}"]`,
      `{"model":"${secret}\n"}`,
    ]) {
      const r = check(Buffer.from(body));
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.detail).not.toContain('SECRET');
    }
  });

  it('refuses 10,000 levels of nesting as too deep without throwing', () => {
    for (const [open, close] of [
      ['[', ']'],
      ['{"a":', '}'],
    ]) {
      const body = Buffer.from(`{"model":"m","x":${open.repeat(10_000)}1${close.repeat(10_000)}}`);
      expect(check(body)).toEqual({ ok: false, problem: 'too_deep', detail: 'JSON nested deeper than 256 levels' });
    }
  });

  it('accepts 200 levels of nesting with the default limit of 256', () => {
    const body = Buffer.from(`{"x":${'{"model":"no","y":'.repeat(199)}1${'}'.repeat(199)},"model":"m"}`);
    expect(summary(check(body))).toEqual(ok('m'));
    expect(summary(check(body, 199))).toEqual(no('too_deep'));
  });

  it('counts the top-level object as depth 1', () => {
    const body = Buffer.from('{"model":"m","a":{"b":[1]}}'); // 3 levels
    expect(summary(check(body, 3))).toEqual(ok('m'));
    expect(summary(check(body, 2))).toEqual(no('too_deep'));
    expect(summary(check(Buffer.from('{"model":"m"}'), 1))).toEqual(ok('m'));
  });

  it('throws on a maxDepth that is not a positive integer', () => {
    expect(() => extractModel(Buffer.from('{}'), 0)).toThrow(RangeError);
    expect(() => extractModel(Buffer.from('{}'), 1.5)).toThrow(RangeError);
  });

  it('reads a plain Uint8Array, and only the bytes it views', () => {
    const whole = Buffer.from('xx{"model":"a"}"}yy');
    const view = (start: number, end: number) => new Uint8Array(whole.buffer, whole.byteOffset + start, end - start);
    expect(summary(check(view(2, 15)))).toEqual(ok('a'));
    // Cut inside the string: the quote after the view must not close it.
    expect(summary(check(view(2, 13)))).toEqual(no('invalid_json'));
    expect(summary(check(whole.subarray(2, 13)))).toEqual(no('invalid_json'));
  });

  it('finds model after a 1 MiB messages array', () => {
    const body = chatBody(1 << 20, ',"model":"gpt-4o-mini"}');
    expect(body.length).toBeGreaterThan(1 << 20);
    expect(summary(check(body))).toEqual(ok('gpt-4o-mini'));
    expect(JSON.parse(body.toString()).model).toBe('gpt-4o-mini');
  });

  it('finds an error at the very end of a 1 MiB body', () => {
    const body = chatBody(1 << 20, ',"model":"gpt-4o-mini"');
    expect(check(body)).toEqual({
      ok: false,
      problem: 'invalid_json',
      detail: `invalid JSON at byte ${body.length}: expected ',' or '}'`,
    });
  });

  it('finds an unterminated string after long strings with escapes', () => {
    const long = 'x'.repeat(5000);
    const body = Buffer.from(`{"a":"${long}\\"${long}\\\\","b":"${long}\\n${long}`);
    expect(summary(check(body))).toEqual(no('invalid_json'));
  });
});

/** A chat body of about `size` bytes: many messages with escapes and non-ASCII text, then `tail`. */
function chatBody(size: number, tail: string): Buffer {
  const sentences = [
    'The gateway checks every request before it reaches the model.',
    'A "quoted" word, a tab\tand a newline\nkeep the JSON escapes honest: C:\\path\\to\\file.',
    'Ünïcödé text and emoji 🚀 are part of real prompts too.',
    'Tool arguments are JSON inside a string: {"model":"evil","n":[1,2]}',
  ];
  const messages: string[] = [];
  for (let used = 0, i = 0; used < size; i++) {
    const message = JSON.stringify({
      role: i % 2 ? 'assistant' : 'user',
      model: 'nested',
      content: sentences
        .slice(i % 4)
        .concat(sentences)
        .join(' ')
        .repeat(1 + (i % 7)),
    });
    messages.push(message);
    used += Buffer.byteLength(message) + 1;
  }
  return Buffer.from(`{"messages":[${messages.join(',')}]${tail}`);
}

// ---------------------------------------------------------------------------------------------
// Property tests: random JSON documents and random mutations of them, against JSON.parse.

/** mulberry32: a small seeded PRNG, so that failures replay. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MODELS = ['gpt-4o', 'gpt-4o-mini', 'claude-3', '', 'модель', '🚀', 'a"b\\c', '\ud800', 'model'];
const CHARS = [
  'a',
  'b',
  'z',
  ' ',
  'model',
  '"',
  '\\',
  '/',
  '\n',
  '\t',
  '\u0001',
  '\u001f',
  'é',
  '中',
  '😀',
  '\ud800',
  '\udc00',
  '\u2028',
  '{',
  '}',
  '[',
  ']',
  ',',
  ':',
];

class JsonGenerator {
  constructor(private readonly random: () => number) {}

  int(n: number): number {
    return Math.floor(this.random() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }
  chance(p: number): boolean {
    return this.random() < p;
  }

  space(): string {
    if (this.chance(0.6)) return '';
    let s = '';
    for (let k = 1 + this.int(3); k > 0; k--) s += this.pick([' ', '\t', '\n', '\r', '  ']);
    return s;
  }

  /** A JSON string literal for `text`, each character written raw or escaped at random. */
  string(text: string, escapeRate = this.pick([0, 0.1, 0.5, 1])): string {
    let out = '"';
    for (const ch of text) {
      const code = ch.codePointAt(0)!;
      const mustEscape = ch === '"' || ch === '\\' || code < 0x20 || (code >= 0xd800 && code <= 0xdfff);
      if (!mustEscape && !this.chance(escapeRate)) out += ch;
      else if (ch === '"' || ch === '\\') out += this.chance(0.7) ? '\\' + ch : this.unicodeEscape(code);
      else if ('\n\t\b\f\r/'.includes(ch) && this.chance(0.7))
        out += JSON.stringify(ch).slice(1, -1).replace('/', '\\/');
      else if (code > 0xffff)
        out +=
          this.unicodeEscape(0xd800 + ((code - 0x10000) >> 10)) +
          this.unicodeEscape(0xdc00 + ((code - 0x10000) & 0x3ff));
      else out += this.unicodeEscape(code);
    }
    return out + '"';
  }

  unicodeEscape(code: number): string {
    const hex = code.toString(16).padStart(4, '0');
    return '\\u' + (this.chance(0.5) ? hex : hex.toUpperCase());
  }

  text(): string {
    const length = this.chance(0.8) ? this.int(12) : this.chance(0.8) ? 12 + this.int(60) : 100 + this.int(2000);
    let s = '';
    while (s.length < length) s += this.chance(0.5) ? 'a' : this.pick(CHARS);
    return s;
  }

  number(): string {
    let s = this.chance(0.3) ? '-' : '';
    s += this.chance(0.3) ? '0' : String(1 + this.int(9)) + (this.chance(0.5) ? String(this.int(100000)) : '');
    if (this.chance(0.3)) s += '.' + String(this.int(1000)).padStart(1 + this.int(3), '0');
    if (this.chance(0.2)) s += this.pick(['e', 'E']) + this.pick(['', '+', '-']) + String(this.int(400));
    return s;
  }

  value(depth: number): string {
    const kind = this.int(depth > 5 ? 4 : 7);
    if (kind === 0) return this.string(this.text());
    if (kind === 1) return this.number();
    if (kind === 2) return this.pick(['true', 'false', 'null']);
    if (kind === 3) return this.string(this.pick(MODELS));
    if (kind === 4) return this.array(depth + 1);
    return this.object(depth + 1, []);
  }

  array(depth: number): string {
    const items = Array.from({ length: this.int(5) }, () => this.space() + this.value(depth) + this.space());
    return '[' + (items.length ? items.join(',') : this.space()) + ']';
  }

  /** An object with random members, plus `extra` members (already written) at random places. */
  object(depth: number, extra: string[]): string {
    const members = Array.from({ length: this.int(5) }, () => {
      const key = this.chance(0.2) ? 'model' : this.text(); // nested model keys, to be ignored
      return this.string(key) + this.space() + ':' + this.space() + this.value(depth);
    });
    for (const member of extra) members.splice(this.int(members.length + 1), 0, member);
    const body = members.map((m) => this.space() + m + this.space());
    return '{' + (body.length ? body.join(',') : this.space()) + '}';
  }

  /** A request body: mostly an object with zero, one or several top-level `model` members. */
  document(): string {
    if (this.chance(0.05)) return this.space() + this.value(1) + this.space();
    const count = this.pick([0, 1, 1, 1, 1, 2, 3]);
    const first = this.pick(MODELS);
    const models = Array.from({ length: count }, () => {
      const value = this.chance(0.1) ? this.value(2) : this.string(this.chance(0.7) ? first : this.pick(MODELS));
      return this.string('model') + this.space() + ':' + this.space() + value;
    });
    return this.space() + this.object(1, models) + this.space();
  }
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The answer JSON.parse gives for a body. `lenient` first neutralises raw control characters the
 * way extractModel's documented leniency treats them inside strings: tab, LF and CR become spaces
 * (whitespace outside strings, ordinary characters inside), others become a letter (invalid
 * outside strings, after a backslash and in \u digits; ordinary inside strings).
 */
function reference(body: Buffer, lenient = false): Expected {
  let text: string;
  try {
    text = strictUtf8.decode(body);
  } catch {
    return no('not_utf8');
  }
  if (/^[ \t\n\r]*$/.test(text)) return no('empty');
  if (lenient) text = text.replace(/[\t\n\r]/g, ' ').replace(/[\u0000-\u001f]/g, 'g');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return no('invalid_json');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return no('not_object');
  const members = topLevelMembers(text);
  const models = members.filter(([key]) => key === 'model').map(([, v]) => v);
  const conflict = models.length > 0 && !models.every((m) => typeof m === 'string' && m === models[0]);
  if (conflict && models.length > 1) return no('duplicate_model');
  if (members.some(([key]) => key !== 'model' && key.toLowerCase() === 'model')) return no('model_case');
  if (models.length === 0) return no('model_absent');
  if (conflict) return no('model_not_string');
  expect((value as { model: unknown }).model).toBe(models[0]); // what JSON.parse keeps
  return ok(models[0] as string);
}

/** The members of a valid JSON object text, duplicates included (JSON.parse drops them). */
function topLevelMembers(text: string): [string, unknown][] {
  const members: [string, unknown][] = [];
  let depth = 0;
  let key: string | undefined;
  let valueStart = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      if (depth === 1 && key === undefined) key = JSON.parse(text.slice(i, end + 1)) as string;
      i = end;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      if (depth === 1 && key !== undefined) members.push([key, JSON.parse(text.slice(valueStart, i))]);
      depth--;
    } else if (depth === 1 && c === ':') valueStart = i + 1;
    else if (depth === 1 && c === ',') {
      members.push([key!, JSON.parse(text.slice(valueStart, i))]);
      key = undefined;
    }
  }
  return members;
}

/** Nesting depth of a valid JSON text. */
function depthOf(text: string): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') while (text[++i] !== '"') i += text[i] === '\\' ? 1 : 0;
    else if (c === '{' || c === '[') deepest = Math.max(deepest, ++depth);
    else if (c === '}' || c === ']') depth--;
  }
  return deepest;
}

const MUTATION_BYTES = [...'{}[]:,"\\ \t\n\r0123456789-+.eEtrufalsn/gxm'].map((c) => c.charCodeAt(0));

describe('extractModel against JSON.parse', () => {
  const generate = new JsonGenerator(prng(20240611));
  const documents = Array.from({ length: 3000 }, () => Buffer.from(generate.document()));

  it('agrees with JSON.parse on random documents with random model placements', () => {
    const seen = new Map<string, number>();
    for (const body of documents) {
      const expected = reference(body);
      const key = 'model' in expected ? 'ok' : expected.problem;
      seen.set(key, (seen.get(key) ?? 0) + 1);
      expect(summary(check(body)), body.toString()).toEqual(expected);
    }
    // The generator must actually reach each outcome, or the property proves little.
    for (const outcome of ['ok', 'model_absent', 'duplicate_model', 'model_not_string', 'not_object']) {
      expect(seen.get(outcome) ?? 0, outcome).toBeGreaterThan(20);
    }
  });

  it('applies the depth limit exactly at the depth of random documents', () => {
    for (const body of documents.slice(0, 500)) {
      const depth = depthOf(body.toString());
      if (depth === 0) continue;
      expect(summary(check(body, depth))).toEqual(reference(body));
      if (depth > 1) expect(summary(check(body, depth - 1))).toEqual(no('too_deep'));
    }
  });

  it('agrees with JSON.parse on random one-byte mutations of those documents', () => {
    const random = prng(7);
    const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)];
    let lenient = 0;
    let accepted = 0;
    for (const original of documents) {
      for (let m = 0; m < 6; m++) {
        const at = Math.floor(random() * (original.length + 1));
        const kind = pick(['insert', 'delete', 'replace']);
        const byte =
          random() < 0.15
            ? Math.floor(random() * 0x20)
            : random() < 0.1
              ? 0x80 + Math.floor(random() * 0x80)
              : pick(MUTATION_BYTES);
        const mutated =
          kind === 'insert'
            ? Buffer.concat([original.subarray(0, at), Buffer.from([byte]), original.subarray(at)])
            : Buffer.concat([
                original.subarray(0, at),
                kind === 'replace' ? Buffer.from([byte]) : Buffer.alloc(0),
                original.subarray(at + 1),
              ]);
        const actual = check(mutated);
        if (!actual.ok && actual.detail.endsWith('control character in the model string')) continue; // strict on purpose
        expect(summary(actual), `${kind} ${byte} at ${at} of ${JSON.stringify(original.toString())}`).toEqual(
          reference(mutated, true),
        );
        if (actual.ok) {
          accepted++;
          // Accepted, and JSON.parse agrees; or it refuses only a raw control byte in a string,
          // since the lenient reference above accepted the same model.
          if (!('model' in reference(mutated))) lenient++;
        }
      }
    }
    expect(accepted).toBeGreaterThan(1000);
    expect(lenient).toBeGreaterThan(0);
  });
});

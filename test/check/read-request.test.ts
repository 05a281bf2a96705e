/**
 * read-request: the bytes of a CheckRequest as Envoy sends them become a RequestView
 * (the `headers` map, or `header_map` with encode_raw_headers), keeping only the headers a
 * decision reads; any missing part becomes an empty value; bytes that are not a well-formed
 * protobuf message are refused (undefined), never guessed at and never a crash. Checked against
 * protobufjs (the generic decoder grpc-js would use) on thousands of random requests.
 */
import { Reader } from 'protobufjs';
import { describe, expect, test } from 'vitest';
import type { CheckRequest } from '../../proto/types/envoy/service/auth/v3/CheckRequest';
import type { CheckRequest__Output } from '../../proto/types/envoy/service/auth/v3/CheckRequest';
import { decodeCheckRequest, headerFilter, requestHeaderFilter } from '../../src/check/read-request';
import { decisionHeaders } from '../../src/contract/headers';
import { buildCheckRequest } from '../../src/envoy/check-request';
import { authorizationService } from '../../src/envoy/protos';
import type { RequestView } from '../../src/check/request-view';
import { readFileSync } from 'node:fs';
import { parseConfig } from '../../src/config/load';
import { DEMO_CONFIG } from '../support/service-harness';
import { readCheckRequest } from '../support/reference-view';

const def = authorizationService().Check;
const encode = (req: CheckRequest): Buffer => def.requestSerialize(req) as Buffer;
const DEFAULT_ROUTES = parseConfig(readFileSync(DEMO_CONFIG, 'utf8')).routes;
const filter = requestHeaderFilter(DEFAULT_ROUTES);
const wanted = new Set(decisionHeaders(DEFAULT_ROUTES));
const decode = (bytes: Buffer): RequestView | undefined => decodeCheckRequest(bytes, filter);
/** What protobufjs + the plain reading make of the same bytes. */
const reference = (bytes: Buffer): RequestView =>
  readCheckRequest(def.requestDeserialize(bytes) as CheckRequest__Output, (h) => wanted.has(h));
const plain = (v: RequestView | undefined) =>
  v && { ...v, headers: { ...v.headers }, body: v.body && Buffer.from(v.body).toString('latin1') };

describe('decodeCheckRequest', () => {
  test('reads method, path, query, the decision headers, body and request id from the headers map', () => {
    const v = decode(
      encode(
        buildCheckRequest({
          method: 'POST',
          path: '/v1/chat/completions?alt=sse&key=',
          headers: [
            ['Authorization', 'Bearer k'],
            ['X-Request-Id', 'req-1'],
            ['X-Api-Key', 'a'],
            ['x-api-key', 'b'],
            ['User-Agent', 'sdk/1.0'],
            ['anthropic-version', '2023-06-01'],
          ],
          body: '{"model":"m"}',
        }),
      ),
    )!;
    expect(v.method).toBe('POST');
    expect(v.path).toBe('/v1/chat/completions');
    expect(v.query).toBe('alt=sse&key=');
    expect(v.headers.authorization).toBe('Bearer k');
    expect(v.headers['x-api-key']).toBe('a,b');
    expect(v.headers['anthropic-version']).toBe('2023-06-01');
    expect(v.requestId).toBe('req-1');
    expect(Buffer.from(v.body!).toString('utf8')).toBe('{"model":"m"}');
    expect(v.partialBody).toBe(false);
    expect(v.headers['user-agent']).toBe('sdk/1.0'); // for the decision line
    // Headers no decision (or its log line) reads are skipped, not decoded.
    expect(Object.keys(v.headers).sort()).toEqual([
      ':method',
      ':path',
      'anthropic-version',
      'authorization',
      'user-agent',
      'x-api-key',
      'x-envoy-auth-partial-body',
      'x-request-id',
    ]);
  });

  test('keeps the key headers the config names, and only those', () => {
    const bytes = encode(
      buildCheckRequest({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: [
          ['x-corp-key', 'k1'],
          ['x-goog-api-key', 'k2'],
        ],
      }),
    );
    const custom = headerFilter([':path', ':method', 'x-corp-key']);
    expect(decodeCheckRequest(bytes, custom)!.headers).toEqual({
      ':path': '/v1/chat/completions',
      ':method': 'POST',
      'x-corp-key': 'k1',
    });
  });

  test('flags a body Envoy cut at max_request_bytes', () => {
    const v = decode(
      encode(buildCheckRequest({ method: 'POST', path: '/v1/messages', body: 'x'.repeat(100), maxRequestBytes: 10 })),
    )!;
    expect(v.partialBody).toBe(true);
    expect(v.body!.length).toBe(10);
  });

  test('reads header_map (encode_raw_headers), lowercasing names and joining repeats with "," as Envoy does', () => {
    const v = decode(
      encode({
        attributes: {
          request: {
            http: {
              header_map: {
                headers: [
                  { key: ':method', raw_value: Buffer.from('POST') },
                  { key: ':path', raw_value: Buffer.from('/v1beta/models/m:generateContent?alt=sse') },
                  { key: 'X-Goog-Api-Key', raw_value: Buffer.from('k1') },
                  { key: 'x-goog-api-key', value: 'k2' },
                  { key: 'accept', value: 'skipped' },
                  { key: '', value: 'ignored' },
                ],
              },
            },
          },
        },
      }),
    )!;
    expect(v.method).toBe('POST');
    expect(v.path).toBe('/v1beta/models/m:generateContent');
    expect(v.query).toBe('alt=sse');
    expect(v.headers).toEqual({
      ':method': 'POST',
      ':path': '/v1beta/models/m:generateContent?alt=sse',
      'x-goog-api-key': 'k1,k2',
    });
  });

  test('takes the body field when raw_body is absent, as the bytes that came', () => {
    const v = decode(
      encode({
        attributes: { request: { http: { method: 'POST', path: '/v1/embeddings', body: '{"model":"\u00e9"}' } } },
      }),
    )!;
    expect(Buffer.from(v.body!).toString('utf8')).toBe('{"model":"\u00e9"}');
  });

  test('falls back to the http path and method fields when pseudo-headers are absent', () => {
    const v = decode(
      encode({
        attributes: {
          request: { http: { method: 'GET', path: '/v1/models?x=1', headers: { authorization: 'Bearer k' } } },
        },
      }),
    )!;
    expect(v).toMatchObject({ method: 'GET', path: '/v1/models', query: 'x=1' });
  });

  test.each<[string, CheckRequest]>([
    ['an empty request', {}],
    ['no http attributes', { attributes: { request: {} } }],
  ])('reads %s as an empty view', (_name, req) => {
    expect(decode(encode(req))).toEqual({
      method: '',
      path: '',
      query: '',
      headers: {},
      body: undefined,
      partialBody: false,
      requestId: '',
    });
  });

  test("reads the client's address (attributes.source, as Envoy determined it) and nothing else of the peers and context", () => {
    const req = {
      attributes: {
        source: { address: { socket_address: { address: '2001:db8::7', port_value: 1 } } },
        destination: { address: { socket_address: { address: '10.0.0.2', port_value: 2 } } },
        context_extensions: { a: 'b' },
      },
    };
    const v = decode(encode(req))!;
    expect(v).toEqual({
      method: '',
      path: '',
      query: '',
      headers: {},
      body: undefined,
      partialBody: false,
      requestId: '',
      client: '2001:db8::7',
    });
    expect(v.client).toBe('2001:db8::7');
  });

  test('merges a repeated embedded message as the protobuf spec says (as if the two were concatenated)', () => {
    const a = encode({
      attributes: {
        request: {
          http: {
            headers: { ':path': '/v1/chat/completions', authorization: 'Bearer a', 'x-request-id': 'r1' },
            raw_body: Buffer.from('{"model":"a"}'),
          },
        },
      },
    });
    const b = encode({
      attributes: { request: { http: { headers: { authorization: 'Bearer b', ':method': 'POST' } } } },
    });
    const v = decode(Buffer.concat([a, b]))!;
    expect(v.headers).toEqual({
      ':path': '/v1/chat/completions',
      authorization: 'Bearer b',
      'x-request-id': 'r1',
      ':method': 'POST',
    });
    expect(Buffer.from(v.body!).toString()).toBe('{"model":"a"}');
  });
});

describe('decodeCheckRequest refuses what is not a well-formed message', () => {
  const valid = encode(
    buildCheckRequest({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', 'Bearer k']],
      body: '{"model":"m"}',
    }),
  );

  test.each<[string, number[]]>([
    ['wire type 6', [0x0e]],
    ['wire type 7', [0x0f]],
    ['a stray end-group', [0x0c]],
    ['field number 0', [0x02, 0x00]],
    ['a length past the end', [0x0a, 0x05, 0x00]],
    ['a truncated tag', [0x80]],
    ['an 11-byte varint', [0x08, ...Array(10).fill(0xff), 0x01]],
    ['a length over 32 bits', [0x0a, 0xff, 0xff, 0xff, 0xff, 0x7f]],
    ['a fixed64 cut short', [0x09, 1, 2, 3]],
    ['an unterminated group', [0x0b, 0x08, 0x01]],
    ['groups nested 65 deep', [...Array(65).fill(0x0b), ...Array(65).fill(0x0c)]],
  ])('%s', (_name, bytes) => {
    expect(decode(Buffer.from(bytes))).toBeUndefined();
  });

  test('skips unknown fields of every wire type, and groups nested 64 deep', () => {
    const unknown = Buffer.from([
      0x10,
      0x96,
      0x01,
      0x19,
      1,
      2,
      3,
      4,
      5,
      6,
      7,
      8,
      0x25,
      1,
      2,
      3,
      4,
      0x2a,
      0x01,
      0x00,
      ...Array(64).fill(0x33),
      ...Array(64).fill(0x34),
    ]);
    expect(plain(decode(Buffer.concat([unknown, valid])))).toEqual(plain(decode(valid)));
  });

  test('every truncation of a valid request is refused (its one top-level field spans it all)', () => {
    expect(decode(valid.subarray(0, 0))).toEqual({
      method: '',
      path: '',
      query: '',
      headers: {},
      body: undefined,
      partialBody: false,
      requestId: '',
    });
    for (let n = 1; n < valid.length; n++) expect(decode(valid.subarray(0, n)), `first ${n} bytes`).toBeUndefined();
  });

  test('20,000 random mutations anywhere: never a throw, only wanted headers', () => {
    const rnd = mulberry32(7);
    let views = 0;
    for (let i = 0; i < 20_000; i++) {
      const m = Buffer.from(valid);
      for (let k = 1 + Math.floor(rnd() * 4); k > 0; k--) m[Math.floor(rnd() * m.length)] = Math.floor(rnd() * 256);
      const v = decode(m);
      if (v === undefined) continue;
      views++;
      expect(
        typeof v.method === 'string' &&
          typeof v.path === 'string' &&
          typeof v.query === 'string' &&
          typeof v.requestId === 'string',
      ).toBe(true);
      for (const [name, value] of Object.entries(v.headers))
        expect(wanted.has(name) && typeof value === 'string').toBe(true);
    }
    expect(views).toBeGreaterThan(1_000);
  });

  test('20,000 random mutations of string contents (header names and values, path, method, body): the same view as protobufjs', () => {
    // Structural mutations are not compared: protobufjs reads a known field by its declared type
    // whatever the wire type says (a varint where a string belongs desynchronises it), and keeps
    // the last of a repeated embedded message where the spec merges; the decoder follows the spec.
    const ranges = stringContents(valid);
    expect(ranges.length).toBeGreaterThan(20);
    const rnd = mulberry32(11);
    const bytes = [0x00, 0x2c, 0x3a, 0x41, 0x5a, 0x61, 0x7f, 0x80, 0xc3, 0xe2, 0xff];
    for (let i = 0; i < 20_000; i++) {
      const m = Buffer.from(valid);
      for (let k = 1 + Math.floor(rnd() * 4); k > 0; k--) {
        const [from, to] = ranges[Math.floor(rnd() * ranges.length)];
        if (to > from)
          m[from + Math.floor(rnd() * (to - from))] =
            rnd() < 0.5 ? bytes[Math.floor(rnd() * bytes.length)] : Math.floor(rnd() * 256);
      }
      expect(plain(decode(m)), `mutation ${i}`).toEqual(plain(reference(m)));
    }
  });

  test('map entries in any legal shape: missing key or value, value first, repeated fields, unknown fields, long names', () => {
    const str = (field: number, s: string | Buffer): Buffer => {
      const b = Buffer.isBuffer(s) ? s : Buffer.from(s);
      return Buffer.concat([varint((field << 3) | 2), varint(b.length), b]);
    };
    const entry = (...parts: Buffer[]): Buffer => str(3, Buffer.concat(parts)); // HttpRequest.headers
    const wrap = (http: Buffer): Buffer => str(1, str(4, str(2, http))); // attributes.request.http
    const longName = `x-${'a'.repeat(200)}`;
    const v = decodeCheckRequest(
      wrap(
        Buffer.concat([
          entry(str(2, '/v1/chat/completions'), str(1, ':path')), // value before key
          entry(str(1, ':method')), // no value: ""
          entry(str(2, 'orphan')), // no key: the header ""
          entry(str(1, 'authorization'), str(2, 'Bearer first'), str(2, 'Bearer last')), // the last value wins
          entry(str(1, 'x-x'), str(1, 'x-request-id'), Buffer.from([0x18, 0x05]), str(2, 'r-1')), // repeated key, an unknown varint field
          entry(str(1, longName), str(2, 'v'.repeat(300))), // lengths over 127: multi-byte varints
        ]),
      ),
      headerFilter([':path', ':method', 'authorization', 'x-request-id', longName]),
    )!;
    expect({ ...v.headers }).toEqual({
      ':path': '/v1/chat/completions',
      ':method': '',
      authorization: 'Bearer last',
      'x-request-id': 'r-1',
      [longName]: 'v'.repeat(300),
    });
  });

  test('headers named like Object.prototype members are plain names', () => {
    const filter = headerFilter([':path', 'constructor', '__proto__', 'tostring']);
    const viaMap = decodeCheckRequest(
      encode({
        attributes: {
          request: { http: { headers: { ':path': '/p', constructor: 'c', __proto__: 'p' } as Record<string, string> } },
        },
      }),
      filter,
    )!;
    expect(viaMap.headers.constructor).toBe('c');
    const viaHeaderMap = decodeCheckRequest(
      encode({
        attributes: {
          request: {
            http: {
              header_map: {
                headers: [
                  { key: 'Constructor', value: 'c' },
                  { key: '__proto__', value: 'p' },
                  { key: 'toString', value: 't' },
                ],
              },
            },
          },
        },
      }),
      filter,
    )!;
    expect(viaHeaderMap.headers.constructor).toBe('c');
    expect(Object.getOwnPropertyDescriptor(viaHeaderMap.headers, '__proto__')?.value).toBe('p');
    expect(viaHeaderMap.headers.tostring).toBe('t');
  });
});

describe('decodeCheckRequest agrees with protobufjs', () => {
  test('on 3,000 random well-formed CheckRequests (headers map or header_map, unknown and unrelated fields, UTF-8)', () => {
    const rnd = mulberry32(42);
    for (let i = 0; i < 3_000; i++) {
      const bytes = encode(randomRequest(rnd));
      expect(plain(decode(bytes)), `request ${i}`).toEqual(plain(reference(bytes)));
    }
  });
});

/**
 * The [start, end) byte ranges of the contents of every string and bytes field on the decoder's
 * path (HttpRequest's strings, map entries' keys and values, raw_body) of a well-formed request.
 */
function stringContents(bytes: Uint8Array): [number, number][] {
  const out: [number, number][] = [];
  const walkLevel = (r: Reader, end: number, level: 'check' | 'attributes' | 'request' | 'http' | 'entry'): void => {
    const descend: Record<string, Record<number, 'attributes' | 'request' | 'http' | 'entry'>> = {
      check: { 1: 'attributes' },
      attributes: { 4: 'request' },
      request: { 2: 'http' },
      http: { 3: 'entry' },
      entry: {},
    };
    while (r.pos < end) {
      const tag = r.uint32();
      if ((tag & 7) !== 2) {
        r.skipType(tag & 7);
        continue;
      }
      const len = r.uint32();
      const next = descend[level][tag >>> 3];
      if (next) walkLevel(r, r.pos + len, next);
      else {
        if (level === 'http' || level === 'entry') out.push([r.pos, r.pos + len]);
        r.pos += len;
      }
    }
  };
  walkLevel(Reader.create(bytes), bytes.length, 'check');
  return out;
}

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}

function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NAMES = [
  ...wanted,
  'user-agent',
  'accept',
  'content-type',
  'content-length',
  'x-stainless-os',
  'x-forwarded-for',
  'host',
  ':authority',
  ':scheme',
  'x-api-keys',
  'authorizatio',
  'x-modelgate-group',
  '',
];
const CHARS = [
  'a',
  'Z',
  '0',
  ' ',
  ',',
  '/',
  ':',
  '?',
  '=',
  '&',
  '"',
  '\u00e9',
  '\u4e2d',
  '\u{1f600}',
  'sk-mg-',
  'Bearer ',
];

function randomRequest(rnd: () => number): CheckRequest {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
  const text = (max: number): string => Array.from({ length: Math.floor(rnd() * max) }, () => pick(CHARS)).join('');
  const name = (): string => (rnd() < 0.8 ? pick(NAMES) : text(6).toLowerCase());
  const http: Record<string, unknown> = {
    id: String(Math.floor(rnd() * 1e9)),
    size: String(Math.floor(rnd() * 1e6)),
    protocol: 'HTTP/1.1',
    host: text(5),
  };
  if (rnd() < 0.7) http.method = pick(['GET', 'POST', 'PUT', '']);
  if (rnd() < 0.7) http.path = `/${text(8)}${rnd() < 0.3 ? `?${text(5)}` : ''}`;
  if (rnd() < 0.6) {
    const headers: Record<string, string> = {};
    for (let n = Math.floor(rnd() * 12); n > 0; n--) headers[name()] = text(rnd() < 0.2 ? 60 : 12); // some over 127 bytes: the decoder's general path
    http.headers = headers;
  }
  if (rnd() < 0.4) {
    http.header_map = {
      headers: Array.from({ length: Math.floor(rnd() * 8) }, () => {
        const h: Record<string, unknown> = { key: rnd() < 0.3 ? name().toUpperCase() : name() };
        if (rnd() < 0.5) h.value = text(10);
        if (rnd() < 0.5) h.raw_value = Buffer.from(text(10), 'utf8');
        return h;
      }),
    };
  }
  if (rnd() < 0.4) http.body = text(20);
  if (rnd() < 0.4) http.raw_body = Buffer.from(text(20), 'utf8');
  return {
    attributes: {
      source: {
        address: { socket_address: { address: '127.0.0.1', port_value: Math.floor(rnd() * 65535) } },
        principal: text(4),
      },
      destination: { address: { pipe: { path: text(4) } } },
      context_extensions: rnd() < 0.5 ? { [text(3)]: text(3) } : {},
      metadata_context:
        rnd() < 0.3 ? { filter_metadata: { f: { fields: { a: { stringValue: text(4) } } } } } : undefined,
      request: { time: { seconds: String(Math.floor(rnd() * 2e9)), nanos: Math.floor(rnd() * 1e9) }, http },
    },
  };
}

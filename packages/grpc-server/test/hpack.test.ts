/**
 * HPACK decoding (src/h2/hpack.ts, huffman.ts) against RFC 7541's own examples (Appendix C)
 * and against nghttp2 (node:http2's client) encoding real requests: every byte a header value can
 * carry, Huffman or not, indexed, evicted, never indexed.
 */
import * as http2 from 'node:http2';
import * as net from 'node:net';
import { describe, expect, test } from 'vitest';
import { HpackDecoder, HpackError, encodeInteger, literalField } from '../src/h2/hpack';
import { HUFFMAN_CODE, huffmanDecode } from '../src/h2/huffman';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

function decodeAll(decoder: HpackDecoder, block: Buffer): [string, string][] {
  const out: [string, string][] = [];
  decoder.decode(block, (n, v) => out.push([n, v]));
  return out;
}

describe('RFC 7541 Appendix C', () => {
  test('C.2: one field of each representation', () => {
    expect(
      decodeAll(new HpackDecoder(), hex('400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572')),
    ).toEqual([['custom-key', 'custom-header']]);
    expect(decodeAll(new HpackDecoder(), hex('040c 2f73 616d 706c 652f 7061 7468'))).toEqual([
      [':path', '/sample/path'],
    ]);
    expect(decodeAll(new HpackDecoder(), hex('1008 7061 7373 776f 7264 0673 6563 7265 74'))).toEqual([
      ['password', 'secret'],
    ]);
    expect(decodeAll(new HpackDecoder(), hex('82'))).toEqual([[':method', 'GET']]);
  });

  const requests: [string, string][][] = [
    [
      [':method', 'GET'],
      [':scheme', 'http'],
      [':path', '/'],
      [':authority', 'www.example.com'],
    ],
    [
      [':method', 'GET'],
      [':scheme', 'http'],
      [':path', '/'],
      [':authority', 'www.example.com'],
      ['cache-control', 'no-cache'],
    ],
    [
      [':method', 'GET'],
      [':scheme', 'https'],
      [':path', '/index.html'],
      [':authority', 'www.example.com'],
      ['custom-key', 'custom-value'],
    ],
  ];

  test('C.3: three requests on one connection, raw strings, the dynamic table growing', () => {
    const d = new HpackDecoder();
    expect(decodeAll(d, hex('8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d'))).toEqual(requests[0]);
    expect(decodeAll(d, hex('8286 84be 5808 6e6f 2d63 6163 6865'))).toEqual(requests[1]);
    expect(decodeAll(d, hex('8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65'))).toEqual(
      requests[2],
    );
  });

  test('C.4: the same requests with Huffman strings', () => {
    const d = new HpackDecoder();
    expect(decodeAll(d, hex('8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff'))).toEqual(requests[0]);
    expect(decodeAll(d, hex('8286 84be 5886 a8eb 1064 9cbf'))).toEqual(requests[1]);
    expect(decodeAll(d, hex('8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf'))).toEqual(requests[2]);
  });

  const responses: [string, string][][] = [
    [
      [':status', '302'],
      ['cache-control', 'private'],
      ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
      ['location', 'https://www.example.com'],
    ],
    [
      [':status', '307'],
      ['cache-control', 'private'],
      ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
      ['location', 'https://www.example.com'],
    ],
    [
      [':status', '200'],
      ['cache-control', 'private'],
      ['date', 'Mon, 21 Oct 2013 20:13:22 GMT'],
      ['location', 'https://www.example.com'],
      ['content-encoding', 'gzip'],
      ['set-cookie', 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1'],
    ],
  ];

  test('C.5: three responses in a 256-octet table, entries evicted', () => {
    const d = new HpackDecoder(256);
    expect(
      decodeAll(
        d,
        hex(`4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d
      546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d`),
      ),
    ).toEqual(responses[0]);
    expect(decodeAll(d, hex('4803 3330 37c1 c0bf'))).toEqual(responses[1]);
    expect(
      decodeAll(
        d,
        hex(`88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f
      6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31`),
      ),
    ).toEqual(responses[2]);
  });

  test('C.6: the same responses with Huffman strings', () => {
    const d = new HpackDecoder(256);
    expect(
      decodeAll(
        d,
        hex(`4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7
      8f0b 97c8 e9ae 82ae 43d3`),
      ),
    ).toEqual(responses[0]);
    expect(decodeAll(d, hex('4883 640e ff c1 c0 bf'))).toEqual(responses[1]);
    expect(
      decodeAll(
        d,
        hex(`88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf
      cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07`),
      ),
    ).toEqual(responses[2]);
  });
});

describe('malformed blocks are HpackErrors (a connection error), never a throw of anything else', () => {
  test.each([
    ['index 0', '80'],
    ['an index beyond both tables', 'be'],
    ['a table size update after a field', '82 3f e1 1f'],
    ['a table size update over the limit', '3f e2 1f'],
    ['a truncated integer', 'ff'],
    ['an integer too large', '0f ff ff ff ff 0f'],
    [
      'an integer of zero continuation octets until its scale overflows (0 × Infinity = NaN)',
      `3f ${'80 '.repeat(147)}00`,
    ],
    ['a string length of zero continuation octets', `40 7f ${'80 '.repeat(147)}00`],
    ['a truncated string', '40 05 61 62'],
    ['a missing string', '40'],
    ['Huffman padding that is not all ones', '04 81 00'],
    ['Huffman padding longer than 7 bits', '04 82 1f ff'],
    ['Huffman EOS inside a string', '04 84 ff ff ff ff'],
  ])('%s', (_what, block) => {
    expect(() => new HpackDecoder().decode(hex(block), () => {})).toThrow(HpackError);
  });

  test('20,000 random blocks: decoded or an HpackError, nothing else', () => {
    let seed = 11;
    const rnd = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const d = new HpackDecoder();
    for (let i = 0; i < 20_000; i++) {
      const block = Buffer.from(Array.from({ length: 1 + rnd(40) }, () => rnd(256)));
      try {
        d.decode(block, () => {});
      } catch (err) {
        expect(err).toBeInstanceOf(HpackError);
      }
    }
  });
});

describe('the Huffman table', () => {
  const codes = Array.from({ length: 257 }, (_, sym) => ({
    sym,
    code: HUFFMAN_CODE[2 * sym],
    bits: HUFFMAN_CODE[2 * sym + 1],
  }));

  test('is a complete prefix code: its Kraft sum is exactly 1', () => {
    expect(codes.reduce((sum, c) => sum + 2 ** -c.bits, 0)).toBe(1);
  });

  test("is canonical, as RFC 7541 Appendix B's is: sorted by length then symbol, each code the last plus one", () => {
    const sorted = [...codes].sort((a, b) => a.bits - b.bits || a.sym - b.sym);
    expect(sorted[0]).toEqual({ sym: 48, code: 0, bits: 5 }); // '0' is 00000 [5]
    for (let i = 1; i < sorted.length; i++) {
      const prev = sorted[i - 1];
      expect(sorted[i].code, `symbol ${sorted[i].sym}`).toBe((prev.code + 1) * 2 ** (sorted[i].bits - prev.bits));
    }
    expect(codes[256]).toEqual({ sym: 256, code: 0x3fffffff, bits: 30 }); // EOS
  });

  test('decodes every symbol back from its code, padded with ones', () => {
    for (const { sym, code, bits } of codes.slice(0, 256)) {
      const total = Math.ceil(bits / 8) * 8;
      const value = code * 2 ** (total - bits) + (2 ** (total - bits) - 1);
      const bytes = Buffer.from(
        Array.from({ length: total / 8 }, (_, i) => Math.floor(value / 2 ** (total - 8 * (i + 1))) % 256),
      );
      expect(huffmanDecode(bytes, 0, bytes.length)).toBe(String.fromCharCode(sym));
    }
  });
});

/** The header blocks node:http2's client (nghttp2's encoder) sends for these requests, in order. */
async function headerBlocks(
  requests: http2.OutgoingHttpHeaders[],
  clientSettings: http2.Settings = {},
): Promise<Buffer[]> {
  const blocks: Buffer[] = [];
  const server = net.createServer((socket) => {
    let buf = Buffer.alloc(0);
    let prefaceDone = false;
    let partial: Buffer[] = [];
    socket.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]));
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (!prefaceDone) {
        if (buf.length < 24) return;
        buf = buf.subarray(24);
        prefaceDone = true;
      }
      while (buf.length >= 9) {
        const len = buf.readUIntBE(0, 3);
        if (buf.length < 9 + len) break;
        const type = buf[3];
        const flags = buf[4];
        let payload = buf.subarray(9, 9 + len);
        buf = buf.subarray(9 + len);
        if (type === 4 && !(flags & 1)) socket.write(Buffer.from([0, 0, 0, 4, 1, 0, 0, 0, 0]));
        if (type === 1 || type === 9) {
          if (type === 1 && flags & 0x8) payload = payload.subarray(1, payload.length - payload[0]);
          if (type === 1 && flags & 0x20) payload = payload.subarray(5);
          partial.push(payload);
          if (flags & 0x4) {
            blocks.push(Buffer.concat(partial));
            partial = [];
          }
        }
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const client = http2.connect(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, {
    settings: clientSettings,
  });
  client.on('error', () => {});
  for (const h of requests) {
    const req = client.request(h, { endStream: true });
    req.on('error', () => {});
  }
  const deadline = Date.now() + 5000;
  while (blocks.length < requests.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  client.destroy();
  server.close();
  return blocks;
}

describe('against nghttp2 (node:http2 client) encoding real requests', () => {
  test('every byte 0x20-0xff (and tab) inside a value, Huffman-coded where shorter, decodes to what was sent', async () => {
    const symbols = [9, ...Array.from({ length: 0x100 - 0x20 }, (_, i) => 0x20 + i)].filter((s) => s !== 0x7f);
    const requests = symbols.map((s) => ({
      ':path': `/p${s}`,
      'x-probe': `aaaaaaaaaaaaaaaaaaaa${String.fromCharCode(s)}aaaaaaaaaaaaaaaaaaaa`,
    }));
    const blocks = await headerBlocks(requests);
    expect(blocks).toHaveLength(requests.length);
    const d = new HpackDecoder();
    blocks.forEach((b, i) => {
      const fields = Object.fromEntries(decodeAll(d, b));
      expect(fields[':path']).toBe(requests[i][':path']);
      expect(fields['x-probe']).toBe(requests[i]['x-probe']);
    });
  });

  test('300 requests whose headers fill and evict the dynamic table decode in order', async () => {
    const requests = Array.from({ length: 300 }, (_, i) => {
      const h: http2.OutgoingHttpHeaders = {
        ':method': 'POST',
        ':path': `/svc/${i % 7}`,
        'content-type': 'application/grpc',
        te: 'trailers',
      };
      for (let j = 0; j < 6; j++) h[`x-h${(i + j) % 23}`] = `value-${(i * 31 + j) % 97}-${'z'.repeat((i + j) % 60)}`;
      return h;
    });
    const blocks = await headerBlocks(requests);
    const d = new HpackDecoder();
    blocks.forEach((b, i) => {
      const fields = Object.fromEntries(decodeAll(d, b));
      for (const [k, v] of Object.entries(requests[i])) expect(fields[k]).toBe(v);
    });
  });

  test('never-indexed (sensitive) fields decode too', async () => {
    const requests = [1, 2, 3].map((i) => ({
      ':path': '/x',
      authorization: `secret-${i}`,
      [http2.sensitiveHeaders]: ['authorization'],
    }));
    const blocks = await headerBlocks(requests as http2.OutgoingHttpHeaders[]);
    const d = new HpackDecoder();
    blocks.forEach((b, i) => expect(Object.fromEntries(decodeAll(d, b)).authorization).toBe(`secret-${i + 1}`));
    // authorization (static index 23) as never indexed: 0001 1111, then 23 - 15 = 8.
    expect(blocks[0].indexOf(Buffer.from([0x1f, 0x08]))).toBeGreaterThanOrEqual(0);
  });
});

describe('what this server writes', () => {
  test('integers with a prefix (RFC 7541 C.1)', () => {
    expect(encodeInteger(10, 5, 0)).toEqual([10]);
    expect(encodeInteger(1337, 5, 0)).toEqual([31, 154, 10]);
    expect(encodeInteger(42, 8, 0)).toEqual([42]);
  });

  test('literal fields decode back, by static name index and by name', () => {
    const d = new HpackDecoder();
    const block = Buffer.concat([
      literalField(31, 'application/grpc'),
      literalField('grpc-status', '13'),
      literalField('grpc-message', 'bad%20thing'),
    ]);
    expect(decodeAll(d, block)).toEqual([
      ['content-type', 'application/grpc'],
      ['grpc-status', '13'],
      ['grpc-message', 'bad%20thing'],
    ]);
  });
});

/**
 * Numbers a lax upstream parses otherwise ("n": "1_6", candidateCount "1.6e1", an enum service
 * tier) and how requests travel (pipelined HTTP/1.1, compressed bodies, resets at chosen moments, a
 * non-streaming answer left after its headers), looking for a response no balance paid for or a
 * spend past the bound docs/metering.md states. Every request goes through the real Envoy to the
 * stand-in provider (support/money-upstream.ts), which bills exactly what it produced.
 */
import * as http from 'node:http';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import { expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { balanceOfKey, inMode, request, withMoneyGateway, withMoneyKeys } from '../support/money-client';
import type { MoneyUpstream } from '../support/money-upstream';

const PREFIX = 'rt11a';
/** gpt-4o-mini in the demo config: per million tokens, and its output cap. */
const PRICE = { input: 0.15, output: 0.6, cap: 16384 };
const cost = (input: number, output: number): number => (input * PRICE.input + output * PRICE.output) / 1e6;

async function rowsOf(store: FileStore, keyId: string): Promise<UsageEntry[]> {
  return (await store.meter!.usage({ limit: 100_000 })).filter((e) => e.keyId === keyId);
}

/** The header each request here carries (Envoy forwards it; the key itself is replaced upstream). */
const MARK = 'x-rt11a-key';

/** How many requests marked `name` reached the stand-in since `from`. */
function upstreamOf(up: MoneyUpstream, name: string, from: number): number {
  return up.received.slice(from).filter((r) => r.headers[MARK] === name).length;
}

const STRICT_KEYS = ['nUnderscore', 'nNel', 'geminiExponent'] as const;
type StrictKey = (typeof STRICT_KEYS)[number];
const strictKeys = Object.fromEntries(STRICT_KEYS.map((k) => [k, generateKey()])) as Record<StrictKey, string>;
/** A balance that covers one answer of max_tokens 100 (about 0.00009) and not two. */
const STRICT_BALANCE = 0.0001;
/** gemini-2.5-flash in the demo config: per million tokens. */
const GEMINI = { input: 0.3, output: 2.5 };
/** A balance that covers one Gemini answer of maxOutputTokens 100 (about 0.0003) and not two. */
const GEMINI_BALANCE = 0.0004;
const balanceOf = (k: string): number => (k === 'geminiExponent' ? GEMINI_BALANCE : STRICT_BALANCE);

describeE2E('money, lax numbers and the wire: strict mode (bound: zero)', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;
  withMoneyGateway(
    (demo) => withMoneyKeys(strictKeys, balanceOf, `${PREFIX}s`)(inMode('strict')(demo)),
    (started) => ({ up, gw, store } = started),
  );

  // pydantic's lax int (vLLM's and other OpenAI-compatible servers' request models) reads `"n": "1_6"` as 16,
  // as Python's int() does, and trims U+0085 (NEL) as white space where JavaScript's \s does not: the
  // admission reads n as they do.
  for (const [k, n, answers] of [
    ['nUnderscore', '1_6', 16],
    ['nNel', '\u00858', 8],
  ] as const) {
    it(`chat: "n": ${JSON.stringify(n)} (pydantic reads ${answers}) reserves ${answers} answers: refused on a balance for one, nothing upstream`, async () => {
      const from = up.received.length;
      const body = { model: 'gpt-4o-mini', max_tokens: 100, n, messages: [{ role: 'user', content: 'hi' }] };
      const sent = await request(
        gw,
        '/v1/chat/completions',
        { authorization: `Bearer ${strictKeys[k]}`, [MARK]: k },
        body,
      );
      if (sent.status === 200) {
        await waitFor(`the row of ${k}`, async () => (await rowsOf(store, `${PREFIX}s-${k}`)).length === 1);
      }
      const balance = await balanceOfKey(store, strictKeys[k]);
      const choices = sent.status === 200 ? (JSON.parse(sent.text) as { choices: unknown[] }).choices.length : 0;
      expect(
        balance,
        `status ${sent.status}, ${choices} answers served, balance ${STRICT_BALANCE} -> ${balance}`,
      ).toBeGreaterThanOrEqual(0);
      expect(sent.status).toBe(403);
      expect(sent.text).toContain('balance_insufficient');
      expect(upstreamOf(up, k, from)).toBe(0);
      expect(balance).toBe(STRICT_BALANCE);
      // The same request asking for one answer is served and debited what the provider billed.
      const one = await request(
        gw,
        '/v1/chat/completions',
        { authorization: `Bearer ${strictKeys[k]}`, [MARK]: k },
        { ...body, n: '1' },
      );
      expect(one.status).toBe(200);
      expect(upstreamOf(up, k, from)).toBe(1);
      await waitFor(`the row of ${k}`, async () => (await rowsOf(store, `${PREFIX}s-${k}`)).length === 1);
      const usage = (JSON.parse(one.text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
      expect(usage.completion_tokens).toBe(100);
      expect(await balanceOfKey(store, strictKeys[k])).toBeCloseTo(
        STRICT_BALANCE - cost(usage.prompt_tokens, usage.completion_tokens),
        12,
      );
    });
  }

  // Gemini's API reads its JSON as proto3's JSON mapping does: an integer field may be a string holding any
  // JSON number, exponent included ("1.6e1" is 16: Go's protojson, protobuf.dev's JSON mapping); the
  // admission reads it so.
  it('gemini: generationConfig.candidateCount "1.6e1" (proto3 JSON reads 16) reserves 16 answers: refused on a balance for one, nothing upstream', async () => {
    const from = up.received.length;
    const key = strictKeys.geminiExponent;
    const path = '/v1beta/models/gemini-2.5-flash:generateContent';
    const body = (candidateCount: string): unknown => ({
      contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
      generationConfig: { maxOutputTokens: 100, candidateCount },
    });
    const sent = await request(gw, path, { 'x-goog-api-key': key, [MARK]: 'geminiExponent' }, body('1.6e1'));
    if (sent.status === 200)
      await waitFor('the row', async () => (await rowsOf(store, `${PREFIX}s-geminiExponent`)).length === 1);
    const balance = await balanceOfKey(store, key);
    const candidates = sent.status === 200 ? (JSON.parse(sent.text) as { candidates: unknown[] }).candidates.length : 0;
    expect(
      balance,
      `status ${sent.status}, ${candidates} candidates served, balance ${GEMINI_BALANCE} -> ${balance}`,
    ).toBeGreaterThanOrEqual(0);
    expect(sent.status).toBe(403);
    expect(sent.text).toContain('balance_insufficient');
    expect(upstreamOf(up, 'geminiExponent', from)).toBe(0);
    // One candidate ("1e0") is served and debited what the provider billed.
    const one = await request(gw, path, { 'x-goog-api-key': key, [MARK]: 'geminiExponent' }, body('1e0'));
    expect(one.status).toBe(200);
    expect(upstreamOf(up, 'geminiExponent', from)).toBe(1);
    await waitFor('the row', async () => (await rowsOf(store, `${PREFIX}s-geminiExponent`)).length === 1);
    const usage = (
      JSON.parse(one.text) as { usageMetadata: { promptTokenCount: number; candidatesTokenCount: number } }
    ).usageMetadata;
    expect(usage.candidatesTokenCount).toBe(100);
    expect(await balanceOfKey(store, key)).toBeCloseTo(
      GEMINI_BALANCE - (usage.promptTokenCount * GEMINI.input + usage.candidatesTokenCount * GEMINI.output) / 1e6,
      12,
    );
  });
});

const SOFT_KEYS = [
  'softUnderscore',
  'pipelined',
  'encodings',
  'echoedUsage',
  'windowCut',
  'geminiTier',
  'headersCut',
] as const;
type SoftKey = (typeof SOFT_KEYS)[number];
const softKeys = Object.fromEntries(SOFT_KEYS.map((k) => [k, generateKey()])) as Record<SoftKey, string>;
const SOFT_BALANCE: Record<SoftKey, number> = {
  softUnderscore: 0.0001,
  pipelined: 0.0001,
  encodings: 0.0001,
  echoedUsage: 10,
  windowCut: 10,
  geminiTier: 10,
  headersCut: 10,
};

interface RawReply {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/**
 * Writes `raw` (one or several HTTP/1.1 requests, pipelined) on one connection in one write and
 * reads `count` responses (content-length or chunked), then closes.
 */
function rawExchange(gw: Gateway, raw: Buffer, count: number): Promise<RawReply[]> {
  const url = new URL(gw.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname);
    let buf = Buffer.alloc(0);
    const replies: RawReply[] = [];
    const parse = (): void => {
      for (;;) {
        const head = buf.indexOf('\r\n\r\n');
        if (head < 0) return;
        const lines = buf.subarray(0, head).toString('latin1').split('\r\n');
        const headers: Record<string, string> = {};
        for (const l of lines.slice(1))
          headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
        let rest = buf.subarray(head + 4);
        let body: Buffer;
        if (headers['transfer-encoding']?.includes('chunked')) {
          const parts: Buffer[] = [];
          for (;;) {
            const eol = rest.indexOf('\r\n');
            if (eol < 0) return;
            const size = parseInt(rest.subarray(0, eol).toString('latin1'), 16);
            if (rest.length < eol + 2 + size + 2) return;
            parts.push(rest.subarray(eol + 2, eol + 2 + size));
            rest = rest.subarray(eol + 2 + size + 2);
            if (size === 0) break;
          }
          body = Buffer.concat(parts);
        } else {
          const len = Number(headers['content-length'] ?? 0);
          if (rest.length < len) return;
          body = rest.subarray(0, len);
          rest = rest.subarray(len);
        }
        replies.push({ status: Number(lines[0].split(' ')[1]), headers, body: body.toString('utf8') });
        buf = rest;
        if (replies.length === count) {
          socket.destroy();
          resolve(replies);
          return;
        }
      }
    };
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      parse();
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(replies));
    socket.write(raw);
  });
}

/** One HTTP/1.1 POST as bytes, with a JSON body (`body` as text, sent as is) and extra header lines. */
function rawPost(path: string, headers: readonly (readonly [string, string])[], body: string | Buffer): Buffer {
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  const lines = [
    `POST ${path} HTTP/1.1`,
    'host: x',
    'content-type: application/json',
    `content-length: ${b.length}`,
    ...headers.map(([k, v]) => `${k}: ${v}`),
  ];
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`), b]);
}

describeE2E('money, lax numbers and the wire: soft mode (bound: balance + M)', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;
  withMoneyGateway(
    withMoneyKeys(softKeys, (k) => SOFT_BALANCE[k as SoftKey], PREFIX),
    (started) => ({ up, gw, store } = started),
  );

  // Soft mode lets a lone request through only if it asks for one answer; `"n": "1_6"` asks for 16.
  it('chat: a lone request with "n": "1_6" at the model\'s cap on a balance of 0.0001 spends at most balance + M', async () => {
    const body = { model: 'gpt-4o-mini', max_tokens: PRICE.cap, n: '1_6', messages: [{ role: 'user', content: 'hi' }] };
    const m = cost(Buffer.byteLength(JSON.stringify(body)), PRICE.cap);
    const from = up.received.length;
    const sent = await request(
      gw,
      '/v1/chat/completions',
      { authorization: `Bearer ${softKeys.softUnderscore}`, [MARK]: 'softUnderscore' },
      body,
    );
    if (sent.status === 200)
      await waitFor('the row', async () => (await rowsOf(store, `${PREFIX}-softUnderscore`)).length === 1);
    const spent = SOFT_BALANCE.softUnderscore - (await balanceOfKey(store, softKeys.softUnderscore));
    expect(spent, `status ${sent.status}, spent ${spent}, M ${m}`).toBeLessThanOrEqual(SOFT_BALANCE.softUnderscore + m);
    expect(sent.status).toBe(403);
    expect(sent.text).toContain('balance_insufficient');
    expect(upstreamOf(up, 'softUnderscore', from)).toBe(0);
  });

  it('defended: 8 chat requests pipelined on one HTTP/1.1 connection in one write, on a balance of 0.0001: each served one is debited what the provider billed, the key spends at most balance + M', async () => {
    const key = softKeys.pipelined;
    const from = up.received.length;
    const body = JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 40, messages: [{ role: 'user', content: 'hi' }] });
    const one = rawPost(
      '/v1/chat/completions',
      [
        ['authorization', `Bearer ${key}`],
        [MARK, 'pipelined'],
      ],
      body,
    );
    const replies = await rawExchange(gw, Buffer.concat(Array.from({ length: 8 }, () => one)), 8);
    const served = replies.filter((r) => r.status === 200);
    const refused = replies.filter((r) => r.status !== 200);
    expect(replies).toHaveLength(8);
    for (const r of refused) expect(r.status, r.body).toBe(403);
    expect(served.length).toBeGreaterThan(0);
    await waitFor(
      "every served request's row",
      async () => (await rowsOf(store, `${PREFIX}-pipelined`)).length === served.length,
    );
    const billed = served.reduce((sum, r) => {
      const u = (JSON.parse(r.body) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
      return sum + cost(u.prompt_tokens, u.completion_tokens);
    }, 0);
    const spent = SOFT_BALANCE.pipelined - (await balanceOfKey(store, key));
    expect(spent).toBeCloseTo(billed, 12);
    expect(spent).toBeLessThanOrEqual(SOFT_BALANCE.pipelined + cost(Buffer.byteLength(body), PRICE.cap));
    expect(upstreamOf(up, 'pipelined', from)).toBe(served.length);
  });

  it('defended: a compressed chat body however its encoding is written (GZIP, "gzip, identity", deflate, br, zstd, two content-encoding headers) is refused before anything goes upstream', async () => {
    const key = softKeys.encodings;
    const from = up.received.length;
    const body = JSON.stringify({
      model: 'gpt-4o-mini',
      n: 16,
      max_tokens: PRICE.cap,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const zlib = await import('node:zlib');
    const variants: [string, [string, string][], Buffer][] = [
      ['GZIP', [['content-encoding', 'GZIP']], zlib.gzipSync(body)],
      ['gzip, identity', [['content-encoding', 'gzip, identity']], zlib.gzipSync(body)],
      ['deflate', [['content-encoding', 'deflate']], zlib.deflateSync(body)],
      ['br', [['content-encoding', 'br']], zlib.brotliCompressSync(body)],
      ['zstd', [['content-encoding', 'zstd']], zlib.gzipSync(body)],
      [
        'identity then gzip',
        [
          ['content-encoding', 'identity'],
          ['content-encoding', 'gzip'],
        ],
        zlib.gzipSync(body),
      ],
      [' gzip (a leading space)', [['content-encoding', ' gzip']], zlib.gzipSync(body)],
    ];
    const seen: string[] = [];
    for (const [name, headers, bytes] of variants) {
      const [reply] = await rawExchange(
        gw,
        rawPost(
          '/v1/chat/completions',
          [['authorization', `Bearer ${key}`], [MARK, 'encodings'], ['connection', 'close'], ...headers],
          bytes,
        ),
        1,
      );
      seen.push(`${name} -> ${reply?.status} ${reply?.headers['x-modelgate-reason'] ?? ''}`);
    }
    expect(
      seen.every((l) => / 400 body_invalid$/.test(l)),
      seen.join('; '),
    ).toBe(true);
    expect(upstreamOf(up, 'encodings', from)).toBe(0);
    expect(await balanceOfKey(store, key)).toBe(SOFT_BALANCE.encodings);
  });

  // An HTTP/2 client that opens a stream with a window of 1 KiB: Envoy forwards 1 KiB of the answer
  // and holds the rest; the client reads it and resets. A non-streaming answer is whole at the
  // provider before its first byte leaves, and billed whole. Envoy read the whole answer (2.4 MB)
  // past the meter's filter before the reset, so its usage was read: exact.
  it('defended: chat: a non-streaming answer of 32 answers at the cap, read 1 KiB through a small HTTP/2 window, then reset, is debited what the provider billed', async () => {
    const key = softKeys.windowCut;
    const body = { model: 'gpt-4o-mini', max_tokens: PRICE.cap, n: 32, messages: [{ role: 'user', content: 'hi' }] };
    const from = up.received.length;
    const got = await new Promise<{ status: number; bytes: number }>((resolve, reject) => {
      const session = http2.connect(gw.baseUrl, { settings: { initialWindowSize: 1024 } });
      session.on('error', reject);
      const stream = session.request({
        ':method': 'POST',
        ':path': '/v1/chat/completions',
        'content-type': 'application/json',
        authorization: `Bearer ${key}`,
        [MARK]: 'windowCut',
      });
      let status = 0;
      let bytes = 0;
      stream.on('response', (h) => (status = Number(h[':status'])));
      stream.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes >= 1024) {
          stream.close(http2.constants.NGHTTP2_CANCEL);
          session.close();
          resolve({ status, bytes });
        }
      });
      stream.on('end', () => {
        session.close();
        resolve({ status, bytes });
      });
      stream.on('error', () => resolve({ status, bytes }));
      stream.end(JSON.stringify(body));
    });
    expect(got.status).toBe(200);
    await waitFor('the row', async () => (await rowsOf(store, `${PREFIX}-windowCut`)).length === 1, 30_000);
    const [row] = await rowsOf(store, `${PREFIX}-windowCut`);
    expect(upstreamOf(up, 'windowCut', from)).toBe(1);
    // The stand-in produced (and bills) 32 x 16,384 output tokens.
    expect(row.outputTokens, `received ${got.bytes} bytes; row ${JSON.stringify(row)}`).toBeGreaterThanOrEqual(
      32 * PRICE.cap,
    );
    expect(got.bytes).toBeLessThan(4096);
  });

  // A provider may send a non-streaming answer's headers before its body (the answer is produced, and billed,
  // whatever the client does). A client that takes the headers and leaves is debited the maximum output, as a
  // request left before any answer byte is. The stand-in flushes headers early on request.
  it('chat: a non-streaming answer whose headers came before its body, left by the client after the headers, is debited the output the provider billed', async () => {
    const body = { model: 'gpt-4o-mini', max_tokens: 2000, messages: [{ role: 'user', content: 'hi' }] };
    const from = up.received.length;
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL(gw.baseUrl);
      const data = JSON.stringify(body);
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          method: 'POST',
          path: '/v1/chat/completions',
          agent: false,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(data),
            authorization: `Bearer ${softKeys.headersCut}`,
            [MARK]: 'headersCut',
            'x-stand-in-headers-first': 'rt11a-headers',
          },
        },
        (res) => {
          req.destroy();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(data);
    });
    expect(status).toBe(200);
    expect(upstreamOf(up, 'headersCut', from)).toBe(1);
    up.open('rt11a-headers');
    await waitFor('the row', async () => (await rowsOf(store, `${PREFIX}-headersCut`)).length === 1, 30_000);
    const [row] = await rowsOf(store, `${PREFIX}-headersCut`);
    expect(row.outputTokens, JSON.stringify(row)).toBeGreaterThanOrEqual(2000);
  });

  // Gemini's serviceTier is an enum, and proto3's JSON mapping reads an enum by its number as well as by its
  // name: a number is refused as its name is.
  it('gemini: a service tier written as an enum number ("serviceTier": 3, "service_tier": 2) is refused as its name is (service_tier_unpriced), before anything goes upstream', async () => {
    const key = softKeys.geminiTier;
    const from = up.received.length;
    const seen: string[] = [];
    for (const tier of [{ serviceTier: 3 }, { service_tier: 2 }, { serviceTier: true }]) {
      const sent = await request(
        gw,
        '/v1beta/models/gemini-2.5-flash:generateContent',
        { 'x-goog-api-key': key, [MARK]: 'geminiTier' },
        { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], ...tier },
      );
      seen.push(
        `${JSON.stringify(tier)} -> ${sent.status} ${/service_tier_unpriced/.test(sent.text) ? 'service_tier_unpriced' : sent.text.slice(0, 80)}`,
      );
    }
    expect(
      seen.every((l) => l.endsWith('-> 400 service_tier_unpriced')),
      seen.join('; '),
    ).toBe(true);
    expect(upstreamOf(up, 'geminiTier', from)).toBe(0);
    // Unspecified (0) is the standard tier: served.
    const plain = await request(
      gw,
      '/v1beta/models/gemini-2.5-flash:generateContent',
      { 'x-goog-api-key': key, [MARK]: 'geminiTier' },
      { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], serviceTier: 0 },
    );
    expect(plain.status).toBe(200);
  });

  it('defended: a Responses stream longer than the meter\'s tail whose echoed tools hold "usage" objects of zero tokens (as near the top as a client\'s object gets) is debited what the provider reported', async () => {
    const key = softKeys.echoedUsage;
    const fake = {
      input_tokens: 0,
      output_tokens: 0,
      total_tokens: 0,
      input_tokens_details: { cached_tokens: 1_000_000 },
    };
    const body = {
      model: 'gpt-4o-mini',
      stream: true,
      max_output_tokens: 20,
      input: 'hi',
      instructions: 'x '.repeat(10_000),
      tools: [
        {
          type: 'function',
          name: 'f',
          usage: fake,
          parameters: { type: 'object', properties: { usage: fake }, usage: fake },
        },
      ],
    };
    const sent = await request(gw, '/v1/responses', { authorization: `Bearer ${key}` }, body);
    expect(sent.status).toBe(200);
    expect(sent.text.length).toBeGreaterThan(2 * 16384);
    await waitFor('the row', async () => (await rowsOf(store, `${PREFIX}-echoedUsage`)).length === 1);
    const [row] = await rowsOf(store, `${PREFIX}-echoedUsage`);
    const completed = sent.text.split('\n\n').find((e) => e.startsWith('event: response.completed'))!;
    const usage = (
      JSON.parse(completed.slice(completed.indexOf('data: ') + 6)) as {
        response: { usage: { input_tokens: number; output_tokens: number } };
      }
    ).response.usage;
    expect(row.estimated).toBeUndefined();
    expect([row.inputTokens, row.cachedInputTokens, row.outputTokens]).toEqual([
      usage.input_tokens,
      0,
      usage.output_tokens,
    ]);
  });
});

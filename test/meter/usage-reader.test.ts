/**
 * The usage reader on the demo upstream's real answers (every protocol, JSON and stream), fed in
 * chunks of every size, compressed and not, plus the shapes the providers document.
 */
import { gzipSync, brotliCompressSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoUpstream, type DemoUpstream } from '../../src/demo/upstream';
import { UsageReader } from '../../src/meter/usage-reader';
import type { Protocol } from '../../src/store/store';
import { tailUsage } from '../../src/meter/tail-usage';
import { METER_TAIL_BYTES } from '../../src/envoy/meter-filters';

let upstream: DemoUpstream;
beforeAll(async () => {
  upstream = await startDemoUpstream({ chunkDelayMs: 0 });
});
afterAll(() => upstream.close());

async function fetchRaw(path: string, body: unknown): Promise<{ contentType: string; bytes: Buffer }> {
  const res = await fetch(upstream.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { contentType: res.headers.get('content-type') ?? '', bytes: Buffer.from(await res.arrayBuffer()) };
}

async function read(
  protocol: Protocol,
  contentType: string,
  bytes: Buffer,
  chunk: number,
  encoding = '',
  stream = false,
) {
  const reader = new UsageReader(protocol, contentType, encoding, stream);
  for (let i = 0; i < bytes.length; i += chunk) reader.push(bytes.subarray(i, i + chunk));
  return reader.end(true);
}

const messages = [{ role: 'user', content: 'How many tokens is this prompt, roughly?' }];
const cases: Array<[string, Protocol, string, unknown, (b: any) => { input: number; output: number }]> = [
  // eslint-disable-line @typescript-eslint/no-explicit-any
  [
    'chat',
    'chat',
    '/v1/chat/completions',
    { model: 'm', messages },
    (b) => ({ input: b.usage.prompt_tokens, output: b.usage.completion_tokens }),
  ],
  [
    'responses',
    'responses',
    '/v1/responses',
    { model: 'm', input: 'hello there' },
    (b) => ({ input: b.usage.input_tokens, output: b.usage.output_tokens }),
  ],
  [
    'embeddings',
    'embeddings',
    '/v1/embeddings',
    { model: 'm', input: ['a', 'bb bb'] },
    (b) => ({ input: b.usage.prompt_tokens, output: 0 }),
  ],
  [
    'messages',
    'messages',
    '/v1/messages',
    { model: 'm', max_tokens: 10, messages },
    (b) => ({ input: b.usage.input_tokens, output: b.usage.output_tokens }),
  ],
  [
    'generateContent',
    'generative',
    '/v1beta/models/g:generateContent',
    { contents: [{ parts: [{ text: 'hi there' }] }] },
    (b) => ({ input: b.usageMetadata.promptTokenCount, output: b.usageMetadata.candidatesTokenCount }),
  ],
];

describe('usage from JSON answers', () => {
  for (const [name, protocol, path, body, expected] of cases) {
    it(`reads ${name} usage whatever the chunk size, plain, gzip and br`, async () => {
      const { contentType, bytes } = await fetchRaw(path, body);
      const want = expected(JSON.parse(bytes.toString()));
      expect(want.input).toBeGreaterThan(0);
      for (const size of [1, 3, 17, 1 << 20]) {
        expect(await read(protocol, contentType, bytes, size), `chunk ${size}`).toEqual({
          usage: { inputTokens: want.input, outputTokens: want.output, cachedInputTokens: 0 },
        });
      }
      expect(await read(protocol, contentType, gzipSync(bytes), 5, 'gzip')).toEqual({
        usage: { inputTokens: want.input, outputTokens: want.output, cachedInputTokens: 0 },
      });
      expect(await read(protocol, contentType, brotliCompressSync(bytes), 5, 'br')).toEqual({
        usage: { inputTokens: want.input, outputTokens: want.output, cachedInputTokens: 0 },
      });
    });
  }
});

describe('usage from streams', () => {
  const streams: Array<[string, Protocol, string, unknown, string]> = [
    [
      'chat with include_usage',
      'chat',
      '/v1/chat/completions',
      { model: 'm', messages, stream: true, stream_options: { include_usage: true } },
      '/v1/chat/completions',
    ],
    ['responses', 'responses', '/v1/responses', { model: 'm', input: 'hello there', stream: true }, '/v1/responses'],
    ['messages', 'messages', '/v1/messages', { model: 'm', max_tokens: 10, messages, stream: true }, '/v1/messages'],
    [
      'generative SSE',
      'generative',
      '/v1beta/models/g:streamGenerateContent?alt=sse',
      { contents: [{ parts: [{ text: 'hi there' }] }] },
      '/v1beta/models/g:generateContent',
    ],
    [
      'generative JSON array',
      'generative',
      '/v1beta/models/g:streamGenerateContent',
      { contents: [{ parts: [{ text: 'hi there' }] }] },
      '/v1beta/models/g:generateContent',
    ],
  ];
  for (const [name, protocol, path, body, plainPath] of streams) {
    it(`reads the ${name} stream's usage, equal to the JSON answer's, whatever the chunk size`, async () => {
      const plainBody = { ...(body as object) } as Record<string, unknown>;
      delete plainBody.stream;
      delete plainBody.stream_options;
      const plain = await fetchRaw(plainPath, plainBody);
      const want = await read(protocol, plain.contentType, plain.bytes, 1 << 20);
      const { contentType, bytes } = await fetchRaw(path, body);
      for (const size of [1, 2, 7, 64, 1 << 20])
        expect(await read(protocol, contentType, bytes, size, '', true), `chunk ${size}`).toEqual(want);
      expect('usage' in want).toBe(true);
    });
  }

  it('names a chat stream without include_usage stream_without_usage, and a cut one incomplete', async () => {
    const { contentType, bytes } = await fetchRaw('/v1/chat/completions', { model: 'm', messages, stream: true });
    expect(await read('chat', contentType, bytes, 10, '', true)).toEqual({ reason: 'stream_without_usage' });
    const reader = new UsageReader('chat', contentType, '', true);
    reader.push(bytes.subarray(0, 50));
    expect(await reader.end(false)).toEqual({ reason: 'incomplete' });
  });
});

describe('provider shapes', () => {
  const one = async (protocol: Protocol, text: string, contentType = 'application/json') =>
    read(protocol, contentType, Buffer.from(text), 4);
  it('counts cached and reasoning tokens as the providers report them', async () => {
    expect(
      await one(
        'chat',
        '{"id":"x","usage":{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":60},"completion_tokens_details":{"reasoning_tokens":5}}}',
      ),
    ).toEqual({ usage: { inputTokens: 100, outputTokens: 20, cachedInputTokens: 60 } });
    // Anthropic's cache writes cost 1.25x the input price (5 minutes, the default) or 2x (1 hour): the
    // premium counts as input tokens (5 written: 5 + ceil(1.25) = 7 tokens at the input price).
    expect(
      await one(
        'messages',
        '{"usage":{"input_tokens":10,"cache_read_input_tokens":50,"cache_creation_input_tokens":5,"output_tokens":7}}',
      ),
    ).toEqual({ usage: { inputTokens: 67, outputTokens: 7, cachedInputTokens: 50 } });
    expect(
      await one(
        'messages',
        '{"usage":{"input_tokens":10,"cache_read_input_tokens":50,"cache_creation_input_tokens":400,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":300},"output_tokens":7}}',
      ),
    ).toEqual({ usage: { inputTokens: 10 + 50 + 400 + 25 + 300, outputTokens: 7, cachedInputTokens: 50 } });
    expect(
      await one(
        'messages',
        '{"usage":{"input_tokens":3,"cache_read_input_tokens":0,"cache_creation_input_tokens":2008,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":2008},"output_tokens":1}}',
      ),
    ).toEqual({ usage: { inputTokens: 3 + 2008 * 2, outputTokens: 1, cachedInputTokens: 0 } });
    expect(
      await one(
        'generative',
        '{"candidates":[],"usageMetadata":{"promptTokenCount":30,"cachedContentTokenCount":10,"candidatesTokenCount":4,"thoughtsTokenCount":6}}',
      ),
    ).toEqual({ usage: { inputTokens: 30, outputTokens: 10, cachedInputTokens: 10 } });
  });

  it('ignores usage keys nested elsewhere, strings that look like keys, and escapes', async () => {
    expect(
      await one(
        'chat',
        '{"choices":[{"message":{"content":"\\"usage\\": {\\"prompt_tokens\\": 999}","usage":{"prompt_tokens":1}}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}',
      ),
    ).toEqual({ usage: { inputTokens: 3, outputTokens: 4, cachedInputTokens: 0 } });
  });

  it('reports no usage for bodies without it, malformed JSON, an unknown encoding and a corrupt gzip', async () => {
    expect(await one('chat', '{"error":{"message":"x"}}')).toEqual({ reason: 'no_usage' });
    expect(await one('chat', '{"usage": nonsense')).toEqual({ reason: 'no_usage' });
    expect(await read('chat', 'application/json', Buffer.from('{}'), 1, 'zstd')).toEqual({ reason: 'undecodable' });
    expect(await read('chat', 'application/json', Buffer.from('not gzip at all'), 1, 'gzip')).toEqual({
      reason: 'undecodable',
    });
  });

  it('reads SSE with CRLF line ends and several data lines per event', async () => {
    const text =
      'event: x\r\ndata: {"choices":[],\r\ndata: "usage":{"prompt_tokens":5,"completion_tokens":6}}\r\n\r\ndata: [DONE]\r\n\r\n';
    expect(await one('chat', text, 'text/event-stream')).toEqual({
      usage: { inputTokens: 5, outputTokens: 6, cachedInputTokens: 0 },
    });
  });
});

describe("Anthropic's 1-hour cache writes in a stream longer than the meter's tail", () => {
  it('debits a 1-hour write at 2x when only the tail (message_delta, which carries no cache_creation breakdown) is kept', async () => {
    const event = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
    const start = {
      input_tokens: 3,
      cache_creation_input_tokens: 2008,
      cache_read_input_tokens: 0,
      cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 2008 },
      output_tokens: 1,
    };
    let body = event('message_start', {
      type: 'message_start',
      message: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model: 'claude',
        content: [],
        stop_reason: null,
        usage: start,
      },
    });
    body += event('content_block_start', {
      type: 'content_block_start',
      index: 0,
      content_block: { type: 'text', text: '' },
    });
    while (body.length < 3 * METER_TAIL_BYTES)
      body += event('content_block_delta', {
        type: 'content_block_delta',
        index: 0,
        delta: { type: 'text_delta', text: 'some words of the answer ' },
      });
    body += event('content_block_stop', { type: 'content_block_stop', index: 0 });
    // As Anthropic sends it: cumulative counts, and no cache_creation object (MessageDeltaUsage).
    body += event('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { input_tokens: 3, cache_creation_input_tokens: 2008, cache_read_input_tokens: 0, output_tokens: 900 },
    });
    body += event('message_stop', { type: 'message_stop' });
    const bytes = Buffer.from(body);
    const whole = await tailUsage('messages', bytes, true, 'text/event-stream', '');
    expect(whole.usage).toEqual({ inputTokens: 3 + 2008 * 2, outputTokens: 900, cachedInputTokens: 0 });
    // What Envoy's meter filter keeps of it: its last METER_TAIL_BYTES.
    // The request named the ttl (the Check's marks, its entry): the writes without a breakdown were those.
    const tail = await tailUsage(
      'messages',
      bytes.subarray(bytes.length - METER_TAIL_BYTES),
      false,
      'text/event-stream',
      '',
      true,
      true,
    );
    expect(tail.usage).toEqual({ inputTokens: 3 + 2008 * 2, outputTokens: 900, cachedInputTokens: 0 });
    // A request that named none: 5 minutes.
    expect(
      (await tailUsage('messages', bytes.subarray(bytes.length - METER_TAIL_BYTES), false, 'text/event-stream', ''))
        .usage?.inputTokens,
    ).toBe(3 + 2008 + 502);
  });
});

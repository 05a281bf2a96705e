/**
 * Usage when the provider's is missing or cut (src/meter/tail-usage.ts, response-text.ts,
 * estimate.ts): the usage of a whole body or of what a tail holds whole, the text a response carried
 * in each protocol, and estimates counted with the real o200k_base tokenizer in a worker thread.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import {
  createEstimator,
  jsonInputText,
  workerTokenCounter,
  FAMILY_FACTOR,
  INLINE_MEDIA_TOKENS,
} from '../../src/meter/estimate';
import { capturedText } from '../../src/meter/response-text';
import { lastObjectFor, tailUsage } from '../../src/meter/tail-usage';

const b = (s: string): Uint8Array => Buffer.from(s);
const sse = (...events: unknown[]): string => events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('');

describe('tailUsage', () => {
  it('reads a whole body as the stream reader does', async () => {
    const body = sse(
      { choices: [{ delta: { content: 'hi' } }] },
      { choices: [], usage: { prompt_tokens: 4, completion_tokens: 2 } },
    );
    expect(await tailUsage('chat', b(body), true, 'text/event-stream', '')).toEqual({
      usage: { inputTokens: 4, outputTokens: 2, cachedInputTokens: 0 },
      undecodable: false,
    });
  });

  it('reads whole SSE events of a tail, skipping the cut first one', async () => {
    const body = sse(
      { choices: [{ delta: { content: 'x'.repeat(50) } }] },
      { type: 'message_delta', usage: { output_tokens: 9 } },
    );
    const tail = body.slice(20);
    const r = await tailUsage(
      'messages',
      b(`"usage":{"input_tokens":999}}}\n\n${tail}`),
      false,
      'text/event-stream',
      '',
    );
    // The cut event's usage (input 999) is not read; the whole one is.
    expect(r.usage).toBeUndefined();
    const r2 = await tailUsage(
      'chat',
      b(`xx"}}]}\n\n${sse({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 6 } })}`),
      false,
      'text/event-stream',
      '',
    );
    expect(r2.usage).toEqual({ inputTokens: 5, outputTokens: 6, cachedInputTokens: 0 });
  });

  it('finds the last usage object in the tail of a long JSON answer', async () => {
    const tail = `lots of text","role":"assistant"}}],"usage":{"prompt_tokens":12,"completion_tokens":3400,"prompt_tokens_details":{"cached_tokens":4}}}`;
    expect((await tailUsage('chat', b(tail), false, 'application/json', '')).usage).toEqual({
      inputTokens: 12,
      outputTokens: 3400,
      cachedInputTokens: 4,
    });
    expect(
      lastObjectFor('{"text":"say \\"usage\\": {1}","usageMetadata":{"promptTokenCount":1}}', ['usageMetadata']),
    ).toEqual({ promptTokenCount: 1 });
  });

  it('cannot read the middle of a compressed stream, and says so', async () => {
    expect(await tailUsage('chat', b('\x1f\x8b garbage'), false, 'application/json', 'zstd')).toEqual({
      usage: undefined,
      undecodable: true,
    });
    expect((await tailUsage('chat', b('\x28\xb5\x2f\xfd'), true, 'application/json', 'zstd')).undecodable).toBe(true);
  });

  it('flags counts that are not finite numbers >= 0 as implausible', async () => {
    for (const v of ['-5', '"12"', '"NaN"']) {
      const r = await tailUsage(
        'chat',
        b(`{"usage":{"prompt_tokens":${v},"completion_tokens":3}}`),
        true,
        'application/json',
        '',
      );
      expect(r.usage?.implausible, v).toBe(true);
    }
  });
});

describe('capturedText', () => {
  it('collects what a model wrote in every protocol, and nothing of the envelope', () => {
    const chat = sse(
      { id: 'c1', choices: [{ index: 0, delta: { role: 'assistant', content: 'Hello' } }] },
      { choices: [{ delta: { tool_calls: [{ function: { name: 'f', arguments: '{"a":1}' } }] } }] },
    );
    expect(capturedText(b(chat), true, true)).toMatchObject({ text: 'Hello{"a":1}' });
    const responses = sse(
      { type: 'response.output_text.delta', delta: 'Hi' },
      { type: 'response.function_call_arguments.delta', delta: '{}' },
    );
    expect(capturedText(b(responses), true, true).text).toBe('Hi{}');
    const messages = sse(
      { type: 'content_block_delta', delta: { type: 'text_delta', text: 'Yo' } },
      { type: 'content_block_delta', delta: { type: 'input_json_delta', partial_json: '{"q"' } },
      { type: 'content_block_delta', delta: { type: 'thinking_delta', thinking: 'hmm' } },
    );
    expect(capturedText(b(messages), true, true).text).toBe('Yo{"q"hmm');
    const gemini = JSON.stringify({
      candidates: [
        { content: { role: 'model', parts: [{ text: 'A' }, { functionCall: { name: 'f', args: { x: 1 } } }] } },
      ],
      usageMetadata: { promptTokenCount: 1 },
      modelVersion: 'g',
    });
    expect(capturedText(b(gemini), false, true).text).toBe('A{"x":1}');
    const anthropic = JSON.stringify({
      id: 'msg',
      type: 'message',
      role: 'assistant',
      content: [
        { type: 'text', text: 'Sure' },
        { type: 'tool_use', id: 't', name: 'n', input: { k: 'v' } },
      ],
      stop_reason: 'end_turn',
    });
    expect(capturedText(b(anthropic), false, true).text).toBe('Sure{"k":"v"}');
  });

  it('reads only whole events of a cut capture, and counts the bytes they were read from', () => {
    const whole = sse({ choices: [{ delta: { content: 'abc' } }] });
    const r = capturedText(b(`tent":"zz"}}]}\n\n${whole}data: {"choi`), true, false);
    expect(r.text).toBe('abc');
    expect(r.bytes).toBe(Buffer.byteLength(whole));
    const array = `,{"candidates":[{"content":{"parts":[{"text":"one"}]}}]},{"candidates":[{"content":{"parts":[{"text":"two"}]}}]},{"candi`;
    expect(capturedText(b(array), false, false).text).toBe('onetwo');
  });
});

describe('tailUsage: an event longer than the tail', () => {
  // The Responses API's last event repeats the request's instructions and tools before its usage.
  const tools = [
    {
      type: 'function',
      name: 'f',
      parameters: { type: 'object', properties: { usage: { input_tokens: 1, output_tokens: 1 } } },
    },
  ];
  const completed = (usage: unknown) =>
    sse(
      { type: 'response.output_text.delta', delta: 'hi' },
      {
        type: 'response.completed',
        response: {
          id: 'r',
          instructions: 'Be brief. '.repeat(2000),
          tools,
          output: [],
          ...(usage ? { usage } : {}),
          user: null,
          metadata: { usage: 'x' },
        },
      },
    );
  const tail = (body: string) => b(body).subarray(-16384);

  it("reads the usage at the end of a stream's last event when the event began before the tail", async () => {
    const body = completed({ input_tokens: 259034, output_tokens: 20, input_tokens_details: { cached_tokens: 0 } });
    expect(b(body).length).toBeGreaterThan(20000);
    const r = await tailUsage('responses', tail(body), false, 'text/event-stream', '');
    expect(r.usage).toEqual({ inputTokens: 259034, outputTokens: 20, cachedInputTokens: 0 });
  });

  it('never takes a usage object deeper in (a tool schema the response echoes), nor reads a cut stream this way', async () => {
    expect(
      (await tailUsage('responses', tail(completed(undefined)), false, 'text/event-stream', '')).usage,
    ).toBeUndefined();
    const cut = completed({ input_tokens: 259034, output_tokens: 20 });
    expect((await tailUsage('responses', tail(cut), false, 'text/event-stream', '', false)).usage).toBeUndefined();
    // The same rule for a JSON answer's tail: a member of the answer, or of an object in it.
    expect(lastObjectFor(JSON.stringify({ tools, instructions: 'x' }), ['usage'])).toBeUndefined();
    expect(lastObjectFor(JSON.stringify({ tools, usage: { input_tokens: 5 } }), ['usage'])).toEqual({
      input_tokens: 5,
    });
    expect(
      lastObjectFor(JSON.stringify([{ a: 1 }, { usageMetadata: { promptTokenCount: 3 } }]), ['usageMetadata']),
    ).toEqual({ promptTokenCount: 3 });
  });
});

describe('estimates with the o200k_base tokenizer (in a worker thread)', () => {
  const counter = workerTokenCounter();
  const est = createEstimator(counter);
  afterAll(() => counter.close());

  it('counts as the tokenizer does, from a worker', async () => {
    const text = 'The meter counts what a response carried when its provider says nothing.';
    expect(await counter.count([text, ''])).toEqual([countTokens(text), 0]);
  });

  it('gives each caller its own counts when the counts asked for in one turn share messages to the worker', async () => {
    // 150 callers of one to three texts each: more than TEXTS_PER_MESSAGE, so several messages.
    const asks = Array.from({ length: 150 }, (_, i) =>
      Array.from({ length: 1 + (i % 3) }, (_, j) => `text ${i}.${j} ${'word '.repeat(i + j)}`),
    );
    const counts = await Promise.all(asks.map((texts) => counter.count(texts)));
    expect(counts).toEqual(asks.map((texts) => texts.map((t) => countTokens(t))));
    expect(await counter.count([])).toEqual([]);
  });

  it('estimates input from the whole JSON text of a request kept whole, and a larger one at one token per byte', async () => {
    const body = JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Tell me a story about a lighthouse keeper.' }],
    });
    expect(jsonInputText(body)).toEqual({ text: body, media: 0 });
    const tokens = countTokens(body);
    expect(await est.input('chat', { sample: b(body), bodyBytes: body.length, referencedInput: false }, 0)).toBe(
      tokens,
    );
    // A sample of half the body does not stand for the rest (the client chooses what it says): the upper bound.
    expect(await est.input('chat', { sample: b(body), bodyBytes: body.length * 2, referencedInput: false }, 0)).toBe(
      body.length * 2,
    );
    // Anthropic's family factor, referenced input, inline media, and no sample at all.
    expect(await est.input('messages', { sample: b(body), bodyBytes: body.length, referencedInput: true }, 1000)).toBe(
      Math.ceil(tokens * FAMILY_FACTOR.messages) + 1000,
    );
    const image = JSON.stringify({
      content: [
        { type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(4000)}` } },
        { type: 'text', text: 'and "data:" in a text' },
      ],
    });
    expect(jsonInputText(image)).toEqual({
      text: '{"content":[{"type":"image_url","image_url":{"url":""}},{"type":"text","text":"and \\"data:\\" in a text"}]}',
      media: 1,
    });
    expect(await est.input('chat', { sample: b(image), bodyBytes: image.length, referencedInput: false }, 0)).toBe(
      countTokens(jsonInputText(image).text) + INLINE_MEDIA_TOKENS,
    );
    // A data: URL written with escapes is media too; a sample cut inside a string keeps its text.
    expect(jsonInputText('{"url":"data\\u003aimage/png;base64,AAAA"}').media).toBe(1);
    expect(jsonInputText('{"a":"data:text/plain,x","b":"cut he')).toEqual({ text: '{"a":"","b":"cut he', media: 1 });
    expect(await est.input('chat', { bodyBytes: 400, referencedInput: false }, 0)).toBe(400);
  });

  it("counts a tool schema's keys and numbers (a provider bills them), and an embedding request's token ids at a token each at least", async () => {
    const ids = Array.from({ length: 900 }, (_, i) => (i * 7919) % 1000);
    const body = JSON.stringify({
      model: 'text-embedding-3-small',
      input: [ids.slice(0, 500), ids.slice(500)],
      dimensions: 256,
    });
    expect(body.length).toBeLessThan(4096);
    const embedding = await est.input(
      'embeddings',
      { sample: b(body), bodyBytes: body.length, referencedInput: false },
      0,
    );
    expect(embedding).toBe(countTokens(body));
    expect(embedding).toBeGreaterThanOrEqual(901);
    // An enum of integers and long property names count as their string values (12 and 11 tokens).
    const tools = JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [
        {
          type: 'function',
          function: {
            name: 'f',
            parameters: {
              type: 'object',
              properties: {
                x: { type: 'integer', enum: Array.from({ length: 300 }, (_, i) => i) },
                ...Object.fromEntries(
                  Array.from({ length: 20 }, (_, i) => [`the_quarterly_revenue_of_region_${i}`, {}]),
                ),
              },
            },
          },
        },
      ],
    });
    const input = await est.input('chat', { sample: b(tools), bodyBytes: tools.length, referencedInput: false }, 0);
    expect(input).toBe(countTokens(tools));
    expect(input).toBeGreaterThan(300 + 20 * 5);
  });

  it('estimates output from the text read, extrapolated to the bytes sent, and a body it cannot read by its bytes', async () => {
    const text = ' the'.repeat(30);
    expect(await est.output('chat', text, 1000, 1000, true)).toBe(30);
    expect(await est.output('chat', text, 1000, 3000, true)).toBe(90);
    expect(await est.output('chat', '', 100, 3300, true)).toBe(Math.ceil(3200 / 32));
    expect(await est.output('chat', undefined, 0, 777, false)).toBe(777);
  });
});

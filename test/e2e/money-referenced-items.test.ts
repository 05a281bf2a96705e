/**
 * Strict mode through the real Envoy (issue 36, finding 2): every item that carries or names an
 * image or a file the provider reads as input is reserved for as referenced input
 * (meter.referencedInputTokens, 200,000 tokens at the model's input price), not as its bytes. A
 * Responses `computer_call_output` whose screenshot is a data URL, one by file_id, an
 * `image_generation_call` passed back by id, Anthropic's `container_upload` and Gemini's remote MCP
 * servers had been reserved as their bytes only (a few hundred tokens), while OpenAI bills an image
 * thousands of tokens. With a balance of 0.01, which covers each request's bytes and output many
 * times but not 200,000 input tokens, each is refused before anything goes upstream (403
 * balance_insufficient), and a request of the same protocol without such an item is served.
 */
import { expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import { describeE2E, type Gateway } from '../support/gateway';
import { balanceOfKey, inMode, request, withMoneyGateway, withMoneyKeys } from '../support/money-client';
import type { MoneyUpstream } from '../support/money-upstream';

const PREFIX = 'rtref';
const key = generateKey();
const BALANCE = 0.01;
const MARK = 'x-rtref-case';
const IMAGE = `data:image/png;base64,${Buffer.alloc(48, 7).toString('base64')}`;

const responses = (input: unknown, extra: Record<string, unknown> = {}) => ({
  path: '/v1/responses',
  headers: { authorization: `Bearer ${key}` },
  body: { model: 'gpt-4o-mini', max_output_tokens: 16, input, ...extra },
});
const messages = (content: unknown, extra: Record<string, unknown> = {}) => ({
  path: '/v1/messages',
  headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
  body: { model: 'claude-3-5-haiku-latest', max_tokens: 16, messages: [{ role: 'user', content }], ...extra },
});
const gemini = (body: Record<string, unknown>) => ({
  path: '/v1beta/models/gemini-2.5-flash:generateContent',
  headers: { 'x-goog-api-key': key },
  body: { generationConfig: { maxOutputTokens: 16 }, ...body },
});

const CASES = {
  'responses computer_call_output, a data URL screenshot': responses([
    { type: 'computer_call_output', call_id: 'call_1', output: { type: 'computer_screenshot', image_url: IMAGE } },
  ]),
  'responses computer_call_output, a screenshot by file_id': responses([
    { type: 'computer_call_output', call_id: 'call_1', output: { type: 'computer_screenshot', file_id: 'file-abc' } },
  ]),
  'responses image_generation_call passed back by id': responses([
    { role: 'user', content: 'make it bluer' },
    { type: 'image_generation_call', id: 'ig_123', status: 'completed', result: null },
  ]),
  'messages container_upload': messages([
    { type: 'text', text: 'analyse it' },
    { type: 'container_upload', file_id: 'file_abc' },
  ]),
  'generative remote MCP servers': gemini({
    contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
    tools: [{ mcpServers: [{ name: 's', streamableHttpTransport: { url: 'https://mcp.example.com' } }] }],
  }),
  'generative functionResponse with a screenshot': gemini({
    contents: [
      {
        role: 'user',
        parts: [
          {
            functionResponse: {
              name: 'screenshot',
              response: {},
              parts: [{ inlineData: { mimeType: 'image/png', data: Buffer.alloc(48, 7).toString('base64') } }],
            },
          },
        ],
      },
    ],
  }),
} as const;

const CONTROLS = {
  responses: responses([{ role: 'user', content: 'describe the last screenshot in words' }]),
  messages: messages([{ type: 'text', text: 'analyse it' }]),
  generative: gemini({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
} as const;

describeE2E(
  'money, strict mode: every item that carries or names an image or a file is reserved as referenced input',
  () => {
    let up: MoneyUpstream;
    let gw: Gateway;
    let store: FileStore;
    withMoneyGateway(
      (demo) => inMode('strict')(withMoneyKeys({ k: key }, () => BALANCE, PREFIX)(demo)),
      (started) => ({ up, gw, store } = started),
    );

    for (const [what, c] of Object.entries(CASES)) {
      it(`refuses ${what} (403 balance_insufficient, nothing upstream) where its bytes alone would fit`, async () => {
        const from = up.received.length;
        const sent = await request(gw, c.path, { ...c.headers, [MARK]: what }, c.body);
        expect(sent.status, sent.text).toBe(403);
        expect(sent.text).toContain('balance_insufficient');
        expect(up.received.slice(from).filter((r) => r.headers[MARK] === what)).toHaveLength(0);
        expect(await balanceOfKey(store, key)).toBeLessThanOrEqual(BALANCE);
      });
    }

    for (const [protocol, c] of Object.entries(CONTROLS)) {
      it(`serves a ${protocol} request of the same size without such an item`, async () => {
        const sent = await request(gw, c.path, { ...c.headers, [MARK]: `control-${protocol}` }, c.body);
        expect(sent.status, sent.text).toBe(200);
      });
    }
  },
);

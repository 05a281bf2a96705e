/**
 * The meter's bound (docs/metering.md, "Overspend") against input from elsewhere: strict mode
 * promises zero overspend, soft mode at most the balance plus R x M. A body's bytes bound the input
 * it holds, not the input it points at (an image by URL, a video by fileUri, a hosted web search's
 * results), and a hosted tool's per-call fee is no token. So each source of input from elsewhere
 * counts meter.referencedInputTokens in the maximum (soft mode's lone request may hold none), and
 * hosted tools count their most calls at their price (price.tools; unpriced ones are refused:
 * hosted_tool_unpriced; test/e2e/money-hosted-tools.test.ts). Each case goes through a real Envoy and modelgate
 * to a stand-in provider that bills such input as providers do (support/money-upstream.ts), on its
 * own key with a balance of 0.001, and asserts the stated bound. Also: a stream whose last event is
 * longer than the meter's tail is debited the usage the provider reported.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { balanceOfKey, inMode, request, startMoneyGateway, withMoneyKeys } from '../support/money-client';
import { IMAGE_TOKENS, type MoneyUpstream } from '../support/money-upstream';

/** Each case's own key, group basic (demo prices), balance 0.001. */
const BALANCE = 0.001;
const KEYS = ['chatImages', 'geminiVideo', 'claudeSearch', 'responsesSearch', 'softImages', 'longCompleted'] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
/** The long stream's key can pay for its ten images (it tests reading the usage, not the bound). */
const balanceOf = (k: KeyName): number => (k === 'longCompleted' ? 10 : BALANCE);
const withKeys = withMoneyKeys(keys, (k) => balanceOf(k as KeyName), 'rt');

/** A hosted web search's fee: OpenAI and Anthropic list about $10 per 1,000 (the demo's unit is dollars). */
const SEARCH_FEE = 0.01;

/** Sends one request on a case's key; when served, waits for its ledger row. */
async function spend(
  gw: Gateway,
  store: FileStore,
  key: KeyName,
  path: string,
  headers: Record<string, string>,
  body: unknown,
) {
  const sent = await request(gw, path, headers, body);
  let row: UsageEntry | undefined;
  if (sent.status === 200) {
    await waitFor(
      'the ledger row',
      async () => (await store.meter!.usage({ keyId: `rt-${key}`, limit: 10 })).length > 0,
      15_000,
    );
    [row] = await store.meter!.usage({ keyId: `rt-${key}`, limit: 1 });
  }
  const balance = await balanceOfKey(store, keys[key]);
  return { sent, row, balance, bodyBytes: Buffer.byteLength(JSON.stringify(body)) };
}

const bearer = (key: KeyName): Record<string, string> => ({ authorization: `Bearer ${keys[key]}` });
const claude = (key: KeyName): Record<string, string> => ({
  'x-api-key': keys[key],
  'anthropic-version': '2023-06-01',
});

describeE2E(
  'money, input from elsewhere: strict mode reserves body bytes as input, but input can come from elsewhere',
  () => {
    let up: MoneyUpstream;
    let gw: Gateway;
    let store: FileStore;
    beforeAll(async () => {
      ({ up, gw, store } = await startMoneyGateway((demo) => withKeys(inMode('strict')(demo))));
    }, 60_000);
    afterAll(async () => {
      await gw?.close();
      await up?.close();
    });

    it('chat: two images by URL (a 300-byte body the provider bills as 51,000 input tokens) may not spend past the balance', async () => {
      const image = (n: number) => ({
        type: 'image_url',
        image_url: { url: `https://example.com/${n}.png`, detail: 'high' },
      });
      const r = await spend(gw, store, 'chatImages', '/v1/chat/completions', bearer('chatImages'), {
        model: 'gpt-4o-mini',
        max_tokens: 5,
        messages: [{ role: 'user', content: [{ type: 'text', text: 'describe' }, image(1), image(2)] }],
      });
      // Strict mode's bound is zero: refused, or served within the balance.
      expect(r.balance, `status ${r.sent.status}, ledger ${JSON.stringify(r.row)}`).toBeGreaterThanOrEqual(0);
    });

    it('Gemini: a YouTube video by fileUri (a 200-byte body, about 950,000 input tokens) may not spend past the balance', async () => {
      const r = await spend(
        gw,
        store,
        'geminiVideo',
        '/v1beta/models/gemini-2.5-flash:generateContent',
        { 'x-goog-api-key': keys.geminiVideo },
        {
          contents: [
            {
              role: 'user',
              parts: [{ fileData: { fileUri: 'https://www.youtube.com/watch?v=9hE5-98ZeCg' } }, { text: 'summarize' }],
            },
          ],
          generationConfig: { maxOutputTokens: 5 },
        },
      );
      expect(r.balance, `status ${r.sent.status}, ledger ${JSON.stringify(r.row)}`).toBeGreaterThanOrEqual(0);
    });

    it('messages: a web_search server tool (max_uses 8) pays its searches and its results, within the balance', async () => {
      const r = await spend(gw, store, 'claudeSearch', '/v1/messages', claude('claudeSearch'), {
        model: 'claude-3-5-haiku-latest',
        max_tokens: 20,
        tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 8 }],
        messages: [{ role: 'user', content: 'news today' }],
      });
      expect(r.balance, `status ${r.sent.status}, ledger ${JSON.stringify(r.row)}`).toBeGreaterThanOrEqual(0);
      // Served, its eight searches are on the ledger too (Anthropic reports them:
      // usage.server_tool_use.web_search_requests).
      if (r.row) expect(r.row.cost).toBeGreaterThanOrEqual(8 * SEARCH_FEE);
    });

    it('responses: a hosted web_search tool pays its call and its results, within the balance', async () => {
      const r = await spend(gw, store, 'responsesSearch', '/v1/responses', bearer('responsesSearch'), {
        model: 'gpt-4o-mini',
        max_output_tokens: 20,
        tools: [{ type: 'web_search' }],
        input: 'news today',
      });
      expect(r.balance, `status ${r.sent.status}, ledger ${JSON.stringify(r.row)}`).toBeGreaterThanOrEqual(0);
      if (r.row) expect(r.row.cost).toBeGreaterThanOrEqual(SEARCH_FEE);
    });
  },
);

describeE2E('money, input from elsewhere: soft mode bound (balance + one request maximum M)', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;
  beforeAll(async () => {
    ({ up, gw, store } = await startMoneyGateway(withKeys));
  }, 60_000);
  afterAll(async () => {
    await gw?.close();
    await up?.close();
  });

  it('chat: one request with 40 images by URL spends at most the balance plus M', async () => {
    const content = [
      { type: 'text', text: 'describe' },
      ...Array.from({ length: 40 }, (_, n) => ({
        type: 'image_url',
        image_url: { url: `https://example.com/${n}.png` },
      })),
    ];
    const r = await spend(gw, store, 'softImages', '/v1/chat/completions', bearer('softImages'), {
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content }],
    });
    // docs/metering.md: M = the body's bytes as input tokens plus the model's output cap (16,384), at
    // 0.15 / 0.60, for a request with no input from elsewhere; one with 40 images must fit the balance.
    const m = (r.bodyBytes * 0.15 + 16384 * 0.6) / 1e6;
    expect(BALANCE - r.balance, `status ${r.sent.status}, ledger ${JSON.stringify(r.row)}, M ${m}`).toBeLessThanOrEqual(
      BALANCE + m,
    );
    expect(r.sent.status).toBe(403);
    expect(r.sent.text).toContain('balance_insufficient');
    expect(r.balance).toBe(BALANCE);
  });

  it('responses: a stream whose response.completed is over 16 KiB (20 KB of instructions, echoed) is debited the usage the provider reported', async () => {
    // The meter keeps the last 16 KiB: response.completed, which echoes instructions and tools, no
    // longer fits, so the provider's usage is never read and the input is estimated from the body.
    const content = [
      { type: 'input_text', text: 'describe' },
      ...Array.from({ length: 10 }, (_, n) => ({ type: 'input_image', image_url: `https://example.com/${n}.png` })),
    ];
    const r = await spend(gw, store, 'longCompleted', '/v1/responses', bearer('longCompleted'), {
      model: 'gpt-4o-mini',
      stream: true,
      max_output_tokens: 20,
      instructions: 'Be brief. '.repeat(2000),
      input: [{ role: 'user', content }],
    });
    expect(r.sent.status).toBe(200);
    const reported = Number(/"input_tokens":(\d+)/.exec(r.sent.text)?.[1]);
    expect(reported).toBeGreaterThan(10 * IMAGE_TOKENS);
    expect(r.row, JSON.stringify(r.row)).toMatchObject({ inputTokens: reported });
  });
});

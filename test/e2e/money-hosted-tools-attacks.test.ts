/**
 * Attacks on hosted tools priced per call, through a real Envoy and modelgate to the money stand-in
 * (support/money-upstream.ts: it grounds a Gemini request declaring googleSearch, its answer
 * carrying groundingMetadata, and honours a field mask on the answer's top-level fields as Google's
 * front end does; a Responses stored prompt `pmpt_search...` searches once). The demo prices
 * google_search on gemini-2.5-flash at 0.035 per grounded prompt, web_search on gpt-4o-mini at 0.01.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { request, startMoneyGateway, withMoneyKeys } from '../support/money-client';
import type { MoneyUpstream } from '../support/money-upstream';

const GROUNDED = 0.035;
const KEYS = ['mask', 'header', 'plain', 'prompt', 'promptSse'] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;

describeE2E('hosted tools attacked: calls an answer hides or a body never declared are still debited', () => {
  let up: MoneyUpstream | undefined;
  let gw: Gateway;
  let store: FileStore;
  beforeAll(async () => {
    ({ up, gw, store } = await startMoneyGateway(withMoneyKeys(keys, () => 5, 'hta')));
  }, 60_000);
  afterAll(async () => {
    await gw?.close();
    await up?.close();
  });

  async function rowOf(key: KeyName, n = 1): Promise<UsageEntry> {
    await waitFor(
      'the ledger row',
      async () => (await store.meter!.usage({ keyId: `hta-${key}`, limit: 10 })).length >= n,
      15_000,
    );
    return (await store.meter!.usage({ keyId: `hta-${key}`, limit: 1 }))[0];
  }
  const body = {
    contents: [{ role: 'user', parts: [{ text: 'news today' }] }],
    tools: [{ googleSearch: {} }],
    generationConfig: { maxOutputTokens: 20 },
  };

  // Before: `?fields=usageMetadata` kept the usage and dropped the candidates with their
  // groundingMetadata: the usage was trusted, the filter counted no grounding, and the grounded
  // prompt Google bills (0.035 here) was debited nothing.
  it('?fields=usageMetadata (generateContent, and an SSE stream): one google_search call debited', async () => {
    for (const [path, n] of [
      ['/v1beta/models/gemini-2.5-flash:generateContent?fields=usageMetadata', 1],
      ['/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&fields=usageMetadata', 2],
    ] as const) {
      const sent = await request(gw, path, { 'x-goog-api-key': keys.mask }, body);
      expect(sent.status, sent.text).toBe(200);
      expect(sent.text).not.toContain('groundingMetadata');
      expect(sent.text).toContain('usageMetadata');
      const row = await rowOf('mask', n);
      expect(row.toolCalls, path).toBe(1);
      expect(row.cost).toBeGreaterThanOrEqual(GROUNDED);
    }
  });

  it('x-goog-fieldmask: usageMetadata: one google_search call debited', async () => {
    const sent = await request(
      gw,
      '/v1beta/models/gemini-2.5-flash:generateContent',
      { 'x-goog-api-key': keys.header, 'x-goog-fieldmask': 'usageMetadata' },
      body,
    );
    expect(sent.status, sent.text).toBe(200);
    expect(sent.text).not.toContain('groundingMetadata');
    const row = await rowOf('header');
    expect(row.toolCalls).toBe(1);
    expect(row.cost).toBeGreaterThanOrEqual(GROUNDED);
  });

  // Before: a Responses request whose stored prompt (`prompt.id`) holds web_search declares no tool
  // in its body: the provider searched, the answer's web_search_call item was counted by the filter,
  // and no call was debited (the request had no declared tools to settle).
  it("a web_search_call the answer reports of a tool the body never declared (a stored prompt's) is debited at its price", async () => {
    const body2 = {
      model: 'gpt-4o-mini',
      max_output_tokens: 20,
      prompt: { id: 'pmpt_search_news' },
      input: 'news today',
    };
    const sent = await request(gw, '/v1/responses', { authorization: `Bearer ${keys.prompt}` }, body2);
    expect(sent.status, sent.text).toBe(200);
    expect(sent.text).toContain('web_search_call');
    const row = await rowOf('prompt');
    expect(row.estimated ?? undefined).toBeUndefined();
    expect(row.toolCalls).toBe(1);
    expect(row.cost).toBeGreaterThanOrEqual(0.01);
    const streamed = await request(
      gw,
      '/v1/responses',
      { authorization: `Bearer ${keys.promptSse}`, 'x-stand-in-delay-ms': '0' },
      { ...body2, stream: true },
    );
    expect(streamed.status, streamed.text.slice(0, 300)).toBe(200);
    const row2 = await rowOf('promptSse');
    expect(row2.toolCalls).toBe(1);
    expect(row2.cost).toBeGreaterThanOrEqual(0.01);
  });

  it('held: without a mask, the grounded answer is debited one call and an ungrounded one none', async () => {
    expect(
      (await request(gw, '/v1beta/models/gemini-2.5-flash:generateContent', { 'x-goog-api-key': keys.plain }, body))
        .status,
    ).toBe(200);
    expect((await rowOf('plain')).toolCalls).toBe(1);
    expect(
      (
        await request(
          gw,
          '/v1beta/models/gemini-2.5-flash:generateContent',
          { 'x-goog-api-key': keys.plain },
          { ...body, tools: [] },
        )
      ).status,
    ).toBe(200);
    expect((await rowOf('plain', 2)).toolCalls ?? 0).toBe(0);
  });
});

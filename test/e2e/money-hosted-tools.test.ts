/**
 * Hosted tools priced per call (docs/metering.md, "Hosted tools"), through a real Envoy and modelgate
 * to a stand-in provider that searches as providers do (support/money-upstream.ts: a Responses
 * `web_search_call` output item per search; Anthropic's `usage.server_tool_use.web_search_requests`,
 * up to max_uses). The demo prices web_search on gpt-4o-mini and claude-3-5-haiku-latest at 0.01 a
 * call and leaves code_interpreter unpriced. Each case has its own key in group basic.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { balanceOfKey, inMode, request, startMoneyGateway, withMoneyKeys } from '../support/money-client';
import type { MoneyUpstream } from '../support/money-upstream';

const FEE = 0.01;
const KEYS = ['json', 'sse', 'split', 'splitGemini', 'claude', 'gemini', 'history', 'unpriced', 'strictSmall'] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
/** strictSmall can pay two searches and some tokens, not the ten meter.maxHostedToolCalls holds. */
const balanceOf = (k: KeyName): number => (k === 'strictSmall' ? 0.05 : 5);

const bearer = (key: KeyName): Record<string, string> => ({ authorization: `Bearer ${keys[key]}` });

describeE2E(
  'hosted tools priced per call: served, held at their most calls, debited the calls the answer reports',
  () => {
    let up: MoneyUpstream;
    let gw: Gateway;
    let store: FileStore;
    beforeAll(async () => {
      ({ up, gw, store } = await startMoneyGateway((demo) =>
        withMoneyKeys(keys, (k) => balanceOf(k as KeyName), 'ht')(inMode('strict')(demo)),
      ));
    }, 60_000);
    afterAll(async () => {
      await gw?.close();
      await up?.close();
    });

    async function rowOf(key: KeyName, n = 1): Promise<UsageEntry> {
      await waitFor(
        'the ledger row',
        async () => (await store.meter!.usage({ keyId: `ht-${key}`, limit: 10 })).length >= n,
        15_000,
      );
      return (await store.meter!.usage({ keyId: `ht-${key}`, limit: 1 }))[0];
    }

    it('responses (JSON): a web_search call is debited at its price besides the tokens', async () => {
      const sent = await request(gw, '/v1/responses', bearer('json'), {
        model: 'gpt-4o-mini',
        max_output_tokens: 20,
        tools: [{ type: 'web_search' }],
        input: 'news today',
      });
      expect(sent.status, sent.text).toBe(200);
      const row = await rowOf('json');
      expect(row.estimated ?? undefined).toBeUndefined();
      expect(row.toolCalls).toBe(1);
      const tokens =
        ((row.inputTokens - row.cachedInputTokens) * 0.15 + row.cachedInputTokens * 0.075 + row.outputTokens * 0.6) /
        1e6;
      expect(row.cost).toBeCloseTo(tokens + FEE, 9);
      expect(await balanceOfKey(store, keys.json)).toBeCloseTo(5 - row.cost, 9);
    });

    it("responses (stream): the call is counted in the whole stream, past the meter's tail", async () => {
      // 6,000 tokens: response.completed alone (its output repeats the text after the search item) is
      // longer than the 16 KiB the meter's tail keeps, so only the filter's count sees the item.
      const sent = await request(
        gw,
        '/v1/responses',
        { ...bearer('sse'), 'x-stand-in-delay-ms': '0' },
        {
          model: 'gpt-4o-mini',
          stream: true,
          max_output_tokens: 6000,
          tools: [{ type: 'web_search_preview' }],
          input: 'news today',
        },
      );
      expect(sent.status, sent.text.slice(0, 300)).toBe(200);
      const completed = sent.text.slice(sent.text.lastIndexOf('event: response.completed'));
      expect(completed.length).toBeGreaterThan(16384);
      expect(completed.indexOf('web_search_call')).toBeLessThan(completed.length - 16384);
      const row = await rowOf('sse');
      expect(row.estimated ?? undefined).toBeUndefined();
      expect(row.toolCalls).toBe(1);
      expect(row.cost).toBeGreaterThanOrEqual(FEE);
    });

    it("a call split between two chunks of the answer is counted once, in a long stream and in Gemini's JSON", async () => {
      // Every occurrence of the tool's name is cut in two between writes: the filter finds each in the
      // bytes it carries from one chunk to the next, and counts none twice.
      const sent = await request(
        gw,
        '/v1/responses',
        { ...bearer('split'), 'x-stand-in-delay-ms': '0', 'x-stand-in-cut-inside': 'web_search_call' },
        {
          model: 'gpt-4o-mini',
          stream: true,
          max_output_tokens: 6000,
          tools: [{ type: 'web_search_preview' }],
          input: 'news today',
        },
      );
      expect(sent.status, sent.text.slice(0, 300)).toBe(200);
      const completed = sent.text.slice(sent.text.lastIndexOf('event: response.completed'));
      expect(completed.indexOf('web_search_call')).toBeLessThan(completed.length - 16384);
      const row = await rowOf('split');
      expect(row.estimated ?? undefined).toBeUndefined();
      expect(row.toolCalls).toBe(1);
      const body = {
        contents: [{ role: 'user', parts: [{ text: 'news today' }] }],
        tools: [{ googleSearch: {} }],
        generationConfig: { maxOutputTokens: 20 },
      };
      const grounded = await request(
        gw,
        '/v1beta/models/gemini-2.5-flash:generateContent',
        { 'x-goog-api-key': keys.splitGemini, 'x-stand-in-cut-inside': 'groundingMetadata' },
        body,
      );
      expect(grounded.status, grounded.text).toBe(200);
      expect(grounded.text).toContain('groundingMetadata');
      expect((await rowOf('splitGemini')).toolCalls).toBe(1);
    });

    it("messages: Anthropic's reported searches (max_uses 3) are debited, three calls", async () => {
      const sent = await request(
        gw,
        '/v1/messages',
        { 'x-api-key': keys.claude, 'anthropic-version': '2023-06-01' },
        {
          model: 'claude-3-5-haiku-latest',
          max_tokens: 20,
          tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 3 }],
          messages: [{ role: 'user', content: 'news today' }],
        },
      );
      expect(sent.status, sent.text).toBe(200);
      const row = await rowOf('claude');
      expect(row.toolCalls).toBe(3);
      expect(row.cost).toBeGreaterThanOrEqual(3 * FEE);
    });

    it('Gemini: a grounded prompt (groundingMetadata) is debited one google_search call, in generateContent and in a stream', async () => {
      const body = {
        contents: [{ role: 'user', parts: [{ text: 'news today' }] }],
        tools: [{ googleSearch: {} }],
        generationConfig: { maxOutputTokens: 20 },
      };
      const headers = { 'x-goog-api-key': keys.gemini };
      expect((await request(gw, '/v1beta/models/gemini-2.5-flash:generateContent', headers, body)).status).toBe(200);
      let row = await rowOf('gemini');
      expect(row.toolCalls).toBe(1);
      expect(row.cost).toBeGreaterThanOrEqual(0.035);
      expect(
        (await request(gw, '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse', headers, body)).status,
      ).toBe(200);
      row = await rowOf('gemini', 2);
      expect(row.toolCalls).toBe(1);
      // Without the tool, nothing is grounded and no call is debited.
      expect(
        (await request(gw, '/v1beta/models/gemini-2.5-flash:generateContent', headers, { ...body, tools: [] })).status,
      ).toBe(200);
      row = await rowOf('gemini', 3);
      expect(row.toolCalls ?? 0).toBe(0);
    });

    it('serves a replayed history of web_search_call items that declares no tool, debiting no call', async () => {
      const input = [
        { role: 'user', content: 'news' },
        { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search', query: 'news' } },
        { role: 'user', content: 'and now?' },
      ];
      const sent = await request(gw, '/v1/responses', bearer('history'), {
        model: 'gpt-4o-mini',
        max_output_tokens: 20,
        input,
      });
      expect(sent.status, sent.text).toBe(200);
      const row = await rowOf('history');
      expect(row.toolCalls ?? 0).toBe(0);
      expect(row.cost).toBeLessThan(FEE);
    });

    it('refuses a declared tool the price does not name (400 hosted_tool_unpriced), in any spelling', async () => {
      for (const body of [
        { model: 'gpt-4o-mini', input: 'x', tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] },
        // Escaped, as a provider's parser decodes it.
        JSON.parse(
          '{"model":"gpt-4o-mini","input":"x","tools":[{"type":"code\\u005finterpreter","container":{"type":"auto"}}]}',
        ),
      ]) {
        const sent = await request(gw, '/v1/responses', bearer('unpriced'), body);
        expect(sent.status, sent.text).toBe(400);
        expect(sent.text).toContain('hosted_tool_unpriced');
      }
      // A key sent twice: one reading sees a function, another the hosted tool.
      const twice = await rawRequest(
        gw,
        '/v1/responses',
        bearer('unpriced'),
        '{"model":"gpt-4o-mini","input":"x","tools":[{"type":"code_interpreter","type":"function","name":"f","container":{"type":"auto"}}]}',
      );
      expect(twice.status, twice.text).toBe(400);
      expect(twice.text).toContain('hosted_tool_unpriced');
      expect(up.received.filter((r) => r.headers.authorization === `Bearer ${keys.unpriced}`)).toHaveLength(0);
    });

    it('strict mode reserves the most calls: ten (meter.maxHostedToolCalls) do not fit 0.05, max_tool_calls 2 does', async () => {
      const body = {
        model: 'gpt-4o-mini',
        max_output_tokens: 20,
        tools: [{ type: 'web_search' }],
        input: 'news today',
      };
      const refused = await request(gw, '/v1/responses', bearer('strictSmall'), body);
      expect(refused.status, refused.text).toBe(403);
      expect(refused.text).toContain('balance_insufficient');
      const sent = await request(gw, '/v1/responses', bearer('strictSmall'), { ...body, max_tool_calls: 2 });
      expect(sent.status, sent.text).toBe(200);
      const row = await rowOf('strictSmall');
      expect(row.toolCalls).toBe(1);
      expect(await balanceOfKey(store, keys.strictSmall)).toBeGreaterThanOrEqual(0);
    });
  },
);

/** A request whose body is sent as written (a key twice, which JSON.stringify cannot write). */
async function rawRequest(gw: Gateway, path: string, headers: Record<string, string>, body: string) {
  const res = await fetch(`${gw.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: res.status, text: await res.text() };
}

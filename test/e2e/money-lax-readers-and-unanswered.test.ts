/**
 * Input an estimate or a hold can miss, and answers the client never got (docs/metering.md,
 * "Overspend"): a 4 KiB input sample filled with numbers, fields a case-insensitive or case-folding
 * binder reads (generationConfig.CandidateCount, "previou\u017f_response_id"), input pulled from
 * elsewhere (Gemini fileSearch, Anthropic mcp_servers, a Responses item_reference), Envoy's 504
 * after the request went upstream, and a client that leaves a non-streaming request before its
 * answer. Each case goes through a real Envoy and modelgate to the stand-in provider
 * (support/money-upstream.ts, or a slow one of its own here), on its own key, and asserts the stated
 * bound or what the provider billed.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey, hashKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { request, withMoneyKeys } from '../support/money-client';
import { startMoneyUpstream, type MoneyUpstream } from '../support/money-upstream';

const KEYS = [
  'sparseSample',
  'sparseCut',
  'geminiCase',
  'geminiFileSearch',
  'claudeMcp',
  'itemReference',
  'longS',
  'slowAnswer',
  'leftAnswer',
] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
/** The estimate cases can pay for what they send (they test the estimate, not the bound); the others have 0.001. */
const balanceOf = (k: KeyName): number =>
  k === 'sparseSample' || k === 'sparseCut' || k === 'slowAnswer' || k === 'leftAnswer' ? 10 : 0.001;
const withKeys = withMoneyKeys(keys, (k) => balanceOf(k as KeyName), 'rt2');

const bearer = (key: KeyName): Record<string, string> => ({ authorization: `Bearer ${keys[key]}` });
const claude = (key: KeyName): Record<string, string> => ({
  'x-api-key': keys[key],
  'anthropic-version': '2023-06-01',
});
const goog = (key: KeyName): Record<string, string> => ({ 'x-goog-api-key': keys[key] });

async function rowOf(store: FileStore, key: KeyName): Promise<UsageEntry> {
  await waitFor(
    'the ledger row',
    async () => (await store.meter!.usage({ keyId: `rt2-${key}`, limit: 10 })).length > 0,
    30_000,
  );
  return (await store.meter!.usage({ keyId: `rt2-${key}`, limit: 1 }))[0];
}

/**
 * A body whose first 4 KiB (the sample the meter estimates input from) hold no string values: a
 * tool whose parameter schema is an enum of 2,100 zeros (tools count as input at every provider),
 * then 100,000 one-token words the provider bills.
 */
const WORDS = 100_000;
const sparseHead = {
  type: 'function',
  function: {
    name: 'f',
    parameters: { type: 'object', properties: { x: { type: 'integer', enum: Array(2100).fill(0) } } },
  },
};
const denseText = 'a '.repeat(WORDS);

describeE2E('money, lax readers and unanswered requests: soft mode, the stand-in provider', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;
  beforeAll(async () => {
    up = await startMoneyUpstream();
    const at = { host: '127.0.0.1', port: up.port };
    gw = await startGateway({ config: withKeys, upstreamTargets: { chat: at, messages: at, generative: at, alt: at } });
    store = gw.modelgate.service!.store as FileStore;
  }, 60_000);
  afterAll(async () => {
    await gw?.close();
    await up?.close();
  });

  it('chat stream without include_usage: the input estimate reads the first 4 KiB, which a client fills with numbers (100,000 billed input tokens debited as about 100)', async () => {
    const sent = await request(gw, '/v1/chat/completions', bearer('sparseSample'), {
      model: 'gpt-4o-mini',
      tools: [sparseHead],
      stream: true,
      max_tokens: 5,
      messages: [{ role: 'user', content: denseText }],
    });
    expect(sent.status).toBe(200);
    const row = await rowOf(store, 'sparseSample');
    // The provider bills 100,000+ input tokens (o200k_base counts " a" as one token too).
    expect(row.estimated).toBe('stream_without_usage');
    expect(row.inputTokens, JSON.stringify(row)).toBeGreaterThanOrEqual(WORDS / 2);
  });

  it('chat stream with include_usage, cut by the client after its first event: the same sparse sample, estimated as incomplete', async () => {
    const sent = await request(
      gw,
      '/v1/chat/completions',
      { ...bearer('sparseCut'), 'x-stand-in-delay-ms': '50' },
      {
        model: 'gpt-4o-mini',
        tools: [sparseHead],
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: 200,
        messages: [{ role: 'user', content: denseText }],
      },
      (received) => received.length >= 1,
    );
    expect(sent.status).toBe(200);
    const row = await rowOf(store, 'sparseCut');
    expect(row.estimated).toBe('incomplete');
    // A provider bills a cut stream's whole prompt (it was read before the first token).
    expect(row.inputTokens, JSON.stringify(row)).toBeGreaterThanOrEqual(WORDS / 2);
  });

  it('gemini: generationConfig.CandidateCount (a case-insensitive binder reads candidateCount) is refused as the top-level "N" is', async () => {
    const sent = await request(gw, '/v1beta/models/gemini-2.5-flash:generateContent', goog('geminiCase'), {
      contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
      generationConfig: { CandidateCount: 8, MaxOutputTokens: 65536 },
    });
    // Served now: the meter reads one answer, a Go relay (one-api, new-api) produces eight.
    expect(sent.status, sent.text.slice(0, 300)).toBe(400);
  });

  it("gemini: the fileSearch tool (retrieved chunks billed as input, indexing billed) is refused as a hosted tool, as OpenAI's file_search is", async () => {
    const sent = await request(gw, '/v1beta/models/gemini-2.5-flash:generateContent', goog('geminiFileSearch'), {
      contents: [{ role: 'user', parts: [{ text: 'what do my files say?' }] }],
      tools: [{ fileSearch: { fileSearchStoreNames: ['fileSearchStores/my-store'] } }],
    });
    expect(sent.status, sent.text.slice(0, 300)).toBe(400);
    expect(sent.text).toContain('hosted_tool_unpriced');
  });

  it('anthropic: mcp_servers (a remote MCP server, type "url": its results are input) counts as input from elsewhere', async () => {
    const sent = await request(
      gw,
      '/v1/messages',
      { ...claude('claudeMcp'), 'anthropic-beta': 'mcp-client-2025-04-04' },
      {
        model: 'claude-3-5-haiku-latest',
        max_tokens: 100,
        messages: [{ role: 'user', content: 'list my tickets' }],
        mcp_servers: [{ type: 'url', url: 'https://mcp.example.com/sse', name: 'tickets' }],
      },
    );
    expect(sent.status, sent.text.slice(0, 300)).toBe(403);
  });

  it('responses: an item_reference input item (a stored item pulled in by id) counts as input from elsewhere', async () => {
    const sent = await request(gw, '/v1/responses', bearer('itemReference'), {
      model: 'gpt-4o-mini',
      max_output_tokens: 20000,
      input: [
        { type: 'item_reference', id: 'msg_0123456789abcdef' },
        { role: 'user', content: 'and now?' },
      ],
    });
    // Balance 0.001, maximum about 0.012: a lone request with input from elsewhere must fit.
    expect(sent.status, sent.text.slice(0, 300)).toBe(403);
  });

  it('"previou\u017f_response_id" (long s: Go\'s encoding/json folds it to previous_response_id) is refused as "N" is', async () => {
    const sent = await request(gw, '/v1/responses', bearer('longS'), {
      model: 'gpt-4o-mini',
      max_output_tokens: 20000,
      'previou\u017f_response_id': 'resp_0123456789abcdef',
      input: 'continue',
    });
    expect(sent.status, sent.text.slice(0, 300)).toBe(400);
  });
});

describeE2E(
  'money, lax readers and unanswered requests: a non-streaming answer slower than the upstream idle timeout',
  () => {
    let gw: Gateway;
    let slow: http.Server;
    let answered = 0;
    beforeAll(async () => {
      // A provider that takes 3 s to answer a non-streaming request it bills (as a long reasoning answer does).
      slow = http.createServer((req, res) => {
        req.resume();
        req.on('end', () =>
          setTimeout(() => {
            answered++;
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(
              JSON.stringify({
                id: 'chatcmpl-slow',
                object: 'chat.completion',
                choices: [{ index: 0, message: { role: 'assistant', content: 'done' }, finish_reason: 'stop' }],
                usage: { prompt_tokens: 1000, completion_tokens: 16000, total_tokens: 17000 },
              }),
            );
          }, 3000),
        );
      });
      await new Promise<void>((r) => slow.listen(0, '127.0.0.1', () => r()));
      const at = { host: '127.0.0.1', port: (slow.address() as AddressInfo).port };
      gw = await startGateway({
        config: (demo) => withKeys(demo).replace(/upstreamIdleTimeoutSeconds: 300/, 'upstreamIdleTimeoutSeconds: 1'),
        upstreamTargets: { chat: at },
      });
    }, 60_000);
    afterAll(async () => {
      await gw?.close();
      slow?.closeAllConnections();
      await new Promise<void>((r) => slow?.close(() => r()));
    });

    it('the 504 Envoy sends after the request went upstream is not free: the provider bills the answer it produces', async () => {
      const sent = await request(gw, '/v1/chat/completions', bearer('slowAnswer'), {
        model: 'gpt-4o-mini',
        max_tokens: 16000,
        messages: [{ role: 'user', content: 'write a long essay' }],
      });
      expect(sent.status).toBe(504);
      const meter = gw.modelgate.service!.meter;
      await waitFor(
        'the request settled',
        () => meter.deps.inFlight.count('rt2-slowAnswer') === 0 && meter.pending === 0,
        30_000,
      );
      await waitFor('the provider produced (and billed) the answer', () => answered === 1, 30_000);
      const store = gw.modelgate.service!.store as FileStore;
      const balance = (await store.findKey(hashKey(keys.slowAnswer)))!.balance as number;
      // Released as upstream_error: nothing debited, for 16,000 output tokens the provider billed.
      expect(balance, 'the key paid nothing for a request the provider billed').toBeLessThan(10);
    });

    it('a client that leaves a non-streaming request before its answer is debited its output too (the provider goes on and bills it)', async () => {
      const url = new URL(gw.baseUrl);
      const data = Buffer.from(
        JSON.stringify({
          model: 'gpt-4o-mini',
          max_tokens: 16000,
          messages: [{ role: 'user', content: 'write a long essay' }],
        }),
      );
      const before = answered;
      const req = http.request({
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: '/v1/chat/completions',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': data.length, ...bearer('leftAnswer') },
      });
      req.on('error', () => {});
      req.end(data);
      setTimeout(() => req.destroy(), 400);
      const store = gw.modelgate.service!.store as FileStore;
      const row = await rowOf(store, 'leftAnswer');
      await waitFor('the provider produced (and billed) the answer', () => answered === before + 1, 30_000);
      expect(row.estimated).toBe('incomplete');
      // Debited an estimate of its input and no output: the provider billed 16,000 output tokens.
      expect(row.outputTokens, JSON.stringify(row)).toBeGreaterThan(0);
    });
  },
);

/**
 * Request shapes that would make a hold or a debit smaller than the provider's bill
 * (docs/metering.md, "Overspend"): gzip-compressed Gemini bodies (their candidateCount and video
 * unread), any anthropic-beta header (the provider may raise the output cap), a duplicated "n",
 * service tiers billed above the standard price, chat streams without usage from reasoning models,
 * a Responses stream cut after its text, a Gemini field mask dropping usageMetadata, and Envoy retry
 * headers from a client. Each case goes through a real Envoy and modelgate to the stand-in provider
 * (support/money-upstream.ts), on its own key, and asserts the stated bound or what the provider
 * bills; soft mode, strict mode on the file store and on PostgreSQL (leases).
 */
import * as zlib from 'node:zlib';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { AdminDb } from '../../src/store/pg/admin';
import { setGroup, setPrice } from '../../src/store/pg/groups';
import { migrate } from '../../src/store/pg/schema';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, startGateway, type Gateway, type Reply } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { balanceOfKey, inMode, request, startMoneyGateway, withMoneyKeys } from '../support/money-client';
import { startMoneyUpstream, VIDEO_TOKENS, type MoneyUpstream } from '../support/money-upstream';
import { issueKey } from '../support/pg-keys';
import { openPool, startPgServer, type PgServer } from '../support/pg-server';

const KEYS = [
  'gzipSoft',
  'gzipStrict',
  'priority',
  'betaSoft',
  'duplicateN',
  'retryHeaders',
  'reasoningStream',
  'reasoningCut',
  'geminiMask',
  'plainStream',
  'tierFlex',
] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
/**
 * 0.001 for the bound cases; the strict gzip case can pay for one plain request (0.164) but not for a video; the others
 * pay what they send.
 */
const BALANCES: Record<KeyName, number> = {
  gzipSoft: 0.001,
  gzipStrict: 0.2,
  priority: 10,
  betaSoft: 0.001,
  duplicateN: 0.001,
  retryHeaders: 10,
  reasoningStream: 10,
  reasoningCut: 10,
  geminiMask: 10,
  plainStream: 10,
  tierFlex: 10,
};
const withKeys = withMoneyKeys(keys, (k) => BALANCES[k as KeyName], 'rt3');

const bearer = (key: KeyName): Record<string, string> => ({ authorization: `Bearer ${keys[key]}` });
const claude = (key: KeyName): Record<string, string> => ({
  'x-api-key': keys[key],
  'anthropic-version': '2023-06-01',
});

/** The demo's prices (envoy/modelgate.yaml, group basic), per million tokens. */
const GEMINI_FLASH = { input: 0.3, output: 2.5, cap: 65536 };
const HAIKU = { input: 0.8, output: 4, cap: 8192 };

async function rowOf(store: FileStore, key: KeyName): Promise<UsageEntry> {
  await waitFor(
    'the ledger row',
    async () => (await store.meter!.usage({ keyId: `rt3-${key}`, limit: 10 })).length > 0,
    30_000,
  );
  return (await store.meter!.usage({ keyId: `rt3-${key}`, limit: 1 }))[0];
}

const balanceOf = (store: FileStore, key: KeyName): Promise<number> => balanceOfKey(store, keys[key]);

/**
 * A Gemini request for eight answers about a one-hour video by fileUri (VIDEO_TOKENS of input), its
 * body gzip-compressed (`content-encoding: gzip`, which Google's API front end decompresses).
 */
const GEMINI_VIDEO = {
  contents: [
    {
      role: 'user',
      parts: [{ fileData: { fileUri: 'https://www.youtube.com/watch?v=9hE5-98ZeCg' } }, { text: 'summarize' }],
    },
  ],
  generationConfig: { candidateCount: 8, maxOutputTokens: 5 },
};
function sendGzippedGemini(gw: Gateway, key: KeyName): Promise<Reply> {
  return gw.send('POST', '/v1beta/models/gemini-2.5-flash:generateContent', {
    body: zlib.gzipSync(JSON.stringify(GEMINI_VIDEO)),
    headers: [
      ['x-goog-api-key', keys[key]],
      ['content-type', 'application/json'],
      ['content-encoding', 'gzip'],
    ],
  });
}

describeE2E('money, request shapes: soft mode', () => {
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

  it('gemini: a gzip-compressed body (its candidateCount and its video unread: the plain shape) spends at most the balance plus M', async () => {
    // The Check reads Gemini's body only for the meter (its model is in the path) and never asks
    // whether it could: a compressed or otherwise unreadable body gets the plain shape (one answer,
    // no input from elsewhere), which soft mode lets through as the lone request. OpenAI's and
    // Anthropic's routes refuse a compressed body (body_invalid); Gemini's forwards it.
    const sent = await sendGzippedGemini(gw, 'gzipSoft');
    if (sent.status === 200) await rowOf(store, 'gzipSoft');
    const spent = BALANCES.gzipSoft - (await balanceOf(store, 'gzipSoft'));
    // M: the body's bytes as input plus the model's output cap, for a request with no input from elsewhere.
    const m =
      (zlib.gzipSync(JSON.stringify(GEMINI_VIDEO)).length * GEMINI_FLASH.input +
        GEMINI_FLASH.cap * GEMINI_FLASH.output) /
      1e6;
    expect(spent, `status ${sent.status}: ${sent.text.slice(0, 200)}`).toBeLessThanOrEqual(BALANCES.gzipSoft + m);
  });

  it("anthropic: with any anthropic-beta header the lone request's output is the client's max_tokens, past the model's cap the bound M counts", async () => {
    // admission.ts lifts the configured cap for a request with an anthropic-beta header (a beta can
    // raise the provider's cap: output-128k-...), and soft mode still lets it through as the lone
    // request a balance need not cover. docs/metering.md's bound counts the model's cap (8,192 here).
    const sent = await request(
      gw,
      '/v1/messages',
      { ...claude('betaSoft'), 'anthropic-beta': 'output-128k-2025-02-19' },
      {
        model: 'claude-3-5-haiku-latest',
        max_tokens: 64_000,
        messages: [{ role: 'user', content: 'write a long story' }],
      },
    );
    if (sent.status === 200) await rowOf(store, 'betaSoft');
    const spent = BALANCES.betaSoft - (await balanceOf(store, 'betaSoft'));
    const m = (1000 * HAIKU.input + HAIKU.cap * HAIKU.output) / 1e6;
    expect(spent, `status ${sent.status}: ${sent.text.slice(0, 200)}`).toBeLessThanOrEqual(BALANCES.betaSoft + m);
  });

  it('chat: a duplicated "n" (8, then 1) is refused (body_invalid), as a duplicated "model" is', async () => {
    // The Check keeps a duplicated field's last value (as JSON.parse does); extract-model.ts refuses
    // duplicated models because other parsers keep the first (simdjson's on-demand API, Go's gjson,
    // which relays use to peek at fields). A first-wins upstream produces eight answers of 2,000
    // tokens (0.0096) for a request held as one (0.0012), which soft mode lets through alone.
    const body = `{"model":"gpt-4o-mini","n":8,"max_tokens":2000,"messages":[{"role":"user","content":"write"}],"n":1}`;
    const sent = await gw.send('POST', '/v1/chat/completions', {
      body,
      headers: [
        ['authorization', `Bearer ${keys.duplicateN}`],
        ['content-type', 'application/json'],
      ],
    });
    expect(sent.status, sent.text.slice(0, 300)).toBe(400);
    expect(sent.headers['x-modelgate-reason']).toBe('body_invalid');
  });

  it('chat: service_tier "priority" (billed by OpenAI at about 1.7x the standard price) is refused (service_tier_unpriced), never debited at the standard price', async () => {
    // The price is one per model; a request chooses its tier (OpenAI's priority processing: gpt-4o
    // 4.25/17 against 2.50/10 per million, gpt-4.1 3.50/14 against 2/8), and the answer names it
    // (`"service_tier": "priority"`). Anthropic's `speed: "fast"` and `inference_geo` do the same.
    const sent = await request(gw, '/v1/chat/completions', bearer('priority'), {
      model: 'gpt-4o-mini',
      service_tier: 'priority',
      max_tokens: 1000,
      messages: [{ role: 'user', content: 'write' }],
    });
    expect(sent.status, sent.text.slice(0, 300)).toBe(400);
    expect(sent.text).toContain('service_tier_unpriced');
    expect(up.received.filter((r) => r.body.includes('"service_tier":"priority"')).length).toBe(0);
  });

  /**
   * A reasoning model (o-series, gpt-5, Gemini 2.5 thinking) bills its hidden reasoning as output
   * and never shows it: an estimate from the text the response carried misses it. Each request here
   * reasons REASONING tokens (the stand-in's x-stand-in-reasoning) and answers 5.
   */
  const REASONING = 10_000;
  const reasons = { 'x-stand-in-reasoning': String(REASONING), 'x-stand-in-tokens': '5' };

  it('chat: a stream without include_usage from a reasoning model is debited its reasoning tokens, not only the text it showed', async () => {
    const sent = await request(
      gw,
      '/v1/chat/completions',
      { ...bearer('reasoningStream'), ...reasons },
      {
        model: 'gpt-4o-mini',
        stream: true,
        reasoning_effort: 'high',
        messages: [{ role: 'user', content: 'prove it' }],
      },
    );
    expect(sent.status).toBe(200);
    const row = await rowOf(store, 'reasoningStream');
    expect(row.estimated).toBe('stream_without_usage');
    expect(row.outputTokens, JSON.stringify(row)).toBeGreaterThanOrEqual(REASONING);
  });

  it('chat: a stream without include_usage on a model that does not reason, asking for no reasoning, is debited an estimate of its text, not its maximum', async () => {
    const sent = await request(
      gw,
      '/v1/chat/completions',
      { ...bearer('plainStream'), 'x-stand-in-tokens': '5' },
      {
        model: 'gpt-4o-mini',
        stream: true,
        messages: [{ role: 'user', content: 'hello' }],
      },
    );
    expect(sent.status).toBe(200);
    const row = await rowOf(store, 'plainStream');
    expect(row.estimated).toBe('stream_without_usage');
    expect(row.outputTokens).toBeGreaterThanOrEqual(5);
    expect(row.outputTokens).toBeLessThan(1000);
  });

  it('chat: service_tier "flex" and "auto" (billed at or below the standard price) are served', async () => {
    for (const tier of ['flex', 'auto']) {
      const sent = await request(gw, '/v1/chat/completions', bearer('tierFlex'), {
        model: 'gpt-4o-mini',
        max_tokens: 10,
        service_tier: tier,
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(sent.status, sent.text.slice(0, 200)).toBe(200);
    }
  });

  it('responses: a stream cut after its text (before response.completed) is debited the reasoning the provider billed', async () => {
    const sent = await request(
      gw,
      '/v1/responses',
      { ...bearer('reasoningCut'), ...reasons, 'x-stand-in-delay-ms': '200' },
      {
        model: 'gpt-4o-mini',
        stream: true,
        reasoning: { effort: 'high' },
        input: 'prove it',
      },
      (received) => received.includes('response.output_text.done'),
    );
    expect(sent.status).toBe(200);
    const row = await rowOf(store, 'reasoningCut');
    expect(row.estimated).toBe('incomplete');
    expect(row.outputTokens, JSON.stringify(row)).toBeGreaterThanOrEqual(REASONING);
  });

  it('gemini: a field mask (?fields=candidates) that drops usageMetadata leaves the thinking tokens to be paid', async () => {
    // Google's system parameter `fields` (or the x-goog-fieldmask header) trims the answer: without
    // usageMetadata the meter estimates from the text, which holds no thoughts.
    const sent = await request(
      gw,
      '/v1beta/models/gemini-2.5-flash:generateContent?fields=candidates',
      { 'x-goog-api-key': keys.geminiMask, ...reasons },
      {
        contents: [{ role: 'user', parts: [{ text: 'prove it' }] }],
        generationConfig: { thinkingConfig: { thinkingBudget: 24576 } },
      },
    );
    expect(sent.status, sent.text.slice(0, 200)).toBe(200);
    expect(sent.text).not.toContain('usageMetadata');
    const row = await rowOf(store, 'geminiMask');
    expect(row.outputTokens, JSON.stringify(row)).toBeGreaterThanOrEqual(REASONING);
  });

  it('defended: Envoy retry headers from a client (x-envoy-retry-on, retriable status 200) never make one paid request several at the provider', async () => {
    // A retry on a 200 would have the provider produce and bill every attempt, the meter seeing one.
    // use_remote_address: true makes every client external, so Envoy drops its x-envoy-* headers.
    const before = up.received.length;
    const sent = await request(
      gw,
      '/v1/chat/completions',
      {
        ...bearer('retryHeaders'),
        'x-envoy-retry-on': 'retriable-status-codes,5xx,reset',
        'x-envoy-retriable-status-codes': '200',
        'x-envoy-max-retries': '5',
        'x-envoy-upstream-rq-per-try-timeout-ms': '1',
        'x-envoy-hedge-on-per-try-timeout': 'true',
      },
      { model: 'gpt-4o-mini', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] },
    );
    expect(sent.status).toBe(200);
    const row = await rowOf(store, 'retryHeaders');
    expect(up.received.length - before).toBe(1);
    expect(row.estimated).toBeUndefined();
  });
});

describeE2E('money, request shapes: strict mode (file store)', () => {
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

  it('gemini: a gzip-compressed body (eight answers, a video) may not spend past the balance', async () => {
    // Reserved as the plain shape (200 bytes, 65,536 output tokens: 0.164), billed 946,800 input tokens (0.284).
    const sent = await sendGzippedGemini(gw, 'gzipStrict');
    if (sent.status === 200) {
      const row = await rowOf(store, 'gzipStrict');
      expect(row.inputTokens).toBeGreaterThanOrEqual(VIDEO_TOKENS);
    }
    expect(
      await balanceOf(store, 'gzipStrict'),
      `status ${sent.status}: ${sent.text.slice(0, 200)}`,
    ).toBeGreaterThanOrEqual(0);
  });
});

describeE2E('money, request shapes: strict mode on PostgreSQL (leases)', () => {
  let server: PgServer;
  let pool: AdminDb;
  let up: MoneyUpstream;
  let gw: Gateway;
  let key: string;
  beforeAll(async () => {
    server = await startPgServer();
    pool = openPool(server.url);
    await migrate(pool);
    await setGroup(pool, {
      name: 'basic',
      models: [{ name: 'gemini-2.5-flash', protocols: ['generative'], available: true }],
    });
    await setPrice(pool, 'basic', 'gemini-2.5-flash', {
      price: { input: GEMINI_FLASH.input, output: GEMINI_FLASH.output, cachedInput: null },
      maxOutputTokens: GEMINI_FLASH.cap,
    });
    key = (await issueKey(pool, { group: 'basic', id: 'rt3-pg-gzip', balance: String(BALANCES.gzipStrict) })).key;
    up = await startMoneyUpstream();
    const at = { host: '127.0.0.1', port: up.port };
    gw = await startGateway({
      config: (demo) => `${demo.replace('  mode: soft ', '  mode: strict ')}\nstore: ${server.url}\n`,
      upstreamTargets: { generative: at, alt: at },
    });
  }, 120_000);
  afterAll(async () => {
    await gw?.close();
    await up?.close();
    await pool?.end();
    await server?.close();
  });

  it('gemini: a gzip-compressed body (eight answers, a video) may not spend past the balance', async () => {
    const sent = await gw.send('POST', '/v1beta/models/gemini-2.5-flash:generateContent', {
      body: zlib.gzipSync(JSON.stringify(GEMINI_VIDEO)),
      headers: [
        ['x-goog-api-key', key],
        ['content-type', 'application/json'],
        ['content-encoding', 'gzip'],
      ],
    });
    const rows = async (): Promise<number> =>
      (
        await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM modelgate.usage WHERE key_id = $1', [
          'rt3-pg-gzip',
        ])
      ).rows[0].n;
    if (sent.status === 200) await waitFor('the ledger row', async () => (await rows()) > 0, 30_000);
    const {
      rows: [k],
    } = await pool.query<{ b: string }>('SELECT balance::text AS b FROM modelgate.keys WHERE id = $1', ['rt3-pg-gzip']);
    expect(Number(k.b), `status ${sent.status}: ${sent.text.slice(0, 200)}`).toBeGreaterThanOrEqual(0);
  });
});

/**
 * What `npm start` brings up (the demo config: soft mode, file store, one replica) against a key
 * holder with a small balance (docs/metering.md: at most balance + M) and the demo's alice (12.5)
 * running today's coding agents' request shapes, who must not be refused: bursts split over the
 * three protocol families, the alternate prefix and the agent paths; Gemini and Responses streams
 * cut mid-way; a body sent slowly while other requests hold the balance; a balance lowered in the
 * config file (hot reload) while requests are in flight; headers a client sends that name
 * modelgate's or Envoy's own. Every request goes through the real Envoy to the stand-in provider
 * (support/money-upstream.ts), which bills exactly.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import * as http from 'node:http';
import { expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { balanceOfKey, request, withMoneyGateway, withMoneyKeys, type Sent } from '../support/money-client';
import type { MoneyUpstream } from '../support/money-upstream';

type Counts = Record<string, number>;
const statuses = (sent: Sent[]): Counts =>
  sent.reduce<Counts>((c, s) => ({ ...c, [s.status]: (c[s.status] ?? 0) + 1 }), {});

const KEYS = ['burst', 'gemCut', 'gemArray', 'respCut', 'respPlain', 'slow', 'reload', 'inject'] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
const BALANCES: Record<KeyName, number> = {
  burst: 0.0006,
  gemCut: 10,
  gemArray: 10,
  respCut: 10,
  respPlain: 10,
  slow: 0.0003,
  reload: 0.001,
  inject: 1,
};
const PREFIX = 'rt9';

/** The demo config's prices, per million tokens. */
const PRICE = {
  'gpt-4o-mini': { input: 0.15, output: 0.6 },
  'claude-3-5-haiku-latest': { input: 0.8, output: 4 },
  'gemini-2.5-flash': { input: 0.3, output: 2.5 },
} as const;

const bearer = (k: KeyName): Record<string, string> => ({ authorization: `Bearer ${keys[k]}` });
const claude = (k: KeyName): Record<string, string> => ({ 'x-api-key': keys[k], 'anthropic-version': '2023-06-01' });
const goog = (k: KeyName): Record<string, string> => ({ 'x-goog-api-key': keys[k] });

async function rowsOf(store: FileStore, k: KeyName): Promise<UsageEntry[]> {
  return (await store.meter!.usage({ limit: 100_000 })).filter((e) => e.keyId === `${PREFIX}-${k}`);
}
async function rowOf(store: FileStore, k: KeyName): Promise<UsageEntry> {
  await waitFor(`the row of ${k}`, async () => (await rowsOf(store, k)).length > 0);
  return (await rowsOf(store, k))[0];
}
const balanceOf = (store: FileStore, k: KeyName): Promise<number> => balanceOfKey(store, keys[k]);

/** One request's maximum cost when it names its maximum output: body bytes as input tokens, plus that output. */
const maxCost = (model: keyof typeof PRICE, body: unknown, maxOut: number): number =>
  (Buffer.byteLength(JSON.stringify(body)) * PRICE[model].input + maxOut * PRICE[model].output) / 1e6;

/**
 * A request whose body goes out in two parts: its first bytes at once, the rest when `finish` is
 * called (a client that holds a request open before its body completes).
 */
function slowRequest(
  gw: Gateway,
  path: string,
  headers: Record<string, string>,
  body: unknown,
): { finish(): Promise<Sent> } {
  const url = new URL(gw.baseUrl);
  const data = Buffer.from(JSON.stringify(body));
  let text = '';
  let status = 0;
  let done!: (s: Sent) => void;
  let fail!: (e: Error) => void;
  const result = new Promise<Sent>((resolve, reject) => {
    done = resolve;
    fail = reject;
  });
  const req = http.request(
    {
      host: url.hostname,
      port: url.port,
      method: 'POST',
      path,
      agent: false,
      headers: { 'content-type': 'application/json', 'content-length': data.length, ...headers },
    },
    (res) => {
      status = res.statusCode ?? 0;
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => done({ status, text }));
    },
  );
  req.on('error', (err) => (status ? done({ status, text }) : fail(err)));
  req.write(data.subarray(0, 20));
  return {
    finish: () => {
      req.end(data.subarray(20));
      return result;
    },
  };
}

describeE2E('money, bursts and cut streams: the demo gateway (soft, file store, one replica)', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;
  withMoneyGateway(
    withMoneyKeys(keys, (k) => BALANCES[k as KeyName], PREFIX),
    (started) => ({ up, gw, store } = started),
  );

  it('defended: 450 requests at once, split over OpenAI, Anthropic and Gemini, the root, /alt and the agent paths, in rounds on one small balance: every one served has its row, the key spends at most its balance plus one request', async () => {
    const msg = [{ role: 'user', content: 'a burst over every protocol' }];
    const shapes: Array<{
      path: string;
      headers: Record<string, string>;
      body: Record<string, unknown>;
      model: keyof typeof PRICE;
    }> = [
      {
        path: '/v1/chat/completions',
        headers: bearer('burst'),
        model: 'gpt-4o-mini',
        body: { model: 'gpt-4o-mini', max_tokens: 40, stream: true, messages: msg },
      },
      {
        path: '/chat/completions',
        headers: bearer('burst'),
        model: 'gpt-4o-mini',
        body: { model: 'gpt-4o-mini', max_tokens: 40, messages: msg },
      },
      {
        path: '/alt/v1/chat/completions',
        headers: bearer('burst'),
        model: 'gpt-4o-mini',
        body: {
          model: 'gpt-4o-mini',
          max_tokens: 40,
          stream: true,
          stream_options: { include_usage: true },
          messages: msg,
        },
      },
      {
        path: '/responses',
        headers: bearer('burst'),
        model: 'gpt-4o-mini',
        body: { model: 'gpt-4o-mini', max_output_tokens: 40, stream: true, input: 'a burst over every protocol' },
      },
      {
        path: '/alt/responses',
        headers: bearer('burst'),
        model: 'gpt-4o-mini',
        body: { model: 'gpt-4o-mini', max_output_tokens: 40, input: 'a burst over every protocol' },
      },
      {
        path: '/v1/messages',
        headers: claude('burst'),
        model: 'claude-3-5-haiku-latest',
        body: { model: 'claude-3-5-haiku-latest', max_tokens: 40, stream: true, messages: msg },
      },
      {
        path: '/alt/v1/messages',
        headers: claude('burst'),
        model: 'claude-3-5-haiku-latest',
        body: { model: 'claude-3-5-haiku-latest', max_tokens: 40, messages: msg },
      },
      {
        path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
        headers: goog('burst'),
        model: 'gemini-2.5-flash',
        body: {
          contents: [{ role: 'user', parts: [{ text: 'a burst' }] }],
          generationConfig: { maxOutputTokens: 40, thinkingConfig: { thinkingBudget: 0 } },
        },
      },
      {
        path: '/alt/v1beta/models/gemini-2.5-flash:streamGenerateContent',
        headers: goog('burst'),
        model: 'gemini-2.5-flash',
        body: {
          contents: [{ role: 'user', parts: [{ text: 'a burst' }] }],
          generationConfig: { maxOutputTokens: 40, thinkingConfig: { thinkingBudget: 0 } },
        },
      },
    ];
    const m = Math.max(...shapes.map((s) => maxCost(s.model, s.body, 40)));
    const upBefore = up.received.length;
    let served = 0;
    let empty = 0;
    const seen: Counts[] = [];
    for (let round = 0; round < 8 && empty < 2; round++) {
      const sent = await Promise.all(
        Array.from({ length: 450 }, (_, i) => shapes[i % shapes.length]).map((s) =>
          request(gw, s.path, s.headers, s.body),
        ),
      );
      const c = statuses(sent);
      seen.push(c);
      served += c[200] ?? 0;
      empty = (c[200] ?? 0) === 0 ? empty + 1 : 0;
      for (const s of sent) if (s.status !== 200) expect([403], s.text.slice(0, 300)).toContain(s.status);
      await waitFor('every served request settled', async () => (await rowsOf(store, 'burst')).length === served);
    }
    const rows = await rowsOf(store, 'burst');
    const spent = BALANCES.burst - (await balanceOf(store, 'burst'));
    const figures = `rounds ${JSON.stringify(seen)}; served ${served}; rows ${rows.length}; upstream ${up.received.length - upBefore}; spent ${spent}; balance ${BALANCES.burst} + one request ${m}`;
    expect(served, figures).toBeGreaterThan(0);
    expect(up.received.length - upBefore, figures).toBe(served);
    expect(rows.length, figures).toBe(served);
    // Only the chat stream without include_usage is estimated (stream_without_usage); every other shape reports usage.
    expect(
      rows.filter((r) => r.estimated).every((r) => r.estimated === 'stream_without_usage'),
      figures,
    ).toBe(true);
    expect(spent, figures).toBeLessThanOrEqual(BALANCES.burst + m + 1e-12);
  }, 100_000);

  it('defended: a Gemini SSE stream with thinking under /alt/v1beta, cut by the client mid-way, is debited at least the thinking and answer the provider billed', async () => {
    const body = {
      contents: [{ role: 'user', parts: [{ text: 'think, then answer' }] }],
      generationConfig: { maxOutputTokens: 200, thinkingConfig: { thinkingBudget: 1000, includeThoughts: true } },
    };
    const sent = await request(
      gw,
      '/alt/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
      { ...goog('gemCut'), 'x-stand-in-reasoning': '500' },
      body,
      (t) => (t.match(/^data: /gm) ?? []).length >= 3,
    );
    expect(sent.status).toBe(200);
    const row = await rowOf(store, 'gemCut');
    // The provider produced and billed 200 answer tokens and 500 thinking tokens (at most 1,200).
    expect(row.estimated).toBe('incomplete');
    expect(row.outputTokens, JSON.stringify(row)).toBeGreaterThanOrEqual(700);
    expect(row.outputTokens, JSON.stringify(row)).toBeLessThanOrEqual(1200);
  });

  it('defended: a Gemini JSON-array stream on a reasoning model (gemini-2.5-flash, no thinkingConfig), cut by the client mid-way, is debited its maximum output (Gemini caps thinking and answer together by maxOutputTokens)', async () => {
    const body = {
      contents: [{ role: 'user', parts: [{ text: 'answer at length' }] }],
      generationConfig: { maxOutputTokens: 300 },
    };
    const sent = await request(
      gw,
      '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
      { ...goog('gemArray'), 'x-stand-in-reasoning': '200' },
      body,
      (t) => (t.match(/"candidates"/g) ?? []).length >= 3,
    );
    expect(sent.status).toBe(200);
    const row = await rowOf(store, 'gemArray');
    // The client received 3 tokens; the model's hidden thinking and the rest of its answer are billed
    // within maxOutputTokens (python-genai#2062: max_output_tokens caps thinking + output combined).
    expect(row.estimated).toBe('incomplete');
    expect(row.outputTokens, JSON.stringify(row)).toBe(300);
  });

  it('defended: a Responses stream at the agent path /responses asking for reasoning, cut after response.created, is debited its maximum output', async () => {
    const body = {
      model: 'gpt-4o-mini',
      input: 'reason about this',
      reasoning: { effort: 'high' },
      max_output_tokens: 120,
      stream: true,
    };
    const sent = await request(gw, '/responses', bearer('respCut'), body, (t) => t.includes('event: response.created'));
    expect(sent.status).toBe(200);
    const row = await rowOf(store, 'respCut');
    expect(row.estimated).toBe('incomplete');
    expect(row.outputTokens, JSON.stringify(row)).toBe(120);
  });

  it('defended: a Responses stream under /alt/responses, cut after response.created, leaves its row: the input sent and the output received', async () => {
    const body = {
      model: 'gpt-4o-mini',
      instructions: 'be brief',
      input: 'no reasoning here',
      max_output_tokens: 50,
      stream: true,
    };
    const sent = await request(gw, '/alt/responses', bearer('respPlain'), body, (t) =>
      t.includes('event: response.created'),
    );
    expect(sent.status).toBe(200);
    const row = await rowOf(store, 'respPlain');
    expect(row.estimated).toBe('incomplete');
    expect(row.inputTokens, JSON.stringify(row)).toBeGreaterThanOrEqual(3);
    expect(await balanceOf(store, 'respPlain')).toBeCloseTo(BALANCES.respPlain - row.cost, 12);
  });

  it('defended: a request whose body is held open while other requests take the whole balance is checked when its body completes: refused, the key spends at most its balance plus one request', async () => {
    const msg = [{ role: 'user', content: 'hold' }];
    const held = { model: 'gpt-4o-mini', max_tokens: 200, messages: msg };
    const slow = slowRequest(gw, '/alt/v1/chat/completions', bearer('slow'), {
      model: 'gpt-4o-mini',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'slow body' }],
    });
    const before = up.received.length;
    // Requests held in flight at the provider (gate) until they hold the balance: 0.0003 / ~0.000123 each.
    const inFlight = [request(gw, '/v1/chat/completions', { ...bearer('slow'), 'x-stand-in-gate': 'slow' }, held)];
    await waitFor('the first request upstream', () => up.received.length === before + 1);
    inFlight.push(request(gw, '/chat/completions', { ...bearer('slow'), 'x-stand-in-gate': 'slow' }, held));
    await waitFor('the second request upstream', () => up.received.length === before + 2);
    const third = await request(gw, '/v1/chat/completions', bearer('slow'), held);
    expect(third.status, 'the balance is held').toBe(403);
    const late = await slow.finish();
    up.open('slow');
    const done = await Promise.all(inFlight);
    expect(done.map((d) => d.status)).toEqual([200, 200]);
    expect(late.status, late.text.slice(0, 300)).toBe(403);
    expect(late.text).toContain('balance_insufficient');
    await waitFor('two rows', async () => (await rowsOf(store, 'slow')).length === 2);
    const spent = BALANCES.slow - (await balanceOf(store, 'slow'));
    expect(spent).toBeLessThanOrEqual(BALANCES.slow + maxCost('gpt-4o-mini', held, 200));
  });

  it('defended: a balance lowered in the config file (hot reload) below what the requests in flight hold: the next request is refused; what was spent is remembered', async () => {
    const body = { model: 'gpt-4o-mini', max_tokens: 300, messages: [{ role: 'user', content: 'reload' }] };
    const before = up.received.length;
    const inFlight: Array<Promise<Sent>> = [];
    for (let i = 0; i < 3; i++) {
      inFlight.push(request(gw, '/v1/chat/completions', { ...bearer('reload'), 'x-stand-in-gate': 'reload' }, body));
      await waitFor(`request ${i + 1} upstream`, () => up.received.length === before + i + 1);
    }
    // Three in flight at ~0.000183 each hold ~0.00055 of 0.001; lowered to 0.0005 by the operator.
    const reloads = () => gw.modelgate.logLines().filter((l) => l.includes('"config reloaded"')).length;
    const r0 = reloads();
    const text = readFileSync(gw.configPath, 'utf8');
    const lowered = text.replace(
      new RegExp(`(id: ${PREFIX}-reload\\n(?:.*\\n){2}    balance: )${BALANCES.reload}`),
      '$10.0005',
    );
    expect(lowered).not.toBe(text);
    writeFileSync(gw.configPath, lowered);
    await waitFor('the reload', () => reloads() > r0);
    const after = await request(gw, '/alt/v1/chat/completions', bearer('reload'), body);
    expect(after.status, after.text.slice(0, 300)).toBe(403);
    up.open('reload');
    expect((await Promise.all(inFlight)).map((s) => s.status)).toEqual([200, 200, 200]);
    await waitFor('three rows', async () => (await rowsOf(store, 'reload')).length === 3);
    const spent = (await rowsOf(store, 'reload')).reduce((s, r) => s + r.cost, 0);
    expect(await balanceOf(store, 'reload')).toBeCloseTo(0.0005 - spent, 12);
    // And raised again: the spending stays.
    const r1 = reloads();
    writeFileSync(gw.configPath, text);
    await waitFor('the second reload', () => reloads() > r1);
    expect(await balanceOf(store, 'reload')).toBeCloseTo(BALANCES.reload - spent, 12);
  });

  it('defended: x-modelgate-* and x-envoy-* headers a client sends change nothing the meter reads: one request upstream, debited exactly what the provider reported', async () => {
    const injected = {
      ...bearer('inject'),
      'x-modelgate-key-id': 'alice',
      'x-modelgate-metered': 'false',
      'x-modelgate-group': 'pro',
      'x-modelgate-decision': 'allow',
      'x-modelgate-reason': 'ok',
      'x-envoy-auth-partial-body': 'true',
      'x-envoy-original-path': '/v1/messages/count_tokens',
      'x-envoy-internal': 'true',
      'x-envoy-decorator-operation': 'count_tokens',
      'x-envoy-upstream-rq-timeout-ms': '1',
      'x-envoy-expected-rq-timeout-ms': '1',
      'x-request-id': 'injected-id',
      'x-forwarded-for': '127.0.0.1',
    };
    const before = up.received.length;
    const sent = await request(gw, '/alt/v1/chat/completions', injected, {
      model: 'gpt-4o-mini',
      max_tokens: 20,
      messages: [{ role: 'user', content: 'injected headers' }],
    });
    expect(sent.status, sent.text.slice(0, 300)).toBe(200);
    const usage = (JSON.parse(sent.text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
    const row = await rowOf(store, 'inject');
    expect(up.received.length - before).toBe(1);
    expect(row).toMatchObject({
      keyId: `${PREFIX}-inject`,
      group: 'basic',
      inputTokens: usage.prompt_tokens,
      outputTokens: usage.completion_tokens,
      priced: true,
    });
    expect(row.estimated ?? undefined).toBeUndefined();
    expect(row.requestId).not.toBe('injected-id');
    expect(await balanceOf(store, 'inject')).toBeCloseTo(BALANCES.inject - row.cost, 12);
  });

  it('defended: alice (12.5) running Claude Code, Codex and gemini-cli request shapes at once (tools, 1-hour cache_control, thinking, reasoning, streams, anthropic-beta, ?beta=true) is served every one', async () => {
    const schema = (i: number) => ({
      type: 'object',
      properties: Object.fromEntries(
        Array.from({ length: 8 }, (_, j) => [`param_${i}_${j}`, { type: 'string', description: 'x'.repeat(80) }]),
      ),
      required: [`param_${i}_0`],
    });
    const system = 'You are Claude Code, an interactive CLI tool. '.repeat(300);
    const claudeCode = {
      model: 'claude-opus-5-5',
      max_tokens: 32000,
      stream: true,
      thinking: { type: 'enabled', budget_tokens: 31999 },
      system: [
        { type: 'text', text: 'You are Claude Code.' },
        { type: 'text', text: system, cache_control: { type: 'ephemeral', ttl: '1h' } },
      ],
      tools: Array.from({ length: 16 }, (_, i) => ({
        name: `Tool${i}`,
        description: 'A tool. '.repeat(40),
        input_schema: schema(i),
      })),
      messages: [
        {
          role: 'user',
          content: [{ type: 'text', text: 'fix the failing test', cache_control: { type: 'ephemeral', ttl: '1h' } }],
        },
      ],
      metadata: { user_id: 'user_abc_account__session_123' },
    };
    const haiku = {
      model: 'claude-3-5-haiku-latest',
      max_tokens: 512,
      stream: true,
      system: [{ type: 'text', text: 'Summarize.' }],
      messages: [{ role: 'user', content: 'title for this conversation' }],
    };
    const claudeHeaders = {
      'x-api-key': DEMO_KEYS.alice,
      'anthropic-version': '2023-06-01',
      'anthropic-beta':
        'claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14,extended-cache-ttl-2025-04-11',
      'x-stand-in-delay-ms': '0',
    };
    const codex = {
      model: 'gpt-6.1-sol',
      instructions: 'You are Codex, a coding agent. '.repeat(300),
      stream: true,
      store: false,
      parallel_tool_calls: false,
      tool_choice: 'auto',
      reasoning: { effort: 'high', summary: 'auto' },
      include: ['reasoning.encrypted_content'],
      prompt_cache_key: '5f0e1d2c-3b4a-4958-8776-655443322110',
      tools: [
        { type: 'function', name: 'shell', description: 'Runs a shell command', strict: false, parameters: schema(99) },
      ],
      input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'fix the failing test' }] }],
    };
    const codexHeaders = { authorization: `Bearer ${DEMO_KEYS.alice}`, 'x-stand-in-delay-ms': '0' };
    const gemini = (thinking: Record<string, unknown>) => ({
      contents: [{ role: 'user', parts: [{ text: 'fix the failing test' }] }],
      systemInstruction: { role: 'user', parts: [{ text: 'You are an interactive CLI agent. '.repeat(300) }] },
      tools: [
        {
          functionDeclarations: Array.from({ length: 12 }, (_, i) => ({
            name: `tool_${i}`,
            description: 'A tool. '.repeat(30),
            parameters: schema(i),
          })),
        },
      ],
      generationConfig: { temperature: 0, topP: 1, thinkingConfig: { includeThoughts: true, ...thinking } },
    });
    const geminiHeaders = { 'x-goog-api-key': DEMO_KEYS.alice, 'x-stand-in-delay-ms': '0' };
    const first = (t: string) => t.length > 0;
    const sent = await Promise.all([
      ...Array.from({ length: 4 }, () => request(gw, '/v1/messages?beta=true', claudeHeaders, claudeCode, first)),
      request(gw, '/alt/v1/messages?beta=true', claudeHeaders, claudeCode, first),
      request(gw, '/v1/messages?beta=true', claudeHeaders, haiku, first),
      request(gw, '/v1/responses', codexHeaders, codex, first),
      request(gw, '/responses', codexHeaders, codex, first),
      request(gw, '/alt/v1/responses', codexHeaders, codex, first),
      request(
        gw,
        '/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse',
        geminiHeaders,
        gemini({ thinkingBudget: -1 }),
        first,
      ),
      request(
        gw,
        '/alt/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse',
        geminiHeaders,
        gemini({ thinkingLevel: 'HIGH' }),
        first,
      ),
      request(
        gw,
        '/v1beta/models/gemini-3.8-flash:streamGenerateContent?alt=sse',
        geminiHeaders,
        gemini({ thinkingBudget: 24576 }),
        first,
      ),
      request(gw, '/v1beta/models/gemini-3.5-flash-lite:generateContent', geminiHeaders, {
        contents: [{ role: 'user', parts: [{ text: 'route: simple or complex?' }] }],
        generationConfig: { responseMimeType: 'application/json', thinkingConfig: { thinkingBudget: 0 } },
      }),
    ]);
    expect(
      sent.map((s) => s.status),
      sent
        .filter((s) => s.status !== 200)
        .map((s) => s.text.slice(0, 300))
        .join('\n'),
    ).toEqual(sent.map(() => 200));
  }, 60_000);
});

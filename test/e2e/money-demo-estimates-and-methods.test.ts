/**
 * What `npm start` brings up (the demo config: soft mode, file store, one replica) against a key
 * holder with a small balance (docs/metering.md, "Overspend": at most balance + M): the input
 * estimate of a small body whose billed prompt is in its JSON keys and numbers (a tool's schema),
 * the demo's coding-agent models against meter.reasoningModels and their output caps, field names
 * written with escapes, and methods and protocol versions other than POST over HTTP/1.1. Every
 * request goes through the real Envoy to the stand-in provider (support/money-upstream.ts), which
 * bills exactly what it produced.
 */
import * as net from 'node:net';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { balanceOfKey, request, withMoneyGateway, withMoneyKeys, type Sent } from '../support/money-client';
import type { MoneyUpstream } from '../support/money-upstream';

const KEYS = [
  'enumTool',
  'keysTool',
  'sol',
  'solAsked',
  'solLong',
  'proLong',
  'enumUsage',
  'escaped',
  'methods',
] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
const BALANCES: Record<KeyName, number> = {
  enumTool: 0.0001,
  keysTool: 10,
  sol: 0.005,
  solAsked: 10,
  solLong: 0.0001,
  proLong: 0.0001,
  enumUsage: 10,
  escaped: 0.0001,
  methods: 10,
};
const PREFIX = 'rt10';

/** The demo config's prices, per million tokens, and output caps (each its provider's own). */
const PRICE = {
  'gpt-4o-mini': { input: 0.15, output: 0.6, cap: 16384 },
  'gpt-6.1-sol': { input: 1.25, output: 10, cap: 128000 },
  'gemini-3.1-pro-preview': { input: 2, output: 12, cap: 65536 },
} as const;
type Model = keyof typeof PRICE;
const cost = (model: Model, input: number, output: number): number =>
  (input * PRICE[model].input + output * PRICE[model].output) / 1e6;
/** M (docs/metering.md, "Overspend"): a single-answer request's body bytes as input plus the model's output cap. */
const bigM = (model: Model, body: unknown): number =>
  cost(model, Buffer.byteLength(JSON.stringify(body)), PRICE[model].cap);

const bearer = (k: KeyName, extra: Record<string, string> = {}): Record<string, string> => ({
  authorization: `Bearer ${keys[k]}`,
  ...extra,
});

async function rowsOf(store: FileStore, k: KeyName): Promise<UsageEntry[]> {
  return (await store.meter!.usage({ limit: 100_000 })).filter((e) => e.keyId === `${PREFIX}-${k}`);
}

/**
 * Sends `body` one request at a time, each once the previous one's row is in the ledger, until the
 * key is refused (or `limit` were served): a key holder spending its balance down as the meter allows.
 */
async function spendDown(
  gw: Gateway,
  store: FileStore,
  k: KeyName,
  body: unknown,
  headers: Record<string, string>,
  limit: number,
): Promise<{ served: number; last: Sent }> {
  let served = 0;
  let last: Sent = { status: 0, text: '' };
  while (served < limit) {
    last = await request(gw, '/v1/chat/completions', { ...bearer(k), ...headers }, body);
    if (last.status !== 200) break;
    served++;
    await waitFor(`row ${served} of ${k}`, async () => (await rowsOf(store, k)).length === served);
  }
  return { served, last };
}

/**
 * A chat request whose prompt is mostly a function tool's parameter schema, kept under the 4 KiB the
 * Check samples for an input estimate: `fill` adds to the schema until the body is about 4,000 bytes.
 */
function toolBody(
  fill: (properties: Record<string, unknown>, i: number) => void,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  const body = {
    model: 'gpt-4o-mini',
    stream: true,
    max_tokens: 1,
    ...extra,
    messages: [{ role: 'user', content: 'hi' }],
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties } } }],
  };
  for (let i = 0; Buffer.byteLength(JSON.stringify(body)) < 3990; i++) fill(properties, i);
  return body;
}

describeE2E('money, estimates and methods: the demo gateway (soft, file store, one replica)', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;
  withMoneyGateway(
    withMoneyKeys(keys, (k) => BALANCES[k as KeyName], PREFIX),
    (started) => ({ up, gw, store } = started),
  );

  // The input estimate of a body kept whole (<= 4 KiB) counts its whole JSON text (estimate.ts
  // jsonInputText), numbers included: a tool schema that is an enum of the integers 0..N is about 2,000
  // tokens in o200k_base (OpenAI bills more: it renders the enum as `0 | 1 | 2 | ...`).
  it("a chat stream without include_usage whose prompt is a tool enum of integers (3,990 bytes, 2,000 billed input tokens) is debited its JSON text's count, within balance + M", async () => {
    const body = toolBody((p, i) => {
      const x = (p.x ??= { type: 'integer', enum: [] as number[] }) as { enum: number[] };
      x.enum.push(i);
    });
    const text = JSON.stringify(body);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(4096);
    // What the provider bills at the least: the body's JSON through o200k_base (its keys, numbers and punctuation).
    const billedInput = countTokens(text);
    const before = await balanceOfKey(store, keys.enumTool);
    const upBefore = up.received.length;
    const { served, last } = await spendDown(gw, store, 'enumTool', body, {}, 400);
    expect(last.status, last.text.slice(0, 300)).toBe(403);
    expect(up.received.length - upBefore).toBe(served);
    const rows = await rowsOf(store, 'enumTool');
    const debited = before - (await balanceOfKey(store, keys.enumTool));
    const billed = served * cost('gpt-4o-mini', billedInput, 1);
    const bound = BALANCES.enumTool + bigM('gpt-4o-mini', body);
    const figures = `served ${served}, one row: ${rows[0].inputTokens} input, ${rows[0].outputTokens} output (${rows[0].estimated}); debited ${debited.toPrecision(6)}; billed ${billed.toPrecision(6)} (${billedInput} input each); bound ${bound.toPrecision(6)}`;
    expect(rows[0].inputTokens, figures).toBeGreaterThanOrEqual(billedInput);
    expect(billed, figures).toBeLessThanOrEqual(bound);
  }, 120_000);

  // JSON keys count too: a tool schema names its parameters there (OpenAI renders each property name into the
  // prompt).
  it("a chat stream without include_usage whose tool schema has 60 long property names is debited its whole JSON text's count, keys included", async () => {
    const body = toolBody(
      (p, i) => {
        p[`the_quarterly_revenue_of_the_region_numbered_${i}_in_thousands`] = {};
      },
      { max_tokens: 5 },
    );
    const billedInput = countTokens(JSON.stringify(body));
    const sent = await request(gw, '/v1/chat/completions', bearer('keysTool'), body);
    expect(sent.status, sent.text.slice(0, 300)).toBe(200);
    await waitFor('the row of keysTool', async () => (await rowsOf(store, 'keysTool')).length === 1);
    const [row] = await rowsOf(store, 'keysTool');
    expect(row.estimated).toBe('stream_without_usage');
    expect(
      row.inputTokens,
      `debited ${row.inputTokens} input tokens; o200k_base counts ${billedInput} in the body`,
    ).toBeGreaterThanOrEqual(billedInput);
  });

  it('defended: the same enum body with include_usage is debited what the provider reported (the usage path is exact; only the estimate misses)', async () => {
    const body = toolBody(
      (p, i) => {
        const x = (p.x ??= { type: 'integer', enum: [] as number[] }) as { enum: number[] };
        x.enum.push(i);
      },
      { stream_options: { include_usage: true } },
    );
    const sent = await request(gw, '/v1/chat/completions', bearer('enumUsage'), body);
    expect(sent.status, sent.text.slice(0, 300)).toBe(200);
    const usage = JSON.parse(
      sent.text
        .split('\n\n')
        .filter((e) => e.includes('"usage"'))
        .pop()!
        .slice('data: '.length),
    ).usage as { prompt_tokens: number; completion_tokens: number };
    await waitFor('the row of enumUsage', async () => (await rowsOf(store, 'enumUsage')).length === 1);
    const [row] = await rowsOf(store, 'enumUsage');
    expect(row.estimated ?? null).toBeNull();
    expect([row.inputTokens, row.outputTokens]).toEqual([usage.prompt_tokens, usage.completion_tokens]);
  });

  // gpt-6* is in meter.reasoningModels' defaults: the demo's gpt-6.1-sol (Codex CLI's default model) reasons
  // at its default effort without reasoning_effort, so a chat stream without include_usage is debited its
  // maximum output, not the text it showed.
  it("gpt-6.1-sol (the demo's coding-agent model, in meter.reasoningModels): chat streams without usage are debited their maximum, not their visible text, within the bound", async () => {
    const REASONING = 10_000;
    const body = { model: 'gpt-6.1-sol', stream: true, messages: [{ role: 'user', content: 'refactor this' }] };
    const before = await balanceOfKey(store, keys.sol);
    const { served, last } = await spendDown(
      gw,
      store,
      'sol',
      body,
      { 'x-stand-in-reasoning': String(REASONING) },
      100,
    );
    expect(last.status, last.text.slice(0, 300)).toBe(403);
    const rows = await rowsOf(store, 'sol');
    const debited = before - (await balanceOfKey(store, keys.sol));
    // The stand-in's visible answer: 30 tokens (DEFAULT_TOKENS); its input: 2 words. Billed: those plus the reasoning.
    const billedEach = cost('gpt-6.1-sol', 2, 30 + REASONING);
    const billed = served * billedEach;
    const bound = BALANCES.sol + bigM('gpt-6.1-sol', body);
    const figures = `served ${served}, one row: ${rows[0].inputTokens} input, ${rows[0].outputTokens} output (${rows[0].estimated}); debited ${debited.toPrecision(6)}; billed ${billed.toPrecision(6)} (${billedEach.toPrecision(6)} each); bound ${bound.toPrecision(6)}`;
    expect(rows[0].outputTokens, figures).toBeGreaterThanOrEqual(30 + REASONING);
    expect(billed, figures).toBeLessThanOrEqual(bound);
  }, 120_000);

  // The demo config names each priced model's cap (the provider's own: GPT-5's 128,000, Claude Opus 4.5's
  // 64,000, Gemini 3 Pro's 65,536) and modelgate warns of a priced model without one: held at
  // meter.maxOutputTokens (32,768), a request naming no maximum could have the provider write past it.
  it('gpt-6.1-sol, a request naming no maximum: the provider produces its own cap (128,000), four times meter.maxOutputTokens, on a balance of 0.0001: within balance + M: the demo config names that cap', async () => {
    const OUT = 128_000;
    const body = { model: 'gpt-6.1-sol', messages: [{ role: 'user', content: 'write the whole module' }] };
    const before = await balanceOfKey(store, keys.solLong);
    const sent = await request(
      gw,
      '/v1/chat/completions',
      bearer('solLong', { 'x-stand-in-tokens': String(OUT) }),
      body,
    );
    expect(sent.status, sent.text.slice(0, 300)).toBe(200);
    await waitFor('the row of solLong', async () => (await rowsOf(store, 'solLong')).length === 1);
    const [row] = await rowsOf(store, 'solLong');
    const after = await balanceOfKey(store, keys.solLong);
    const billed = cost('gpt-6.1-sol', 5, OUT);
    const bound = BALANCES.solLong + bigM('gpt-6.1-sol', body);
    const figures = `row: ${row.inputTokens} input, ${row.outputTokens} output (${row.estimated ?? 'provider'}); balance ${before} -> ${after}; billed ${billed.toPrecision(6)}; bound ${bound.toPrecision(6)}`;
    expect(row.outputTokens, figures).toBe(OUT);
    expect(before - after, figures).toBeLessThanOrEqual(bound);
  }, 60_000);

  // The same for Gemini, where a request without generationConfig.maxOutputTokens gets the model's own
  // maximum (65,536 for Gemini 3 Pro).
  it('gemini-3.1-pro-preview, a request naming no maximum: the provider produces its own cap (65,536), twice meter.maxOutputTokens, on a balance of 0.0001: within balance + M: the demo config names that cap', async () => {
    const OUT = 65_536;
    const body = { contents: [{ role: 'user', parts: [{ text: 'write the whole module' }] }] };
    const before = await balanceOfKey(store, keys.proLong);
    const sent = await request(
      gw,
      '/v1beta/models/gemini-3.1-pro-preview:generateContent',
      { 'x-goog-api-key': keys.proLong, 'x-stand-in-tokens': String(OUT) },
      body,
    );
    expect(sent.status, sent.text.slice(0, 300)).toBe(200);
    await waitFor('the row of proLong', async () => (await rowsOf(store, 'proLong')).length === 1);
    const [row] = await rowsOf(store, 'proLong');
    const after = await balanceOfKey(store, keys.proLong);
    const bound = BALANCES.proLong + bigM('gemini-3.1-pro-preview', body);
    const figures = `row: ${row.inputTokens} input, ${row.outputTokens} output (${row.estimated ?? 'provider'}); balance ${before} -> ${after}; debited ${(before - after).toPrecision(6)}; bound ${bound.toPrecision(6)}`;
    expect(row.outputTokens, figures).toBe(OUT);
    expect(before - after, figures).toBeLessThanOrEqual(bound);
  }, 60_000);

  it('defended: gpt-6.1-sol asked for reasoning (reasoning_effort, as Codex sends reasoning) in a chat stream without usage is debited its maximum output', async () => {
    const body = {
      model: 'gpt-6.1-sol',
      stream: true,
      max_tokens: 500,
      reasoning_effort: 'low',
      messages: [{ role: 'user', content: 'refactor this' }],
    };
    const sent = await request(gw, '/v1/chat/completions', bearer('solAsked', { 'x-stand-in-reasoning': '400' }), body);
    expect(sent.status, sent.text.slice(0, 300)).toBe(200);
    await waitFor('the row of solAsked', async () => (await rowsOf(store, 'solAsked')).length === 1);
    const [row] = await rowsOf(store, 'solAsked');
    expect(row.outputTokens).toBe(500);
  });

  it('defended: "n" and "candidateCount" written with escapes ("\\u006e", "candidate\\u0043ount") are read as the provider reads them: alone, many answers on a small balance are refused; beside a plain one, body_invalid', async () => {
    const upBefore = up.received.length;
    const raw = async (
      path: string,
      json: string,
      headers: Record<string, string>,
    ): Promise<{ status: number; reason: string }> => {
      const reply = await gw.send('POST', path, {
        headers: Object.entries({ 'content-type': 'application/json', ...headers }),
        body: json,
      });
      return { status: reply.status, reason: String(reply.headers['x-modelgate-reason'] ?? '') };
    };
    const msgs = '"messages":[{"role":"user","content":"hi"}]';
    expect(await raw('/v1/chat/completions', `{"model":"gpt-4o-mini","\\u006e":8,${msgs}}`, bearer('escaped'))).toEqual(
      { status: 403, reason: 'balance_insufficient' },
    );
    expect(
      await raw('/v1/chat/completions', `{"model":"gpt-4o-mini","n":1,"\\u006e":8,${msgs}}`, bearer('escaped')),
    ).toEqual({ status: 400, reason: 'body_invalid' });
    const gem = '"contents":[{"role":"user","parts":[{"text":"hi"}]}]';
    expect(
      await raw(
        '/v1beta/models/gemini-2.5-flash:generateContent',
        `{${gem},"generationConfig":{"candidate\\u0043ount":8,"maxOutputTokens":40}}`,
        { 'x-goog-api-key': keys.escaped },
      ),
    ).toEqual({ status: 403, reason: 'balance_insufficient' });
    expect(
      await raw(
        '/v1beta/models/gemini-2.5-flash:generateContent',
        `{${gem},"generationConfig":{"candidateCount":1,"candidate\\u0043ount":8}}`,
        { 'x-goog-api-key': keys.escaped },
      ),
    ).toEqual({ status: 400, reason: 'body_invalid' });
    expect(up.received.length).toBe(upBefore);
  });

  it('defended: other methods (PUT, PATCH, DELETE, OPTIONS, HEAD), HTTP/1.0 and an h2c upgrade on the protocol paths: refused (405, 426), or served (h2c is ignored) with its row', async () => {
    const chat = JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
    const seen: string[] = [];
    const upBefore = up.received.length;
    for (const method of ['PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD']) {
      for (const path of [
        '/v1/chat/completions',
        '/v1/messages',
        '/v1beta/models/gemini-2.5-flash:generateContent',
        '/alt/v1/responses',
      ]) {
        const reply = await gw.send(method, path, {
          headers: Object.entries({
            'content-type': 'application/json',
            ...bearer('methods'),
            'x-goog-api-key': keys.methods,
          }),
          body: chat,
        });
        seen.push(`${method} ${path} -> ${reply.status}`);
      }
    }
    // HTTP/1.0 (with a content-length) and an HTTP/1.1 h2c upgrade, written by hand.
    const url = new URL(gw.baseUrl);
    const rawRequest = (head: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const s = net.connect(Number(url.port), url.hostname, () =>
          s.write(
            `${head}content-type: application/json\r\nauthorization: Bearer ${keys.methods}\r\ncontent-length: ${Buffer.byteLength(chat)}\r\n\r\n${chat}`,
          ),
        );
        let got = '';
        s.setEncoding('utf8');
        s.on('data', (c: string) => {
          got += c;
          // One answer is all this needs (its head and any body): the connection may stay open.
          if (/\r\n\r\n/.test(got)) s.destroy();
        });
        s.on('end', () => resolve(got));
        s.on('close', () => resolve(got));
        s.on('error', reject);
      });
    seen.push(
      `HTTP/1.0 -> ${(await rawRequest('POST /v1/chat/completions HTTP/1.0\r\nhost: x\r\n')).split('\r\n')[0]}`,
    );
    seen.push(
      `h2c -> ${(await rawRequest('POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQAAP__\r\n')).split('\r\n')[0]}`,
    );
    const reached = up.received.length - upBefore;
    // Every other method is 405, HTTP/1.0 426 Upgrade Required; the h2c upgrade header is ignored and
    // the request served as HTTP/1.1: it is the one request upstream, and it has its row.
    expect(
      seen.filter((l) => /^[A-Z]+ \//.test(l)).every((l) => l.endsWith('-> 405')),
      seen.join('\n'),
    ).toBe(true);
    expect(
      seen.find((l) => l.startsWith('HTTP/1.0')),
      seen.join('\n'),
    ).toMatch(/ 426 /);
    expect(reached, seen.join('\n')).toBeLessThanOrEqual(1);
    await waitFor(
      'a row for every request that reached the provider',
      async () => (await rowsOf(store, 'methods')).length >= reached,
    );
    const rows = await rowsOf(store, 'methods');
    expect(rows.length, seen.join('\n')).toBe(reached);
    for (const r of rows) expect(r.estimated ?? null, seen.join('\n')).toBeNull();
  });
});

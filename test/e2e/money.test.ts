/**
 * Nothing is served unpaid: every money attack a key holder with little left could try, through a
 * real Envoy and modelgate, against a stand-in provider that behaves as real providers do
 * (support/money-upstream.ts). Each case asserts the ledger: the balance moved by the provider's
 * usage or by a flagged estimate, never by nothing; and the overspend stays within its stated bound.
 */
import { readFileSync } from 'node:fs';
import * as http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashKey } from '../../src/contract/key-format';
import { meterStatePath } from '../../src/server/service';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { request, type Sent } from '../support/money-client';
import { DEFAULT_TOKENS, startMoneyUpstream, type MoneyUpstream } from '../support/money-upstream';

const PRICE = { input: 0.15, output: 0.6 };
/** gpt-4o-mini's cap in the demo config: a request's maximum output when it names none. */
const CAP = 16384;

const bearer = (key: string, extra: Record<string, string> = {}): Record<string, string> => ({
  authorization: `Bearer ${key}`,
  ...extra,
});
const msg = (content: string) => [{ role: 'user', content }];

describeE2E('money: nothing served unpaid, soft mode (file store, Envoy 1.40 bundle)', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;
  beforeAll(async () => {
    up = await startMoneyUpstream();
    const at = { host: '127.0.0.1', port: up.port };
    gw = await startGateway({ upstreamTargets: { chat: at, messages: at, generative: at, alt: at } });
    store = gw.modelgate.service!.store as FileStore;
  }, 60_000);
  afterAll(async () => {
    await gw?.close();
    await up?.close();
  });

  const balance = async (key: string): Promise<number> => (await store.findKey(hashKey(key)))!.balance as number;
  const rows = (): Promise<UsageEntry[]> => store.meter!.usage({ limit: 10_000 });
  /** The ledger row of the next settled request (waits for it). */
  const nextRow = async (before: number): Promise<UsageEntry> => {
    await waitFor('the ledger row', async () => (await rows()).length > before, 15_000);
    return (await rows())[0];
  };
  const settle = async <T>(send: () => Promise<T>): Promise<{ sent: T; row: UsageEntry; paid: number }> => {
    const before = (await rows()).length;
    const alice = await balance(DEMO_KEYS.alice);
    const sent = await send();
    const row = await nextRow(before);
    expect(await balance(DEMO_KEYS.alice)).toBeCloseTo(alice - row.cost, 10);
    return { sent, row, paid: alice - (await balance(DEMO_KEYS.alice)) };
  };

  it('debits an estimate for chat streams without include_usage, however `stream` is spelled', async () => {
    for (const stream of [true, 1, 'true']) {
      const { sent, row, paid } = await settle(() =>
        request(gw, '/v1/chat/completions', bearer(DEMO_KEYS.alice), {
          model: 'gpt-4o-mini',
          stream,
          messages: msg('stream me'),
        }),
      );
      expect(sent.status).toBe(200);
      expect(row).toMatchObject({ keyId: 'alice', estimated: 'stream_without_usage', priced: true });
      // Every token the client got is paid for (the estimate counts the text it carried).
      expect(row.outputTokens).toBeGreaterThanOrEqual(DEFAULT_TOKENS);
      expect(row.outputTokens).toBeLessThan(DEFAULT_TOKENS * 2);
      expect(paid).toBeGreaterThan(0);
    }
  });

  const CUTS: Array<{ name: string; path: string; headers: Record<string, string>; body: unknown; cut: RegExp }> = [
    {
      name: 'a chat stream cut at finish_reason (include_usage asked)',
      path: '/v1/chat/completions',
      headers: bearer(DEMO_KEYS.alice),
      body: { model: 'gpt-4o-mini', stream: true, stream_options: { include_usage: true }, messages: msg('cut me') },
      cut: /"finish_reason":"stop"/,
    },
    {
      name: 'a responses stream cut at output_text.done',
      path: '/v1/responses',
      headers: bearer(DEMO_KEYS.alice),
      body: { model: 'gpt-4o-mini', stream: true, input: 'cut me' },
      cut: /response\.output_text\.done/,
    },
    {
      name: 'a messages stream cut at content_block_stop',
      path: '/v1/messages',
      headers: { 'x-api-key': DEMO_KEYS.alice, 'anthropic-version': '2023-06-01' },
      body: { model: 'claude-3-5-haiku-latest', max_tokens: 100, stream: true, messages: msg('cut me') },
      cut: /content_block_stop/,
    },
    {
      name: 'a Gemini SSE stream cut before its last chunk',
      path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
      headers: { 'x-goog-api-key': DEMO_KEYS.alice },
      body: { contents: [{ role: 'user', parts: [{ text: 'cut me' }] }] },
      cut: /(?:data: .*\n\n){25}/,
    },
  ];
  for (const c of CUTS) {
    it(`debits what the client got for ${c.name}`, async () => {
      const { sent, row } = await settle(() =>
        request(gw, c.path, { ...c.headers, 'x-stand-in-delay-ms': '5' }, c.body, (t) => c.cut.test(t)),
      );
      expect(sent.status).toBe(200);
      expect(row.estimated).toBe('incomplete');
      expect(row.inputTokens).toBeGreaterThan(0);
      // At least the tokens the client received before it left (most of the answer).
      expect(row.outputTokens).toBeGreaterThanOrEqual(Math.floor(DEFAULT_TOKENS * 0.75));
      expect(row.cost).toBeGreaterThan(0);
    });
  }

  it('reads usage from a gzip answer (Envoy decompresses it) and estimates one it cannot read (zstd)', async () => {
    const gz = await settle(() =>
      request(
        gw,
        '/v1/chat/completions',
        bearer(DEMO_KEYS.alice, { 'accept-encoding': 'zstd', 'x-stand-in-encoding': 'gzip' }),
        { model: 'gpt-4o-mini', messages: msg('compressed') },
      ),
    );
    expect(gz.sent.status).toBe(200);
    expect(gz.row.estimated).toBeUndefined();
    expect(gz.row.outputTokens).toBe(DEFAULT_TOKENS);
    // The provider was asked only for what the meter reads, whatever the client accepted.
    expect(up.received.at(-1)!.headers['accept-encoding']).toBe('gzip');
    const z = await settle(() =>
      request(
        gw,
        '/v1/chat/completions',
        bearer(DEMO_KEYS.alice, { 'accept-encoding': 'zstd', 'x-stand-in-encoding': 'zstd' }),
        { model: 'gpt-4o-mini', messages: msg('compressed') },
      ),
    );
    expect(z.row.estimated).toBe('undecodable');
    expect(z.row.outputTokens).toBeGreaterThan(0);
  });

  for (const usage of ['1e300', '1e307', '-5', '"12"', '"NaN"']) {
    it(`replaces implausible usage (${usage}) with a flagged estimate and keeps every figure finite`, async () => {
      const { row } = await settle(() =>
        request(gw, '/v1/chat/completions', bearer(DEMO_KEYS.alice, { 'x-stand-in-usage': usage }), {
          model: 'gpt-4o-mini',
          messages: msg('absurd usage'),
        }),
      );
      expect(row.estimated).toBe('implausible');
      expect(Number.isFinite(row.cost)).toBe(true);
      expect(row.outputTokens).toBeGreaterThanOrEqual(DEFAULT_TOKENS);
      expect(row.outputTokens).toBeLessThan(DEFAULT_TOKENS * 2);
      expect(Number.isFinite(await balance(DEMO_KEYS.alice))).toBe(true);
      store.meter!.flush();
      const state = JSON.parse(readFileSync(meterStatePath(gw.configPath, null), 'utf8')) as {
        spent: Record<string, unknown>;
      };
      expect(Object.values(state.spent).every((n) => typeof n === 'number' && Number.isFinite(n))).toBe(true);
    });
  }

  it('estimates an answer that reports no usage at all', async () => {
    const { row } = await settle(() =>
      request(
        gw,
        '/v1/messages',
        { 'x-api-key': DEMO_KEYS.alice, 'anthropic-version': '2023-06-01', 'x-stand-in-usage': 'omit' },
        { model: 'claude-3-5-haiku-latest', max_tokens: 100, messages: msg('no usage') },
      ),
    );
    expect(row).toMatchObject({ estimated: 'no_usage', priced: true });
    expect(row.outputTokens).toBeGreaterThanOrEqual(DEFAULT_TOKENS);
  });

  for (const method of ['embedContent', 'batchEmbedContents']) {
    it(`estimates Gemini's ${method}, whose answer has no usage`, async () => {
      const body =
        method === 'embedContent'
          ? { content: { parts: [{ text: 'embed these words please' }] } }
          : { requests: [{ content: { parts: [{ text: 'embed these words please' }] } }] };
      const { sent, row } = await settle(() =>
        request(gw, `/v1beta/models/gemini-2.5-flash:${method}`, { 'x-goog-api-key': DEMO_KEYS.alice }, body),
      );
      expect(sent.status).toBe(200);
      expect(row).toMatchObject({ estimated: 'no_usage', outputTokens: 0 });
      expect(row.inputTokens).toBeGreaterThan(0);
      expect(row.cost).toBeGreaterThan(0);
    });
  }

  it('does not let a lone request on a small balance ask for many answers (n: 128) unless the balance covers them', async () => {
    const before = await balance(DEMO_KEYS.trial);
    const ledger = (await store.meter!.usage({ keyId: 'trial', limit: 1000 })).length;
    for (const n of [128, '8', 2]) {
      const a = await request(gw, '/v1/chat/completions', bearer(DEMO_KEYS.trial), {
        model: 'gpt-4o-mini',
        n,
        max_tokens: 16384,
        messages: msg('many answers'),
      });
      expect(a.status, String(n)).toBe(403);
      expect(a.text).toContain('balance_insufficient');
      expect(a.text).toContain(`${Number(n)} answers`);
    }
    expect(await balance(DEMO_KEYS.trial)).toBe(before);
    expect((await store.meter!.usage({ keyId: 'trial', limit: 1000 })).length).toBe(ledger);
  });

  it('holds a small balance against 200 concurrent streams: one is served at a time, overspend at most one request', async () => {
    const before = await balance(DEMO_KEYS.trial);
    const body = { model: 'gpt-4o-mini', stream: true, messages: msg('all at once') };
    const answers = await Promise.all(
      Array.from({ length: 200 }, () =>
        request(gw, '/v1/chat/completions', bearer(DEMO_KEYS.trial, { 'x-stand-in-delay-ms': '5' }), body),
      ),
    );
    const served = answers.filter((a) => a.status === 200).length;
    expect(served).toBeGreaterThanOrEqual(1);
    expect(
      answers.filter((a) => a.status !== 200).every((a) => a.status === 403 && a.text.includes('balance_insufficient')),
    ).toBe(true);
    await waitFor('every settlement', () => gw.modelgate.service!.meter.settledAll, 15_000);
    const spent = before - (await balance(DEMO_KEYS.trial));
    // The bound (docs/metering.md): the balance plus one request's maximum per replica.
    const oneMax = (Buffer.byteLength(JSON.stringify(body)) * PRICE.input + CAP * PRICE.output) / 1e6;
    expect(spent).toBeGreaterThan(0);
    expect(spent).toBeLessThanOrEqual(before + oneMax);
    // What was served was paid for: one ledger row each.
    expect((await store.meter!.usage({ keyId: 'trial', limit: 1000 })).length).toBeGreaterThanOrEqual(served);
  });

  it('holds it against 500 streams multiplexed on one HTTP/2 connection', async () => {
    const before = await balance(DEMO_KEYS.trial);
    const session = http2.connect(gw.baseUrl);
    const body = JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: msg('one connection') });
    const statuses = await Promise.all(
      Array.from(
        { length: 500 },
        () =>
          new Promise<number>((resolve) => {
            const req = session.request({
              ':method': 'POST',
              ':path': '/v1/chat/completions',
              authorization: `Bearer ${DEMO_KEYS.trial}`,
              'content-type': 'application/json',
            });
            let status = 0;
            req.on('response', (h) => (status = Number(h[':status'])));
            req.on('data', () => {});
            req.on('end', () => resolve(status));
            req.on('error', () => resolve(status));
            req.end(body);
          }),
      ),
    );
    session.close();
    await waitFor('every settlement', () => gw.modelgate.service!.meter.settledAll, 15_000);
    const spent = before - (await balance(DEMO_KEYS.trial));
    const oneMax = (Buffer.byteLength(body) * PRICE.input + CAP * PRICE.output) / 1e6;
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(1);
    expect(spent).toBeLessThanOrEqual(Math.max(0, before) + oneMax);
  });
});

describeE2E('money: strict mode (file store)', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;
  beforeAll(async () => {
    up = await startMoneyUpstream();
    const at = { host: '127.0.0.1', port: up.port };
    gw = await startGateway({
      config: (demo) => demo.replace('  mode: soft ', '  mode: strict '),
      upstreamTargets: { chat: at, messages: at, generative: at, alt: at },
    });
    store = gw.modelgate.service!.store as FileStore;
  }, 60_000);
  afterAll(async () => {
    await gw?.close();
    await up?.close();
  });
  const balance = async (key: string): Promise<number> => (await store.findKey(hashKey(key)))!.balance as number;

  it('never lets a request spend past its reservation: n, candidateCount, snake case, no max named, previous_response_id', async () => {
    // trial: 0.00006. Each of these would spend past it if the gateway read less than the upstream does.
    const cases: Array<[string, Record<string, string>, unknown]> = [
      [
        '/v1/chat/completions',
        bearer(DEMO_KEYS.trial),
        { model: 'gpt-4o-mini', max_tokens: 20, n: 128, messages: msg('many answers') },
      ],
      [
        '/v1/chat/completions',
        bearer(DEMO_KEYS.trial),
        { model: 'gpt-4o-mini', max_tokens: 20, n: '8', messages: msg('many answers') },
      ],
      ['/v1/chat/completions', bearer(DEMO_KEYS.trial), { model: 'gpt-4o-mini', messages: msg('no maximum named') }],
      [
        '/v1/responses',
        bearer(DEMO_KEYS.trial),
        { model: 'gpt-4o-mini', max_output_tokens: 10, previous_response_id: 'resp_earlier', input: 'go on' },
      ],
      [
        '/v1beta/models/gemini-2.5-flash:generateContent',
        { 'x-goog-api-key': DEMO_KEYS.trial },
        { contents: [], generationConfig: { maxOutputTokens: 5, candidateCount: 8 } },
      ],
      [
        '/v1beta/models/gemini-2.5-flash:generateContent',
        { 'x-goog-api-key': DEMO_KEYS.trial },
        { contents: [], generation_config: { max_output_tokens: 400 } },
      ],
    ];
    for (const [path, headers, body] of cases) {
      const before = await balance(DEMO_KEYS.trial);
      const sent = await request(gw, path, headers, body);
      if (sent.status === 200) await waitFor('the settlement', () => gw.modelgate.service!.meter.settledAll);
      else expect(sent.text, JSON.stringify(body)).toContain('balance_insufficient');
      expect(await balance(DEMO_KEYS.trial), JSON.stringify(body)).toBeGreaterThanOrEqual(0);
      expect(await balance(DEMO_KEYS.trial)).toBeLessThanOrEqual(before);
    }
  });

  it('settles a cut stream instead of releasing its reservation', async () => {
    const rowsBefore = (await store.meter!.usage({ keyId: 'alice', limit: 1000 })).length;
    const before = await balance(DEMO_KEYS.alice);
    const sent = await request(
      gw,
      '/v1/chat/completions',
      bearer(DEMO_KEYS.alice, { 'x-stand-in-delay-ms': '5' }),
      {
        model: 'gpt-4o-mini',
        max_tokens: 50,
        stream: true,
        stream_options: { include_usage: true },
        messages: msg('cut me'),
      },
      (t) => /"finish_reason":"stop"/.test(t),
    );
    expect(sent.status).toBe(200);
    await waitFor(
      'the settlement',
      async () => (await store.meter!.usage({ keyId: 'alice', limit: 1000 })).length > rowsBefore,
    );
    const [row] = await store.meter!.usage({ keyId: 'alice', limit: 1 });
    expect(row.estimated).toBe('incomplete');
    expect(row.outputTokens).toBeGreaterThanOrEqual(37);
    expect(await balance(DEMO_KEYS.alice)).toBeCloseTo(before - row.cost, 10);
  });
});

describe('money: a restart', () => {
  describeE2E('while streams are in flight (modelgate serve, SIGTERM)', () => {
    let up: MoneyUpstream;
    let gw: Gateway;
    beforeAll(async () => {
      up = await startMoneyUpstream();
      const at = { host: '127.0.0.1', port: up.port };
      gw = await startGateway({
        modelgate: 'process',
        config: (demo) => demo.replace('  drainSeconds: 25 ', '  drainSeconds: 10 '),
        upstreamTargets: { chat: at, messages: at, generative: at, alt: at },
      });
    }, 60_000);
    afterAll(async () => {
      await gw?.close();
      await up?.close();
    });

    it('drains: every stream in flight when modelgate is told to stop is reported and paid for', async () => {
      const body = {
        model: 'gpt-4o-mini',
        stream: true,
        stream_options: { include_usage: true },
        messages: msg('keep streaming'),
      };
      // 30 tokens 40 ms apart: about 1.2 s each.
      const streams = Array.from({ length: 20 }, () =>
        request(gw, '/v1/chat/completions', bearer(DEMO_KEYS.alice, { 'x-stand-in-delay-ms': '40' }), body),
      );
      await waitFor('the streams to start', () => up.received.length >= 20);
      gw.modelgate.kill('SIGTERM');
      const answers = await Promise.all(streams);
      expect(answers.map((a) => `${a.status} ${a.text.includes('[DONE]')}`)).toEqual(Array(20).fill('200 true'));
      await waitFor(
        'modelgate to exit',
        () => gw.modelgate.logLines().some((l) => l.includes('"modelgate stopped"')),
        20_000,
      );
      const state = JSON.parse(readFileSync(meterStatePath(gw.configPath, null), 'utf8')) as { usage: UsageEntry[] };
      const paid = state.usage.filter((u) => u.keyId === 'alice');
      expect(paid).toHaveLength(20);
      // The provider's own usage: each reported in full during the drain.
      expect(paid.map((u) => `${u.estimated ?? 'exact'} ${u.outputTokens}`)).toEqual(
        Array(20).fill(`exact ${DEFAULT_TOKENS}`),
      );
      await gw.modelgate.restart();
    });
  });
});

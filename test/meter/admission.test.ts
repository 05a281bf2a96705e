/**
 * The meter's word at Check time, through a real modelgate (file store): every billable request is
 * held in flight at its maximum cost; soft mode lets a key with a positive balance run one request
 * and more only while the balance covers their maximum; strict mode reserves the maximum in the
 * store; `unmeteredStreams: deny` refuses chat streams that would report no usage, reading
 * `stream` as a lax upstream does.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load';
import { uncappedPricedModels } from '../../src/meter/admission';
import { tokensCost } from '../../src/meter/policy/hold';
import type { FileStore } from '../../src/store/file-store';
import { DEMO_KEYS } from '../support/demo-keys';
import {
  DEMO_CONFIG,
  jsonChat,
  deniedHeader,
  reasonOf,
  startHarness,
  tempConfig,
  type Harness,
} from '../support/service-harness';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const demo = readFileSync(DEMO_CONFIG, 'utf8');
const strict = (): string => demo.replace('  mode: soft ', '  mode: strict ');
const chat = jsonChat;
const PRICE = { input: 0.15, output: 0.6, cachedInput: null };

describe('soft mode (the default)', () => {
  it('lets a key with a small balance run one request at a time, whatever it sends at once', async () => {
    h = await startHarness();
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
    // trial's 0.00006 covers no request's maximum (16,384 output tokens of gpt-4o-mini), so the
    // first is allowed (its balance is positive) and every other one while it is in flight is not.
    const answers = await Promise.all(Array.from({ length: 50 }, () => h!.check(chat(DEMO_KEYS.trial, body))));
    const reasons = answers.map(reasonOf);
    expect(reasons.filter((r) => r === 'allowed')).toHaveLength(1);
    expect(reasons.filter((r) => r === 'balance_insufficient')).toHaveLength(49);
    const denied = answers.find((a) => reasonOf(a) === 'balance_insufficient')!;
    expect(deniedHeader(denied, 'x-modelgate-hint')).toMatch(
      /^the key's balance \(0\.00006\) minus what its 1 request in flight may cost \([0-9.]+\) cannot cover this request's maximum cost \([0-9.]+\): wait for them to finish/,
    );
    // Settled, it leaves room again.
    const id = h.logs.decisions().find((d) => d.reason === 'allowed')!.requestId as string;
    await h.service.meter.deps.store!.debit({
      requestId: id,
      keyId: 'trial',
      group: 'basic',
      model: 'gpt-4o-mini',
      protocol: 'chat',
      inputTokens: 1,
      outputTokens: 25,
      cachedInputTokens: 0,
      price: PRICE,
    });
    h.service.meter.deps.inFlight.take(id);
    expect(reasonOf(await h.check(chat(DEMO_KEYS.trial, body)))).toBe('allowed');
  });

  it('lets a key run as many at once as its balance covers at their maximum (plus one)', async () => {
    h = await startHarness();
    const body = { model: 'gpt-4o-mini', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
    const each = tokensCost(Buffer.byteLength(JSON.stringify(body)), 100, PRICE);
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(reasonOf(await h.check(chat(DEMO_KEYS.trial, body))));
    // The first always; then each one while balance - held >= its maximum.
    const fits = 1 + Math.floor((0.00006 - each) / each) + 1;
    expect(answers.filter((r) => r === 'allowed')).toHaveLength(Math.min(10, fits));
  });

  it('lets the lone request a small balance does not cover ask for one answer only (n, candidateCount must fit)', async () => {
    h = await startHarness();
    for (const n of [2, 128, '8']) {
      const a = await h.check(
        chat(DEMO_KEYS.trial, { model: 'gpt-4o-mini', n, messages: [{ role: 'user', content: 'hi' }] }),
      );
      expect(reasonOf(a), String(n)).toBe('balance_insufficient');
      expect(deniedHeader(a, 'x-modelgate-hint')).toMatch(
        new RegExp(
          `^the key's balance \\(0\\.00006\\) cannot cover this request's maximum cost \\([0-9.]+\\) for its ${Number(n)} answers \\(n, candidateCount\\): ask for one answer`,
        ),
      );
    }
    expect(h.service.meter.deps.inFlight.count('trial')).toBe(0);
    // One answer (n: 1) is the lone request soft mode allows; many answers that the balance covers are allowed too.
    expect(
      reasonOf(
        await h.check(
          chat(DEMO_KEYS.trial, { model: 'gpt-4o-mini', n: 1, messages: [{ role: 'user', content: 'hi' }] }),
        ),
      ),
    ).toBe('allowed');
    expect(
      reasonOf(
        await h.check(
          chat(DEMO_KEYS.alice, { model: 'gpt-4o-mini', n: 4, messages: [{ role: 'user', content: 'hi' }] }),
        ),
      ),
    ).toBe('allowed');
  });

  it("lets the lone request a small balance does not cover name no maximum output above the model's cap, nor, for a model without one, above meter.maxOutputTokens", async () => {
    // gpt-4o-mini without its maxOutputTokens: the request's own maximum would count, uncapped.
    const capless = demo.replace(
      /(- name: gpt-4o-mini\s+# any protocol style\n\s+price: [^\n]+\n)\s+maxOutputTokens: 16384[^\n]*\n/,
      '$1',
    );
    expect(capless).not.toEqual(demo);
    h = await startHarness({ configPath: tempConfig(capless) });
    const a = await h.check(
      chat(DEMO_KEYS.trial, {
        model: 'gpt-4o-mini',
        max_tokens: 1_000_000,
        messages: [{ role: 'user', content: 'hi' }],
      }),
    );
    expect(reasonOf(a)).toBe('balance_insufficient');
    expect(deniedHeader(a, 'x-modelgate-hint')).toMatch(
      /with a maximum output of 1000000 tokens, above the usual cap of 32768: lower max_tokens/,
    );
    expect(
      reasonOf(
        await h.check(
          chat(DEMO_KEYS.trial, {
            model: 'gpt-4o-mini',
            max_tokens: 32768,
            messages: [{ role: 'user', content: 'hi' }],
          }),
        ),
      ),
    ).toBe('allowed');
  });

  it("lets the lone request a small balance does not cover hold a Gemini thinking budget only up to the model's cap", async () => {
    h = await startHarness();
    const gemini = (budget: number) => ({
      method: 'POST',
      path: '/v1beta/models/gemini-2.5-flash:generateContent',
      headers: [
        ['x-goog-api-key', DEMO_KEYS.trial],
        ['content-type', 'application/json'],
      ] as [string, string][],
      body: JSON.stringify({
        contents: [{ parts: [{ text: 'hi' }] }],
        generationConfig: { maxOutputTokens: 100, thinkingConfig: { thinkingBudget: budget } },
      }),
    });
    const a = await h.check(gemini(1_000_000_000));
    expect(reasonOf(a)).toBe('balance_insufficient');
    expect(deniedHeader(a, 'x-modelgate-hint')).toMatch(
      /with a maximum output of 1000000000 tokens, above the usual cap of 65536/,
    );
    expect(reasonOf(await h.check(gemini(24_576)))).toBe('allowed');
  });

  it('holds nothing against unlimited keys and unpriced models', async () => {
    h = await startHarness();
    const big = { model: 'gpt-4o', max_tokens: 1_000_000, messages: [{ role: 'user', content: 'x' }] };
    const answers = await Promise.all(Array.from({ length: 20 }, () => h!.check(chat(DEMO_KEYS.bob, big))));
    expect(answers.map(reasonOf).every((r) => r === 'allowed')).toBe(true);
    expect(h.service.meter.deps.inFlight.held('bob')).toBe(0);
  });
});

describe('strict mode', () => {
  it('reserves the maximum cost, denies what the balance minus reservations cannot cover, and frees it on settlement', async () => {
    h = await startHarness({ configPath: tempConfig(strict()) });
    const body = { model: 'gpt-4o-mini', max_tokens: 20, messages: [{ role: 'user', content: 'x' }] };
    const each = tokensCost(Buffer.byteLength(JSON.stringify(body)), 20, PRICE);
    const fits = Math.floor(0.00006 / each);
    expect(fits).toBeGreaterThanOrEqual(1);
    const answers = [];
    for (let i = 0; i < fits + 3; i++) answers.push(reasonOf(await h.check(chat(DEMO_KEYS.trial, body))));
    expect(answers.slice(0, fits).every((r) => r === 'allowed')).toBe(true);
    expect(answers.slice(fits)).toEqual(['balance_insufficient', 'balance_insufficient', 'balance_insufficient']);
    const denied = await h.check(chat(DEMO_KEYS.trial, body));
    expect(deniedHeader(denied, 'x-modelgate-hint')).toMatch(
      /^the key's balance minus requests in flight \([0-9.e-]+\) cannot cover this request's maximum cost \([0-9.e-]+\)/,
    );
    const meter = (h.service.store as FileStore).meter!;
    const held = h.logs
      .decisions()
      .filter((d) => d.reason === 'allowed')
      .map((d) => d.requestId as string);
    await meter.debit({
      requestId: held[0],
      keyId: 'trial',
      group: 'basic',
      model: 'gpt-4o-mini',
      protocol: 'chat',
      inputTokens: 1,
      outputTokens: 1,
      cachedInputTokens: 0,
      price: PRICE,
    });
    expect(reasonOf(await h.check(chat(DEMO_KEYS.trial, body)))).toBe('allowed');
  });

  it('reserves n answers, every alias of the maximum, and the model cap when none is named', async () => {
    h = await startHarness({ configPath: tempConfig(strict()) });
    // 0.00006 at 0.6 per million output tokens is 100 output tokens at most.
    const ok = { model: 'gpt-4o-mini', max_tokens: 20, messages: [] };
    expect(reasonOf(await h.check(chat(DEMO_KEYS.trial, ok)))).toBe('allowed');
    for (const body of [
      { ...ok, n: 128 },
      { ...ok, n: '8' },
      { model: 'gpt-4o-mini', max_tokens: 20, max_completion_tokens: 5000, messages: [] },
      { model: 'gpt-4o-mini', maxTokens: 5000, messages: [] },
      { model: 'gpt-4o-mini', messages: [] },
      { model: 'gpt-4o-mini', max_tokens: 20, previous_response_id: 'resp_1', messages: [] },
    ])
      expect(reasonOf(await h.check(chat(DEMO_KEYS.trial, body))), JSON.stringify(body)).toBe('balance_insufficient');
  });

  it("reads Gemini's candidateCount and generation_config in snake case", async () => {
    h = await startHarness({ configPath: tempConfig(strict()) });
    // A model priced 0.3/2.5 without audio prices (gemini-2.5-flash's hold counts input at its audio price).
    const gen = (body: unknown) => ({
      method: 'POST',
      path: '/v1beta/models/gemini-3.8-flash:generateContent',
      headers: [
        ['x-vendor-api-key', DEMO_KEYS.trial],
        ['content-type', 'application/json'],
      ] as [string, string][],
      body: JSON.stringify(body),
    });
    // 0.00006 at 2.5 per million output tokens is 24 tokens.
    expect(reasonOf(await h.check(gen({ contents: [], generationConfig: { maxOutputTokens: 5 } })))).toBe('allowed');
    expect(
      reasonOf(await h.check(gen({ contents: [], generationConfig: { maxOutputTokens: 5, candidateCount: 8 } }))),
    ).toBe('balance_insufficient');
    expect(reasonOf(await h.check(gen({ contents: [], generation_config: { max_output_tokens: 5000 } })))).toBe(
      'balance_insufficient',
    );
  });

  it('reserves nothing for unlimited keys, unpriced models and token counts', async () => {
    h = await startHarness({ configPath: tempConfig(strict()) });
    const big = { model: 'gpt-4o-mini', max_tokens: 1_000_000, messages: [{ role: 'user', content: 'x' }] };
    expect(reasonOf(await h.check(chat(DEMO_KEYS.bob, big)))).toBe('allowed');
    expect(reasonOf(await h.check(chat(DEMO_KEYS.bob, { ...big, model: 'gpt-4o' })))).toBe('allowed');
    expect(reasonOf(await h.check(chat(DEMO_KEYS.trial, big)))).toBe('balance_insufficient');
    expect(
      reasonOf(
        await h.check({
          method: 'POST',
          path: '/v1/messages/count_tokens',
          headers: [
            ['x-api-key', DEMO_KEYS.trial],
            ['anthropic-version', '2023-06-01'],
            ['content-type', 'application/json'],
          ],
          body: JSON.stringify({ model: 'claude-3-5-haiku-latest', messages: [] }),
        }),
      ),
    ).toBe('allowed');
  });
});

describe('background mode', () => {
  const responses = (key: string, body: unknown) => ({ ...chat(key, body), path: '/v1/responses' });

  it('refuses a Responses API request with background set, however it is spelled, streamed or not, for every key; serves it without', async () => {
    h = await startHarness();
    for (const background of [true, 1, 'true', 'yes', 'On']) {
      for (const key of [DEMO_KEYS.alice, DEMO_KEYS.trial]) {
        const refused = await h.check(
          responses(key, { model: 'gpt-4o-mini', input: 'x', background, stream: background === 1 }),
        );
        expect(reasonOf(refused), JSON.stringify(background)).toBe('background_unsupported');
        expect(refused.denied_response?.status?.code).toBe('BadRequest');
        expect(deniedHeader(refused, 'x-modelgate-hint')).toContain('remove "background"');
      }
    }
    for (const background of [false, 0, 'false', null]) {
      expect(
        reasonOf(await h.check(responses(DEMO_KEYS.alice, { model: 'gpt-4o-mini', input: 'x', background }))),
        JSON.stringify(background),
      ).toBe('allowed');
    }
    // Only the Responses API has a background mode.
    expect(
      reasonOf(await h.check(chat(DEMO_KEYS.alice, { model: 'gpt-4o-mini', messages: [], background: true }))),
    ).toBe('allowed');
  });

  it('is not refused with the meter off', async () => {
    h = await startHarness({
      configPath: tempConfig(demo.replace(/meter:\n  enabled: true/, 'meter:\n  enabled: false')),
    });
    expect(
      reasonOf(await h.check(responses(DEMO_KEYS.alice, { model: 'gpt-4o-mini', input: 'x', background: true }))),
    ).toBe('allowed');
  });
});

describe('hosted tools and input from elsewhere', () => {
  const responses = (key: string, body: unknown) => ({ ...chat(key, body), path: '/v1/responses' });
  const image = (url: string) => ({ role: 'user', content: [{ type: 'image_url', image_url: { url } }] });

  it('refuses a hosted tool the price does not name (400 hosted_tool_unpriced, naming it) unless meter.hostedTools is allow', async () => {
    h = await startHarness();
    // The demo prices web_search and file_search on gpt-4o-mini, not code_interpreter.
    const body = {
      model: 'gpt-4o-mini',
      input: 'x',
      tools: [{ type: 'web_search_preview' }, { type: 'code_interpreter', container: { type: 'auto' } }],
    };
    const refused = await h.check(responses(DEMO_KEYS.alice, body));
    expect(reasonOf(refused)).toBe('hosted_tool_unpriced');
    expect(refused.denied_response?.status?.code).toBe('BadRequest');
    expect(deniedHeader(refused, 'x-modelgate-hint')).toContain('"code_interpreter"');
    expect(deniedHeader(refused, 'x-modelgate-hint')).toContain('price.tools.code_interpreter');
    expect(
      reasonOf(
        await h.check(responses(DEMO_KEYS.alice, { ...body, tools: [{ type: 'function', name: 'code_interpreter' }] })),
      ),
    ).toBe('allowed');
    await h.close();
    h = await startHarness({
      configPath: tempConfig(demo.replace('  mode: soft ', '  hostedTools: allow\n  mode: soft ')),
    });
    expect(reasonOf(await h.check(responses(DEMO_KEYS.alice, body)))).toBe('allowed');
  });

  it('serves a priced hosted tool, holding its most calls (max_tool_calls, else meter.maxHostedToolCalls) at its price in the maximum cost', async () => {
    h = await startHarness();
    const body = { model: 'gpt-4o-mini', input: 'x', max_output_tokens: 10, tools: [{ type: 'web_search' }] };
    const cost =
      (extra: object = {}) =>
      async (): Promise<number> => {
        const d = await h!.check(responses(DEMO_KEYS.alice, { ...body, ...extra }));
        expect(reasonOf(d)).toBe('allowed');
        const id = h!.logs.decisions().at(-1)!.requestId as string;
        const entry = h!.service.meter.deps.inFlight.get(id)!;
        return entry.maxCost;
      };
    const plain = await cost({ tools: [] })();
    const capped = await cost()();
    const own = await cost({ max_tool_calls: 2 })();
    // The body grows by the tools' bytes (one token each at 0.15 per million): well under a call's 0.01.
    expect(capped - plain).toBeGreaterThanOrEqual(10 * 0.01);
    expect(capped - plain).toBeLessThan(10 * 0.01 + 0.0001);
    expect(own - plain).toBeGreaterThanOrEqual(2 * 0.01);
    expect(own - plain).toBeLessThan(2 * 0.01 + 0.0001);
    const id = h.logs.decisions().at(-1)!.requestId as string;
    expect(h.service.meter.deps.inFlight.get(id)!.tools).toEqual({ names: ['web_search'], maxCalls: 2 });
  });

  it("names the client's own switch in the refusal when its user-agent says it is Codex, and never echoes the header", async () => {
    h = await startHarness({
      configPath: tempConfig(
        demo.replace(
          'price: { input: 0.15, output: 0.6, cachedInput: 0.075, tools: { web_search: 0.01, file_search: 0.0025 } }',
          'price: { input: 0.15, output: 0.6, cachedInput: 0.075 }',
        ),
      ),
    });
    const codex = (ua: string) => ({
      ...responses(DEMO_KEYS.alice, { model: 'gpt-4o-mini', input: 'x', tools: [{ type: 'web_search' }] }),
      headers: [...responses(DEMO_KEYS.alice, {}).headers, ['user-agent', ua]] as [string, string][],
    });
    const refused = await h.check(codex('codex_exec/0.171.0 (Ubuntu 24.04; x86_64) dumb <script>'));
    expect(reasonOf(refused)).toBe('hosted_tool_unpriced');
    const hint = deniedHeader(refused, 'x-modelgate-hint') ?? '';
    expect(hint).toContain('web_search = "disabled"');
    expect(hint).not.toContain('script');
    expect(deniedHeader(await h.check(codex('curl/8.0')), 'x-modelgate-hint')).not.toContain('disabled');
  });

  it('serves a replayed history of hosted tool calls (web_search_call items) that declares no tool, on a model that prices none', async () => {
    h = await startHarness({
      configPath: tempConfig(
        demo.replace(
          'price: { input: 0.15, output: 0.6, cachedInput: 0.075, tools: { web_search: 0.01, file_search: 0.0025 } }',
          'price: { input: 0.15, output: 0.6, cachedInput: 0.075 }',
        ),
      ),
    });
    const input = [
      { role: 'user', content: 'news' },
      { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search', query: 'news' } },
      { role: 'user', content: 'more' },
    ];
    expect(reasonOf(await h.check(responses(DEMO_KEYS.alice, { model: 'gpt-4o-mini', input })))).toBe('allowed');
    expect(
      reasonOf(
        await h.check(responses(DEMO_KEYS.alice, { model: 'gpt-4o-mini', input, tools: [{ type: 'web_search' }] })),
      ),
    ).toBe('hosted_tool_unpriced');
  });

  it('soft mode: the lone request a small balance does not cover may not hold input from elsewhere (its maximum counts meter.referencedInputTokens per part)', async () => {
    h = await startHarness();
    // trial's balance (0.00006) covers a plain request's maximum but not 200,000 input tokens.
    const refused = await h.check(
      chat(DEMO_KEYS.trial, { model: 'gpt-4o-mini', max_tokens: 10, messages: [image('https://x/1.png')] }),
    );
    expect(reasonOf(refused)).toBe('balance_insufficient');
    expect(deniedHeader(refused, 'x-modelgate-hint')).toMatch(
      /counts 1 input source the provider reads beyond the body's bytes/,
    );
    expect(
      reasonOf(
        await h.check(
          chat(DEMO_KEYS.trial, { model: 'gpt-4o-mini', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
        ),
      ),
    ).toBe('allowed');
  });

  it("soft mode with R replicas on one store: each holds a key's requests to its share of the balance (balance / R), plus its lone request", async () => {
    h = await startHarness({ configPath: tempConfig(demo.replace('    balance: 0.00006 ', '    balance: 0.06 ')) });
    const body = { model: 'gpt-4o-mini', max_tokens: 16384, messages: [{ role: 'user', content: 'hi' }] };
    const each = tokensCost(Buffer.byteLength(JSON.stringify(body)), 16384, PRICE);
    const run = async (): Promise<string[]> => {
      const answers: string[] = [];
      for (let i = 0; i < 10; i++) answers.push(reasonOf(await h!.check(chat(DEMO_KEYS.trial, body))));
      return answers;
    };
    // One replica: the lone request, then each while what is held leaves room for one more.
    const alone = await run();
    expect(alone.filter((r) => r === 'allowed')).toHaveLength(Math.max(1, Math.floor(0.06 / each)));
    for (const d of h.logs.decisions().filter((x) => x.reason === 'allowed'))
      h.service.meter.deps.inFlight.take(d.requestId as string);
    expect(h.service.meter.deps.inFlight.count('trial')).toBe(0);
    // Three replicas share the store: this one holds to a third of the balance.
    (h.service.store as { replicas?: () => number }).replicas = () => 3;
    const before = h.logs.decisions().length;
    const shared = await run();
    expect(shared.filter((r) => r === 'allowed')).toHaveLength(Math.max(1, Math.floor(0.02 / each)));
    expect(Math.floor(0.02 / each)).toBeLessThan(Math.floor(0.06 / each));
    const hint = h.logs
      .decisions()
      .slice(before)
      .find((d) => d.reason === 'balance_insufficient')?.hint;
    expect(hint).toMatch(
      /^the key's balance \(0\.06; 0\.02 of it on this replica, one of 3\) minus what its \d+ requests? in flight may cost/,
    );
  });

  it('strict mode: reserves meter.referencedInputTokens per part the provider reads beyond the body', async () => {
    h = await startHarness({ configPath: tempConfig(strict()) });
    const one = { model: 'gpt-4o-mini', max_tokens: 10, messages: [image('https://x/1.png')] };
    const allowed = await h.check(chat(DEMO_KEYS.alice, one));
    expect(reasonOf(allowed)).toBe('allowed');
    // trial (0.00006) cannot reserve 200,000 input tokens of gpt-4o-mini (0.03).
    const refused = await h.check(chat(DEMO_KEYS.trial, one));
    expect(reasonOf(refused)).toBe('balance_insufficient');
    expect(deniedHeader(refused, 'x-modelgate-hint')).toMatch(/maximum cost \(0\.03/);
  });
});

describe("the meter's fields in another case", () => {
  it('refuses "N", "Max_Tokens", "STREAM" (a case-insensitive binder reads them as n, max_tokens, stream; this reading would not), as "MODEL" is refused', async () => {
    h = await startHarness();
    for (const [sent, field] of [
      ['N', 'n'],
      ['Max_Tokens', 'max_tokens'],
      ['STREAM', 'stream'],
      ['CandidateCount', 'candidateCount'],
    ]) {
      const refused = await h.check(
        chat(DEMO_KEYS.alice, { model: 'gpt-4o-mini', [sent]: sent === 'STREAM' ? true : 128, messages: [] }),
      );
      expect(reasonOf(refused), sent).toBe('body_invalid');
      expect(deniedHeader(refused, 'x-modelgate-hint')).toBe(
        `the top-level key "${sent}" is "${field}" in another case, which case-insensitive parsers read as it: send it only as "${field}"`,
      );
    }
    // Nested keys are the provider's own objects (read case-sensitively by their schemas), and other keys pass.
    expect(
      reasonOf(
        await h.check(
          chat(DEMO_KEYS.alice, { model: 'gpt-4o-mini', metadata: { N: '1' }, Temperature: 1, messages: [] }),
        ),
      ),
    ).toBe('allowed');
  });
});

describe('Anthropic betas', () => {
  it("an anthropic-beta header (one can raise the output cap: output-128k) leaves the request's own max_tokens above the model's cap", async () => {
    h = await startHarness({ configPath: tempConfig(strict()) });
    const ask = (beta?: string) =>
      h!.check({
        method: 'POST',
        path: '/v1/messages',
        headers: [
          ['x-api-key', DEMO_KEYS.trial],
          ['anthropic-version', '2023-06-01'],
          ['content-type', 'application/json'],
          ...(beta ? [['anthropic-beta', beta] as [string, string]] : []),
        ],
        body: JSON.stringify({
          model: 'claude-3-5-haiku-latest',
          max_tokens: 128000,
          messages: [{ role: 'user', content: 'x' }],
        }),
      });
    const cost = (r: Awaited<ReturnType<typeof ask>>): number =>
      Number(/maximum cost \(([\d.e-]+)\)/.exec(deniedHeader(r, 'x-modelgate-hint') ?? '')?.[1]);
    const capped = await ask();
    const raised = await ask('output-128k-2025-02-19');
    expect([reasonOf(capped), reasonOf(raised)]).toEqual(['balance_insufficient', 'balance_insufficient']);
    // 128,000 output tokens held instead of the model's cap.
    expect(cost(raised) / cost(capped)).toBeGreaterThan(2);
  });
});

describe('unmeteredStreams', () => {
  const stream = { model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'x' }] };

  it('deny: refuses a chat stream without include_usage, however `stream` is spelled, and serves one with it', async () => {
    h = await startHarness({
      configPath: tempConfig(demo.replace('  unmeteredStreams: estimate ', '  unmeteredStreams: deny ')),
    });
    for (const s of [true, 1, 'true', '1', 'True', 'yes', 'on']) {
      const refused = await h.check(chat(DEMO_KEYS.alice, { ...stream, stream: s }));
      expect(reasonOf(refused), JSON.stringify(s)).toBe('stream_usage_required');
      expect(refused.denied_response?.status?.code).toBe('BadRequest');
      expect(deniedHeader(refused, 'x-modelgate-hint')).toContain('"stream_options": {"include_usage": true}');
    }
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, { ...stream, stream_options: { include_usage: true } })))).toBe(
      'allowed',
    );
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, { ...stream, stream: 'false' })))).toBe('allowed');
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, { model: 'gpt-4o-mini', messages: [] })))).toBe('allowed');
  });

  it('estimate (the default): serves it', async () => {
    h = await startHarness();
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, stream)))).toBe('allowed');
  });
});

describe("the maxima in the Check's metadata", () => {
  it("carries each request's own maxInput and maxOutput (not an earlier request's of the same key and model: the encoded response cache)", async () => {
    h = await startHarness();
    const meta = async (body: unknown) => {
      const res = await h!.check(chat(DEMO_KEYS.alice, body));
      expect(reasonOf(res)).toBe('allowed');
      const f = res.dynamic_metadata?.fields ?? {};
      return {
        maxInput: f.maxInput?.numberValue,
        maxOutput: f.maxOutput?.numberValue,
        hiddenOutput: f.hiddenOutput?.numberValue,
      };
    };
    const small = { model: 'gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] };
    const large = {
      model: 'gpt-4o-mini',
      max_tokens: 4000,
      messages: [{ role: 'user', content: 'hi there, a longer question' }],
    };
    expect(await meta(small)).toEqual({
      maxInput: Buffer.byteLength(JSON.stringify(small)),
      maxOutput: 50,
      hiddenOutput: undefined,
    });
    expect(await meta(large)).toEqual({
      maxInput: Buffer.byteLength(JSON.stringify(large)),
      maxOutput: 4000,
      hiddenOutput: undefined,
    });
    // A request that asks for reasoning: its hidden output is its maximum.
    const reasoning = { ...small, reasoning_effort: 'high' };
    expect((await meta(reasoning)).hiddenOutput).toBe(50);
    expect(await meta(small)).toEqual({
      maxInput: Buffer.byteLength(JSON.stringify(small)),
      maxOutput: 50,
      hiddenOutput: undefined,
    });
  });
});

describe("Anthropic's cache writes in the hold", () => {
  it("holds the cache write's price over Anthropic's own tool prompts too (they are written to the cache with the tools: 2x with a 1-hour ttl)", async () => {
    h = await startHarness();
    const tools = [
      { type: 'computer_20250124', name: 'computer', display_width_px: 1024, display_height_px: 768 },
      { type: 'bash_20250124', name: 'bash' },
      {
        type: 'text_editor_20250728',
        name: 'str_replace_based_edit_tool',
        cache_control: { type: 'ephemeral', ttl: '1h' },
      },
    ];
    const body = {
      model: 'claude-3-5-haiku-latest',
      max_tokens: 5,
      tools,
      messages: [{ role: 'user', content: 'hi' }],
    };
    const res = await h.check({
      method: 'POST',
      path: '/v1/messages',
      body: JSON.stringify(body),
      headers: [
        ['x-api-key', DEMO_KEYS.alice],
        ['anthropic-version', '2023-06-01'],
        ['content-type', 'application/json'],
      ],
    });
    expect(reasonOf(res)).toBe('allowed');
    // Everything up to the breakpoint is written at 2x: the body's bytes and Anthropic's prompts for
    // these tools (tool use 600, computer use 1,400, bash 300, text editor 800, as held).
    const provider = 600 + 1400 + 300 + 800;
    expect(res.dynamic_metadata?.fields?.maxInput?.numberValue).toBeGreaterThanOrEqual(
      2 * (Buffer.byteLength(JSON.stringify(body)) + provider),
    );
    // And its report, wherever it lands, counts writes reported without a breakdown by ttl as 1-hour
    // ones: the metadata names the 1-hour write's factor.
    expect(res.dynamic_metadata?.fields?.inputFactor?.numberValue).toBe(2);
  });
});

describe('soft mode on a replica that cannot count the others (replicas() = 0)', () => {
  it('refuses what it cannot hold as the store connection\'s doing (503 store_unavailable, retryable), never as balance_insufficient (a 403 a client does not retry, "top the balance up")', async () => {
    h = await startHarness({ configPath: tempConfig(demo.replace('    balance: 0.00006 ', '    balance: 1000 ')) });
    (h.service.store as { replicas?: () => number }).replicas = () => 0;
    const body = { model: 'gpt-4o-mini', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
    expect(reasonOf(await h.check(chat(DEMO_KEYS.trial, body)))).toBe('allowed');
    // A second one while the first is in flight, and a lone one with an image: the balance (1000) covers both.
    const second = await h.check(chat(DEMO_KEYS.trial, body));
    expect(reasonOf(second)).toBe('store_unavailable');
    expect(deniedHeader(second, 'x-modelgate-hint')).toMatch(/count the other replicas/);
    for (const d of h.logs.decisions().filter((x) => x.reason === 'allowed'))
      h.service.meter.deps.inFlight.take(d.requestId as string);
    const picture = await h.check(
      chat(DEMO_KEYS.trial, {
        ...body,
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/1.png' } }] }],
      }),
    );
    expect(reasonOf(picture)).toBe('store_unavailable');
  });
});

describe('priced models without an output cap', () => {
  it('names each priced model of the config without maxOutputTokens (the demo config names none), leaving out unpriced and embeddings-only ones', () => {
    expect(uncappedPricedModels(parseConfig(readFileSync(DEMO_CONFIG, 'utf8')).groups)).toEqual([]);
    const yaml = `${readFileSync(DEMO_CONFIG, 'utf8')}`.replace(
      /(- name: gpt-6\.1-sol\n(?: {8}.*\n)*?) {8}maxOutputTokens: 128000\n/,
      '$1',
    );
    expect(yaml).not.toEqual(readFileSync(DEMO_CONFIG, 'utf8'));
    expect(uncappedPricedModels(parseConfig(yaml).groups)).toEqual(['basic/gpt-6.1-sol']);
  });
});

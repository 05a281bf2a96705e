/**
 * What a request is held at (src/meter/policy/hold.ts): its maxima, its maximum cost, the refusals
 * of unpriced modalities and hosted tools, and soft mode's word. Properties: the hold covers every
 * debit the request can get (strict mode's zero overspend), and soft mode's holds on one replica
 * never pass the balance plus one request's maximum.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chargeOf } from '../../../src/meter/policy/debit';
import {
  holdFor,
  softWord,
  type Hold,
  type HoldMeter,
  type HoldRequest,
  type SoftFacts,
} from '../../../src/meter/policy/hold';
import { PLAIN_SHAPE, type RequestShape } from '../../../src/meter/request-shape';
import { costOf } from '../../../src/store/file-meter';
import type { HostedTool, ModelPrice } from '../../../src/store/store';

const METER: HoldMeter = {
  modalities: 'deny',
  hostedTools: 'deny',
  maxHostedToolCalls: 10,
  referencedInputTokens: 200_000,
  maxOutputTokens: 32_768,
  reasoningModels: ['o3*'],
};
const PRICE: ModelPrice = {
  input: 0.15,
  output: 0.6,
  cachedInput: null,
  tools: { web_search: 0.01, file_search: 0.0025 },
};
const request = (over: Partial<HoldRequest> = {}, shape: Partial<RequestShape> = {}): HoldRequest => ({
  style: 'chat',
  shape: { ...PLAIN_SHAPE, ...shape },
  model: 'gpt-4o-mini',
  price: PRICE,
  modelCap: 16_384,
  bodyBytes: 300,
  masked: false,
  capRaised: false,
  ...over,
});
const held = (q: HoldRequest, m: HoldMeter = METER): Hold => {
  const w = holdFor(q, m);
  if (w.kind !== 'hold') throw new Error(`refused: ${w.reason}`);
  return w;
};

describe('holdFor: refusals', () => {
  it.each([
    [
      'audio input the price does not name',
      request({}, { modalities: [['audioInput', 'input_audio']] }),
      { kind: 'refuse', reason: 'modality_unpriced', modality: 'audioInput', spelled: 'input_audio' },
    ],
    [
      'a hosted tool the price does not name',
      request({}, { hostedTools: ['web_search', 'code_interpreter'] }),
      { kind: 'refuse', reason: 'hosted_tool_unpriced', tool: 'code_interpreter' },
    ],
    [
      'a hosted tool of an unpriced model',
      request({ price: null }, { hostedTools: ['web_search'] }),
      { kind: 'refuse', reason: 'hosted_tool_unpriced', tool: 'web_search' },
    ],
  ] as const)('refuses %s', (_name, q, want) => {
    expect(holdFor(q, METER)).toEqual(want);
  });

  it('serves them when the config allows, unpriced modalities of an unpriced model too', () => {
    const allow = { ...METER, modalities: 'allow', hostedTools: 'allow' } as const;
    expect(
      holdFor(request({}, { modalities: [['audioInput', 'input_audio']], hostedTools: ['code_interpreter'] }), allow)
        .kind,
    ).toBe('hold');
    expect(holdFor(request({ price: null }, { modalities: [['audioInput', 'input_audio']] }), METER).kind).toBe('hold');
    expect(held(request({}, { hostedTools: ['code_interpreter', 'web_search'] }), allow).tools).toEqual({
      names: ['web_search'],
      maxCalls: 10,
    });
  });
});

describe('holdFor: maxima', () => {
  it.each([
    [
      "a plain request: its bytes, the model's cap",
      request(),
      {
        maxInputTokens: 300,
        maxOutputTokens: 16_384,
        beyondCap: undefined,
        hidden: false,
        tools: undefined,
        inputMarks: undefined,
      },
    ],
    [
      'its own max_tokens under the cap',
      request({}, { maxOutput: 100 }),
      { maxOutputTokens: 100, beyondCap: undefined },
    ],
    [
      'its own max_tokens over the cap: the cap',
      request({}, { maxOutput: 100_000 }),
      { maxOutputTokens: 16_384, beyondCap: undefined },
    ],
    [
      'no cap of the model: meter.maxOutputTokens',
      request({ modelCap: null }),
      { maxOutputTokens: 32_768, usualCap: 32_768 },
    ],
    [
      'no cap, a max_tokens past meter.maxOutputTokens: it, beyond the cap',
      request({ modelCap: null }, { maxOutput: 50_000 }),
      { maxOutputTokens: 50_000, beyondCap: 50_000 },
    ],
    [
      'a raised cap (Anthropic beta): its own max_tokens, beyond the cap',
      request({ style: 'messages', capRaised: true }, { maxOutput: 64_000 }),
      { maxOutputTokens: 64_000, beyondCap: 64_000 },
    ],
    [
      'a raised cap without max_tokens: the cap',
      request({ style: 'messages', capRaised: true }),
      { maxOutputTokens: 16_384, beyondCap: undefined },
    ],
    ['n answers: n times', request({}, { maxOutput: 100, answers: 4 }), { maxOutputTokens: 400 }],
    [
      'a thinking budget past the cap: on top, beyond the cap',
      request({}, { maxOutput: 100, extraOutput: 20_000 }),
      { maxOutputTokens: 20_100, beyondCap: 20_000 },
    ],
    [
      'referenced input: meter.referencedInputTokens each',
      request({}, { referencedCount: 2, referencedInput: true }),
      { maxInputTokens: 400_300 },
    ],
    [
      'provider prompts and a 1-hour cache write',
      request({}, { providerInput: 2500, inputFactor: 2 }),
      { maxInputTokens: 5600, inputMarks: { inputExtra: 2500, inputFactor: 2 } },
    ],
    ['embeddings: no output', request({ style: 'embeddings' }, { embeds: true }), { maxOutputTokens: 0 }],
    ['a reasoning request: hidden', request({}, { reasoning: true }), { hidden: true }],
    ['a reasoning model by name: hidden', request({ model: 'o3-mini' }), { hidden: true }],
    [
      'a field mask: hidden, its tools unreported',
      request({ style: 'generative', masked: true }, { hostedTools: ['web_search'] }),
      { hidden: true, tools: { names: ['web_search'], maxCalls: 10, unreported: true } },
    ],
    [
      'hosted tools: its own most calls',
      request({}, { hostedTools: ['web_search'], maxToolCalls: 3 }),
      { tools: { names: ['web_search'], maxCalls: 3 } },
    ],
    ['unpriced: costs nothing', request({ price: null }), { maxCost: 0 }],
  ] as const)('%s', (_name, q, want) => {
    expect(held(q)).toMatchObject(want);
  });

  it("costs its maxima at the price, plus its tools' most calls at the dearest", () => {
    const h = held(request({}, { hostedTools: ['web_search', 'file_search'], maxToolCalls: 3 }));
    expect(h.maxCost).toBeCloseTo((300 * 0.15 + 16_384 * 0.6) / 1e6 + 3 * 0.01, 15);
  });
});

describe('holdFor: the hold covers every debit the request can get (strict mode: zero overspend)', () => {
  // Prices per million tokens: 0, or at least a millionth (a denormal price makes a modality's premium
  // infinitely many text tokens: a cost no store takes).
  const money = fc.oneof(fc.constant(0), fc.double({ min: 1e-6, max: 100, noNaN: true }));
  const price: fc.Arbitrary<ModelPrice> = fc
    .record({
      input: money,
      output: money,
      cachedInput: fc.option(money, { nil: null }),
      longContext: fc.option(
        fc.record({
          above: fc.integer({ min: 1, max: 300_000 }),
          input: money,
          output: money,
          cachedInput: fc.option(money, { nil: null }),
        }),
        { nil: undefined },
      ),
      audioInput: fc.option(money, { nil: undefined }),
      audioOutput: fc.option(money, { nil: undefined }),
      imageOutput: fc.option(money, { nil: undefined }),
      tools: fc.constant({ web_search: 0.01, file_search: 0.0025 }),
    })
    .filter((p) => p.input > 0 || p.output > 0);
  const shape: fc.Arbitrary<Partial<RequestShape>> = fc.record({
    maxOutput: fc.option(fc.integer({ min: 0, max: 200_000 }), { nil: undefined }),
    answers: fc.integer({ min: 1, max: 8 }),
    extraOutput: fc.integer({ min: 0, max: 30_000 }),
    referencedCount: fc.integer({ min: 0, max: 3 }),
    providerInput: fc.integer({ min: 0, max: 3000 }),
    inputFactor: fc.constantFrom(1, 1.25, 2),
    hostedTools: fc.subarray(['web_search', 'file_search'] as HostedTool[]),
    maxToolCalls: fc.option(fc.integer({ min: 1, max: 20 }), { nil: undefined }),
  });
  const meter = { ...METER, modalities: 'allow', referencedInputTokens: 5000 } as const;

  it("an estimate or a provisional maximum within the request's maxima, its tools at their most calls", () => {
    fc.assert(
      fc.property(
        price,
        shape,
        fc.integer({ min: 0, max: 400_000 }),
        fc.option(fc.integer({ min: 1, max: 100_000 }), { nil: null }),
        fc.boolean(),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (p, s, bodyBytes, modelCap, provisional, fi, fo, fc_) => {
          const h = held(request({ price: p, modelCap, bodyBytes }, s), meter);
          const input = Math.floor(h.maxInputTokens * fi);
          const usage = {
            inputTokens: input,
            outputTokens: Math.floor(h.maxOutputTokens * fo),
            cachedInputTokens: Math.floor(input * fc_),
          };
          const c = chargeOf(
            usage,
            p,
            provisional ? undefined : 'incomplete',
            provisional,
            'chat',
            h.tools && { tools: h.tools },
          );
          if (c.kind !== 'debit') return;
          const cost = costOf({ ...c.fields, price: p });
          expect(cost).toBeLessThanOrEqual(h.maxCost * (1 + 1e-12));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("the request's whole maximum, exactly as a provisional debit takes it", () => {
    fc.assert(
      fc.property(price, shape, fc.integer({ min: 0, max: 400_000 }), (p, s, bodyBytes) => {
        const h = held(request({ price: p, bodyBytes }, s), meter);
        const usage = { inputTokens: h.maxInputTokens, outputTokens: h.maxOutputTokens, cachedInputTokens: 0 };
        const c = chargeOf(usage, p, 'no_report', true, 'chat', h.tools && { tools: h.tools });
        if (c.kind !== 'debit') return;
        expect(costOf({ ...c.fields, price: p })).toBeLessThanOrEqual(h.maxCost * (1 + 1e-12));
      }),
      { numRuns: 2000 },
    );
  });
});

describe('softWord', () => {
  const facts = (over: Partial<SoftFacts> = {}): SoftFacts => ({
    balance: 1,
    replicas: 1,
    inFlight: 0,
    held: 0,
    maxCost: 0.5,
    answers: 1,
    beyondCap: undefined,
    toolCalls: undefined,
    maxHostedToolCalls: 10,
    referencedCount: 0,
    ...over,
  });
  it.each([
    ['a request the balance covers', facts(), 'allow'],
    ["a lone plain request past the balance (the bound's M)", facts({ maxCost: 5 }), 'allow'],
    ['a second request past what is left', facts({ inFlight: 1, held: 0.6 }), 'in_flight'],
    ['a second request that fits what is left', facts({ inFlight: 1, held: 0.5 }), 'allow'],
    ['a lone request for many answers past the balance', facts({ maxCost: 5, answers: 2 }), 'many_answers'],
    ['a lone request past the usual cap past the balance', facts({ maxCost: 5, beyondCap: 64_000 }), 'beyond_cap'],
    [
      'a lone request allowing more tool calls past the balance',
      facts({ maxCost: 5, toolCalls: 11 }),
      'many_tool_calls',
    ],
    ['a lone request at the usual tool calls past the balance', facts({ maxCost: 5, toolCalls: 10 }), 'allow'],
    [
      'a lone request with input from elsewhere past the balance',
      facts({ maxCost: 5, referencedCount: 1 }),
      'referenced',
    ],
    [
      'two replicas: a request past its half of the balance, beside one in flight',
      facts({ replicas: 2, inFlight: 1, held: 0.1 }),
      'in_flight',
    ],
  ] as const)('%s: %s', (_name, f, want) => {
    const w = softWord(f);
    expect(w.kind === 'allow' ? 'allow' : w.why).toBe(want);
  });

  it('holds no share when the others may not count this replica (blind), and says so', () => {
    expect(softWord(facts({ replicas: 0, inFlight: 1 }))).toEqual({
      kind: 'refuse',
      why: 'in_flight',
      replicas: 1,
      share: 0,
      blind: true,
    });
    expect(softWord(facts({ replicas: 0 }))).toEqual({ kind: 'allow' });
    expect(softWord(facts({ replicas: 2.7, inFlight: 1, held: 0.1 }))).toMatchObject({
      replicas: 2,
      share: 0.5,
      blind: false,
    });
  });

  it("on one replica, the holds of a key's requests never pass its share plus one plain request's maximum", () => {
    const req = fc.record({
      maxCost: fc.double({ min: 0.0001, max: 10, noNaN: true }),
      answers: fc.integer({ min: 1, max: 3 }),
      referencedCount: fc.integer({ min: 0, max: 1 }),
    });
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 10, noNaN: true }),
        fc.integer({ min: 0, max: 4 }),
        fc.array(req, { minLength: 1, maxLength: 40 }),
        (balance, replicas, reqs) => {
          let held = 0;
          let inFlight = 0;
          let lone = 0;
          for (const r of reqs) {
            const w = softWord(facts({ balance, replicas, inFlight, held, ...r }));
            if (w.kind !== 'allow') continue;
            const share = replicas === 0 ? 0 : balance / replicas;
            if (share - held < r.maxCost) {
              // Past the share: only a lone plain request.
              expect(inFlight).toBe(0);
              expect(r.answers).toBe(1);
              expect(r.referencedCount).toBe(0);
              lone = r.maxCost;
            }
            held += r.maxCost;
            inFlight += 1;
          }
          const share = replicas === 0 ? 0 : balance / replicas;
          expect(held).toBeLessThanOrEqual(Math.max(share, lone) + 1e-9);
        },
      ),
    );
  });
});

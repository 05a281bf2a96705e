/**
 * What a settled request is debited at a price (src/meter/policy/debit.ts chargeOf): exact usage at
 * each modality's price and the calls the answer reports; an estimate or a maximum at the highest
 * price of each direction and the most calls.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { METER_CALL_TYPES } from '../../../src/contract/meter-counters';
import { chargeOf } from '../../../src/meter/policy/debit';
import { costOf } from '../../../src/store/file-meter';
import type { ModelPrice } from '../../../src/store/store';

const PRICE: ModelPrice = {
  input: 0.15,
  output: 0.6,
  cachedInput: null,
  tools: { web_search: 0.01, file_search: 0.0025 },
};
const AUDIO: ModelPrice = { input: 2.5, output: 10, cachedInput: null, audioInput: 40, audioOutput: 80 };
const USAGE = { inputTokens: 1000, outputTokens: 200, cachedInputTokens: 0 };
const ws = METER_CALL_TYPES.indexOf('web_search_call');
const TOOLS = { names: ['web_search', 'file_search'] as const, maxCalls: 5 };
const tools = { ...TOOLS, names: [...TOOLS.names] };

describe('chargeOf', () => {
  it.each([
    ['exact text usage: as reported', USAGE, PRICE, undefined, false, undefined, { fields: USAGE, mark: undefined }],
    [
      'an estimate: as estimated, marked',
      USAGE,
      PRICE,
      'incomplete',
      false,
      undefined,
      { fields: USAGE, mark: 'incomplete' },
    ],
    [
      'unpriced: the tokens, nothing to price',
      USAGE,
      null,
      undefined,
      false,
      undefined,
      { fields: USAGE, mark: undefined },
    ],
    [
      'exact audio input: its premium as input tokens at the text price',
      { ...USAGE, modal: { audioInput: 500 } },
      AUDIO,
      undefined,
      false,
      undefined,
      { fields: { inputTokens: 1000 + 500 * 15, outputTokens: 200, cachedInputTokens: 0 }, mark: undefined },
    ],
    [
      'an estimate on a price with audio: every token at the highest price of its direction',
      USAGE,
      AUDIO,
      'no_usage',
      false,
      undefined,
      { fields: { inputTokens: 1000 * 16, outputTokens: 200 * 8, cachedInputTokens: 0 }, mark: 'no_usage' },
    ],
    [
      'a provisional maximum on a price with audio: the highest price too',
      USAGE,
      AUDIO,
      'no_report',
      true,
      undefined,
      { fields: { inputTokens: 1000 * 16, outputTokens: 200 * 8, cachedInputTokens: 0 }, mark: 'no_report' },
    ],
    [
      'tokens of a modality the meter cannot name: the highest price, marked unknown_modality',
      { ...USAGE, unnamed: { input: 100 } },
      AUDIO,
      undefined,
      false,
      undefined,
      { fields: { inputTokens: 1000 + 100 * 15, outputTokens: 200, cachedInputTokens: 0 }, mark: 'unknown_modality' },
    ],
    [
      'exact, hosted tools with a report: the calls its answer reports (2 searches, no file search)',
      USAGE,
      PRICE,
      undefined,
      false,
      { tools, report: { calls: `${2 * ws + 1}=2`, contentType: 'application/json' } },
      { fields: { ...USAGE, toolCalls: 2, toolCost: 0.02 }, mark: undefined },
    ],
    [
      'an estimate, hosted tools: their most calls at the dearest',
      USAGE,
      PRICE,
      'incomplete',
      false,
      { tools, report: { calls: `${2 * ws + 1}=2`, contentType: 'application/json' } },
      { fields: { ...USAGE, toolCalls: 5, toolCost: 0.05 }, mark: 'incomplete' },
    ],
    [
      'exact without a report (a shutdown): their most calls',
      USAGE,
      PRICE,
      undefined,
      false,
      { tools },
      { fields: { ...USAGE, toolCalls: 5, toolCost: 0.05 }, mark: undefined },
    ],
    [
      'exact with a report counting no call: none debited',
      USAGE,
      PRICE,
      undefined,
      false,
      {
        tools: { names: ['web_search' as const], maxCalls: 5 },
        report: { calls: '0=0', contentType: 'application/json' },
      },
      { fields: USAGE, mark: undefined },
    ],
  ] as const)('%s', (_name, usage, price, estimate, provisional, tooling, want) => {
    const c = chargeOf(usage, price, estimate, provisional, 'responses', tooling);
    expect(c.kind).toBe('debit');
    if (c.kind !== 'debit') return;
    expect(c.fields.inputTokens).toBe(want.fields.inputTokens);
    expect(c.fields.outputTokens).toBe(want.fields.outputTokens);
    expect(c.fields.cachedInputTokens).toBe(want.fields.cachedInputTokens);
    expect(c.fields.toolCalls).toBe('toolCalls' in want.fields ? want.fields.toolCalls : undefined);
    if ('toolCost' in want.fields) expect(c.fields.toolCost).toBeCloseTo(want.fields.toolCost, 12);
    expect(c.mark).toBe(want.mark);
  });

  it('refuses what no count of tokens can carry: audio priced above 0 with both text prices 0', () => {
    const free: ModelPrice = { input: 0, output: 0, cachedInput: null, audioInput: 40 };
    expect(chargeOf({ ...USAGE, modal: { audioInput: 10 } }, free, undefined, false, 'chat', undefined)).toEqual({
      kind: 'inexpressible',
    });
  });

  it('names the modalities reported that the price does not name', () => {
    const c = chargeOf(
      { ...USAGE, modal: { audioOutput: 10 } },
      { ...AUDIO, audioOutput: null },
      undefined,
      false,
      'chat',
      undefined,
    );
    expect(c.kind === 'debit' && c.unpriced).toEqual(['audioOutput']);
  });

  it('never debits less than the usage at the text price, and an estimate never less than exact usage of the same counts', () => {
    const money = fc.oneof(fc.constant(0), fc.double({ min: 1e-6, max: 100, noNaN: true }));
    const price = fc.record({
      input: money,
      output: money,
      cachedInput: fc.constant(null),
      audioInput: fc.option(money, { nil: undefined }),
      audioOutput: fc.option(money, { nil: undefined }),
    });
    fc.assert(
      fc.property(
        price,
        fc.integer({ min: 0, max: 1e6 }),
        fc.integer({ min: 0, max: 1e6 }),
        fc.integer({ min: 0, max: 1e6 }),
        (p, input, output, audio) => {
          const usage = {
            inputTokens: input,
            outputTokens: output,
            cachedInputTokens: 0,
            modal: { audioInput: Math.min(audio, input) },
          };
          const exact = chargeOf(usage, p, undefined, false, 'chat', undefined);
          const estimated = chargeOf(usage, p, 'incomplete', false, 'chat', undefined);
          if (exact.kind !== 'debit' || estimated.kind !== 'debit') return;
          const text = costOf({ ...usage, price: p });
          expect(costOf({ ...exact.fields, price: p })).toBeGreaterThanOrEqual(text);
          expect(costOf({ ...estimated.fields, price: p })).toBeGreaterThanOrEqual(
            costOf({ ...exact.fields, price: p }) * (1 - 1e-12) - 1e-12,
          );
        },
      ),
    );
  });
});

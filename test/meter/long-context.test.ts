/**
 * Long-context prices (docs/metering.md, "Long prompts"): a request whose input is over the
 * threshold pays the long-context price for every token (priceAt, costOf: what a debit charges), and
 * a request whose maximum input may be over it is held and reserved at the dearer price (tokensCost:
 * what soft mode holds and strict mode reserves), so strict mode's bound (zero) holds.
 */
import { describe, expect, it } from 'vitest';
import { maximumCost, tokensCost } from '../../src/meter/policy/hold';
import { highestPrice, modalCharge } from '../../src/meter/modal-cost';
import { costOf } from '../../src/store/file-meter';
import { priceAt, type ModelPrice } from '../../src/store/store';

/** Gemini 3 Pro preview's list prices: 2/12 up to 200,000 input tokens, 4/18 above (cached 0.2/0.4). */
const GEMINI: ModelPrice = {
  input: 2,
  output: 12,
  cachedInput: 0.2,
  longContext: { above: 200_000, input: 4, output: 18, cachedInput: 0.4 },
};

describe('priceAt', () => {
  it("is the model's own price up to the threshold, and the long-context price over it", () => {
    expect(priceAt(GEMINI, 0)).toBe(GEMINI);
    expect(priceAt(GEMINI, 200_000)).toBe(GEMINI);
    expect(priceAt(GEMINI, 200_001)).toEqual({ input: 4, output: 18, cachedInput: 0.4 });
  });

  it('a price without a long-context price is one price at any length', () => {
    const flat: ModelPrice = { input: 2, output: 12, cachedInput: null };
    expect(priceAt(flat, 5_000_000)).toBe(flat);
    expect(priceAt({ ...flat, longContext: null }, 5_000_000)).toEqual({ ...flat, longContext: null });
  });

  it('a threshold that is not a number yields prices no store debits (never the lower one)', () => {
    const broken: ModelPrice = {
      input: 2,
      output: 12,
      cachedInput: null,
      longContext: { above: Number.NaN, input: Number.NaN, output: 18, cachedInput: null },
    };
    expect(Number.isNaN(costOf({ inputTokens: 10, outputTokens: 10, cachedInputTokens: 0, price: broken }))).toBe(true);
  });
});

describe('costOf (what a debit charges)', () => {
  it('charges every token of a request over the threshold at the long-context price, input, cached and output', () => {
    // 300,000 input (100,000 cached), 1,000 output: (200,000 x 4 + 100,000 x 0.4 + 1,000 x 18) / 1e6
    expect(costOf({ inputTokens: 300_000, cachedInputTokens: 100_000, outputTokens: 1000, price: GEMINI })).toBe(0.858);
    // At the model's own price: (200,000 x 2 + 100,000 x 0.2 + 1,000 x 12) / 1e6 = 0.432, half.
    expect(
      costOf({
        inputTokens: 300_000,
        cachedInputTokens: 100_000,
        outputTokens: 1000,
        price: { ...GEMINI, longContext: null },
      }),
    ).toBe(0.432);
  });

  it("counts cached tokens toward the threshold, as the providers do (Gemini's promptTokenCount includes them)", () => {
    // 150,000 new + 60,000 cached = 210,000 > 200,000: the long-context price.
    expect(costOf({ inputTokens: 210_000, cachedInputTokens: 60_000, outputTokens: 0, price: GEMINI })).toBe(
      (150_000 * 4 + 60_000 * 0.4) / 1e6,
    );
  });

  it("charges a request of exactly the threshold at the model's own price", () => {
    expect(costOf({ inputTokens: 200_000, cachedInputTokens: 0, outputTokens: 1000, price: GEMINI })).toBe(0.412);
  });

  it('a long-context price without cachedInput charges cached tokens at its input price', () => {
    const noCached: ModelPrice = {
      input: 2,
      output: 12,
      cachedInput: 0.2,
      longContext: { above: 200_000, input: 4, output: 18, cachedInput: null },
    };
    expect(costOf({ inputTokens: 300_000, cachedInputTokens: 100_000, outputTokens: 0, price: noCached })).toBe(1.2);
  });
});

describe("tokensCost (a request's maximum: the hold, the reservation)", () => {
  it('is at the long-context price when the maximum input is over the threshold', () => {
    // 300,000 x 4 + 65,536 x 18
    expect(tokensCost(300_000, 65_536, GEMINI)).toBe(2.379648);
    expect(tokensCost(200_000, 65_536, GEMINI)).toBe(1.186432);
  });

  it('is never below what the request can be charged: the maximum covers every input up to it', () => {
    for (const maxIn of [1, 199_999, 200_000, 200_001, 400_000]) {
      const max = tokensCost(maxIn, 1000, GEMINI);
      for (const input of [0, Math.floor(maxIn / 2), maxIn]) {
        for (const cached of [0, input])
          expect(
            costOf({ inputTokens: input, cachedInputTokens: cached, outputTokens: 1000, price: GEMINI }),
          ).toBeLessThanOrEqual(max);
      }
    }
  });

  it("a long-context price below the model's own (a typing slip) does not lower the maximum of a request that may come out under the threshold", () => {
    const slip: ModelPrice = {
      input: 2,
      output: 12,
      cachedInput: null,
      longContext: { above: 200_000, input: 0.4, output: 1.8, cachedInput: null },
    };
    expect(tokensCost(300_000, 1000, slip)).toBe(tokensCost(300_000, 1000, { ...slip, longContext: null }));
    expect(costOf({ inputTokens: 150_000, cachedInputTokens: 0, outputTokens: 1000, price: slip })).toBeLessThanOrEqual(
      tokensCost(300_000, 1000, slip),
    );
  });

  it('holds input at the cached price when that is the dearer one, so a request of cached tokens never costs more than its maximum', () => {
    const odd: ModelPrice = { input: 1, output: 1, cachedInput: 5 };
    expect(costOf({ inputTokens: 1000, cachedInputTokens: 1000, outputTokens: 0, price: odd })).toBeLessThanOrEqual(
      tokensCost(1000, 0, odd),
    );
  });
});

describe('maximumCost: a long-context tier and modality prices on one price', () => {
  /** Long-context Gemini-like prices with audio input above text (no such demo model: the bound must hold anyway). */
  const BOTH: ModelPrice = {
    input: 2,
    output: 12,
    cachedInput: null,
    audioInput: 6,
    longContext: { above: 200_000, input: 4, output: 18, cachedInput: null },
  };

  /** What a debit charges: the modality's premium as text tokens (modal-cost.ts), then the store's cost (costOf). */
  const charged = (input: number, audio: number, output: number, price: ModelPrice): number => {
    const { usage } = modalCharge(
      { inputTokens: input, outputTokens: output, cachedInputTokens: 0, modal: { audioInput: audio } },
      price,
      false,
    );
    return costOf({
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      cachedInputTokens: usage.cachedInputTokens,
      price,
    });
  };

  it('holds at least what the debit charges: 240,000 input tokens (230,000 audio) and 100 output, debited 2.8018, where the highest prices alone hold 1.4412', () => {
    expect(charged(240_000, 230_000, 100, BOTH)).toBeCloseTo(2.8018, 9);
    expect(tokensCost(240_000, 100, highestPrice(BOTH))).toBeCloseTo(1.4412, 9);
    expect(maximumCost(240_000, 100, BOTH)).toBeGreaterThanOrEqual(charged(240_000, 230_000, 100, BOTH));
  });

  it('holds at least what the debit charges over a grid of prompts, audio shares and outputs, under and over the threshold with premiums', () => {
    for (const input of [1_000, 40_000, 66_667, 100_000, 199_999, 200_001, 500_000]) {
      for (const share of [0, 0.1, 0.5, 0.96, 1]) {
        for (const output of [0, 100, 65_536]) {
          const audio = Math.floor(input * share);
          expect(
            maximumCost(input, output, BOTH),
            `${input} in (${audio} audio), ${output} out`,
          ).toBeGreaterThanOrEqual(charged(input, audio, output, BOTH));
        }
      }
    }
  });

  it('holds at least a maximum debit whose output premium is written as input tokens (a text output price of 0) and crosses the threshold', () => {
    // 16,384 image output tokens at 30 over an input price of 1.25: 393,216 input tokens, over 200,000.
    const price: ModelPrice = {
      input: 1.25,
      output: 0,
      cachedInput: null,
      imageOutput: 30,
      longContext: { above: 200_000, input: 2.5, output: 2.5, cachedInput: null },
    };
    const { usage } = modalCharge({ inputTokens: 1000, outputTokens: 16_384, cachedInputTokens: 0 }, price, true);
    const debit = costOf({
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      cachedInputTokens: 0,
      price,
    });
    expect(usage.inputTokens).toBeGreaterThan(200_000);
    expect(maximumCost(1000, 16_384, price)).toBeGreaterThanOrEqual(debit);
  });

  it("is tokensCost at the highest prices when the price has no tier (plus one text token per direction for the premium's rounding), or no modality prices", () => {
    const { longContext: _long, ...flat } = BOTH;
    const rounding = (2 * Math.max(flat.input, flat.output)) / 1e6;
    expect(maximumCost(300_000, 1000, flat)).toBeCloseTo(tokensCost(300_000, 1000, highestPrice(flat)) + rounding, 12);
    expect(maximumCost(300_000, 1000, GEMINI)).toBe(tokensCost(300_000, 1000, GEMINI));
  });
});

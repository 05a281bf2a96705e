/**
 * The price a request was admitted at, as the Check's metadata carries it (meter/price-mark.ts): read
 * back whole, or not at all (the meter then looks the price up, as without the field).
 */
import { describe, expect, it } from 'vitest';
import { priceMark, readPriceMark } from '../../src/meter/price-mark';
import type { ModelPrice } from '../../src/store/store';

describe('price marks', () => {
  it('reads back every price it writes: text, cached, long-context and modality prices', () => {
    const prices: ModelPrice[] = [
      { input: 0.15, output: 0.6, cachedInput: 0.075 },
      {
        input: 2,
        output: 12,
        cachedInput: null,
        longContext: { above: 200_000, input: 4, output: 18, cachedInput: null },
      },
      { input: 0.3, output: 2.5, cachedInput: null, audioInput: 1, imageOutput: 30 },
      {
        input: 0,
        output: 0,
        cachedInput: 0,
        longContext: { above: 1, input: 1e-14, output: 0, cachedInput: 0.5 },
        audioOutput: 80,
      },
    ];
    for (const p of prices) expect(readPriceMark(priceMark(p))).toEqual(p);
  });

  it('writes a price once while it lives (config objects): the same string', () => {
    const p: ModelPrice = { input: 1, output: 2, cachedInput: null };
    expect(priceMark(p)).toBe(priceMark(p));
  });

  it('reads nothing from a field that is not a whole, valid price: never a part of one, never a guess', () => {
    const bad: unknown[] = [
      undefined,
      null,
      3,
      true,
      '',
      'null',
      '[]',
      '"x"',
      '{',
      '{}',
      '{"input":1}',
      '{"output":1}',
      '{"input":-1,"output":1}',
      '{"input":1,"output":"2"}',
      '{"input":1,"output":1e999}',
      '{"input":1,"output":1,"cachedInput":-0.1}',
      '{"input":1,"output":1,"cachedInput":"0"}',
      '{"input":1,"output":1,"longContext":{"above":200000,"input":4}}',
      '{"input":1,"output":1,"longContext":{"above":-1,"input":4,"output":18}}',
      '{"input":1,"output":1,"longContext":7}',
      '{"input":1,"output":1,"audioInput":-1}',
      '{"input":1,"output":1,"imageOutput":"30"}',
    ];
    for (const v of bad) expect(readPriceMark(v), JSON.stringify(v)).toBeUndefined();
  });

  it('leaves out what is absent or null, as the config does', () => {
    expect(readPriceMark('{"input":1,"output":2,"cachedInput":null,"longContext":null,"audioInput":null}')).toEqual({
      input: 1,
      output: 2,
      cachedInput: null,
    });
    expect(readPriceMark('{"input":1,"output":2}')).toEqual({ input: 1, output: 2, cachedInput: null });
  });
});

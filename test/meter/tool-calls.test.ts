/**
 * The calls of hosted tools a request is debited (meter/tool-calls.ts): what the answer reports
 * through the Lua filter's counters or the usage, else the request's most calls at the dearest tool.
 */
import { describe, expect, it } from 'vitest';
import { METER_CALL_TYPES, METER_GROUNDING_COUNTER } from '../../src/contract/meter-counters';
import { METER_LUA } from '../../src/envoy/meter-filters';
import { readPriceMark, readToolsMark, priceMark, toolsMark } from '../../src/meter/price-mark';
import {
  answerReportsCalls,
  callCount,
  maximumCalls,
  NO_TOOLS,
  readCounters,
  reportedCalls,
} from '../../src/meter/tool-calls';
import { costOf } from '../../src/store/file-meter';
import { toolsCost, validPrice, type ModelPrice } from '../../src/store/store';

const PRICE: ModelPrice = {
  input: 0.15,
  output: 0.6,
  cachedInput: null,
  tools: { web_search: 0.01, file_search: 0.0025, google_search: 0.035 },
};
const USAGE = { inputTokens: 10, outputTokens: 5, cachedInputTokens: 0 };
const ws = METER_CALL_TYPES.indexOf('web_search_call');
const fs = METER_CALL_TYPES.indexOf('file_search_call');

describe('reportedCalls', () => {
  it('counts a Responses JSON answer by its output items, a stream by the events that start each call', () => {
    const tools = { names: ['web_search', 'file_search'] as const, maxCalls: 10 };
    const counters = `${2 * ws + 1}=3,${2 * ws + 2}=1,${2 * fs + 1}=2`;
    expect(reportedCalls({ ...tools, names: [...tools.names] }, PRICE, 'responses', counters, false, USAGE)).toEqual({
      web_search: 3,
      file_search: 2,
    });
    // A stream: one call started (its item shows in added, done and completed); file search sent no events: its items.
    expect(reportedCalls({ ...tools, names: [...tools.names] }, PRICE, 'responses', counters, true, USAGE)).toEqual({
      web_search: 1,
      file_search: 2,
    });
    expect(reportedCalls({ ...tools, names: [...tools.names] }, PRICE, 'responses', '0=0', true, USAGE)).toEqual({});
    // No counters at all (a bundle whose filter does not count): the most calls, never none.
    expect(reportedCalls({ names: ['web_search'], maxCalls: 10 }, PRICE, 'responses', undefined, true, USAGE)).toEqual({
      web_search: 10,
    });
  });

  it("reads Anthropic's searches from the usage, one per answer for chat search, one grounded prompt for Gemini", () => {
    expect(
      reportedCalls({ names: ['web_search'], maxCalls: 8 }, PRICE, 'messages', undefined, true, {
        ...USAGE,
        toolCalls: { web_search: 3 },
      }),
    ).toEqual({ web_search: 3 });
    expect(reportedCalls({ names: ['web_search'], maxCalls: 2 }, PRICE, 'chat', undefined, false, USAGE)).toEqual({
      web_search: 2,
    });
    expect(
      reportedCalls(
        { names: ['google_search'], maxCalls: 1 },
        PRICE,
        'generative',
        `${METER_GROUNDING_COUNTER}=4`,
        true,
        USAGE,
      ),
    ).toEqual({ google_search: 1 });
    expect(reportedCalls({ names: ['google_search'], maxCalls: 1 }, PRICE, 'generative', '0=0', true, USAGE)).toEqual(
      {},
    );
    expect(
      reportedCalls({ names: ['google_search'], maxCalls: 1 }, PRICE, 'generative', undefined, true, USAGE),
    ).toEqual({ google_search: 1 });
  });

  it("debits a tool whose calls the answer does not report at the request's most calls", () => {
    expect(reportedCalls({ names: ['file_search'], maxCalls: 4 }, PRICE, 'generative', '0=0', false, USAGE)).toEqual({
      file_search: 4,
    });
  });

  it('ignores malformed counters', () => {
    expect([...readCounters('1=2,x=3,2=,44444=1,3=4')]).toEqual([
      [1, 2],
      [3, 4],
    ]);
  });
});

describe('maximumCalls and the cost of calls', () => {
  it("puts every call at the dearest declared tool, and adds calls x price to the tokens' cost", () => {
    const calls = maximumCalls({ names: ['file_search', 'web_search'], maxCalls: 10 }, PRICE);
    expect(calls).toEqual({ web_search: 10 });
    expect(callCount(calls)).toBe(10);
    expect(toolsCost(PRICE, calls)).toBeCloseTo(0.1, 12);
    const tokens = costOf({ ...USAGE, price: PRICE });
    expect(costOf({ ...USAGE, price: PRICE, toolCost: toolsCost(PRICE, { web_search: 3 }) })).toBeCloseTo(
      tokens + 0.03,
      12,
    );
    // A model without a price costs nothing, its tools included.
    expect(costOf({ ...USAGE, price: null, toolCost: 0.03 })).toBe(0);
  });
});

describe("the marks in the Check's metadata", () => {
  it("carries a price's tool prices and the declared tools; refuses a tool price that is not one", () => {
    expect(readPriceMark(priceMark(PRICE))).toEqual(PRICE);
    expect(readPriceMark(JSON.stringify({ ...PRICE, tools: { web_search: -1 } }))).toBeUndefined();
    expect(readPriceMark(JSON.stringify({ ...PRICE, tools: { teleport: 1 } }))).toBeUndefined();
    expect(validPrice({ ...PRICE, tools: { web_search: Number.NaN } })).toBe(false);
    expect(readToolsMark(toolsMark({ names: ['web_search', 'file_search'], maxCalls: 10 }))).toEqual({
      names: ['web_search', 'file_search'],
      maxCalls: 10,
    });
    expect(readToolsMark('web_search,teleport:3')).toBeUndefined();
    expect(readToolsMark('web_search:')).toBeUndefined();
  });
});

describe("the Lua filter's counters", () => {
  it('names each type it counts, the item and the event that starts a call, and the grounding', () => {
    for (const t of METER_CALL_TYPES) expect(METER_LUA).toContain(`"${t}"`);
    expect(METER_LUA).toContain('%.in_progress"');
    expect(METER_LUA).toContain('groundingMetadata');
  });
});

describe('calls the answer reports against what the request declared', () => {
  it('an answer a field mask trims (unreported) is debited its most calls, not the grounding it no longer shows', () => {
    const grounding = { names: ['google_search'] as const, maxCalls: 1 };
    expect(
      reportedCalls({ ...grounding, names: [...grounding.names] }, PRICE, 'generative', '0=0', false, USAGE),
    ).toEqual({});
    expect(
      reportedCalls(
        { ...grounding, names: [...grounding.names], unreported: true },
        PRICE,
        'generative',
        '0=0',
        false,
        USAGE,
      ),
    ).toEqual({ google_search: 1 });
    expect(
      reportedCalls(
        { ...grounding, names: [...grounding.names], unreported: true },
        PRICE,
        'generative',
        `${METER_GROUNDING_COUNTER}=1`,
        true,
        USAGE,
      ),
    ).toEqual({ google_search: 1 });
  });

  it("the Check's tools mark carries unreported, and most calls of 1,000,000 and more (a report with no entry had read no tools)", () => {
    expect(readToolsMark(toolsMark({ names: ['google_search'], maxCalls: 1, unreported: true }))).toEqual({
      names: ['google_search'],
      maxCalls: 1,
      unreported: true,
    });
    expect(readToolsMark(toolsMark({ names: ['web_search'], maxCalls: 1_000_000 }))).toEqual({
      names: ['web_search'],
      maxCalls: 1_000_000,
    });
    expect(readToolsMark('web_search:1:x')).toBeUndefined();
  });
});

describe('calls of a priced tool the request never declared', () => {
  it("are debited from the answer: Responses items and stream events, Anthropic's reported searches; not for an unpriced tool", () => {
    expect(reportedCalls(NO_TOOLS, PRICE, 'responses', `${2 * ws + 1}=3`, false, USAGE)).toEqual({ web_search: 3 });
    expect(reportedCalls(NO_TOOLS, PRICE, 'responses', `${2 * ws + 1}=3,${2 * ws + 2}=1`, true, USAGE)).toEqual({
      web_search: 1,
    });
    // code_interpreter has no price here: nothing to debit it at.
    const ci = METER_CALL_TYPES.indexOf('code_interpreter_call');
    expect(reportedCalls(NO_TOOLS, PRICE, 'responses', `${2 * ci + 1}=2`, false, USAGE)).toEqual({});
    expect(
      reportedCalls(NO_TOOLS, PRICE, 'messages', '0=0', false, { ...USAGE, toolCalls: { web_search: 2 } }),
    ).toEqual({ web_search: 2 });
    expect(reportedCalls(NO_TOOLS, PRICE, 'responses', '0=0', false, USAGE)).toEqual({});
    // Declared ones are counted once.
    expect(
      reportedCalls(
        { names: ['web_search'], maxCalls: 10 },
        PRICE,
        'responses',
        `${2 * ws + 1}=2,${2 * fs + 1}=1`,
        false,
        USAGE,
      ),
    ).toEqual({ web_search: 2, file_search: 1 });
    expect(answerReportsCalls('responses', '0=0', USAGE)).toBe(false);
    expect(answerReportsCalls('responses', `${METER_GROUNDING_COUNTER}=1`, USAGE)).toBe(false);
    expect(answerReportsCalls('responses', `${2 * ws + 1}=1`, USAGE)).toBe(true);
    expect(answerReportsCalls('messages', undefined, { ...USAGE, toolCalls: { web_search: 1 } })).toBe(true);
  });
});

/**
 * Attacks on hosted tools priced per call, at Check time through a real modelgate (file store, the
 * demo config: gpt-4o-mini prices web_search 0.01 and file_search 0.0025, claude-3-5-haiku-latest
 * web_search 0.01; trial's balance is 0.00006, alice's large): spellings of a declaration and of
 * its most calls that a provider or a relay reads and the meter might not.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import {
  DEMO_CONFIG,
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
const post = (path: string, key: string, body: string) => ({
  method: 'POST',
  path,
  headers: [
    path.startsWith('/v1beta/') ? ['x-goog-api-key', key] : ['authorization', `Bearer ${key}`],
    ['content-type', 'application/json'],
  ] as [string, string][],
  body,
});
/** The decision and the in-flight entry of the request it allowed (taken out, so the next is alone). */
async function check(
  path: string,
  key: string,
  body: string,
): Promise<{ reason: string; hint?: string; tools?: unknown; maxCost?: number }> {
  const d = await h!.check(post(path, key, body));
  const id = h!.logs.decisions().at(-1)!.requestId as string;
  const e = h!.service.meter.deps.inFlight.get(id);
  if (e) h!.service.meter.deps.inFlight.take(id);
  return { reason: reasonOf(d), hint: deniedHeader(d, 'x-modelgate-hint'), tools: e?.tools, maxCost: e?.maxCost };
}
const RESPONSES = '/v1/responses',
  CHAT = '/v1/chat/completions',
  MESSAGES = '/v1/messages';
const anthropic = (tools: string): string =>
  `{"model":"claude-3-5-haiku-latest","max_tokens":10,"messages":[{"role":"user","content":"x"}],"tools":${tools}}`;

describe('soft mode: the lone request may not name more hosted tool calls than meter.maxHostedToolCalls', () => {
  // Before: trial (0.00006) was served a Responses request with max_tool_calls 1,000,000 (its
  // maximum cost 10,000) as its lone request; its provider could bill every call, and soft mode's
  // bound M was whatever the client wrote.
  it('refuses a max_tool_calls or a sum of max_uses above it that the balance does not cover, with a hint', async () => {
    h = await startHarness();
    for (const body of [
      '{"model":"gpt-4o-mini","input":"x","max_output_tokens":10,"max_tool_calls":1000000,"tools":[{"type":"web_search"}]}',
      '{"model":"gpt-4o-mini","input":"x","max_output_tokens":10,"max_tool_calls":"11","tools":[{"type":"web_search"}]}',
    ]) {
      const r = await check(RESPONSES, DEMO_KEYS.trial, body);
      expect(r.reason, body).toBe('balance_insufficient');
      expect(r.hint).toMatch(
        /with up to (1000000|11) hosted tool calls, above the usual 10 \(meter\.maxHostedToolCalls\): lower max_tool_calls or max_uses/,
      );
    }
    const r = await check(
      MESSAGES,
      DEMO_KEYS.trial,
      anthropic(
        '[{"type":"web_search_20250305","name":"web_search","max_uses":600},{"type":"web_search_20250305","name":"b","max_uses":600}]',
      ),
    );
    expect(r.reason).toBe('balance_insufficient');
    expect(r.hint).toContain('with up to 1200 hosted tool calls');
  });

  it('still serves the lone request at the usual most calls or fewer, and a balance that covers more', async () => {
    h = await startHarness();
    expect(
      (
        await check(
          RESPONSES,
          DEMO_KEYS.trial,
          '{"model":"gpt-4o-mini","input":"x","max_output_tokens":10,"tools":[{"type":"web_search"}]}',
        )
      ).tools,
    ).toEqual({ names: ['web_search'], maxCalls: 10 });
    expect(
      (
        await check(
          RESPONSES,
          DEMO_KEYS.trial,
          '{"model":"gpt-4o-mini","input":"x","max_output_tokens":10,"max_tool_calls":10,"tools":[{"type":"web_search"}]}',
        )
      ).reason,
    ).toBe('allowed');
    expect(
      (
        await check(
          MESSAGES,
          DEMO_KEYS.trial,
          anthropic('[{"type":"web_search_20250305","name":"web_search","max_uses":3}]'),
        )
      ).tools,
    ).toEqual({ names: ['web_search'], maxCalls: 3 });
    expect(
      (
        await check(
          RESPONSES,
          DEMO_KEYS.alice,
          '{"model":"gpt-4o-mini","input":"x","max_output_tokens":10,"max_tool_calls":500,"tools":[{"type":"web_search"}]}',
        )
      ).tools,
    ).toEqual({ names: ['web_search'], maxCalls: 500 });
  });
});

describe('chat web_search_options in another case', () => {
  // Before: "Web_Search_Options" was served with no tool held or debited; a relay that binds JSON
  // case-insensitively (Go's encoding/json, as one-api/new-api do) forwards it as web_search_options,
  // and the search model bills its search fee.
  it('is refused body_invalid, as "N" is; sent twice with different values too', async () => {
    h = await startHarness();
    for (const key of ['Web_Search_Options', 'WEB_SEARCH_OPTIONS', 'web_search_optionſ']) {
      const r = await check(
        CHAT,
        DEMO_KEYS.alice,
        `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}],"${key}":{}}`,
      );
      expect(r.reason, key).toBe('body_invalid');
      expect(r.hint).toContain('web_search_options');
    }
    expect(
      (
        await check(
          CHAT,
          DEMO_KEYS.alice,
          '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}],"web_search_options":null,"web_search_options":{}}',
        )
      ).reason,
    ).toBe('body_invalid');
    expect(
      (
        await check(
          CHAT,
          DEMO_KEYS.alice,
          '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}],"web_search_options":{}}',
        )
      ).tools,
    ).toEqual({ names: ['web_search'], maxCalls: 1 });
  });
});

describe('Anthropic max_uses sent twice in one tool', () => {
  // Before: `"max_uses": 50, "max_uses": 1` was held at 1 call (JSON.parse keeps the last); a parser
  // that keeps the first lets the provider run 50, past what strict mode reserved.
  it('is not read as the last one: the request is held at the usual most calls (meter.maxHostedToolCalls)', async () => {
    h = await startHarness();
    const dup = await check(
      MESSAGES,
      DEMO_KEYS.alice,
      anthropic('[{"type":"web_search_20250305","name":"web_search","max_uses":50,"max_uses":1}]'),
    );
    expect(dup.tools).toEqual({ names: ['web_search'], maxCalls: 10 });
    const escaped = await check(
      MESSAGES,
      DEMO_KEYS.alice,
      anthropic('[{"type":"web_search_20250305","name":"web_search","max_uses":50,"max\\u005fuses":1}]'),
    );
    expect(escaped.tools).toEqual({ names: ['web_search'], maxCalls: 10 });
    // Once each: their sum. A text that reads "max_uses": in a string is no key.
    expect(
      (
        await check(
          MESSAGES,
          DEMO_KEYS.alice,
          anthropic(
            '[{"type":"web_search_20250305","name":"web_search","max_uses":2,"allowed_domains":["\\"max_uses\\": 1"]},{"type":"web_search_20250305","name":"b","max_uses":3}]',
          ),
        )
      ).tools,
    ).toEqual({ names: ['web_search'], maxCalls: 5 });
  });
});

describe('a Gemini field mask', () => {
  it('marks the declared grounding unreported (its most calls debited), in any spelling of its name', async () => {
    h = await startHarness();
    const body = '{"contents":[{"parts":[{"text":"x"}]}],"tools":[{"googleSearch":{}}]}';
    for (const q of [
      '?fields=usageMetadata',
      '?%24fields=usageMetadata',
      '?%66ields=usageMetadata',
      '?Fields=usageMetadata',
      '?$FIELDS=usageMetadata',
    ]) {
      expect(
        (await check(`/v1beta/models/gemini-2.5-flash:generateContent${q}`, DEMO_KEYS.alice, body)).tools,
        q,
      ).toEqual({ names: ['google_search'], maxCalls: 1, unreported: true });
    }
    expect(
      (await check('/v1beta/models/gemini-2.5-flash:generateContent?key_fields=x', DEMO_KEYS.alice, body)).tools,
    ).toEqual({ names: ['google_search'], maxCalls: 1 });
  });
});

describe('what held', () => {
  it('max_tool_calls as a string, sent twice, in another case, negative', async () => {
    h = await startHarness();
    const body = (mtc: string): string =>
      `{"model":"gpt-4o-mini","input":"x","max_output_tokens":10,${mtc},"tools":[{"type":"web_search"}]}`;
    expect((await check(RESPONSES, DEMO_KEYS.alice, body('"max_tool_calls":"2"'))).tools).toEqual({
      names: ['web_search'],
      maxCalls: 2,
    });
    expect((await check(RESPONSES, DEMO_KEYS.alice, body('"max_tool_calls":"1_2"'))).tools).toEqual({
      names: ['web_search'],
      maxCalls: 12,
    });
    expect((await check(RESPONSES, DEMO_KEYS.alice, body('"max_tool_calls":1,"max_tool_calls":50'))).reason).toBe(
      'body_invalid',
    );
    expect((await check(RESPONSES, DEMO_KEYS.alice, body('"Max_Tool_Calls":1'))).reason).toBe('body_invalid');
    // Not a count a provider takes: the usual most calls.
    for (const v of ['-1', '0', '1.5', '"x"'])
      expect((await check(RESPONSES, DEMO_KEYS.alice, body(`"max_tool_calls":${v}`))).tools, v).toEqual({
        names: ['web_search'],
        maxCalls: 10,
      });
  });

  it('a tool type escaped, a tool key sent twice, tool_choice naming an unpriced tool, dated and preview types', async () => {
    h = await startHarness();
    const tools = (t: string): string => `{"model":"gpt-4o-mini","input":"x","tools":${t}}`;
    expect((await check(RESPONSES, DEMO_KEYS.alice, tools('[{"typ\\u0065":"web\\u005fsearch"}]'))).tools).toEqual({
      names: ['web_search'],
      maxCalls: 10,
    });
    expect(
      (await check(RESPONSES, DEMO_KEYS.alice, tools('[{"type":"web_search_preview_2025_03_11"}]'))).tools,
    ).toEqual({ names: ['web_search'], maxCalls: 10 });
    // A `type` sent twice is read both ways: code_interpreter (unpriced on gpt-4o-mini) is refused.
    expect(
      (
        await check(
          RESPONSES,
          DEMO_KEYS.alice,
          tools('[{"type":"function","type":"code_interpreter","container":{"type":"auto"}}]'),
        )
      ).reason,
    ).toBe('hosted_tool_unpriced');
    expect(
      (
        await check(
          RESPONSES,
          DEMO_KEYS.alice,
          '{"model":"gpt-4o-mini","input":"x","tool_choice":{"type":"image_generation"}}',
        )
      ).reason,
    ).toBe('hosted_tool_unpriced');
    expect(
      (
        await check(
          RESPONSES,
          DEMO_KEYS.alice,
          '{"model":"gpt-4o-mini","input":"x","tools":[],"tools":[{"type":"web_search"}]}',
        )
      ).reason,
    ).toBe('body_invalid');
    // A history item's type used as a tool declares nothing a provider runs (it refuses the request).
    expect((await check(RESPONSES, DEMO_KEYS.alice, tools('[{"type":"web_search_call"}]'))).tools).toBeUndefined();
  });

  it('Anthropic: max_uses not an integer, or missing on one of two hosted tools: the usual most calls', async () => {
    h = await startHarness();
    expect(
      (
        await check(
          MESSAGES,
          DEMO_KEYS.alice,
          anthropic('[{"type":"web_search_20250305","name":"web_search","max_uses":1.5}]'),
        )
      ).tools,
    ).toEqual({ names: ['web_search'], maxCalls: 10 });
    expect(
      (
        await check(
          MESSAGES,
          DEMO_KEYS.alice,
          anthropic(
            '[{"type":"web_search_20250305","name":"a","max_uses":1},{"type":"function","type":"web_search_20250305","name":"b"}]',
          ),
        )
      ).tools,
    ).toEqual({ names: ['web_search'], maxCalls: 10 });
  });

  it('Gemini tool keys in either case and escaped are declarations; on a model pricing none they are refused', async () => {
    const unpriced = demo.replace('audioInput: 1.0, tools: { google_search: 0.035 } }', 'audioInput: 1.0 }');
    expect(unpriced).not.toEqual(demo);
    h = await startHarness({ configPath: tempConfig(unpriced) });
    for (const k of [
      'googleSearch',
      'google_search',
      'google\\u0053earch',
      'googleSearchRetrieval',
      'google_search_retrieval',
      'googleMaps',
      'fileSearch',
      'enterpriseWebSearch',
    ]) {
      const r = await check(
        '/v1beta/models/gemini-2.5-flash:generateContent',
        DEMO_KEYS.alice,
        `{"contents":[{"parts":[{"text":"x"}]}],"tools":[{"${k}":{}}]}`,
      );
      expect(r.reason, k).toBe('hosted_tool_unpriced');
    }
  });
});

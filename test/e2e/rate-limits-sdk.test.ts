/**
 * Each stock SDK, unchanged, meets a 429 of a rate limit (docs/rate-limits.md) through the real Envoy: it
 * waits (openai and @anthropic-ai/sdk as retry-after says; @google/genai with its retry options
 * on, by its own backoff: it does not read retry-after) and then succeeds, once the key's minute
 * window has reset. One key per SDK, limited to 1 request per minute, used up first; the three
 * run at once, so the file waits for one window at most (under a minute).
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type * as GenAI from '@google/genai' with { 'resolution-mode': 'import' };
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { limitedKey, sendAs, withKeys } from '../support/rate-limit-cases';

const keys = {
  openai: limitedKey('sdk-openai', { rpm: 1 }),
  anthropic: limitedKey('sdk-anthropic', { rpm: 1 }),
  gemini: limitedKey('sdk-gemini', { rpm: 1 }),
};

interface Seen {
  readonly status: number;
  readonly retryAfter: string | null;
  readonly at: number;
}

/** A fetch that notes each answer's status, retry-after and time (the SDK itself is left as it is). */
function noting(seen: Seen[]): typeof fetch {
  return async (input, init) => {
    const res = await fetch(input, init);
    seen.push({ status: res.status, retryAfter: res.headers.get('retry-after'), at: Date.now() });
    return res;
  };
}

describeE2E('the stock SDKs wait on a rate limit 429 and then succeed', () => {
  let gw: Gateway;
  let genai: typeof GenAI;
  beforeAll(async () => {
    genai = await import('@google/genai');
    gw = await startGateway({ config: withKeys(Object.values(keys)) });
  }, 60_000);
  afterAll(() => gw?.close());

  it('openai, @anthropic-ai/sdk and @google/genai each get 429, wait, and get their answer', async () => {
    // Each key's one request of this minute.
    for (const [family, k] of Object.entries(keys))
      expect((await sendAs(gw, family as 'openai', k.key)).status).toBe(200);
    const seen = { openai: [] as Seen[], anthropic: [] as Seen[], gemini: [] as Seen[] };
    const started = Date.now();
    const openai = new OpenAI({ apiKey: keys.openai.key, baseURL: `${gw.baseUrl}/v1`, fetch: noting(seen.openai) });
    const anthropic = new Anthropic({ apiKey: keys.anthropic.key, baseURL: gw.baseUrl, fetch: noting(seen.anthropic) });
    const google = new genai.GoogleGenAI({
      apiKey: keys.gemini.key,
      // The SDK retries only when asked; its backoff (1 s doubling, at most 8 s apart here) must outlast a minute
      // window.
      httpOptions: {
        baseUrl: gw.baseUrl,
        apiVersion: 'v1beta',
        retryOptions: { attempts: 14, initialDelay: 1, maxDelay: 8 },
        fetch: noting(seen.gemini),
      } as GenAI.HttpOptions,
    });
    const [o, a, g] = await Promise.all([
      openai.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
      anthropic.messages.create({
        model: 'claude-sonnet-4-5',
        max_tokens: 32,
        messages: [{ role: 'user', content: 'hi' }],
      }),
      google.models.generateContent({ model: 'gemini-2.5-pro', contents: 'hi' }),
    ]);
    expect(o.choices[0].message.content).toContain('gpt-4o');
    expect(a.content[0].type).toBe('text');
    expect(g.text).toContain('gemini-2.5-pro');
    for (const [sdk, s] of Object.entries(seen)) {
      expect(s[0].status, sdk).toBe(429);
      expect(s.at(-1)!.status, sdk).toBe(200);
      expect(
        s.filter((x) => x.status === 200),
        sdk,
      ).toHaveLength(1);
    }
    // openai and anthropic waited what retry-after said (one retry, after the window's reset).
    for (const sdk of ['openai', 'anthropic'] as const) {
      const [refused, ok] = [seen[sdk][0], seen[sdk].at(-1)!];
      expect(seen[sdk], sdk).toHaveLength(2);
      expect(ok.at - refused.at, sdk).toBeGreaterThanOrEqual(Number(refused.retryAfter) * 1000 - 1000);
    }
    expect(Date.now() - started).toBeLessThan(75_000);
  }, 120_000);
});

/**
 * Rate limits with the embedded engine (docs/rate-limits.md), through the real Envoy: no Redis, no
 * envoyproxy/ratelimit, modelgate answers Envoy's rate limit filters itself (what `npm start` runs).
 * Requests per minute exactly, tokens charged after each response and checked before the next,
 * requests in flight, each protocol's 429 shape and headers.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { DEMO_KEYS } from '../support/demo-keys';
import { limitedKey, roomInMinute, sendAs, until, withKeys } from '../support/rate-limit-cases';

const rpm = limitedKey('rl-rpm', { rpm: 5 });
const shapes = {
  openai: limitedKey('rl-openai', { rpm: 1 }),
  anthropic: limitedKey('rl-anthropic', { rpm: 1 }),
  gemini: limitedKey('rl-gemini', { rpm: 1 }),
};
const tokens = limitedKey('rl-tpm', { tpm: 30 });
const inFlight = limitedKey('rl-inflight', { inFlight: 3 });

describeE2E('rate limits, embedded engine (no Redis)', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({ config: withKeys([rpm, ...Object.values(shapes), tokens, inFlight]) });
  }, 60_000);
  afterAll(() => gw?.close());

  it('serves exactly N requests of a key limited to N per minute, sent concurrently, then 429 rate_limited', async () => {
    await roomInMinute(15);
    const replies = await Promise.all(Array.from({ length: 12 }, () => sendAs(gw, 'openai', rpm.key)));
    const ok = replies.filter((r) => r.status === 200).length;
    expect(ok).toBe(5);
    const refused = replies.filter((r) => r.status === 429);
    expect(refused).toHaveLength(7);
    for (const r of refused) expect(r.headers['x-modelgate-reason']).toBe('rate_limited');
    expect(gw.received.filter((r) => r.headers['x-modelgate-key-id'] === 'rl-rpm')).toHaveLength(5);
  });

  it("answers a 429 in the OpenAI shape with x-should-retry: true, retry-after (the window's reset) and x-ratelimit-*-requests", async () => {
    await roomInMinute(10);
    expect((await sendAs(gw, 'openai', shapes.openai.key)).status).toBe(200);
    const r = await sendAs(gw, 'openai', shapes.openai.key);
    expect(r.status).toBe(429);
    const retry = Number(r.headers['retry-after']);
    expect(retry).toBeGreaterThan(0);
    expect(retry).toBeLessThanOrEqual(60);
    expect(r.headers).toMatchObject({
      'x-should-retry': 'true',
      'x-ratelimit-limit-requests': '1',
      'x-ratelimit-remaining-requests': '0',
      'x-ratelimit-reset-requests': `${retry}s`,
      'content-type': 'application/json',
    });
    expect(r.json()).toEqual({
      error: {
        message: expect.stringContaining('1 requests per minute'),
        type: 'rate_limit_error',
        param: null,
        code: 'rate_limited',
      },
    });
    expect(r.headers['x-modelgate-hint']).toContain(`resets in ${retry} s`);
  });

  it('answers a 429 in the Anthropic shape with anthropic-ratelimit-requests-*', async () => {
    await roomInMinute(10);
    expect((await sendAs(gw, 'anthropic', shapes.anthropic.key)).status).toBe(200);
    const r = await sendAs(gw, 'anthropic', shapes.anthropic.key);
    expect(r.status).toBe(429);
    expect(r.headers).toMatchObject({
      'anthropic-ratelimit-requests-limit': '1',
      'anthropic-ratelimit-requests-remaining': '0',
    });
    expect(Date.parse(String(r.headers['anthropic-ratelimit-requests-reset']))).toBeGreaterThan(Date.now() - 1000);
    expect(r.json()).toEqual({
      type: 'error',
      error: { type: 'rate_limit_error', message: expect.stringContaining('[modelgate: rate_limited]') },
    });
  });

  it('answers a 429 in the Gemini shape: RESOURCE_EXHAUSTED with a RetryInfo', async () => {
    await roomInMinute(10);
    expect((await sendAs(gw, 'gemini', shapes.gemini.key)).status).toBe(200);
    const r = await sendAs(gw, 'gemini', shapes.gemini.key);
    expect(r.status).toBe(429);
    const body = r.json();
    expect(body.error).toMatchObject({
      code: 429,
      status: 'RESOURCE_EXHAUSTED',
      message: expect.stringContaining('[modelgate: rate_limited]'),
    });
    expect(body.error.details).toEqual([
      { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${r.headers['retry-after']}s` },
    ]);
  });

  it('charges the real tokens after each response and refuses the next request once they reach the limit', async () => {
    await roomInMinute(15);
    const first = await sendAs(gw, 'openai', tokens.key);
    expect(first.status).toBe(200);
    const used = first.json().usage.total_tokens as number;
    expect(used).toBeGreaterThan(0);
    // Until the charge lands, requests pass; after it, the tokens used decide.
    let n = used;
    while (n < 30) {
      await until('the charge', async () => gw.modelgate.service!.meter.settledAll);
      const r = await sendAs(gw, 'openai', tokens.key);
      if (r.status !== 200) break;
      n += r.json().usage.total_tokens as number;
    }
    await until('the last charge', async () => gw.modelgate.service!.meter.settledAll);
    const refused = await sendAs(gw, 'openai', tokens.key);
    expect(refused.status).toBe(429);
    expect(refused.headers['x-modelgate-reason']).toBe('tokens_rate_limited');
    expect(refused.headers).toMatchObject({
      'x-should-retry': 'true',
      'x-ratelimit-limit-tokens': '30',
      'x-ratelimit-remaining-tokens': '0',
    });
    const wait = Number(refused.headers['retry-after']);
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(60);
    expect(refused.headers['x-ratelimit-reset-tokens']).toBe(`${wait}s`);
    expect(refused.json().error.message).toContain('30 tokens per minute');
  });

  it('holds a key to its requests in flight under 200 parallel streams, 429 concurrency_limited with x-should-retry: true and retry-after 1, and frees a slot when a response ends', async () => {
    const body = JSON.stringify({
      model: 'gpt-4o',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'a long story, please, in many many words' }],
    });
    const send = () =>
      gw.send('POST', '/v1/chat/completions', {
        headers: [
          ['authorization', `Bearer ${inFlight.key}`],
          ['content-type', 'application/json'],
        ],
        body,
        http2: true,
      });
    const table = gw.modelgate.service!.inFlight;
    let most = 0;
    const sampler = setInterval(() => (most = Math.max(most, table.inFlight('rl-inflight'))), 1);
    const replies = await Promise.all(Array.from({ length: 200 }, send));
    clearInterval(sampler);
    expect(most).toBeLessThanOrEqual(3);
    const ok = replies.filter((r) => r.status === 200).length;
    const refused = replies.filter((r) => r.status === 429);
    expect(ok).toBeGreaterThanOrEqual(3);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.headers['x-modelgate-reason']).toBe('concurrency_limited');
      expect(r.headers['retry-after']).toBe('1');
      expect(r.headers['x-should-retry']).toBe('true');
    }
    await until('every slot back', () => gw.modelgate.service!.inFlight.inFlight('rl-inflight') === 0);
    expect((await send()).status).toBe(200);
  });

  it('leaves keys without limits alone (no rate limit call, no headers of a limit)', async () => {
    const r = await sendAs(gw, 'openai', DEMO_KEYS.bob);
    expect(r.status).toBe(200);
    expect(r.headers['x-ratelimit-limit']).toBeUndefined();
  });
});

/**
 * The meter's word at Check time, through a real modelgate (file store): strict mode reserves a
 * request's maximum cost and denies what the balance minus requests in flight cannot cover; the
 * reservation is settled by the debit; `unmeteredStreams: deny` refuses chat streams that would
 * report no usage. Soft mode with streams allowed changes nothing.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { maxCost, requestedMaxOutput, streamsWithoutUsage } from '../../src/meter/admission';
import type { FileStore } from '../../src/store/file-store';
import { DEMO_KEYS } from '../support/demo-keys';
import { DEMO_CONFIG, deniedHeader, reasonOf, startHarness, tempConfig, type Harness } from '../support/service-harness';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const demo = readFileSync(DEMO_CONFIG, 'utf8');
const chat = (key: string, body: unknown) => ({
  method: 'POST', path: '/v1/chat/completions',
  headers: [['authorization', `Bearer ${key}`], ['content-type', 'application/json']] as [string, string][],
  body: JSON.stringify(body),
});

describe('strict mode', () => {
  it('reserves the maximum cost, denies what the balance minus reservations cannot cover, and frees it on settlement', async () => {
    h = await startHarness({ configPath: tempConfig(demo.replace('  mode: soft ', '  mode: strict ')) });
    const body = { model: 'gpt-4o-mini', max_tokens: 20, messages: [{ role: 'user', content: 'x' }] };
    // gpt-4o-mini in basic: 0.15 in / 0.6 out per million; trial has 0.00006.
    const each = maxCost(Buffer.byteLength(JSON.stringify(body)), 20, { input: 0.15, output: 0.6, cachedInput: null });
    const fits = Math.floor(0.00006 / each);
    expect(fits).toBeGreaterThanOrEqual(1);
    const answers = [];
    for (let i = 0; i < fits + 3; i++) answers.push(reasonOf(await h.check(chat(DEMO_KEYS.trial, body))));
    expect(answers.slice(0, fits).every((r) => r === 'allowed')).toBe(true);
    expect(answers.slice(fits)).toEqual(['balance_insufficient', 'balance_insufficient', 'balance_insufficient']);
    const denied = await h.check(chat(DEMO_KEYS.trial, body));
    expect(deniedHeader(denied, 'x-modelgate-hint')).toMatch(/^the key's balance minus requests in flight \([0-9.e-]+\) cannot cover this request's maximum cost \([0-9.e-]+\)/);
    // A settlement (the debit of one of them) drops its reservation: room for one more.
    const meter = (h.service.store as FileStore).meter!;
    const held = [...h.logs.decisions()].filter((d) => d.reason === 'allowed').map((d) => d.requestId as string);
    await meter.debit({ requestId: held[0], keyId: 'trial', group: 'basic', model: 'gpt-4o-mini', protocol: 'chat', inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, price: { input: 0.15, output: 0.6, cachedInput: null } });
    expect(reasonOf(await h.check(chat(DEMO_KEYS.trial, body)))).toBe('allowed');
  });

  it('reserves nothing for unlimited keys, unpriced models and token counts', async () => {
    h = await startHarness({ configPath: tempConfig(demo.replace('  mode: soft ', '  mode: strict ').replace('balance: 0.1 ', 'balance: 0.000001 ')) });
    const big = { model: 'gpt-4o-mini', max_tokens: 1_000_000, messages: [{ role: 'user', content: 'x' }] };
    expect(reasonOf(await h.check(chat(DEMO_KEYS.bob, big)))).toBe('allowed');
    expect(reasonOf(await h.check(chat(DEMO_KEYS.bob, { ...big, model: 'gpt-4o' })))).toBe('allowed');
    expect(reasonOf(await h.check(chat(DEMO_KEYS.trial, big)))).toBe('balance_insufficient');
    expect(reasonOf(await h.check({
      method: 'POST', path: '/v1/messages/count_tokens',
      headers: [['x-api-key', DEMO_KEYS.trial], ['anthropic-version', '2023-06-01'], ['content-type', 'application/json']],
      body: JSON.stringify({ model: 'claude-3-5-haiku-latest', messages: [] }),
    }))).toBe('allowed');
  });
});

describe('unmeteredStreams', () => {
  const stream = { model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'x' }] };

  it('deny: refuses a chat stream without include_usage with 400 stream_usage_required and a hint, and serves one with it', async () => {
    h = await startHarness({ configPath: tempConfig(demo.replace('  unmeteredStreams: allow ', '  unmeteredStreams: deny ')) });
    const refused = await h.check(chat(DEMO_KEYS.alice, stream));
    expect(reasonOf(refused)).toBe('stream_usage_required');
    expect(refused.denied_response?.status?.code).toBe('BadRequest');
    expect(deniedHeader(refused, 'x-modelgate-hint')).toContain('"stream_options": {"include_usage": true}');
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, { ...stream, stream_options: { include_usage: true } })))).toBe('allowed');
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, { model: 'gpt-4o-mini', messages: [] })))).toBe('allowed');
  });

  it('allow (the default): serves it', async () => {
    h = await startHarness();
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, stream)))).toBe('allowed');
  });
});

describe('estimates', () => {
  it('reads the maximum output each protocol names', () => {
    expect(requestedMaxOutput({ max_tokens: 10 })).toBe(10);
    expect(requestedMaxOutput({ max_completion_tokens: 7, max_tokens: 10 })).toBe(7);
    expect(requestedMaxOutput({ max_output_tokens: 5 })).toBe(5);
    expect(requestedMaxOutput({ generationConfig: { maxOutputTokens: 3 } })).toBe(3);
    expect(requestedMaxOutput({ max_tokens: -1 })).toBeUndefined();
    expect(requestedMaxOutput({ max_tokens: '10' })).toBeUndefined();
    expect(streamsWithoutUsage({ stream: true })).toBe(true);
    expect(streamsWithoutUsage({ stream: true, stream_options: { include_usage: true } })).toBe(false);
    expect(streamsWithoutUsage({ stream: false })).toBe(false);
  });
});

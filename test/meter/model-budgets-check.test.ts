/**
 * A key's budget on one model (modelBudgets, LiteLLM's model_max_budget) through a real modelgate
 * (file store, fake clock): strict mode admits at once only what the model's window covers and
 * refuses the rest with model_budget_exhausted, its hint naming the model and the reset; other
 * models of the group are not held to it; the next window starts afresh; soft mode overspends by at
 * most one lone request per window; the key holder's /v1/me lists it; a settlement counts in the
 * model's window only.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { tokensCost } from '../../src/meter/policy/hold';
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
const chat = jsonChat;
const body = { model: 'gpt-4o-mini', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const other = { ...body, model: 'gpt-5.5' };
const each = tokensCost(Buffer.byteLength(JSON.stringify(body)), 100, { input: 0.15, output: 0.6, cachedInput: null });

function withModelBudget(yaml: string, amount: number, period = 'day', timeZone = 'Asia/Tokyo'): string {
  const out = yaml.replace(
    /(  - id: alice[^\n]*\n(?:    [^\n]*\n)*?    balance: 12\.5\n)/,
    `$1    modelBudgets: { gpt-4o-mini: { amount: ${amount}, period: ${period}, timeZone: ${timeZone} } }\n`,
  );
  expect(out).not.toEqual(yaml);
  return out;
}
const strict = (yaml: string): string => {
  const out = yaml.replace('  mode: soft ', '  mode: strict ');
  expect(out).not.toEqual(yaml);
  return out;
};

describe("a key's budget on one model at Check time", () => {
  it("strict: admits what the model's day covers at once, refuses the rest naming the model and the reset, leaves other models alone, and starts afresh", async () => {
    let now = Date.parse('2026-11-28T12:00:00Z');
    const fits = Math.floor(0.005 / each);
    expect(fits).toBeGreaterThan(2);
    const configPath = tempConfig(strict(withModelBudget(demo, 0.005)));
    h = await startHarness({ configPath, now: () => now });
    const reasons = (
      await Promise.all(Array.from({ length: fits + 4 }, () => h!.check(chat(DEMO_KEYS.alice, body))))
    ).map(reasonOf);
    expect(reasons.filter((r) => r === 'allowed')).toHaveLength(fits);
    expect(reasons.filter((r) => r === 'model_budget_exhausted')).toHaveLength(4);
    const denied = await h.check(chat(DEMO_KEYS.alice, body));
    expect(deniedHeader(denied, 'x-modelgate-reason')).toBe('model_budget_exhausted');
    // Tokyo's 28 November ends at 15:00 UTC.
    expect(deniedHeader(denied, 'x-modelgate-hint')).toMatch(
      /^the key's daily budget for the model "gpt-4o-mini" \(0\.005\) has spent 0 in this window and its requests in flight hold [0-9.]+, so it cannot cover this request's maximum cost \([0-9.]+\): it resets at 2026-11-28T15:00:00\.000Z; use another model/,
    );
    // Another model of the group, and another key on the same model, are not held to it.
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, other)))).toBe('allowed');
    expect(reasonOf(await h.check(chat(DEMO_KEYS.bob, body)))).toBe('allowed');

    // Settled at their maximum (their deadline passed): the model's window has spent them.
    now += 2 * 3_600_000;
    h.service.meter.expire();
    await h.service.meter.idle();
    const after = await h.check(chat(DEMO_KEYS.alice, body));
    expect(reasonOf(after)).toBe('model_budget_exhausted');
    expect(deniedHeader(after, 'x-modelgate-hint')).toMatch(
      /has spent 0\.00\d+ in this window and its requests in flight hold 0,/,
    );
    // The other model's spend (one request) did not count in gpt-4o-mini's window, nor did its own in the other's.
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, other)))).toBe('allowed');

    // A restart reads the model's window from the state file.
    await h.close();
    h = await startHarness({ configPath, now: () => now });
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, body)))).toBe('model_budget_exhausted');

    // The next day in Tokyo (15:00 UTC), the model's budget starts again.
    now = Date.parse('2026-11-28T14:59:59Z');
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, body)))).toBe('model_budget_exhausted');
    now = Date.parse('2026-11-28T15:00:00Z');
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, body)))).toBe('allowed');
  });

  it("soft: one lone request may run past the model's budget, a second at once may not, and a spent window refuses", async () => {
    const now = Date.parse('2028-02-29T12:00:00Z');
    h = await startHarness({
      configPath: tempConfig(withModelBudget(demo, each / 2, 'month', 'Europe/Berlin')),
      now: () => now,
    });
    const reasons = (await Promise.all(Array.from({ length: 8 }, () => h!.check(chat(DEMO_KEYS.alice, body))))).map(
      reasonOf,
    );
    expect(reasons.filter((r) => r === 'allowed')).toHaveLength(1);
    expect(reasons.filter((r) => r === 'model_budget_exhausted')).toHaveLength(7);
    await h.service.meter.drain(0);
    const denied = await h.check(chat(DEMO_KEYS.alice, body));
    expect(reasonOf(denied)).toBe('model_budget_exhausted');
    // Berlin's March 2028 begins at 23:00 UTC on the leap day.
    expect(deniedHeader(denied, 'x-modelgate-hint')).toMatch(
      /monthly budget for the model "gpt-4o-mini" .* it resets at 2028-02-29T23:00:00\.000Z/,
    );
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, other)))).toBe('allowed');
  });

  it("shows the key holder's budget per model with its window on /v1/me", async () => {
    const now = Date.parse('2026-11-28T12:00:00Z');
    h = await startHarness({ configPath: tempConfig(withModelBudget(demo, 0.01)), now: () => now });
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, body)))).toBe('allowed');
    const me = (await (
      await fetch(`http://${h.service.httpAddress}/v1/me`, { headers: { authorization: `Bearer ${DEMO_KEYS.alice}` } })
    ).json()) as { budgets: unknown[] };
    expect(me.budgets).toEqual([
      {
        of: 'model',
        model: 'gpt-4o-mini',
        amount: 0.01,
        period: 'day',
        timeZone: 'Asia/Tokyo',
        windowStart: '2026-11-27T15:00:00.000Z',
        resetsAt: '2026-11-28T15:00:00.000Z',
        spent: 0,
        held: each,
        remaining: 0.01 - each,
      },
    ]);
  });

  it('refuses a config whose budget per model is not a budget, naming the field', async () => {
    await expect(startHarness({ configPath: tempConfig(withModelBudget(demo, 0)) })).rejects.toThrow(
      /modelBudgets.*amount/,
    );
  });
});

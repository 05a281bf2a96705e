/**
 * Budgets per window through a real modelgate (file store, fake clock): a key's daily budget in
 * New York refuses with budget_exhausted and a hint naming the reset in ISO 8601 UTC, strict mode
 * never admits more than the window's amount at once, settlements count in the window (and survive
 * a restart, from the state file), the next day starts afresh, and a group's budget holds all its
 * keys together beside each one's balance.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { addTokenToFile, adminStatePath } from '../../src/admin/file-backend';
import { generateToken, hashToken } from '../../src/admin/tokens';
import { tokensCost } from '../../src/meter/policy/hold';
import { DEMO_KEYS } from '../support/demo-keys';
import { signedWith, startWebhookReceiver } from '../support/webhook-receiver';
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
const PRICE = { input: 0.15, output: 0.6, cachedInput: null };
const body = { model: 'gpt-4o-mini', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const each = tokensCost(Buffer.byteLength(JSON.stringify(body)), 100, PRICE);

function withKeyBudget(yaml: string, amount: number): string {
  const out = yaml.replace(
    /(  - id: alice[^\n]*\n(?:    [^\n]*\n)*?    balance: 12\.5\n)/,
    `$1    budget: { amount: ${amount}, period: day, timeZone: America/New_York }\n`,
  );
  expect(out).not.toEqual(yaml);
  return out;
}

describe('budgets per window at Check time', () => {
  it("strict: admits what the day's budget covers at once, refuses the rest naming the reset, and starts afresh the next day", async () => {
    let now = Date.parse('2026-11-28T12:00:00Z');
    const fits = Math.floor(0.01 / each);
    expect(fits).toBeGreaterThan(2);
    const configPath = tempConfig(withKeyBudget(demo.replace('  mode: soft ', '  mode: strict '), 0.01));
    h = await startHarness({ configPath, now: () => now });
    const reasons = (
      await Promise.all(Array.from({ length: fits + 5 }, () => h!.check(chat(DEMO_KEYS.alice, body))))
    ).map(reasonOf);
    expect(reasons.filter((r) => r === 'allowed')).toHaveLength(fits);
    expect(reasons.filter((r) => r === 'budget_exhausted')).toHaveLength(5);
    const denied = await h.check(chat(DEMO_KEYS.alice, body));
    expect(reasonOf(denied)).toBe('budget_exhausted');
    // New York's 28 November ends at 05:00 UTC on the 29th.
    expect(deniedHeader(denied, 'x-modelgate-hint')).toMatch(
      /^the key's daily budget \(0\.01\) has spent 0 in this window and its requests in flight hold [0-9.]+, so it cannot cover this request's maximum cost \([0-9.]+\): it resets at 2026-11-29T05:00:00\.000Z/,
    );
    // Other keys are not held to alice's budget.
    expect(reasonOf(await h.check(chat(DEMO_KEYS.bob, body)))).toBe('allowed');

    // Never reported: settled at their maximum when their deadline passes; the window has spent them.
    now += 3 * 3_600_000;
    h.service.meter.expire();
    await h.service.meter.idle();
    const after = await h.check(chat(DEMO_KEYS.alice, body));
    expect(reasonOf(after)).toBe('budget_exhausted');
    expect(deniedHeader(after, 'x-modelgate-hint')).toMatch(
      /has spent 0\.00\d+ in this window and its requests in flight hold 0,/,
    );

    // A restart reads the window's spend from the state file.
    await h.close();
    h = await startHarness({ configPath, now: () => now });
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, body)))).toBe('budget_exhausted');

    // The next day in New York (05:00 UTC), the budget starts again.
    now = Date.parse('2026-11-29T04:59:59Z');
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, body)))).toBe('budget_exhausted');
    now = Date.parse('2026-11-29T05:00:00Z');
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, body)))).toBe('allowed');
  });

  it('soft: one lone request may run past the budget, a second at once may not, and a spent window refuses', async () => {
    const now = Date.parse('2026-03-08T12:00:00Z');
    h = await startHarness({ configPath: tempConfig(withKeyBudget(demo, each / 2)), now: () => now });
    const reasons = (await Promise.all(Array.from({ length: 10 }, () => h!.check(chat(DEMO_KEYS.alice, body))))).map(
      reasonOf,
    );
    expect(reasons.filter((r) => r === 'allowed')).toHaveLength(1);
    expect(reasons.filter((r) => r === 'budget_exhausted')).toHaveLength(9);
    const id = h.logs.decisions().find((d) => d.reason === 'allowed')!.requestId as string;
    expect(h.service.meter.deps.inFlight.get(id)?.budgetHold).toBeDefined();
    // Settled at its maximum (a drain's provisional debit): the window has spent more than its amount.
    await h.service.meter.drain(0);
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, body)))).toBe('budget_exhausted');
  });

  it("holds a group's keys together to the group's budget, beside each key's balance", async () => {
    const now = Date.parse('2028-02-29T12:00:00Z');
    const yaml = demo
      .replace(
        /(\n  basic:\n    available: true\n)/,
        `$1    budget: { amount: ${each * 2.5}, period: month, timeZone: Europe/Berlin }\n`,
      )
      .replace('  mode: soft ', '  mode: strict ');
    expect(yaml).not.toEqual(demo);
    h = await startHarness({ configPath: tempConfig(yaml), now: () => now });
    const reasons = [];
    for (const key of [DEMO_KEYS.alice, DEMO_KEYS.alice, DEMO_KEYS.trial])
      reasons.push(reasonOf(await h.check(chat(key, body))));
    // trial's own balance (0.00006) might refuse it too: here the group's budget is the tighter.
    expect(reasons).toEqual(['allowed', 'allowed', 'budget_exhausted']);
    const denied = await h.check(chat(DEMO_KEYS.alice, body));
    // Berlin's March 2028 begins at 23:00 UTC on the leap day.
    expect(deniedHeader(denied, 'x-modelgate-hint')).toMatch(
      /^the group "basic"'s monthly budget .* it resets at 2028-02-29T23:00:00\.000Z/,
    );
  });

  it("shows the key holder's budget windows with their reset times on /v1/me", async () => {
    let now = Date.parse('2026-11-01T05:30:00Z'); // 01:30 EDT, the day New York's clocks go back
    const yaml = withKeyBudget(demo, 0.01).replace(
      /(\n  basic:\n    available: true\n)/,
      '$1    budget: { amount: 5, period: week, timeZone: Europe/Berlin }\n',
    );
    h = await startHarness({ configPath: tempConfig(yaml), now: () => now });
    expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, body)))).toBe('allowed');
    const res = await fetch(`http://${h.service.httpAddress}/v1/me`, {
      headers: { authorization: `Bearer ${DEMO_KEYS.alice}` },
    });
    expect(res.status).toBe(200);
    const me = (await res.json()) as { balance: number; budgets: unknown[] };
    expect(me.balance).toBeGreaterThan(0);
    expect(me.budgets).toEqual([
      {
        of: 'key',
        amount: 0.01,
        period: 'day',
        timeZone: 'America/New_York',
        windowStart: '2026-11-01T04:00:00.000Z',
        resetsAt: '2026-11-02T05:00:00.000Z',
        spent: 0,
        held: each,
        remaining: 0.01 - each,
      },
      // 2026-11-01 is a Sunday: Berlin's week began on Monday 26 October, the day after its clocks went back (CET,
      // +01:00).
      {
        of: 'group',
        amount: 5,
        period: 'week',
        timeZone: 'Europe/Berlin',
        windowStart: '2026-10-25T23:00:00.000Z',
        resetsAt: '2026-11-01T23:00:00.000Z',
        spent: 0,
        held: each,
        remaining: 5 - each,
      },
    ]);
    now = Date.parse('2026-11-02T05:00:00Z');
    const next = (await (
      await fetch(`http://${h.service.httpAddress}/v1/me`, { headers: { authorization: `Bearer ${DEMO_KEYS.alice}` } })
    ).json()) as { budgets: { resetsAt: string }[] };
    expect(next.budgets.map((b) => b.resetsAt)).toEqual(['2026-11-03T05:00:00.000Z', '2026-11-08T23:00:00.000Z']);
  });

  it("sends the budget's threshold alerts to the configured webhook, signed, once each", async () => {
    const receiver = await startWebhookReceiver();
    const { got } = receiver;
    try {
      let now = Date.parse('2026-11-28T12:00:00Z');
      const url = `${receiver.base}/hook`;
      const yaml = withKeyBudget(demo.replace('  mode: soft ', '  mode: strict '), each * 4).replace(
        /\nmeter:\n/,
        `\nmeter:\n  budgetAlerts: { url: "${url}", secretEnv: HOOK_SECRET }\n`,
      );
      expect(yaml).toContain('budgetAlerts');
      const configPath = tempConfig(yaml);
      const token = generateToken();
      addTokenToFile(
        adminStatePath(configPath),
        { id: 'tok-read', sha256: hashToken(token), scope: 'read', createdAt: now },
        { tokenId: 'cli', address: null, requestId: null },
      );
      h = await startHarness({ configPath, now: () => now, env: { ...process.env, HOOK_SECRET: 'hook-secret' } });
      for (let i = 0; i < 4; i++) expect(reasonOf(await h.check(chat(DEMO_KEYS.alice, body)))).toBe('allowed');
      // Settled at their maximum (their deadline passed): 100 % of the budget.
      now += 3 * 3_600_000;
      h.service.meter.expire();
      await h.service.meter.idle();
      const end = Date.now() + 5000;
      while (got.length < 4 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
      expect(got.map((g) => g.threshold).sort((a, b) => a - b)).toEqual([50, 80, 95, 100]);
      expect(new Set(got.map((g) => g.eventId)).size).toBe(4);
      expect(got.every((g) => signedWith('hook-secret', g))).toBe(true);
      expect(h.logs.raw.join('\n')).toContain('budget alert delivered');
      // Their delivery status through the admin API, kept in modelgate's own state file.
      const seen = async (): Promise<{
        deliveries: {
          eventId: string;
          status: string;
          attempts: number;
          threshold: number;
          subject: string;
          lastError: string | null;
        }[];
      }> =>
        (
          await fetch(`http://${h!.service.httpAddress}/admin/v1/webhooks/deliveries`, {
            headers: { authorization: `Bearer ${token}` },
          })
        ).json() as never;
      const stop = Date.now() + 5000;
      while ((await seen()).deliveries.some((d) => d.status !== 'delivered') && Date.now() < stop)
        await new Promise((r) => setTimeout(r, 10));
      const { deliveries } = await seen();
      expect(deliveries.map((d) => d.threshold).sort((a, b) => a - b)).toEqual([50, 80, 95, 100]);
      expect(
        deliveries.every(
          (d) => d.status === 'delivered' && d.attempts === 1 && d.lastError === null && d.subject === 'key:alice',
        ),
      ).toBe(true);
      expect(new Set(deliveries.map((d) => d.eventId))).toEqual(new Set(got.map((g) => g.eventId)));
      expect(readFileSync(adminStatePath(configPath), 'utf8')).toContain(got[0].eventId);
      expect(JSON.stringify(deliveries)).not.toContain(url);
    } finally {
      await receiver.close();
    }
  });

  it('gives back the budget hold of a request that ended before its answer, and of one whose id came twice', async () => {
    const now = Date.parse('2026-11-28T12:00:00Z');
    h = await startHarness({
      configPath: tempConfig(withKeyBudget(demo.replace('  mode: soft ', '  mode: strict '), 1)),
      now: () => now,
    });
    const me = async (): Promise<{ held: number }> =>
      (
        (await (
          await fetch(`http://${h!.service.httpAddress}/v1/me`, {
            headers: { authorization: `Bearer ${DEMO_KEYS.alice}` },
          })
        ).json()) as { budgets: { held: number }[] }
      ).budgets[0];
    const withId = (id: string) => ({
      ...chat(DEMO_KEYS.alice, body),
      headers: [...chat(DEMO_KEYS.alice, body).headers, ['x-request-id', id]] as [string, string][],
    });
    h.service.meter.deps.inFlight.gone('ended-early');
    expect(reasonOf(await h.check(withId('ended-early')))).toBe('allowed');
    expect((await me()).held).toBe(0);
    expect(reasonOf(await h.check(withId('twice')))).toBe('allowed');
    expect(reasonOf(await h.check(withId('twice')))).toBe('allowed');
    expect((await me()).held).toBe(each);
  });
});

/**
 * Budget windows (src/store/budget-window.ts) at fixed instants: a month end, a leap day, the
 * daylight saving changes of America/New_York and Europe/Berlin, a zone 30 minutes off its summer
 * time, and property tests (fast-check) that a window holds its instant and that windows tile.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { budgetWindow, isTimeZone, nextBudgetWindow, type BudgetPeriod } from '../../src/store/budget-window';

const at = (iso: string): number => Date.parse(iso);
const iso = (t: number): string => new Date(t).toISOString();
const windowIso = (period: BudgetPeriod, tz: string, instant: string): [string, string] => {
  const w = budgetWindow(period, tz, at(instant));
  return [iso(w.start), iso(w.resetsAt)];
};
const HOUR = 3_600_000;

describe('budgetWindow', () => {
  it('gives the UTC day, ISO week and calendar month across a month end', () => {
    expect(windowIso('day', 'UTC', '2026-01-31T23:59:59.999Z')).toEqual([
      '2026-01-31T00:00:00.000Z',
      '2026-02-01T00:00:00.000Z',
    ]);
    expect(windowIso('day', 'UTC', '2026-02-01T00:00:00.000Z')).toEqual([
      '2026-02-01T00:00:00.000Z',
      '2026-02-02T00:00:00.000Z',
    ]);
    expect(windowIso('month', 'UTC', '2026-01-31T23:59:59.999Z')).toEqual([
      '2026-01-01T00:00:00.000Z',
      '2026-02-01T00:00:00.000Z',
    ]);
    expect(windowIso('month', 'UTC', '2026-02-14T12:00:00Z')).toEqual([
      '2026-02-01T00:00:00.000Z',
      '2026-03-01T00:00:00.000Z',
    ]);
    expect(windowIso('month', 'UTC', '2026-12-31T12:00:00Z')).toEqual([
      '2026-12-01T00:00:00.000Z',
      '2027-01-01T00:00:00.000Z',
    ]);
    // 2026-01-29 is a Thursday: its ISO week runs Monday 26 January to Monday 2 February.
    expect(windowIso('week', 'UTC', '2026-01-29T08:00:00Z')).toEqual([
      '2026-01-26T00:00:00.000Z',
      '2026-02-02T00:00:00.000Z',
    ]);
    // A Sunday late at night still belongs to the week that began on the Monday before it.
    expect(windowIso('week', 'UTC', '2026-02-01T23:30:00Z')).toEqual([
      '2026-01-26T00:00:00.000Z',
      '2026-02-02T00:00:00.000Z',
    ]);
  });

  it('counts a leap day: February 2028 has 29 days', () => {
    expect(windowIso('day', 'UTC', '2028-02-29T10:00:00Z')).toEqual([
      '2028-02-29T00:00:00.000Z',
      '2028-03-01T00:00:00.000Z',
    ]);
    const feb = budgetWindow('month', 'UTC', at('2028-02-29T10:00:00Z'));
    expect([iso(feb.start), iso(feb.resetsAt)]).toEqual(['2028-02-01T00:00:00.000Z', '2028-03-01T00:00:00.000Z']);
    expect((feb.resetsAt - feb.start) / (24 * HOUR)).toBe(29);
    const feb2027 = budgetWindow('month', 'UTC', at('2027-02-10T00:00:00Z'));
    expect((feb2027.resetsAt - feb2027.start) / (24 * HOUR)).toBe(28);
    // Tokyo (UTC+9): the leap day begins at 15:00 UTC on the 28th.
    expect(windowIso('day', 'Asia/Tokyo', '2028-02-28T15:00:00Z')).toEqual([
      '2028-02-28T15:00:00.000Z',
      '2028-02-29T15:00:00.000Z',
    ]);
  });

  it('makes a New York day 23 hours long when clocks go forward and 25 when they go back', () => {
    const spring = budgetWindow('day', 'America/New_York', at('2026-03-08T12:00:00Z'));
    expect([iso(spring.start), iso(spring.resetsAt)]).toEqual(['2026-03-08T05:00:00.000Z', '2026-03-09T04:00:00.000Z']);
    expect(spring.resetsAt - spring.start).toBe(23 * HOUR);
    const autumn = budgetWindow('day', 'America/New_York', at('2026-11-01T06:30:00Z')); // 01:30 EDT, the first of two
    expect([iso(autumn.start), iso(autumn.resetsAt)]).toEqual(['2026-11-01T04:00:00.000Z', '2026-11-02T05:00:00.000Z']);
    expect(autumn.resetsAt - autumn.start).toBe(25 * HOUR);
    // 01:30 EST, the second 01:30 of the night: the same day.
    expect(budgetWindow('day', 'America/New_York', at('2026-11-01T06:30:00Z') + HOUR)).toEqual(autumn);
    // The month of March 2026 in New York: 31 days less the hour it lost.
    const march = budgetWindow('month', 'America/New_York', at('2026-03-20T00:00:00Z'));
    expect([iso(march.start), iso(march.resetsAt)]).toEqual(['2026-03-01T05:00:00.000Z', '2026-04-01T04:00:00.000Z']);
    expect(march.resetsAt - march.start).toBe(31 * 24 * HOUR - HOUR);
  });

  it('follows Berlin across its changes on 2026-03-29 and 2026-10-25', () => {
    expect(windowIso('day', 'Europe/Berlin', '2026-03-29T10:00:00Z')).toEqual([
      '2026-03-28T23:00:00.000Z',
      '2026-03-29T22:00:00.000Z',
    ]);
    expect(windowIso('day', 'Europe/Berlin', '2026-10-25T10:00:00Z')).toEqual([
      '2026-10-24T22:00:00.000Z',
      '2026-10-25T23:00:00.000Z',
    ]);
    // The ISO week holding the spring change: 168 hours less one.
    const week = budgetWindow('week', 'Europe/Berlin', at('2026-03-26T12:00:00Z'));
    expect([iso(week.start), iso(week.resetsAt)]).toEqual(['2026-03-22T23:00:00.000Z', '2026-03-29T22:00:00.000Z']);
    expect(week.resetsAt - week.start).toBe(167 * HOUR);
    // Just before midnight local time on the last day of a month is still that month.
    expect(windowIso('month', 'Europe/Berlin', '2026-01-31T22:59:59.999Z')).toEqual([
      '2025-12-31T23:00:00.000Z',
      '2026-01-31T23:00:00.000Z',
    ]);
    expect(windowIso('month', 'Europe/Berlin', '2026-01-31T23:00:00.000Z')).toEqual([
      '2026-01-31T23:00:00.000Z',
      '2026-02-28T23:00:00.000Z',
    ]);
  });

  it('handles a half-hour change (Lord Howe Island) and a zone whose midnight is skipped (Santiago)', () => {
    // Lord Howe: +10:30 standard, +11:00 summer; summer ends at 02:00 on 2026-04-05.
    const lh = budgetWindow('day', 'Australia/Lord_Howe', at('2026-04-05T03:00:00Z'));
    expect(lh.resetsAt - lh.start).toBe(24.5 * HOUR);
    // Santiago moves clocks from 24:00 to 01:00 on 2026-09-06: that day starts at 01:00 local (04:00Z).
    const cl = budgetWindow('day', 'America/Santiago', at('2026-09-06T12:00:00Z'));
    expect(iso(cl.start)).toBe('2026-09-06T04:00:00.000Z');
    expect(cl.resetsAt - cl.start).toBe(23 * HOUR);
  });

  it('knows IANA zones and refuses other names', () => {
    expect(isTimeZone('Europe/Berlin')).toBe(true);
    expect(isTimeZone('UTC')).toBe(true);
    expect(isTimeZone('Mars/Olympus_Mons')).toBe(false);
    expect(isTimeZone('')).toBe(false);
    expect(() => budgetWindow('day', 'Not/AZone', 0)).toThrow(RangeError);
  });
});

describe('budgetWindow properties', () => {
  const zones = [
    'UTC',
    'America/New_York',
    'Europe/Berlin',
    'Australia/Lord_Howe',
    'Asia/Kolkata',
    'Pacific/Chatham',
    'America/Santiago',
    'Pacific/Kiritimati',
    'Pacific/Pago_Pago',
  ];
  const instant = fc.integer({ min: at('2020-01-01T00:00:00Z'), max: at('2040-01-01T00:00:00Z') });
  const period = fc.constantFrom<BudgetPeriod>('day', 'week', 'month');
  const zone = fc.constantFrom(...zones);

  it('a window holds its instant and lasts a day, a week or a month give or take a change of offset', () => {
    fc.assert(
      fc.property(period, zone, instant, (p, tz, t) => {
        const w = budgetWindow(p, tz, t);
        expect(w.start).toBeLessThanOrEqual(t);
        expect(w.resetsAt).toBeGreaterThan(t);
        const days = (w.resetsAt - w.start) / (24 * HOUR);
        const [lo, hi] =
          p === 'day' ? [22 / 24, 26 / 24] : p === 'week' ? [7 - 2 / 24, 7 + 2 / 24] : [28 - 2 / 24, 31 + 2 / 24];
        expect(days).toBeGreaterThanOrEqual(lo);
        expect(days).toBeLessThanOrEqual(hi);
      }),
      { numRuns: 500 },
    );
  });

  it('consecutive windows tile: every instant of a window gives the same window, and the next starts at its reset', () => {
    fc.assert(
      fc.property(period, zone, instant, fc.double({ min: 0, max: 1, noNaN: true }), (p, tz, t, f) => {
        const w = budgetWindow(p, tz, t);
        expect(budgetWindow(p, tz, w.start)).toEqual(w);
        expect(budgetWindow(p, tz, w.resetsAt - 1)).toEqual(w);
        const inside = w.start + Math.floor(f * (w.resetsAt - w.start - 1));
        expect(budgetWindow(p, tz, inside)).toEqual(w);
        const next = nextBudgetWindow(p, tz, w);
        expect(next.start).toBe(w.resetsAt);
        expect(budgetWindow(p, tz, w.start - 1).resetsAt).toBe(w.start);
      }),
      { numRuns: 300 },
    );
  });
});

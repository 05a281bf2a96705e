/**
 * The budget book (src/meter/budgets.ts) with a fake clock and an in-memory ledger: one ledger
 * query per budget and window, strict mode's zero overspend per window under many concurrent
 * requests, soft mode's bound of one request's maximum per window, the reset at the window's end
 * (New York's month across the day clocks go back), a key's and a group's budget both holding, and
 * a ledger that cannot answer refusing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BudgetBook, budgetAllows, type BudgetSubject } from '../../src/meter/budgets';
import type { Budget } from '../../src/store/budget-window';

const at = (iso: string): number => Date.parse(iso);

function ledger() {
  const debits: { subject: string; time: number; cost: number }[] = [];
  const loads: { subject: string; since: number; until: number }[] = [];
  const load = async (s: BudgetSubject, since: number, until: number): Promise<number> => {
    loads.push({ subject: `${s.kind}:${s.name}`, since, until });
    return debits
      .filter((d) => d.subject === `${s.kind}:${s.name}` && d.time >= since && d.time < until)
      .reduce((a, d) => a + d.cost, 0);
  };
  return { debits, loads, load };
}

const key: BudgetSubject = { kind: 'key', name: 'team-a' };
const group: BudgetSubject = { kind: 'group', name: 'staff' };
const daily: Budget = { amount: 10, period: 'day', timeZone: 'UTC' };

describe('budgetAllows', () => {
  it('strict: a request must fit what the window has left after the requests in flight', () => {
    expect(budgetAllows('strict', 10, 5, 1, 2, 1, 2)).toBe(true);
    expect(budgetAllows('strict', 10, 5, 1, 2, 1, 2.000001)).toBe(false);
    expect(budgetAllows('strict', 10, 0, 0, 0, 0, 11)).toBe(false);
  });
  it('strict with R replicas: each must fit its share of what was left when it loaded', () => {
    expect(budgetAllows('strict', 10, 4, 0, 0, 0, 2, 3)).toBe(true);
    expect(budgetAllows('strict', 10, 4, 1, 0, 0, 1.5, 3)).toBe(false);
    expect(budgetAllows('strict', 10, 0, 0, 0, 0, 0.01, 0)).toBe(false);
  });
  it('soft: a lone request runs while the window has something left; a second one must fit', () => {
    expect(budgetAllows('soft', 10, 9, 0.5, 0, 0, 5)).toBe(true);
    expect(budgetAllows('soft', 10, 9, 0.5, 5, 1, 5)).toBe(false);
    expect(budgetAllows('soft', 10, 9, 1, 0, 0, 0.1)).toBe(false);
    expect(budgetAllows('soft', 10, 0, 0, 0, 0, 1, 0)).toBe(true);
  });
});

describe('BudgetBook', () => {
  it('asks the ledger once per window, then counts settlements itself', async () => {
    const l = ledger();
    l.debits.push(
      { subject: 'key:team-a', time: at('2026-11-28T01:00:00Z'), cost: 4 },
      { subject: 'key:team-a', time: at('2026-11-27T23:00:00Z'), cost: 100 },
    );
    let now = at('2026-11-28T10:00:00Z');
    const book = new BudgetBook({ load: l.load, now: () => now });
    const a = await book.admit([{ subject: key, budget: daily }], 3, 'strict');
    expect(a.ok).toBe(true);
    if (!a.ok) return;
    book.settle(a.hold, 2.5, now);
    const b = await book.admit([{ subject: key, budget: daily }], 3.5, 'strict'); // 4 + 2.5 + 3.5 = 10: fits
    expect(b.ok).toBe(true);
    const c = await book.admit([{ subject: key, budget: daily }], 0.01, 'strict');
    expect(c).toMatchObject({
      ok: false,
      why: 'exhausted',
      status: { spent: 6.5, held: 3.5, remaining: 0, window: { resetsAt: at('2026-11-29T00:00:00Z') } },
    });
    expect(l.loads).toEqual([
      { subject: 'key:team-a', since: at('2026-11-28T00:00:00Z'), until: at('2026-11-29T00:00:00Z') },
    ]);
    // The next day: a new window, loaded once, with nothing spent in it; what is in flight still holds.
    now = at('2026-11-29T00:00:00Z');
    const d = await book.admit([{ subject: key, budget: daily }], 6.5, 'strict');
    expect(d.ok).toBe(true);
    expect(await book.status(key, daily)).toMatchObject({ spent: 0, held: 10, remaining: 0 });
    expect(l.loads).toHaveLength(2);
  });

  it('strict mode never lets a window spend more than its amount, however requests interleave', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            cost: fc.integer({ min: 1, max: 400 }),
            actual: fc.double({ min: 0, max: 1, noNaN: true }),
            settleNow: fc.boolean(),
          }),
          { minLength: 1, maxLength: 60 },
        ),
        async (requests) => {
          const l = ledger();
          const now = at('2026-02-28T12:00:00Z');
          const book = new BudgetBook({ load: l.load, now: () => now });
          const budget: Budget = { amount: 1000, period: 'month', timeZone: 'Europe/Berlin' };
          const open: { hold: Parameters<BudgetBook['release']>[0]; cost: number }[] = [];
          let spent = 0;
          // Every admission starts before any settles (concurrent requests), then settlements interleave.
          const verdicts = await Promise.all(
            requests.map((r) => book.admit([{ subject: key, budget }], r.cost, 'strict')),
          );
          verdicts.forEach((v, i) => {
            if (v.ok) open.push({ hold: v.hold, cost: Math.floor(requests[i].cost * requests[i].actual) });
          });
          for (const [i, o] of open.entries()) {
            if (requests[i]?.settleNow === false) book.release(o.hold);
            else {
              book.settle(o.hold, o.cost, now);
              spent += o.cost;
            }
            const again = await book.admit([{ subject: key, budget }], 50, 'strict');
            if (again.ok) {
              book.settle(again.hold, 50, now);
              spent += 50;
            }
          }
          expect(spent).toBeLessThanOrEqual(1000);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('strict mode with R replicas on one ledger, none hearing the others, never spends more than the amount', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 0, max: 500 }),
        fc.array(
          fc.record({
            replica: fc.nat(),
            cost: fc.integer({ min: 1, max: 300 }),
            actual: fc.double({ min: 0, max: 1, noNaN: true }),
            settleAt: fc.nat(),
          }),
          { minLength: 1, maxLength: 80 },
        ),
        async (replicas, before, steps) => {
          // The shared ledger: what was spent before the replicas started, then every settlement.
          const debits: { subject: string; time: number; cost: number }[] = [
            { subject: 'key:team-a', time: at('2026-02-28T01:00:00Z'), cost: before },
          ];
          const load = async (s: BudgetSubject, since: number, until: number): Promise<number> =>
            debits
              .filter((d) => d.subject === `${s.kind}:${s.name}` && d.time >= since && d.time < until)
              .reduce((a, d) => a + d.cost, 0);
          const now = at('2026-02-28T12:00:00Z');
          const books = Array.from({ length: replicas }, () => new BudgetBook({ load, now: () => now }));
          const budget: Budget = { amount: 1000, period: 'day', timeZone: 'UTC' };
          const open: {
            book: BudgetBook;
            hold: Parameters<BudgetBook['release']>[0];
            cost: number;
            settleAt: number;
          }[] = [];
          for (const [i, st] of steps.entries()) {
            const book = books[st.replica % replicas];
            const v = await book.admit([{ subject: key, budget }], st.cost, 'strict', replicas);
            if (v.ok)
              open.push({ book, hold: v.hold, cost: Math.ceil(st.cost * st.actual), settleAt: i + (st.settleAt % 5) });
            // Settle what is due: into the ledger, and into the admitting replica's book only.
            for (const o of open.filter((x) => x.settleAt <= i)) {
              debits.push({ subject: 'key:team-a', time: now, cost: o.cost });
              o.book.settle(o.hold, o.cost, now);
              open.splice(open.indexOf(o), 1);
            }
          }
          for (const o of open) debits.push({ subject: 'key:team-a', time: now, cost: o.cost });
          const spent = debits.reduce((a, d) => a + d.cost, 0);
          expect(spent).toBeLessThanOrEqual(Math.max(1000, before));
        },
      ),
      { numRuns: 150 },
    );
  });

  it('soft mode lets one lone request run past the amount, never a second one at once', async () => {
    const l = ledger();
    const now = at('2026-11-28T10:00:00Z');
    const book = new BudgetBook({ load: l.load, now: () => now });
    const first = await book.admit([{ subject: key, budget: daily }], 9, 'soft');
    expect(first.ok).toBe(true);
    const second = await book.admit([{ subject: key, budget: daily }], 2, 'soft');
    expect(second.ok).toBe(false);
    if (!first.ok) return;
    book.settle(first.hold, 9, now);
    // 1 left: a lone request of maximum 5 runs (the bound: one request's maximum past the amount).
    const lone = await book.admit([{ subject: key, budget: daily }], 5, 'soft');
    expect(lone.ok).toBe(true);
    if (!lone.ok) return;
    book.settle(lone.hold, 5, now);
    expect(await book.admit([{ subject: key, budget: daily }], 0.001, 'soft')).toMatchObject({
      ok: false,
      why: 'exhausted',
      status: { spent: 14 },
    });
  });

  it("holds a key by both its own budget and its group's: the tighter refuses and names whose", async () => {
    const l = ledger();
    l.debits.push({ subject: 'group:staff', time: at('2026-11-02T12:00:00Z'), cost: 95 });
    const now = at('2026-11-20T12:00:00Z');
    const book = new BudgetBook({ load: l.load, now: () => now });
    const monthly: Budget = { amount: 100, period: 'month', timeZone: 'America/New_York' };
    const v = await book.admit(
      [
        { subject: key, budget: daily },
        { subject: group, budget: monthly },
      ],
      6,
      'strict',
    );
    expect(v).toMatchObject({
      ok: false,
      why: 'exhausted',
      status: {
        subject: group,
        spent: 95,
        window: { start: at('2026-11-01T04:00:00Z'), resetsAt: at('2026-12-01T05:00:00Z') },
      },
    });
    const w = await book.admit(
      [
        { subject: key, budget: daily },
        { subject: group, budget: monthly },
      ],
      5,
      'strict',
    );
    expect(w.ok).toBe(true);
    expect(await book.status(key, daily)).toMatchObject({ held: 5 });
    expect(await book.status(group, monthly)).toMatchObject({ held: 5, remaining: 0 });
  });

  it('counts a settlement heard while the window loads (at worst twice, never not at all)', async () => {
    let release: (n: number) => void = () => {};
    const book = new BudgetBook({
      load: () =>
        new Promise<number>((r) => {
          release = r;
        }),
      now: () => at('2026-11-28T10:00:00Z'),
    });
    const pending = book.admit([{ subject: key, budget: daily }], 1, 'strict');
    book.record(key, 3, at('2026-11-28T09:00:00Z'));
    book.record(key, 50, at('2026-11-27T09:00:00Z')); // another window's
    release(4);
    expect(await pending).toMatchObject({ ok: true });
    expect(await book.status(key, daily)).toMatchObject({ spent: 7, held: 1 });
  });

  it('refuses as unavailable when the ledger cannot answer, and asks again next time', async () => {
    let fail = true;
    const book = new BudgetBook({
      load: async () => {
        if (fail) throw new Error('down');
        return 0;
      },
      now: () => at('2026-11-28T10:00:00Z'),
    });
    expect(await book.admit([{ subject: key, budget: daily }], 1, 'soft')).toEqual({
      ok: false,
      why: 'unavailable',
      subject: key,
    });
    const nan = new BudgetBook({ load: async () => Number.NaN, now: () => at('2026-11-28T10:00:00Z') });
    expect(await nan.admit([{ subject: key, budget: daily }], 1, 'soft')).toMatchObject({
      ok: false,
      why: 'unavailable',
    });
    fail = false;
    expect(await book.admit([{ subject: key, budget: daily }], 1, 'soft')).toMatchObject({ ok: true });
  });
});

describe('a request admitted in one window and settled in the next', () => {
  it('reports the thresholds its debit took the next window past, from that window loaded with the debit, counted once', async () => {
    const l = ledger();
    let now = at('2026-11-28T23:59:00Z');
    const moves: { start: number; before: number; after: number }[] = [];
    const book = new BudgetBook({
      load: l.load,
      now: () => now,
      onSpent: (_s, _b, w, before, after) => moves.push({ start: w.start, before, after }),
    });
    const a = await book.admit([{ subject: key, budget: daily }], 9, 'strict');
    expect(a.ok).toBe(true);
    if (!a.ok) return;
    // It ends after midnight: the ledger holds its debit in the new day before the settlement is recorded.
    now = at('2026-11-29T00:01:00Z');
    l.debits.push({ subject: 'key:team-a', time: now, cost: 8.5 });
    book.settle(a.hold, 8.5, now);
    await new Promise((r) => setImmediate(r));
    expect(moves).toEqual([{ start: at('2026-11-29T00:00:00Z'), before: 0, after: 8.5 }]);
    // Counted once: 8.5 of 10 spent, nothing held.
    expect(await book.status(key, daily)).toMatchObject({ spent: 8.5, held: 0, remaining: 1.5 });
    expect((await book.admit([{ subject: key, budget: daily }], 1.5, 'strict')).ok).toBe(true);
    expect((await book.admit([{ subject: key, budget: daily }], 0.01, 'strict')).ok).toBe(false);
  });
});

describe('budgets of a key on one model', () => {
  it("keeps a window per (key, model), apart from the key's own and from another model's, loading each with its model, and names the model when it refuses", async () => {
    const loads: { subject: BudgetSubject; since: number }[] = [];
    let now = at('2026-11-28T12:00:00Z');
    const book = new BudgetBook({
      load: async (s, since) => {
        loads.push({ subject: s, since });
        return 0;
      },
      now: () => now,
    });
    const onModel: BudgetSubject = { kind: 'model', name: 'team-a', model: 'gpt-4o' };
    const otherModel: BudgetSubject = { kind: 'model', name: 'team-a', model: 'gpt-4o-mini' };
    // A model whose name looks like another subject's key must not share its entry.
    const tricky: BudgetSubject = { kind: 'model', name: 'team-a:gpt-4o', model: '' };
    const small: Budget = { amount: 1, period: 'day', timeZone: 'Asia/Tokyo' };
    const first = await book.admit(
      [
        { subject: key, budget: daily },
        { subject: onModel, budget: small },
      ],
      0.8,
      'strict',
    );
    expect(first.ok).toBe(true);
    const second = await book.admit(
      [
        { subject: key, budget: daily },
        { subject: onModel, budget: small },
      ],
      0.8,
      'strict',
    );
    expect(second).toMatchObject({ ok: false, why: 'exhausted', status: { subject: onModel, spent: 0, held: 0.8 } });
    // The key's own budget and the other model's hold nothing of it.
    expect((await book.admit([{ subject: otherModel, budget: small }], 0.8, 'strict')).ok).toBe(true);
    expect((await book.admit([{ subject: tricky, budget: small }], 0.8, 'strict')).ok).toBe(true);
    expect(loads.map((l) => l.subject)).toEqual([key, onModel, otherModel, tricky]);
    if (first.ok) book.settle(first.hold, 0.9, now);
    expect((await book.status(onModel, small)).spent).toBe(0.9);
    expect((await book.status(key, daily)).spent).toBe(0.9);
    expect((await book.status(otherModel, small)).spent).toBe(0);
    // Tokyo's next day (15:00 UTC): a new window, loaded again.
    now = at('2026-11-28T15:00:00Z');
    expect((await book.admit([{ subject: onModel, budget: small }], 0.8, 'strict')).ok).toBe(true);
    expect(loads.at(-1)).toEqual({ subject: onModel, since: at('2026-11-28T15:00:00Z') });
  });
});

/**
 * Strict mode's leases (src/meter/leases.ts) against a store that grants like PostgreSQL's lease():
 * reservations come from the lease in memory, one store call at a time per key, and no more is ever
 * reserved than the store granted.
 */
import { describe, expect, it } from 'vitest';
import { LeaseBook, IDLE_MS, EXHAUSTED_MS } from '../../src/meter/leases';

/** A store with `balance` for one key, shared by replicas, counting calls. */
function fakeStore(balance: number) {
  const leases = new Map<string, number>();
  const calls: Array<[string, number]> = [];
  return {
    calls,
    leases,
    spend(replica: string, cost: number) {
      balance -= cost;
      leases.set(replica, Math.max(0, (leases.get(replica) ?? 0) - cost));
    },
    async lease(replica: string, _key: string, want: number, need: number) {
      calls.push([replica, want]);
      await new Promise((r) => setTimeout(r, 2));
      let others = 0;
      for (const [r, a] of leases) if (r !== replica) others += a;
      const covered = balance - others;
      const granted = Math.max(0, Math.min(want, Math.max(need, covered / 2), covered));
      leases.set(replica, granted);
      return { granted, balance };
    },
  };
}

describe('LeaseBook', () => {
  it('cuts a lease to a balance lowered outside the meter (its notification), so nothing past it is served from the lease', async () => {
    const store = fakeStore(100);
    const book = new LeaseBook(store, 'a');
    expect((await book.reserve('k', 1, 'sha-k')).ok).toBe(true);
    // The lease holds more than the request (it doubles what is in use); the balance drops to 1.
    book.balanceIs('sha-k', 1);
    book.balanceIs('sha-other', 0); // another key's notification changes nothing here
    store.spend('billing', 99);
    const calls = store.calls.length;
    expect((await book.reserve('k', 1, 'sha-k')).ok).toBe(false);
    // It asked the store rather than serving from the lease's old room.
    expect(store.calls.length).toBe(calls + 1);
  });

  it('cuts a grant that lands after a lower balance was notified (the lease call and the notification race on different connections)', async () => {
    const store = fakeStore(100);
    let land: () => void = () => {};
    const slow = {
      ...store,
      async lease(replica: string, key: string, want: number, need: number) {
        const r = await store.lease(replica, key, want, need);
        await new Promise<void>((resolve) => {
          land = resolve;
        });
        return r;
      },
    };
    const book = new LeaseBook(slow, 'a');
    const first = book.reserve('k', 1, 'sha-k');
    await new Promise((r) => setTimeout(r, 20));
    // The store granted from a balance of 100; a billing job takes it to 1 before the grant lands here.
    store.spend('billing', 99);
    book.balanceIs('sha-k', 1);
    land();
    expect((await first).ok).toBe(true);
    const calls = store.calls.length;
    const second = book.reserve('k', 1, 'sha-k');
    await new Promise((r) => setTimeout(r, 20));
    land();
    // Not served from the grant of 100's room: the lease was cut to 1 (in use), so it asked again and got nothing.
    expect((await second).ok).toBe(false);
    expect(store.calls.length).toBe(calls + 1);
  });

  it('a request of the key settled while a lease call is under way comes off the grant it brings back (the grant may predate the debit: the store took it off its lease)', async () => {
    const store = fakeStore(10);
    let land: () => void = () => {};
    let hold = false;
    const slow = {
      ...store,
      async lease(replica: string, key: string, want: number, need: number) {
        const r = await store.lease(replica, key, want, need);
        if (hold)
          await new Promise<void>((resolve) => {
            land = resolve;
          });
        return r;
      },
    };
    const a = new LeaseBook(slow, 'a');
    expect((await a.reserve('k', 4, 'sha-k')).ok).toBe(true);
    // A second request does not fit: a lease call; the store grants 6 of the balance of 10 and its answer is held back.
    hold = true;
    const second = a.reserve('k', 2, 'sha-k');
    await new Promise((r) => setTimeout(r, 20));
    hold = false;
    // Meanwhile the first request's debit commits (4 off the balance and off a's lease in the store: 2 left) and
    // settles here.
    store.spend('a', 4);
    a.settle('k', 4, 4);
    land();
    expect((await second).ok).toBe(true);
    // The store counts a's lease as 2, so another replica gets the rest of the balance of 6.
    const b = new LeaseBook(store, 'b');
    const served = [(await a.reserve('k', 4, 'sha-k')).ok ? 4 : 0, (await b.reserve('k', 4, 'sha-k')).ok ? 4 : 0];
    // Reserved at once: 2, and what a and b served now; never past the balance of 6.
    expect(2 + served[0] + served[1], JSON.stringify({ served, leases: [...store.leases] })).toBeLessThanOrEqual(6);
  });

  it('reserves from one lease call for many requests, and never past the balance', async () => {
    const store = fakeStore(10);
    const book = new LeaseBook(store, 'a');
    const answers = await Promise.all(Array.from({ length: 50 }, () => book.reserve('k', 1)));
    expect(answers.filter((a) => a.ok)).toHaveLength(10);
    // Doubling what is in use, up to half of what is left: a few calls, not one per request (50).
    expect(store.calls.length).toBeLessThanOrEqual(10);
  });

  it('refuses without asking again while the balance is taken, and asks again once something settles', async () => {
    let now = 1000;
    const store = fakeStore(3);
    const book = new LeaseBook(store, 'a', () => now);
    for (let i = 0; i < 3; i++) expect((await book.reserve('k', 1)).ok).toBe(true);
    expect((await book.reserve('k', 1)).ok).toBe(false);
    const calls = store.calls.length;
    expect((await book.reserve('k', 1)).ok).toBe(false);
    expect(store.calls.length).toBe(calls);
    // One request ends, costing 0.5 (of its 1 reserved): its debit took 0.5 off the balance and the lease.
    store.spend('a', 0.5);
    book.settle('k', 1, 0.5);
    expect((await book.reserve('k', 0.5)).ok).toBe(true);
    expect(store.calls.length).toBe(calls);
    now += EXHAUSTED_MS;
  });

  it('shares a balance between replicas: what one leases, the other cannot', async () => {
    const store = fakeStore(4);
    const a = new LeaseBook(store, 'a');
    const b = new LeaseBook(store, 'b');
    expect((await a.reserve('k', 3)).ok).toBe(true);
    expect((await b.reserve('k', 3)).ok).toBe(false);
    expect((await b.reserve('k', 1)).ok).toBe(true);
  });

  it("gives an idle key's lease back, and renews one in use", async () => {
    let now = 1000;
    const store = fakeStore(10);
    const book = new LeaseBook(store, 'a', () => now);
    await book.reserve('k', 1);
    book.settle('k', 1, 0.25);
    now += IDLE_MS + 1;
    await book.maintain();
    expect(store.leases.get('a')).toBe(0);
    expect(book.size).toBe(0);
    await book.reserve('k2', 1);
    now += 40_000;
    const before = store.calls.length;
    await book.maintain();
    expect(store.calls.length).toBe(before + 1);
  });
});

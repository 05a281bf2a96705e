/**
 * The file store's moving balances: one debit per request id, what keys spent kept in a state file
 * written atomically and read back at start, a top-up by raising the configured balance, and a
 * state file that cannot be trusted stopping the start instead of being guessed.
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileStore } from '../../src/store/file-store';
import type { DebitRequest, KeyRecord } from '../../src/store/store';

const key = (balance: number | null): KeyRecord => ({
  id: 'k',
  sha256: 'a'.repeat(64),
  group: 'g',
  balance,
  disabled: false,
  expiresAt: null,
});
const debit = (requestId: string, outputTokens = 1000): DebitRequest => ({
  requestId,
  keyId: 'k',
  group: 'g',
  model: 'm',
  protocol: 'chat',
  inputTokens: 500,
  outputTokens,
  cachedInputTokens: 100,
  price: { input: 2, output: 8, cachedInput: 1 },
});

describe('FileStore with a meter', () => {
  it('debits once per request id and serves the balance net of spending, telling caches the new balance', async () => {
    const store = new FileStore(new Map(), [key(1)], { meter: true });
    const events: unknown[] = [];
    store.onInvalidate((e) => events.push(e));
    // (400 x 2 + 100 x 1 + 1000 x 8) / 1e6 = 0.0089
    expect(await store.meter!.debit(debit('r1'))).toEqual({ applied: true, cost: 0.0089, balance: 0.9911 });
    expect(await store.meter!.debit(debit('r1'))).toEqual({ applied: false, cost: 0.0089, balance: 0.9911 });
    expect((await store.findKey('a'.repeat(64)))!.balance).toBe(0.9911);
    expect(events).toEqual([{ kind: 'key', sha256: 'a'.repeat(64), balance: 0.9911 }]);
    expect(await store.meter!.usage({ keyId: 'k' })).toHaveLength(1);
  });

  it('keeps what was spent in the state file, and a raised balance in the config tops the key up', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'modelgate-meter-')), 'modelgate.state.json');
    const first = new FileStore(new Map(), [key(1)], { path });
    await first.meter!.debit(debit('r1'));
    await first.close();
    const state = JSON.parse(readFileSync(path, 'utf8'));
    expect(state).toMatchObject({ version: 1, spent: { k: 0.0089 } });
    // Only its owner reads it (docs/security.md): key ids, amounts, request ids.
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const second = new FileStore(new Map(), [key(1)], { path });
    expect((await second.findKey('a'.repeat(64)))!.balance).toBe(0.9911);
    // A state file a version of earlier versions wrote 0644, and a leftover temporary file: 0600 after the next write.
    chmodSync(path, 0o644);
    writeFileSync(`${path}.${process.pid}.tmp`, '', { mode: 0o644 });
    await second.meter!.debit(debit('r2'));
    await second.meter!.flush();
    expect(statSync(path).mode & 0o777).toBe(0o600);
    // The same request id settled again after a restart: still once.
    expect((await second.meter!.debit(debit('r1'))).applied).toBe(false);
    second.replace(new Map(), [key(2)]);
    expect((await second.findKey('a'.repeat(64)))!.balance).toBe(1.9822);
    await second.close();
  });

  it('writes the state file in order, one write at a time, off the event loop; a failed write is kept and written next time', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'modelgate-meter-'));
    const path = join(dir, 'modelgate.state.json');
    const errors: string[] = [];
    const store = new FileStore(new Map(), [key(1)], { path, flushMs: 60_000, onError: (e) => errors.push(e.message) });
    const m = store.meter!;
    await m.debit(debit('r1'));
    const first = m.flush();
    // Nothing is written before the event loop turns: the write runs in the thread pool.
    expect(() => readFileSync(path)).toThrow(/ENOENT/);
    await m.debit(debit('r2'));
    const second = m.flush();
    await second;
    // The second write came after the first (it waited for it), so the file holds both debits.
    await first;
    expect(JSON.parse(readFileSync(path, 'utf8')).usage.map((e: { requestId: string }) => e.requestId)).toEqual([
      'r1',
      'r2',
    ]);
    // A write that fails (the directory is gone) is reported and kept: the next write carries it.
    rmSync(dir, { recursive: true });
    await m.debit(debit('r3'));
    await m.flush();
    expect(errors).toHaveLength(1);
    mkdirSync(dir);
    await m.flush();
    expect(JSON.parse(readFileSync(path, 'utf8')).spent.k).toBe(0.0267);
    await store.close();
  });

  it.each([
    ['not JSON', '{"version":1,'],
    ['a NaN spent (JSON has none: a string)', '{"version":1,"spent":{"k":"NaN"},"usage":[]}'],
    ['another version', '{"version":2,"spent":{},"usage":[]}'],
  ])('refuses to start on a state file that is %s, saying how to fix it', (_what, text) => {
    const path = join(mkdtempSync(join(tmpdir(), 'modelgate-meter-')), 'modelgate.state.json');
    writeFileSync(path, text);
    expect(() => new FileStore(new Map(), [key(1)], { path })).toThrow(
      /the meter state file .* is not usable .*delete it to forget what keys spent/,
    );
  });

  it('reserves while the balance minus open reservations covers the amount, and expires reservations', async () => {
    let now = 1000;
    const store = new FileStore(new Map(), [key(1)], { meter: true, now: () => now });
    expect(await store.meter!.reserve('a', 'k', 0.6, 60)).toEqual({ ok: true, available: 0.4 });
    expect((await store.meter!.reserve('b', 'k', 0.6, 60)).ok).toBe(false);
    // A reservation outlives its request's deadline by a minute: the meter's provisional debit lands first.
    now += 61_000;
    expect((await store.meter!.reserve('b', 'k', 0.6, 60)).ok).toBe(false);
    now += 60_000;
    expect((await store.meter!.reserve('b', 'k', 0.6, 60)).ok).toBe(true);
    await store.meter!.release('b');
    expect((await store.meter!.reserve('c', 'k', 1, 60)).ok).toBe(true);
    expect(await store.meter!.reserve('d', 'nobody', 1, 60)).toEqual({ ok: false, available: null });
  });

  it("replaces a provisional settlement with the request's final one, debiting the difference, once", async () => {
    const store = new FileStore(new Map(), [key(1)], { meter: true });
    const m = store.meter!;
    // Settled at its maximum without a report: 0.0089.
    expect(await m.debit({ ...debit('r1'), estimated: 'no_report', provisional: true })).toMatchObject({
      applied: true,
      cost: 0.0089,
      balance: 0.9911,
    });
    // Another provisional settlement of it changes nothing.
    expect((await m.debit({ ...debit('r1', 5000), estimated: 'no_report', provisional: true })).applied).toBe(false);
    // The report: 100 output tokens, (400 x 2 + 100 + 100 x 8) / 1e6 = 0.0017.
    expect(await m.debit(debit('r1', 100))).toMatchObject({ applied: true, cost: 0.0017, balance: 0.9983 });
    expect((await m.debit(debit('r1', 100))).applied).toBe(false);
    const rows = await m.usage({ keyId: 'k' });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ requestId: 'r1', outputTokens: 100, cost: 0.0017 });
    expect(rows[0].provisional).toBeUndefined();
  });

  it('marks estimates in the ledger and never lets what a key spent stop being a finite number', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'modelgate-meter-')), 'modelgate.state.json');
    const store = new FileStore(new Map(), [key(1)], { path });
    await store.meter!.debit({ ...debit('r1'), estimated: 'incomplete' });
    expect((await store.meter!.usage({}))[0].estimated).toBe('incomplete');
    await expect(
      store.meter!.debit({
        ...debit('r2'),
        outputTokens: 1e308,
        price: { input: 1e12, output: 1e12, cachedInput: null },
      }),
    ).rejects.toThrow(/finite/);
    await store.close();
    const state = JSON.parse(readFileSync(path, 'utf8'));
    expect(Number.isFinite(state.spent.k)).toBe(true);
    // The state file it wrote loads again, and is only for its owner to read.
    expect(() => new FileStore(new Map(), [key(1)], { path })).not.toThrow();
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('debits a cost under 1e-12 as 1e-12, never nothing (rounded to the nearest it was 0: a price of 1e-14 a token served free)', async () => {
    const store = new FileStore(new Map(), [key(1e-9)], { meter: true });
    const tiny = {
      ...debit('r1'),
      inputTokens: 3,
      outputTokens: 2,
      cachedInputTokens: 0,
      price: { input: 0.00000001, output: 0.00000001, cachedInput: null },
    };
    expect(await store.meter!.debit(tiny)).toEqual({ applied: true, cost: 1e-12, balance: 9.99e-10 });
    // A cost on the grid is not rounded up by its float error: (400 x 2 + 100 x 1 + 1000 x 8) / 1e6 is 0.0089, not
    // 0.008900000001.
    expect((await store.meter!.debit(debit('r2'))).cost).toBe(0.0089);
  });

  it('defended: 10,000 debits at list prices add up to the exact decimal total (no float drift)', async () => {
    const store = new FileStore(new Map(), [key(1000)], { meter: true });
    // gpt-4o-mini: 0.15 input, 0.075 cached, 0.6 output per million; in units of 1e-12 a token costs 150,000, 75,000,
    // 600,000.
    let exact = 0n;
    let seed = 7;
    const next = (n: number): number => (seed = (seed * 48271) % 2147483647) % n;
    for (let i = 0; i < 10_000; i++) {
      const input = 1 + next(5000);
      const cached = next(input);
      const output = next(2000);
      exact += BigInt(input - cached) * 150_000n + BigInt(cached) * 75_000n + BigInt(output) * 600_000n;
      await store.meter!.debit({
        ...debit(`r${i}`),
        inputTokens: input,
        cachedInputTokens: cached,
        outputTokens: output,
        price: { input: 0.15, output: 0.6, cachedInput: 0.075 },
      });
    }
    expect(BigInt(Math.round(store.meter!.spent('k') * 1e12))).toBe(exact);
  });

  it('defended: a balance of 1e15 (a float spaced 0.125 apart there): what is spent is kept apart from it, so 1,000 debits of 0.0089 are all counted', async () => {
    const store = new FileStore(new Map(), [key(1e15)], { meter: true });
    for (let i = 0; i < 1000; i++) await store.meter!.debit(debit(`r${i}`));
    expect(store.meter!.spent('k')).toBe(8.9);
    expect(Math.abs((await store.findKey('a'.repeat(64)))!.balance! - (1e15 - 8.9))).toBeLessThanOrEqual(0.125);
  });

  it('charges a key removed from the config while its request ran: put back, its balance is net of it (it was forgotten)', async () => {
    const store = new FileStore(new Map(), [key(1)], { meter: true });
    store.replace(new Map(), []);
    expect((await store.meter!.debit(debit('r1'))).applied).toBe(true);
    store.replace(new Map(), [key(1)]);
    expect((await store.findKey('a'.repeat(64)))!.balance).toBe(0.9911);
  });

  it('keeps the requests in flight across a restart, once', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'modelgate-meter-')), 'modelgate.state.json');
    const first = new FileStore(new Map(), [key(1)], { path });
    const pending = {
      requestId: 'r9',
      keyId: 'k',
      group: 'g',
      model: 'm',
      protocol: 'chat' as const,
      limited: true,
      maxInputTokens: 10,
      maxOutputTokens: 20,
      maxCost: 0.001,
      bodyBytes: 10,
      referencedInput: false,
      stream: true,
      since: 1,
      deadline: 2,
    };
    first.meter!.checkpointPending!([pending]);
    await first.close();
    const second = new FileStore(new Map(), [key(1)], { path });
    expect(second.meter!.restorePending!()).toEqual([pending]);
    expect(second.meter!.restorePending!()).toEqual([]);
  });
});

/**
 * Two replicas at once (docs/metering.md, "Overspend: soft (default) or strict" and "Replicas"). Two
 * Envoys, each with its own modelgate, on one PostgreSQL, every upstream the stand-in provider
 * (support/money-upstream.ts); a key holder with a small balance sends its requests to both at once.
 * Each case has a key of its own and asserts what the provider billed, the ledger, and the bound
 * docs/metering.md states.
 *
 * The model `rt6-flat` costs nothing per input token and 1,000 per million output tokens (0.001 a
 * token), its cap 100 tokens: a request naming `max_tokens: 50` is reserved at 0.05 and, answered in
 * full, billed exactly 0.05 (the stand-in produces exactly the maximum named), so "the balance pays
 * for ten" is exact whatever the timing. `gpt-4o-mini` has the demo's prices and cap.
 */
import * as http from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import type { AdminDb } from '../../src/store/pg/admin';
import { setBalance } from '../../src/store/pg/balances';
import type { InvalidationEvent } from '../../src/store/store';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { request, type Sent } from '../support/money-client';
import type { MoneyUpstream } from '../support/money-upstream';
import { withPgReplicas, type PgReplicas } from '../support/money-pg';

const FLAT = 'rt6-flat';
/** rt6-flat: 0.001 a token out, nothing in; cap 100 tokens. */
const FLAT_PRICE = { input: 0, output: 1000, cap: 100 };
/** The demo's gpt-4o-mini. */
const MINI = { input: 0.15, output: 0.6, cap: 16384 };
/** What one rt6-flat request of `max_tokens: 50` reserves and, answered in full, is billed. */
const PER = 0.05;

type Counts = Record<string, number>;
const statuses = (sent: Sent[]): Counts =>
  sent.reduce<Counts>((c, s) => ({ ...c, [s.status]: (c[s.status] ?? 0) + 1 }), {});
const complete = (s: Sent): boolean => s.status === 200 && s.text.includes('[DONE]');

describeE2E('money, two replicas: two replicas on one PostgreSQL', () => {
  let rig: PgReplicas;
  let pool: AdminDb;
  let up: MoneyUpstream;
  /** Two replicas: each Envoy checks with and reports to its own modelgate (strict, leases). */
  let a: Gateway;
  let b: Gateway;

  withPgReplicas({ mode: 'strict', models: { 'gpt-4o-mini': MINI, [FLAT]: FLAT_PRICE } }, (started) => {
    rig = started;
    ({ pool, up, a, b } = started);
  });

  // --- the ledger ---------------------------------------------------------------------------
  const newKey = (id: string, balance: string): Promise<string> => rig.newKey(id, balance);
  const balanceOf = (id: string): Promise<number> => rig.balanceOf(id);
  const finalRows = (id: string): Promise<number> => rig.finalRows(id);
  const ledger = async (id: string): Promise<Array<{ cost: number; output: number; estimated: string | null }>> =>
    (
      await pool.query<{ cost: number; output: number; estimated: string | null }>(
        'SELECT cost::float8 AS cost, output_tokens::int AS output, estimated FROM modelgate.usage WHERE key_id = $1',
        [id],
      )
    ).rows;
  /** The balance is exactly what it was less the ledger's sum (numeric). */
  const balanceIsLedger = async (id: string, initial: string): Promise<boolean> =>
    (
      await pool.query<{ ok: boolean }>(
        'SELECT k.balance = $2::numeric - coalesce((SELECT sum(cost) FROM modelgate.usage WHERE key_id = $1), 0) AS ok FROM modelgate.keys k WHERE id = $1',
        [id, initial],
      )
    ).rows[0].ok;
  const leasesOf = async (id: string): Promise<Array<{ replica: string; amount: number }>> =>
    (
      await pool.query<{ replica: string; amount: number }>(
        'SELECT replica, amount::float8 AS amount FROM modelgate.leases WHERE key_id = $1',
        [id],
      )
    ).rows;

  // --- the attacker's requests --------------------------------------------------------------
  /**
   * An rt6-flat chat stream of `max` tokens (usage asked for), `delayMs` between events; `tag` marks it at the
   * provider.
   */
  const flat = (
    gw: Gateway,
    key: string,
    tag: string,
    o: { max?: number; delayMs?: number; cutAfter?: number } = {},
  ): Promise<Sent> =>
    request(
      gw,
      '/v1/chat/completions',
      { authorization: `Bearer ${key}`, 'x-stand-in-delay-ms': String(o.delayMs ?? 20) },
      {
        model: FLAT,
        max_tokens: o.max ?? 50,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: tag }],
      },
      o.cutAfter === undefined ? undefined : (t) => (t.match(/"content":/g)?.length ?? 0) >= o.cutAfter!,
    );
  /** `n` requests at once, the first `onA` through `gwA`, the rest through `gwB`. */
  const burst = (
    n: number,
    onA: number,
    gwA: Gateway,
    gwB: Gateway,
    send: (gw: Gateway, i: number) => Promise<Sent>,
  ): Promise<Sent[]> => Promise.all(Array.from({ length: n }, (_, i) => send(i < onA ? gwA : gwB, i)));
  const upstreamWith = (tag: string): number => up.received.filter((r) => r.body.includes(tag)).length;

  /** Strict, leases, two replicas: `n` concurrent requests on a balance that pays for exactly ten at their maximum. */
  async function strictBurst(
    id: string,
    onA: number,
    cutAfter?: number,
  ): Promise<{ sent: Sent[]; served: number; after: number; rows: Awaited<ReturnType<typeof ledger>> }> {
    const initial = String(10 * PER);
    const key = await newKey(id, initial);
    const sent = await burst(100, onA, a, b, (gw, i) => flat(gw, key, `${id} ${i}`, { cutAfter }));
    const served = sent.filter((s) => s.status === 200).length;
    await waitFor(
      `a ledger row for each of the ${served} served`,
      async () => (await finalRows(id)) === served,
      60_000,
    );
    await waitFor(
      'both replicas to let go of every request',
      () => a.modelgate.service!.meter.settledAll && b.modelgate.service!.meter.settledAll,
      30_000,
    );
    expect(await balanceIsLedger(id, initial)).toBe(true);
    const after = await balanceOf(id);
    console.log(`rt6 ${id}: statuses ${JSON.stringify(statuses(sent))}; balance after ${after} on ${initial}`);
    return { sent, served, after, rows: await ledger(id) };
  }

  it('defended: strict with leases, 100 requests at once split 50/50 over both replicas on a balance for 10: at most 10 served, balance >= 0, the ledger is what the provider billed', async () => {
    const { sent, served, after, rows } = await strictBurst('rt6-even', 50);
    const why = `statuses ${JSON.stringify(statuses(sent))}; served ${served}; balance after ${after}`;
    expect(served, why).toBeGreaterThan(0);
    expect(served, why).toBeLessThanOrEqual(10);
    expect(after, why).toBeGreaterThanOrEqual(0);
    // Each served request was answered in full and billed exactly its maximum; the ledger has exactly that.
    expect(sent.filter((s) => s.status === 200).every(complete)).toBe(true);
    expect(rows.map((r) => `${r.estimated ?? 'exact'} ${r.output}`)).toEqual(Array(served).fill('exact 50'));
    expect(rows.reduce((s, r) => s + r.cost, 0)).toBeCloseTo(served * PER, 12);
    expect(
      sent.filter((s) => s.status !== 200).every((s) => s.status === 403 && s.text.includes('balance_insufficient')),
      why,
    ).toBe(true);
  }, 120_000);

  it('defended: strict with leases, the same skewed 90/10 over the replicas: at most 10 served, balance >= 0, the ledger is what the provider billed', async () => {
    const { sent, served, after, rows } = await strictBurst('rt6-skewed', 90);
    const why = `statuses ${JSON.stringify(statuses(sent))}; served ${served}; balance after ${after}`;
    expect(served, why).toBeGreaterThan(0);
    expect(served, why).toBeLessThanOrEqual(10);
    expect(after, why).toBeGreaterThanOrEqual(0);
    expect(sent.filter((s) => s.status === 200).every(complete)).toBe(true);
    expect(rows.reduce((s, r) => s + r.cost, 0)).toBeCloseTo(served * PER, 12);
  }, 120_000);

  it('defended: strict with leases, 100 streams at once over both replicas, each cut by the client after 10 tokens: balance >= 0, every one served has its row, none above its reservation, none below what the client received', async () => {
    const { sent, served, after, rows } = await strictBurst('rt6-cut', 50, 10);
    const why = `statuses ${JSON.stringify(statuses(sent))}; served ${served}; balance after ${after}; rows ${JSON.stringify(rows.map((r) => r.output))}`;
    expect(served, why).toBeGreaterThan(0);
    expect(after, why).toBeGreaterThanOrEqual(0);
    expect(rows.length).toBe(served);
    for (const r of rows) {
      expect(r.cost, why).toBeLessThanOrEqual(PER + 1e-12);
      expect(r.output, why).toBeGreaterThanOrEqual(10);
    }
  }, 120_000);

  /**
   * One Envoy whose Checks go to its own modelgate and whose reports go to replica `to` (as meter-pg.test.ts sets up).
   */
  const reportingTo = (to: Gateway): Promise<Gateway> => rig.replica({ reportsTo: to });
  let crossing: Gateway | undefined;

  it('defended: strict with leases, reports crossing replicas under load: rounds of 100 at once over two replicas, one of whose Envoys reports to the other, never past a balance for 10', async () => {
    crossing ??= await reportingTo(b);
    const id = 'rt6-crossing';
    const initial = String(10 * PER);
    const key = await newKey(id, initial);
    let served = 0;
    const seen: Counts[] = [];
    for (let round = 0; round < 4; round++) {
      const sent = await burst(100, 50, crossing, b, (gw, i) => flat(gw, key, `${id} ${round} ${i}`));
      seen.push(statuses(sent));
      served += sent.filter((s) => s.status === 200).length;
      await waitFor("the round's settlements", async () => (await finalRows(id)) === served, 60_000);
      await waitFor(
        'both replicas to let go of every request',
        () => crossing!.modelgate.service!.meter.settledAll && b.modelgate.service!.meter.settledAll,
        30_000,
      );
      if (served >= 10) break;
    }
    const after = await balanceOf(id);
    const why = `rounds ${JSON.stringify(seen)}; served ${served}; balance after ${after}`;
    console.log(`rt6 crossing: ${why}`);
    expect(served, why).toBeGreaterThan(0);
    expect(served, why).toBeLessThanOrEqual(10);
    expect(after, why).toBeGreaterThanOrEqual(0);
    expect(await balanceIsLedger(id, initial)).toBe(true);
    expect((await ledger(id)).reduce((s, r) => s + r.cost, 0)).toBeCloseTo(served * PER, 12);
  }, 180_000);

  /**
   * A request that reaches the provider, whose client leaves before a byte of the answer came back
   * (an agent interrupted while the provider is slow to its first token): debited, as the docs say,
   * the input estimate and the request's maximum output (the provider may have produced it all).
   */
  async function leaveBeforeAnswer(gw: Gateway, key: string, tag: string): Promise<void> {
    const url = new URL(gw.baseUrl);
    const data = Buffer.from(
      JSON.stringify({
        model: FLAT,
        max_tokens: 50,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: tag }],
      }),
    );
    const req = http.request({
      host: url.hostname,
      port: url.port,
      method: 'POST',
      path: '/v1/chat/completions',
      agent: false,
      headers: {
        'content-type': 'application/json',
        'content-length': data.length,
        authorization: `Bearer ${key}`,
        'x-stand-in-hold-ms': '3000',
      },
    });
    req.on('error', () => {});
    req.end(data);
    await waitFor('the request at the provider', () => upstreamWith(tag) === 1, 30_000);
    req.destroy();
  }

  it('defended: strict, a request whose client leaves before its answer, reported to the replica that allowed it: debited its maximum (50 tokens), no more', async () => {
    const id = 'rt6-gone-here';
    const key = await newKey(id, String(10 * PER));
    await leaveBeforeAnswer(b, key, id);
    await waitFor('its row', async () => (await finalRows(id)) === 1, 60_000);
    const [row] = await ledger(id);
    expect(row).toMatchObject({ estimated: 'incomplete', output: 50 });
    expect(await balanceOf(id)).toBeCloseTo(10 * PER - PER, 12);
  }, 90_000);

  it('strict, a request whose client leaves before its answer, reported to the other replica: debited its maximum (50 tokens), as where it was allowed', async () => {
    crossing ??= await reportingTo(b);
    const id = 'rt6-gone-there';
    const key = await newKey(id, String(10 * PER));
    await leaveBeforeAnswer(crossing, key, id);
    await waitFor('its row', async () => (await finalRows(id)) === 1, 60_000);
    const [row] = await ledger(id);
    const after = await balanceOf(id);
    // The Check's metadata carries maxInput and maxOutput: the settling replica, with no entry of the
    // request, bounds its estimate by them.
    expect(row.output, `row ${JSON.stringify(row)}; balance after ${after}`).toBe(50);
    expect(after, `row ${JSON.stringify(row)}; balance after ${after}`).toBeGreaterThanOrEqual(0);
  }, 90_000);

  it('defended: strict with leases, a replica killed (SIGKILL) mid-burst: what its served requests leave unpaid is at most its lease when it died', async () => {
    const killed = await rig.replica({ process: true });
    const id = 'rt6-killed';
    const initial = String(10 * PER);
    const key = await newKey(id, initial);
    // Streams of about 2 s: 30 through the doomed replica; once two of them run, 30 through the live
    // one, and the kill, while the live replica's burst is still being decided.
    const stream = (gw: Gateway, tag: string): Promise<Sent> => flat(gw, key, `${id} ${tag} `, { delayMs: 40 });
    let early = false;
    const doomed = Promise.all(Array.from({ length: 30 }, (_, i) => stream(killed, `k${i}`))).finally(() => {
      early = true;
    });
    await waitFor(
      'two streams the doomed replica allowed to be running',
      () => {
        if (early) throw new Error('the doomed replica answered every request before two ran');
        return upstreamWith(`${id} k`) >= 2;
      },
      60_000,
    );
    const living = Promise.all(Array.from({ length: 30 }, (_, i) => stream(b, `b${i}`)));
    killed.modelgate.kill('SIGKILL');
    const viaKilled = (await doomed).filter((s) => s.status === 200);
    const viaB = (await living).filter((s) => s.status === 200);
    await waitFor(
      'the ledger rows of the requests the live replica served',
      async () => (await finalRows(id)) >= viaB.length,
      60_000,
    );
    await waitFor('the live replica to let go of every request', () => b.modelgate.service!.meter.settledAll, 30_000);
    const billed = [...viaKilled, ...viaB].filter(complete).length * PER;
    const paid = (await ledger(id)).reduce((s, r) => s + r.cost, 0);
    const unpaid = billed - paid;
    const live = b.modelgate.service!.meter.deps.leases!.replica;
    const leaseAtDeath = (await leasesOf(id)).filter((l) => l.replica !== live).reduce((s, l) => s + l.amount, 0);
    const after = await balanceOf(id);
    const why = `served ${viaKilled.length} by the killed replica, ${viaB.length} by the live one; billed ${billed}, paid ${paid}, unpaid ${unpaid}; its lease at death ${leaseAtDeath}; balance after ${after}`;
    console.log(`rt6 kill: ${why}`);
    expect(viaKilled.length + viaB.length, why).toBeLessThanOrEqual(10);
    expect(unpaid, why).toBeLessThanOrEqual(leaseAtDeath + 1e-12);
    expect(after, why).toBeGreaterThanOrEqual(0);
  }, 180_000);

  it('defended: strict with leases, a balance lowered by a billing job while both replicas hold leases: overspend at most (R - 1) x the new balance', async () => {
    const id = 'rt6-lowered';
    const key = await newKey(id, '1');
    // Four slow streams on each replica (about 5 s): each holds a lease of about 0.3, 0.2 of it in use.
    const slow = burst(8, 4, a, b, (gw, i) => flat(gw, key, `${id} slow ${i} `, { delayMs: 100 }));
    await waitFor('the eight slow streams at the provider', () => upstreamWith(`${id} slow`) === 8, 60_000);
    const leases = await leasesOf(id);
    // The billing job leaves the key exactly what the streams in flight reserved: nothing for another request.
    const lowered = 8 * PER;
    const heard = [a, b].map(
      (g) =>
        new Promise<void>((resolve) => {
          const stop = g.modelgate.service!.store.onInvalidate((e: InvalidationEvent) => {
            if (
              e.kind === 'key' &&
              e.balance !== undefined &&
              e.balance !== null &&
              Math.abs(e.balance - lowered) < 1e-12
            ) {
              stop();
              resolve();
            }
          });
        }),
    );
    await setBalance(pool, id, String(lowered));
    await Promise.all(heard);
    const flood = await burst(100, 50, a, b, (gw, i) => flat(gw, key, `${id} flood ${i} `, { delayMs: 2 }));
    const slowSent = await slow;
    const served = [...slowSent, ...flood].filter((s) => s.status === 200).length;
    await waitFor('every row', async () => (await finalRows(id)) === served, 60_000);
    await waitFor(
      'both replicas to let go of every request',
      () => a.modelgate.service!.meter.settledAll && b.modelgate.service!.meter.settledAll,
      30_000,
    );
    const after = await balanceOf(id);
    const overspend = Math.max(0, -after);
    const why = `leases before ${JSON.stringify(leases)}; flood served ${flood.filter((s) => s.status === 200).length} of 100; balance after ${after} on a new balance of ${lowered}`;
    console.log(`rt6 lowered: ${why}`);
    expect(slowSent.every(complete), why).toBe(true);
    expect(overspend, why).toBeLessThanOrEqual((2 - 1) * lowered + 1e-12);
  }, 180_000);

  // --- soft mode: both replicas switched by a config reload ---------------------------------------
  async function soft(): Promise<void> {
    for (const g of [a, b]) {
      writeFileSync(g.configPath, readFileSync(g.configPath, 'utf8').replace('  mode: strict ', '  mode: soft '));
    }
    await waitFor(
      'both replicas in soft mode',
      () => a.modelgate.service!.config().meter.mode === 'soft' && b.modelgate.service!.config().meter.mode === 'soft',
      30_000,
    );
  }

  it("defended: soft, two replicas, balance 0.0001: 100 requests at once over both, each asking the model's cap: spent <= balance + 2 x M, every served request has its row", async () => {
    await soft();
    const id = 'rt6-soft-tiny';
    const initial = '0.0001';
    const key = await newKey(id, initial);
    const body = (i: number) => ({
      model: 'gpt-4o-mini',
      max_tokens: MINI.cap,
      messages: [{ role: 'user', content: `${id} ${i}` }],
    });
    const sent = await burst(100, 50, a, b, (gw, i) =>
      request(gw, '/v1/chat/completions', { authorization: `Bearer ${key}` }, body(i)),
    );
    const served = sent.filter((s) => s.status === 200).length;
    await waitFor('a row for each served', async () => (await finalRows(id)) === served, 60_000);
    await waitFor(
      'both replicas to let go of every request',
      () => a.modelgate.service!.meter.settledAll && b.modelgate.service!.meter.settledAll,
      30_000,
    );
    // M: the largest single-answer request's maximum: its body's bytes as input plus the model's cap.
    const bytes = Math.max(...Array.from({ length: 100 }, (_, i) => Buffer.byteLength(JSON.stringify(body(i)))));
    const M = (bytes * MINI.input + MINI.cap * MINI.output) / 1e6;
    const spent = Number(initial) - (await balanceOf(id));
    const why = `statuses ${JSON.stringify(statuses(sent))}; spent ${spent} on ${initial}; bound ${Number(initial) + 2 * M}`;
    console.log(`rt6 soft tiny: ${why}`);
    expect(served, why).toBeGreaterThan(0);
    expect(spent, why).toBeLessThanOrEqual(Number(initial) + 2 * M);
    expect(await balanceIsLedger(id, initial)).toBe(true);
  }, 120_000);

  it('soft, replicas on one database, a balance of 5.5 x M: 100 streams at once over two of them: each holds to its share of the balance, so the key spends at most balance + R x M', async () => {
    await soft();
    const id = 'rt6-soft-wide';
    // M for rt6-flat: its cap (100 tokens) at 0.001, no input price: 0.1. The balance pays for five and a half.
    const M = (FLAT_PRICE.cap * FLAT_PRICE.output) / 1e6;
    const initial = '0.55';
    const key = await newKey(id, initial);
    // Streams of about 2 s, each asking the cap (billed exactly M).
    const sent = await burst(100, 50, a, b, (gw, i) => flat(gw, key, `${id} ${i}`, { max: FLAT_PRICE.cap }));
    const served = sent.filter((s) => s.status === 200).length;
    await waitFor('a row for each served', async () => (await finalRows(id)) === served, 60_000);
    await waitFor(
      'both replicas to let go of every request',
      () => a.modelgate.service!.meter.settledAll && b.modelgate.service!.meter.settledAll,
      30_000,
    );
    const spent = Number(initial) - (await balanceOf(id));
    const why = `statuses ${JSON.stringify(statuses(sent))}; served ${served} (each billed ${M}); spent ${spent} on a balance of ${initial}; bound ${Number(initial) + 2 * M}`;
    console.log(`rt6 soft wide: ${why}`);
    expect(await balanceIsLedger(id, initial)).toBe(true);
    // Each replica holds to balance / R (R: the modelgates on the database, three here with the one that
    // reports for another Envoy), and each serves at least its lone request.
    expect(served, why).toBeGreaterThanOrEqual(2);
    expect(spent, why).toBeLessThanOrEqual(Number(initial) + 2 * M + 1e-12);
  }, 120_000);
});

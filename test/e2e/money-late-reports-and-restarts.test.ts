/**
 * Money across time (docs/metering.md, "Overspend" and "Restarts and shutdown"): a report that comes
 * after `meter.reservationSeconds` replaces the provisional debit at the maximum with what it says
 * (one row, the request's marks kept); a `modelgate serve` killed (SIGKILL) and started again
 * restores its requests in flight and holds them; strict mode's leases on PostgreSQL when a billing
 * job lowers the balance. Each case goes through a real Envoy and modelgate to the stand-in provider
 * (support/money-upstream.ts), on its own key, and asserts what the provider billed or the bound.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey, hashKey } from '../../src/contract/key-format';
import type { AdminDb } from '../../src/store/pg/admin';
import { addBalance } from '../../src/store/pg/balances';
import { setGroup, setPrice } from '../../src/store/pg/groups';
import { migrate } from '../../src/store/pg/schema';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { request, withMoneyKeys, type Sent } from '../support/money-client';
import { IMAGE_TOKENS, startMoneyUpstream, type MoneyUpstream } from '../support/money-upstream';
import { issueKey } from '../support/pg-keys';
import { openPool, startPgServer, type PgServer } from '../support/pg-server';

const KEYS = ['lateReasoning', 'lateImage', 'lateControl', 'restartStrict', 'restartSoft'] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;

/** The demo's gpt-4o-mini (group basic): per million tokens, and its output cap. */
const MINI = { input: 0.15, output: 0.6, cap: 16384 };
const cost = (input: number, output: number): number => (input * MINI.input + output * MINI.output) / 1e6;

/** The restart cases' request: 200 output tokens named, so its maximum is mostly what it really costs. */
const RESTART_BODY = {
  model: 'gpt-4o-mini',
  max_tokens: 200,
  stream: true,
  stream_options: { include_usage: true },
  messages: [{ role: 'user', content: 'write' }],
};
const RESTART_MAX = cost(Buffer.byteLength(JSON.stringify(RESTART_BODY)), 200);

/**
 * The late cases pay what they send; restartStrict has 1.2 of one request's maximum (strict: one at a time),
 * restartSoft as much.
 */
const BALANCES: Record<KeyName, number> = {
  lateReasoning: 10,
  lateImage: 10,
  lateControl: 10,
  restartStrict: 1.2 * RESTART_MAX,
  restartSoft: 1.2 * RESTART_MAX,
};
const withKeys = withMoneyKeys(keys, (k) => BALANCES[k as KeyName], 'rt5');
const bearer = (key: KeyName): Record<string, string> => ({ authorization: `Bearer ${keys[key]}` });

/** The final (not provisional) ledger row of a key's only request, once the report replaced the provisional one. */
async function finalRow(store: FileStore, key: KeyName): Promise<UsageEntry> {
  let row: UsageEntry | undefined;
  await waitFor(
    'the report to replace the provisional debit',
    async () => {
      const rows = await store.meter!.usage({ keyId: `rt5-${key}`, limit: 10 });
      row = rows.find((r) => !r.provisional);
      return row !== undefined;
    },
    60_000,
  );
  return row!;
}

describeE2E(
  'money, late reports and restarts: a report that comes after meter.reservationSeconds (soft, file store)',
  () => {
    let up: MoneyUpstream;
    let gw: Gateway;
    let store: FileStore;
    beforeAll(async () => {
      up = await startMoneyUpstream();
      const at = { host: '127.0.0.1', port: up.port };
      // Every stream below lasts about 3 s: its deadline (1 s) passes while it runs.
      gw = await startGateway({
        config: (demo) => withKeys(demo.replace(/  reservationSeconds: 900 /, '  reservationSeconds: 1 ')),
        upstreamTargets: { chat: at, messages: at, generative: at, alt: at },
      });
      store = gw.modelgate.service!.store as FileStore;
      expect(gw.modelgate.service!.config().meter.reservationSeconds).toBe(1);
    }, 60_000);
    afterAll(async () => {
      await gw?.close();
      await up?.close();
    });

    /** A chat stream without include_usage, 12 visible tokens 250 ms apart (about 3 s). */
    const slow = { 'x-stand-in-tokens': '12', 'x-stand-in-delay-ms': '250' };

    it('defended: a plain stream settled provisionally at its maximum is replaced by its estimate once its report comes (one row, no double debit)', async () => {
      const sent = await request(
        gw,
        '/v1/chat/completions',
        { ...bearer('lateControl'), ...slow },
        { model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'write' }] },
      );
      expect(sent.status, sent.text).toBe(200);
      const row = await finalRow(store, 'lateControl');
      const rows = await store.meter!.usage({ keyId: 'rt5-lateControl', limit: 10 });
      expect(rows.length).toBe(1);
      expect(row.estimated).toBe('stream_without_usage');
      expect(row.outputTokens).toBeGreaterThanOrEqual(12);
      // The balance is the config's minus this one row: the provisional maximum was credited back.
      const balance = (await store.findKey(hashKey(keys.lateControl)))!.balance as number;
      expect(balance).toBeCloseTo(BALANCES.lateControl - row.cost, 12);
    });

    it('reasoning_effort on gpt-4o-mini, a stream without usage that outlives its deadline: the late report keeps the request\'s "reasoning" mark: debited at least the reasoning billed', async () => {
      // Such a stream is debited its maximum output (docs/metering.md, "Reasoning"). After its deadline
      // the report finds no entry in flight, and the Check's metadata says so (hiddenOutput).
      const REASONING = 5000;
      const sent = await request(
        gw,
        '/v1/chat/completions',
        { ...bearer('lateReasoning'), ...slow, 'x-stand-in-reasoning': String(REASONING) },
        {
          model: 'gpt-4o-mini',
          reasoning_effort: 'high',
          stream: true,
          messages: [{ role: 'user', content: 'write' }],
        },
      );
      expect(sent.status, sent.text).toBe(200);
      const billed = cost(1, 12 + REASONING);
      const row = await finalRow(store, 'lateReasoning');
      const spent = BALANCES.lateReasoning - ((await store.findKey(hashKey(keys.lateReasoning)))!.balance as number);
      expect(row.outputTokens, `debited ${spent} for ${billed} billed`).toBeGreaterThanOrEqual(12 + REASONING);
      expect(spent).toBeGreaterThanOrEqual(billed);
    });

    it("an image by URL, a stream without usage that outlives its deadline: the late report counts the referenced input, not only the body's bytes", async () => {
      // The input estimate counts meter.referencedInputTokens for the image (docs/metering.md, "How
      // estimates are made"); after its deadline the Check's metadata says so (referencedInput).
      const sent = await request(
        gw,
        '/v1/chat/completions',
        { ...bearer('lateImage'), ...slow },
        {
          model: 'gpt-4o-mini',
          stream: true,
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'describe' },
                { type: 'image_url', image_url: { url: 'https://example.com/cat.png', detail: 'high' } },
              ],
            },
          ],
        },
      );
      expect(sent.status, sent.text).toBe(200);
      const row = await finalRow(store, 'lateImage');
      const spent = BALANCES.lateImage - ((await store.findKey(hashKey(keys.lateImage)))!.balance as number);
      const billed = cost(IMAGE_TOKENS, 12);
      expect(row.inputTokens, `debited ${spent} for ${billed} billed`).toBeGreaterThanOrEqual(IMAGE_TOKENS);
      expect(spent).toBeGreaterThanOrEqual(billed);
    });
  },
);

/** The file store's state file, as `modelgate serve` writes it beside its config (docs/metering.md, "The ledger"). */
interface StateFile {
  spent: Record<string, number>;
  usage: UsageEntry[];
  pending?: Array<{ requestId: string; keyId: string }>;
}
const stateOf = (gw: Gateway): StateFile | undefined => {
  try {
    return JSON.parse(readFileSync(join(dirname(gw.configPath), 'modelgate.state.json'), 'utf8')) as StateFile;
  } catch {
    return undefined; // not written yet, or being replaced
  }
};

describeE2E(
  'money, late reports and restarts: modelgate serve killed (SIGKILL) and started again while a request is in flight (file store)',
  () => {
    async function restartGateway(mode: 'soft' | 'strict'): Promise<{ up: MoneyUpstream; gw: Gateway }> {
      const up = await startMoneyUpstream();
      const at = { host: '127.0.0.1', port: up.port };
      const gw = await startGateway({
        modelgate: 'process',
        config: (demo) =>
          withKeys(
            demo
              .replace('  mode: soft ', `  mode: ${mode} `)
              .replace(/  reservationSeconds: 900 /, '  reservationSeconds: 30 '),
          ),
        upstreamTargets: { chat: at, messages: at, generative: at, alt: at },
      });
      return { up, gw };
    }

    /**
     * Request A streams 200 tokens 60 ms apart (about 12 s); once the state file holds it in flight,
     * modelgate is killed and started again, and request B of the same key is sent; then both settle.
     */
    async function killDuringA(
      gw: Gateway,
      key: KeyName,
    ): Promise<{ a: Sent; b: Sent; spent: number; rows: UsageEntry[] }> {
      const keyId = `rt5-${key}`;
      const a = request(gw, '/v1/chat/completions', { ...bearer(key), 'x-stand-in-delay-ms': '60' }, RESTART_BODY);
      await waitFor(
        'the state file to hold A in flight',
        () => stateOf(gw)?.pending?.some((p) => p.keyId === keyId) === true,
        30_000,
      );
      gw.modelgate.kill('SIGKILL');
      await gw.modelgate.restart();
      const b = await request(gw, '/v1/chat/completions', { ...bearer(key), 'x-stand-in-delay-ms': '1' }, RESTART_BODY);
      const aSent = await a;
      const served = [aSent, b].filter((s) => s.status === 200).length;
      await waitFor(
        'a final ledger row for every request served',
        () => (stateOf(gw)?.usage.filter((u) => u.keyId === keyId && !u.provisional).length ?? 0) >= served,
        90_000,
      );
      const state = stateOf(gw)!;
      return { a: aSent, b, spent: state.spent[keyId] ?? 0, rows: state.usage.filter((u) => u.keyId === keyId) };
    }

    it('defended: soft: the request in flight at the kill is restored and held, so the restarted process refuses another past the balance', async () => {
      const { up, gw } = await restartGateway('soft');
      try {
        const { a, b, spent, rows } = await killDuringA(gw, 'restartSoft');
        expect(a.status, a.text).toBe(200);
        expect(b.status, b.text).toBe(403);
        expect(rows.filter((r) => !r.provisional).length).toBe(1);
        // Soft mode's bound with one replica: the balance plus one request's maximum.
        expect(spent).toBeLessThanOrEqual(BALANCES.restartSoft + RESTART_MAX);
      } finally {
        await gw.close();
        await up.close();
      }
    }, 180_000);

    it('strict: the request in flight at the kill is restored without its reservation, so the restarted process reserves the whole balance again for another (bound: zero)', async () => {
      const { up, gw } = await restartGateway('strict');
      try {
        const { a, b, spent, rows } = await killDuringA(gw, 'restartStrict');
        expect(a.status, a.text).toBe(200);
        expect(
          spent,
          `B answered ${b.status}; ${rows.length} rows; spent ${spent} on ${BALANCES.restartStrict}`,
        ).toBeLessThanOrEqual(BALANCES.restartStrict);
        expect(b.status).toBe(403);
      } finally {
        await gw.close();
        await up.close();
      }
    }, 180_000);
  },
);

describeE2E(
  'money, late reports and restarts: strict mode on PostgreSQL (leases), a balance lowered while a lease is held',
  () => {
    let server: PgServer;
    let pool: AdminDb;
    let up: MoneyUpstream;
    let gw: Gateway;
    beforeAll(async () => {
      server = await startPgServer();
      pool = openPool(server.url);
      await migrate(pool);
      await setGroup(pool, { name: 'basic', models: [{ name: 'gpt-4o-mini', protocols: null, available: true }] });
      await setPrice(pool, 'basic', 'gpt-4o-mini', {
        price: { input: MINI.input, output: MINI.output, cachedInput: null },
        maxOutputTokens: MINI.cap,
      });
      up = await startMoneyUpstream();
      const at = { host: '127.0.0.1', port: up.port };
      gw = await startGateway({
        config: (demo) => `${demo.replace('  mode: soft ', '  mode: strict ')}\nstore: ${server.url}\n`,
        upstreamTargets: { chat: at, messages: at, generative: at, alt: at },
      });
    }, 120_000);
    afterAll(async () => {
      await gw?.close();
      await up?.close();
      await pool?.end();
      await server?.close();
    });

    /**
     * A key with ten of A's maxima; A (about 12 s of stream) holds its maximum, reserved from this
     * replica's lease (granted with room to spare). `lower` is an operator's billing job (or `keys
     * balance --add`) debiting the key outside the meter, so that what is left covers exactly A's
     * reservation: strict mode has nothing left for another request. `finish` waits for A and for
     * every debit, and gives the balance after.
     */
    async function leaseHeld(id: string) {
      const { key } = await issueKey(pool, { group: 'basic', id, balance: null });
      await pool.query('UPDATE modelgate.keys SET balance = 10 * $2::numeric WHERE id = $1', [id, String(RESTART_MAX)]);
      const balance = async (): Promise<number> =>
        Number(
          (await pool.query<{ b: string }>('SELECT balance::text AS b FROM modelgate.keys WHERE id = $1', [id])).rows[0]
            .b,
        );
      const auth = { authorization: `Bearer ${key}` };
      const seen = up.received.length;
      const a = request(gw, '/v1/chat/completions', { ...auth, 'x-stand-in-delay-ms': '60' }, RESTART_BODY);
      await waitFor('A upstream', () => up.received.length > seen, 30_000);
      const lease = Number(
        (
          await pool.query<{ a: string }>(
            'SELECT coalesce(sum(amount), 0)::text AS a FROM modelgate.leases WHERE key_id = $1',
            [id],
          )
        ).rows[0].a,
      );
      return {
        key,
        balance,
        lease,
        lower: async (): Promise<void> =>
          addBalance(pool, id, String(-((await balance()) - RESTART_MAX))).then(() => undefined),
        b: (): Promise<Sent> =>
          request(gw, '/v1/chat/completions', { ...auth, 'x-stand-in-delay-ms': '1' }, RESTART_BODY),
        finish: async (b: Sent): Promise<number> => {
          const aSent = await a;
          expect(aSent.status, aSent.text).toBe(200);
          const served = [aSent, b].filter((x) => x.status === 200).length;
          const rows = async (): Promise<number> =>
            (
              await pool.query<{ n: number }>(
                'SELECT count(*)::int AS n FROM modelgate.usage WHERE key_id = $1 AND NOT provisional',
                [id],
              )
            ).rows[0].n;
          await waitFor('every debit', async () => (await rows()) >= served, 60_000);
          return balance();
        },
      };
    }

    it('a billing job takes the balance down to what the request in flight reserved: the replica still serves another from the slack of its lease (bound: zero)', async () => {
      const t = await leaseHeld('rt5-pg-lowered');
      await t.lower();
      // The replica cuts its lease when the row trigger's notification reaches it, milliseconds later
      // (docs/metering.md: a request it admits before that is reserved from the lease as it was; the
      // next test). Its console shows the balance the same notification brought (one event, the lease
      // cut and the cache patched in turn): B goes after it. (The Check reads the key's balance only
      // to see that it is positive, which it still is: the reservation comes from the lease either way.)
      const lowered = await t.balance();
      const seenBalance = async (): Promise<number | null | undefined> => {
        const r = await gw.send('POST', '/console/api/access', {
          headers: [['x-modelgate-console-key', encodeURIComponent(t.key)]],
          body: '{}',
        });
        return r.status === 200 ? (r.json() as { key?: { balance?: number | null } }).key?.balance : undefined;
      };
      // 100 ms apart: the console answers a key 60 times a minute.
      for (let tries = 0; ; tries++) {
        const seen = await seenBalance();
        if (typeof seen === 'number' && Math.abs(seen - lowered) < 1e-12) break;
        if (tries >= 50) throw new Error(`the replica never saw the lowered balance ${lowered} (its console: ${seen})`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const b = await t.b();
      const after = await t.finish(b);
      expect(after, `B answered ${b.status}; lease ${t.lease}; balance after ${after}`).toBeGreaterThanOrEqual(0);
      expect(b.status).toBe(403);
    }, 120_000);

    it("a request racing the lowered balance's notification spends at most the lease as it stood past the new balance (docs/metering.md)", async () => {
      const t = await leaseHeld('rt5-pg-lowered-race');
      expect(t.lease).toBeGreaterThan(RESTART_MAX);
      // B is sent as the billing job commits: whether its Check comes before the notification or
      // after is the machine's to decide. Either way, the bound holds.
      const [, b] = await Promise.all([t.lower(), t.b()]);
      const after = await t.finish(b);
      expect(after, `B answered ${b.status}; lease ${t.lease}; balance after ${after}`).toBeGreaterThanOrEqual(
        -t.lease,
      );
      if (b.status !== 200) expect(b.status).toBe(403);
      else
        console.log(`[late reports] B raced the notification and was served: balance after ${after}, lease ${t.lease}`);
    }, 120_000);
  },
);

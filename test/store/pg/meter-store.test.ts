/**
 * The PostgreSQL meter store's debits on a real PostgreSQL: batched debits
 * (debit_many) keep the ledger and the balance in step, whatever a batch holds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminDb } from '../../../src/store/pg/admin';
import { listGroups, setGroup, setPrice } from '../../../src/store/pg/groups';
import { PgStore } from '../../../src/store/pg/store';
import { PgMeterStore } from '../../../src/store/pg/meter-store';
import { migrate } from '../../../src/store/pg/schema';
import { ESTIMATE_REASONS, type DebitRequest } from '../../../src/store/store';
import { issueKey } from '../../support/pg-keys';
import { openPool, startPgServer, type PgServer } from '../../support/pg-server';

let server: PgServer;
let pool: AdminDb;
let store: PgMeterStore;

beforeAll(async () => {
  server = await startPgServer();
  pool = openPool(server.url);
  await migrate(pool);
  await setGroup(pool, { name: 'g', available: true, models: [{ name: 'm', protocols: null, available: true }] });
  store = new PgMeterStore(async (_what, text, values) => (await pool.query(text, values)).rows);
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await server?.close();
});

/** 1,000 output tokens at 1 per million: 0.001. */
const debit = (requestId: string, keyId: string, o: Partial<DebitRequest> = {}): DebitRequest => ({
  requestId,
  keyId,
  group: 'g',
  model: 'm',
  protocol: 'chat',
  inputTokens: 0,
  outputTokens: 1000,
  cachedInputTokens: 0,
  price: { input: 1, output: 1, cachedInput: null },
  estimated: null,
  provisional: false,
  ...o,
});

const balance = async (id: string): Promise<number> =>
  Number(
    (await pool.query<{ b: string }>('SELECT balance::text AS b FROM modelgate.keys WHERE id = $1', [id])).rows[0].b,
  );
const ledger = async (id: string): Promise<number> =>
  Number(
    (
      await pool.query<{ s: string }>(
        'SELECT coalesce(sum(cost), 0)::text AS s FROM modelgate.usage WHERE key_id = $1',
        [id],
      )
    ).rows[0].s,
  );

describe('PgMeterStore debits', () => {
  it('a request id twice in one batch (a report that arrives twice while others are in flight) is debited once: the balance is what the ledger says (it was debited twice, its row once)', async () => {
    await issueKey(pool, { group: 'g', id: 'dup', balance: '1' });
    // Two batches go at once (one debit each); what arrives meanwhile goes together in the next one.
    const results = await Promise.all([
      store.debit(debit('dup-a', 'dup')),
      store.debit(debit('dup-b', 'dup')),
      store.debit(debit('dup-c', 'dup')),
      store.debit(debit('dup-c', 'dup')),
    ]);
    expect(results.map((r) => r.applied)).toEqual([true, true, true, false]);
    // Seen: 0.996 (dup-c debited twice), the ledger 0.003.
    expect(await ledger('dup')).toBe(0.003);
    expect(await balance('dup')).toBe(0.997);
  });

  it('a provisional settlement and the final one of a request in one batch: the final one stands, the balance is what the ledger says', async () => {
    await issueKey(pool, { group: 'g', id: 'prov', balance: '1' });
    await Promise.all([
      store.debit(debit('prov-a', 'prov')),
      store.debit(debit('prov-b', 'prov')),
      store.debit(debit('prov-p', 'prov', { outputTokens: 5000, estimated: 'no_report', provisional: true })),
      store.debit(debit('prov-p', 'prov', { outputTokens: 100 })),
    ]);
    const row = (
      await pool.query<{ cost: string; provisional: boolean }>(
        "SELECT cost::text AS cost, provisional FROM modelgate.usage WHERE request_id = 'prov-p'",
      )
    ).rows[0];
    expect({ cost: Number(row.cost), provisional: row.provisional }).toEqual({ cost: 0.0001, provisional: false });
    expect(await ledger('prov')).toBe(0.0021);
    expect(await balance('prov')).toBe(0.9979);
  });
});

describe('the ledger marks on PostgreSQL', () => {
  it('keeps every estimate reason, unknown_modality included (migration 8), alone and in a batch', async () => {
    await issueKey(pool, { group: 'g', id: 'marks', balance: '1' });
    await Promise.all(
      ESTIMATE_REASONS.map((reason, i) => store.debit(debit(`mark-${i}`, 'marks', { estimated: reason }))),
    );
    const rows = await store.usage({ keyId: 'marks', limit: 100 });
    expect(rows.map((r) => r.estimated).sort()).toEqual([...ESTIMATE_REASONS].sort());
  });
});

describe('long-context prices on PostgreSQL', () => {
  /** Gemini 3 Pro preview's list prices: 2/12 up to 200,000 input tokens, 4/18 above. */
  const LONG = {
    input: 2,
    output: 12,
    cachedInput: 0.2,
    longContext: { above: 200_000, input: 4, output: 18, cachedInput: 0.4 },
  };

  it('a debit over the threshold charges every token at the long-context price, alone (debit) and in a batch (debit_many)', async () => {
    await issueKey(pool, { group: 'g', id: 'long', balance: '10' });
    const long = { inputTokens: 300_000, cachedInputTokens: 100_000, outputTokens: 1000, price: LONG };
    // Alone: (200,000 x 4 + 100,000 x 0.4 + 1,000 x 18) / 1e6 = 0.858
    expect((await store.debit(debit('long-1', 'long', long))).cost).toBe(0.858);
    // Three at once: the first alone, the other two together in one debit_many; one exactly at the threshold (its own
    // price).
    const batch = await Promise.all([
      store.debit(debit('long-2', 'long', long)),
      store.debit(debit('long-3', 'long', long)),
      store.debit(
        debit('long-4', 'long', { inputTokens: 200_000, cachedInputTokens: 0, outputTokens: 1000, price: LONG }),
      ),
    ]);
    expect(batch.map((r) => r.cost)).toEqual([0.858, 0.858, 0.412]);
    expect(await ledger('long')).toBe(2.986);
    expect(await balance('long')).toBe(7.014);
  });

  it('groups price stores a long-context price, listings and the store read it back, and --none (or a price without one) removes it', async () => {
    await setGroup(pool, {
      name: 'lc',
      available: true,
      models: [{ name: 'gemini-3-pro', protocols: ['generative'], available: true }],
    });
    await setPrice(pool, 'lc', 'gemini-3-pro', { price: LONG });
    const [listed] = await listGroups(pool, 'lc');
    expect(listed.models[0].price).toEqual(LONG);
    const pgStore = new PgStore(server.url);
    try {
      expect((await pgStore.findGroup('lc'))!.models.get('gemini-3-pro')!.price).toEqual(LONG);
      // A group whose model list is set again keeps the model's prices, its long-context one included.
      await setGroup(pool, {
        name: 'lc',
        models: [
          { name: 'gemini-3-pro', protocols: ['generative'], available: true },
          { name: 'other', protocols: null, available: true },
        ],
      });
      expect((await listGroups(pool, 'lc'))[0].models[0].price).toEqual(LONG);
      await setPrice(pool, 'lc', 'gemini-3-pro', { price: { input: 2, output: 12, cachedInput: null } });
      expect((await listGroups(pool, 'lc'))[0].models[0].price).toEqual({ input: 2, output: 12, cachedInput: null });
      await setPrice(pool, 'lc', 'gemini-3-pro', { price: LONG });
      await setPrice(pool, 'lc', 'gemini-3-pro', { price: null });
      expect((await listGroups(pool, 'lc'))[0].models[0].price).toBeNull();
    } finally {
      await pgStore.close();
    }
  });

  it("debits hosted tools' calls besides the tokens, alone and in a batch, the ledger row carrying the calls (migration 9)", async () => {
    await issueKey(pool, { group: 'g', id: 'tools', balance: '1' });
    const priced = { input: 1, output: 1, cachedInput: null, tools: { web_search: 0.01 } };
    // 0.001 of tokens plus three calls at 0.01.
    expect(
      (await store.debit(debit('tools-1', 'tools', { price: priced, toolCalls: 3, toolCost: 0.03 }))).cost,
    ).toBeCloseTo(0.031, 12);
    await Promise.all([
      store.debit(debit('tools-2', 'tools', { price: priced, toolCalls: 1, toolCost: 0.01 })),
      store.debit(debit('tools-3', 'tools', { price: priced, toolCalls: 2, toolCost: 0.02 })),
      store.debit(debit('tools-4', 'tools', { price: priced })),
    ]);
    expect(await balance('tools')).toBe(0.936);
    expect(await ledger('tools')).toBe(0.064);
    const rows = await store.usage({ keyId: 'tools', limit: 10 });
    expect(Object.fromEntries(rows.map((r) => [r.requestId, r.toolCalls ?? 0]))).toEqual({
      'tools-1': 3,
      'tools-2': 1,
      'tools-3': 2,
      'tools-4': 0,
    });
    // A provisional maximum replaced by the report: the difference, the report's calls.
    await store.debit(
      debit('tools-5', 'tools', {
        price: priced,
        toolCalls: 10,
        toolCost: 0.1,
        estimated: 'no_report',
        provisional: true,
      }),
    );
    await store.debit(debit('tools-5', 'tools', { price: priced, toolCalls: 1, toolCost: 0.01 }));
    expect(await balance('tools')).toBe(0.925);
    expect((await store.usage({ keyId: 'tools', limit: 10 })).find((r) => r.requestId === 'tools-5')!.toolCalls).toBe(
      1,
    );
  });

  it("groups price stores hosted tools' prices per call; the store and listings read them back; a model without a price may have none", async () => {
    await setGroup(pool, { name: 'tp', available: true, models: [{ name: 'gpt', protocols: null, available: true }] });
    const price = { input: 1.25, output: 10, cachedInput: null, tools: { web_search: 0.01, file_search: 0.0025 } };
    await setPrice(pool, 'tp', 'gpt', { price });
    expect((await listGroups(pool, 'tp'))[0].models[0].price).toEqual(price);
    const pgStore = new PgStore(server.url);
    try {
      expect((await pgStore.findGroup('tp'))!.models.get('gpt')!.price).toEqual(price);
      await setGroup(pool, {
        name: 'tp',
        models: [
          { name: 'gpt', protocols: null, available: true },
          { name: 'other', protocols: null, available: true },
        ],
      });
      expect((await listGroups(pool, 'tp'))[0].models[0].price).toEqual(price);
    } finally {
      await pgStore.close();
    }
    await expect(
      pool.query(
        `UPDATE modelgate.group_models SET tool_prices = '{"web_search": 0.01}' WHERE group_name = 'tp' AND name = 'other'`,
      ),
    ).rejects.toThrow(/group_models_tool_prices_priced/);
    await expect(
      pool.query(`UPDATE modelgate.group_models SET tool_prices = '[1]' WHERE group_name = 'tp' AND name = 'gpt'`),
    ).rejects.toThrow(/check constraint/);
  });

  it('the table refuses a long-context price without its threshold or prices, or on a model without a price', async () => {
    const update = (set: string) =>
      pool.query(`UPDATE modelgate.group_models SET ${set} WHERE group_name = 'lc' AND name = 'other'`);
    await expect(update('long_context_above = 200000')).rejects.toThrow(/group_models_long_context_complete/);
    await expect(
      update('long_context_above = 200000, long_context_input_price = 4, long_context_output_price = 18'),
    ).rejects.toThrow(/group_models_long_context_complete/);
    await expect(
      update(
        'input_price = 2, output_price = 12, long_context_above = 0, long_context_input_price = 4, long_context_output_price = 18',
      ),
    ).rejects.toThrow(/check constraint/);
  });
});

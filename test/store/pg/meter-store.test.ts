/**
 * The PostgreSQL meter store's debits on a real PostgreSQL (money red team 11b): batched debits
 * (debit_many) keep the ledger and the balance in step, whatever a batch holds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminDb } from '../../../src/store/pg/admin';
import { setGroup } from '../../../src/store/pg/groups';
import { PgMeterStore } from '../../../src/store/pg/meter-store';
import { migrate } from '../../../src/store/pg/schema';
import type { DebitRequest } from '../../../src/store/store';
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
  requestId, keyId, group: 'g', model: 'm', protocol: 'chat', inputTokens: 0, outputTokens: 1000, cachedInputTokens: 0,
  price: { input: 1, output: 1, cachedInput: null }, estimated: null, provisional: false, ...o,
});

const balance = async (id: string): Promise<number> => Number((await pool.query<{ b: string }>('SELECT balance::text AS b FROM modelgate.keys WHERE id = $1', [id])).rows[0].b);
const ledger = async (id: string): Promise<number> => Number((await pool.query<{ s: string }>('SELECT coalesce(sum(cost), 0)::text AS s FROM modelgate.usage WHERE key_id = $1', [id])).rows[0].s);

describe('PgMeterStore debits', () => {
  it('a request id twice in one batch (a report that arrives twice while others are in flight) is debited once: the balance is what the ledger says (it was debited twice, its row once)', async () => {
    await issueKey(pool, { group: 'g', id: 'dup', balance: '1' });
    // Two batches go at once (one debit each); what arrives meanwhile goes together in the next one.
    const results = await Promise.all([store.debit(debit('dup-a', 'dup')), store.debit(debit('dup-b', 'dup')), store.debit(debit('dup-c', 'dup')), store.debit(debit('dup-c', 'dup'))]);
    expect(results.map((r) => r.applied)).toEqual([true, true, true, false]);
    // Seen: 0.996 (dup-c debited twice), the ledger 0.003.
    expect(await ledger('dup')).toBe(0.003);
    expect(await balance('dup')).toBe(0.997);
  });

  it('a provisional settlement and the final one of a request in one batch: the final one stands, the balance is what the ledger says', async () => {
    await issueKey(pool, { group: 'g', id: 'prov', balance: '1' });
    await Promise.all([
      store.debit(debit('prov-a', 'prov')), store.debit(debit('prov-b', 'prov')),
      store.debit(debit('prov-p', 'prov', { outputTokens: 5000, estimated: 'no_report', provisional: true })), store.debit(debit('prov-p', 'prov', { outputTokens: 100 })),
    ]);
    const row = (await pool.query<{ cost: string; provisional: boolean }>("SELECT cost::text AS cost, provisional FROM modelgate.usage WHERE request_id = 'prov-p'")).rows[0];
    expect({ cost: Number(row.cost), provisional: row.provisional }).toEqual({ cost: 0.0001, provisional: false });
    expect(await ledger('prov')).toBe(0.0021);
    expect(await balance('prov')).toBe(0.9979);
  });
});

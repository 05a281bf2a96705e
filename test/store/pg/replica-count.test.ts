/**
 * Store.replicas() on PostgreSQL: the modelgate processes sharing a database, counted from their
 * LISTEN connections (soft mode holds a key's requests on each to its share of the balance:
 * meter/admission.ts). Each store here stands for one replica.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { openPgStore, PgStore, REPLICA_COUNT_STALE_MS } from '../../../src/store/pg/store';
import { startPgServer, type PgServer } from '../../support/pg-server';

let server: PgServer;
const open: PgStore[] = [];

beforeAll(async () => {
  server = await startPgServer();
}, 60_000);
afterAll(async () => {
  for (const s of open) await s.close();
  await server?.close();
});

async function until(what: string, ok: () => boolean, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('counts the replicas on the database (this one included), follows one that joins and, once its memory of the larger count has passed, one that leaves; another database is not counted', async () => {
  // Its memory is at least two graces (12 s), whatever is asked.
  const a = await openPgStore(server.url, { replicaMemoryMs: 3000 });
  open.push(a);
  await until('a to count itself', () => a.replicas() === 1);
  const b = await openPgStore(server.url);
  open.push(b);
  await until('both to count two', () => a.replicas() === 2 && b.replicas() === 2);
  // A replica of another database shares no balances with these.
  const other = await openPgStore(await server.createDatabase());
  open.push(other);
  await until('the other to count itself alone', () => other.replicas() === 1);
  expect(a.replicas()).toBe(2);
  // A replica that leaves (or whose LISTEN connection drops) is still counted for replicaMemoryMs:
  // the requests it admitted under its share may still run.
  const c = await openPgStore(server.url, { replicaMemoryMs: 600_000 });
  open.push(c);
  await until('a and c to count three', () => a.replicas() === 3 && c.replicas() === 3);
  await b.close();
  await new Promise((r) => setTimeout(r, 4 * 2000));
  expect(c.replicas()).toBe(3);
  await until('a to count two again after its memory (12 s)', () => a.replicas() === 2, 40_000);
}, 90_000);

test('counts the replicas whatever application_name their URL sets (the URL overrides the one a client asks for)', async () => {
  const url = await server.createDatabase();
  const named = `${url}${url.includes('?') ? '&' : '?'}application_name=modelgate-eu`;
  const a = await openPgStore(named);
  open.push(a);
  const b = await openPgStore(named);
  open.push(b);
  await until('both to count two', () => a.replicas() === 2 && b.replicas() === 2);
}, 60_000);

/** Makes this store's replica counts fail (its other queries and its LISTEN connection go on); returns the undo. */
function failCounts(store: PgStore): () => void {
  const s = store as unknown as { query(what: string, text: string, values: unknown[]): Promise<unknown[]> };
  const query = s.query.bind(store);
  s.query = (what, text, values) =>
    what === 'countReplicas' ? Promise.reject(new Error('count refused (test)')) : query(what, text, values);
  return () => {
    s.query = query;
  };
}

test('a replica whose counts fail while its LISTEN connection is up is blind after REPLICA_COUNT_STALE_MS (a replica joining meanwhile would believe itself counted), and sees again once a count succeeds', async () => {
  const url = await server.createDatabase();
  const a = await openPgStore(url);
  open.push(a);
  await until('a to count itself', () => a.replicas() === 1);
  const restore = failCounts(a);
  const failedAt = Date.now();
  await a.countReplicas();
  // One failed count changes nothing: the next one may succeed.
  expect(a.replicas()).toBe(1);
  // A replica that joins now counts two and, after its grace, holds half; a, counting nothing, would hold all.
  const b = await openPgStore(url);
  open.push(b);
  await until('a to be blind', () => a.replicas() === 0, REPLICA_COUNT_STALE_MS + 5000);
  expect(Date.now() - failedAt).toBeGreaterThanOrEqual(REPLICA_COUNT_STALE_MS - 500);
  restore();
  await until('a to count both once its counts succeed', () => a.replicas() === 2, 10_000);
}, 60_000);

test('a replica whose first count failed is blind until one succeeds (it cannot know it is alone)', async () => {
  const url = await server.createDatabase();
  const a = new PgStore(url);
  open.push(a);
  const restore = failCounts(a);
  await a.start();
  await a.whenListening(2000);
  await a.countReplicas();
  expect(a.replicas()).toBe(0);
  restore();
  await a.countReplicas();
  expect(a.replicas()).toBe(1);
}, 60_000);

/**
 * Failure behaviour of the PostgreSQL store: a blocked, exhausted, frozen or stopped database
 * makes lookups reject within their bounds (never hang, never answer "not found"), and the same
 * PgStore recovers by itself when the database comes back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminDb } from '../../../src/store/pg/admin';
import { setGroup } from '../../../src/store/pg/groups';
import { setKeyDisabled } from '../../../src/store/pg/keys';
import { issueKey } from '../../support/pg-keys';
import { hashKey } from '../../../src/contract/key-format';
import { migrate } from '../../../src/store/pg/schema';
import { openPgStore } from '../../../src/store/pg/store';
import type { PgStore } from '../../../src/store/pg/store';
import { isAll, isKey, recordEvents } from '../../support/pg-events';
import type { EventLog } from '../../support/pg-events';
import { openPool, startPgServer } from '../../support/pg-server';
import type { PgServer } from '../../support/pg-server';

// Bounds used here; the defaults (PG_STORE_DEFAULTS) are 1000 ms each.
const QUERY_TIMEOUT = 300;
const CONNECT_TIMEOUT = 300;
const HEARTBEAT = 200;

let server: PgServer;
let store: PgStore;
let events: EventLog;
let key: string;

async function withAdmin<T>(fn: (pool: AdminDb) => Promise<T>): Promise<T> {
  const pool = openPool(server.url, 2);
  try {
    return await fn(pool);
  } finally {
    await pool.end();
  }
}

/** How long `promise` took to settle, and whether it rejected. */
async function timed(promise: Promise<unknown>): Promise<{ ms: number; error: Error | undefined }> {
  const start = performance.now();
  const error = await promise.then(
    () => undefined,
    (err: Error) => err,
  );
  return { ms: performance.now() - start, error };
}

beforeAll(async () => {
  server = await startPgServer();
  key = await withAdmin(async (pool) => {
    await migrate(pool);
    await setGroup(pool, { name: 'basic' });
    return (await issueKey(pool, { group: 'basic', id: 'alice', balance: '5' })).key;
  });
  store = await openPgStore(server.url, {
    queryTimeoutMs: QUERY_TIMEOUT,
    connectTimeoutMs: CONNECT_TIMEOUT,
    heartbeatMs: HEARTBEAT,
    poolSize: 1,
    reconnectMinMs: 20,
    reconnectMaxMs: 200,
  });
  events = recordEvents(store);
});

afterAll(async () => {
  server?.resume();
  await store?.close();
  await server?.close();
});

describe('a slow or exhausted database', () => {
  it('rejects a lookup blocked by a lock within the query timeout, and the pool has a single slot busy meanwhile', async () => {
    await withAdmin(async (pool) => {
      const locker = await pool.connect();
      try {
        await locker.query('BEGIN');
        await locker.query('LOCK TABLE modelgate.keys IN ACCESS EXCLUSIVE MODE');
        // The first lookup holds the pool's only connection while it waits for the lock; the
        // second waits for that connection: both must give up in bounded time.
        const [blocked, queued] = await Promise.all([
          timed(store.findKey(hashKey(key))),
          timed(store.findKey(hashKey(key))),
        ]);
        expect(blocked.error?.message).toMatch(/findKey failed: .*(statement timeout|Query read timeout)/);
        expect(blocked.ms).toBeLessThan(QUERY_TIMEOUT + 500);
        expect(queued.error?.message).toMatch(/findKey failed: .*timeout/);
        expect(queued.ms).toBeLessThan(QUERY_TIMEOUT + CONNECT_TIMEOUT + 500);
      } finally {
        await locker.query('ROLLBACK');
        locker.release();
      }
    });
    expect(await store.findKey(hashKey(key))).toMatchObject({ id: 'alice' });
  });
});

// A server given by MODELGATE_TEST_DATABASE_URL is someone else's: it is not ours to stop or freeze.
describe.skipIf(Boolean(process.env.MODELGATE_TEST_DATABASE_URL))('a database that goes away', () => {
  it('rejects lookups within their bounds while the server is frozen, notices the dead LISTEN connection, and recovers when it thaws', async () => {
    const dropped = events.next(isAll, 3000);
    server.pause();
    try {
      const { ms, error } = await timed(store.findKey(hashKey(key)));
      expect(error?.message).toMatch(/findKey failed/);
      expect(ms).toBeLessThan(QUERY_TIMEOUT + CONNECT_TIMEOUT + 500);
      // The heartbeat finds the silent connection dead: no error would ever arrive by itself.
      await dropped;
      expect(store.ready()).toBe(false);
    } finally {
      server.resume();
    }
    await events.next(isAll, 5000);
    expect(store.ready()).toBe(true);
    expect(await store.findKey(hashKey(key))).toMatchObject({ id: 'alice' });
  });

  it('rejects lookups promptly while the server is stopped, and works again after it restarts, without a new store', async () => {
    const errorsBefore = store.stats().errors;
    const dropped = events.next(isAll, 3000);
    await server.stop();
    await dropped;
    expect(store.ready()).toBe(false);

    const { ms, error } = await timed(store.findKey(hashKey(key)));
    expect(error?.message).toMatch(/findKey failed/);
    expect(ms).toBeLessThan(CONNECT_TIMEOUT + 500);
    await expect(store.findGroup('basic')).rejects.toThrow(/findGroup failed/);
    expect(store.stats().errors).toBe(errorsBefore + 2);

    const reconnected = events.next(isAll, 10_000);
    await server.start();
    await reconnected;
    expect(store.ready()).toBe(true);
    expect(await store.findKey(hashKey(key))).toMatchObject({ id: 'alice', balance: 5 });

    // Changes are heard again on the new LISTEN connection.
    const heard = events.next(isKey(hashKey(key)));
    await withAdmin((pool) => setKeyDisabled(pool, 'alice', true));
    await heard;
    expect(await store.findKey(hashKey(key))).toMatchObject({ disabled: true });
  });
});

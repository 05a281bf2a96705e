/**
 * Revocation that reaches every replica in a second: writes made by the admin operations and by
 * plain SQL (a billing job) reach other PgStore instances as precise invalidation events, and a
 * dropped LISTEN connection is covered by `all` events and healed without a restart.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminDb } from '../../../src/store/pg/admin';
import { addBalance } from '../../../src/store/pg/balances';
import { removeGroup, setGroup } from '../../../src/store/pg/groups';
import { deleteKey, setKeyDisabled } from '../../../src/store/pg/keys';
import { issueKey, reissueKey } from '../../support/pg-keys';
import { hashKey } from '../../../src/contract/key-format';
import { INVALIDATION_CHANNEL, migrate } from '../../../src/store/pg/schema';
import { openPgStore } from '../../../src/store/pg/store';
import type { PgStore } from '../../../src/store/pg/store';
import { isAll, isGroup, isKey, recordEvents } from '../../support/pg-events';
import type { EventLog } from '../../support/pg-events';
import { openPool, startPgServer } from '../../support/pg-server';
import type { PgServer } from '../../support/pg-server';

let server: PgServer;
let admin: AdminDb;
let replicaA: PgStore;
let replicaB: PgStore;
let eventsA: EventLog;
let eventsB: EventLog;

beforeAll(async () => {
  server = await startPgServer();
  admin = openPool(server.url);
  await migrate(admin);
  await setGroup(admin, { name: 'basic', models: [{ name: 'gpt-4o-mini', protocols: null, available: true }] });
  // Fast reconnects keep the test short; production defaults are in PG_STORE_DEFAULTS.
  const options = { reconnectMinMs: 20, reconnectMaxMs: 200 };
  [replicaA, replicaB] = await Promise.all([openPgStore(server.url, options), openPgStore(server.url, options)]);
  eventsA = recordEvents(replicaA);
  eventsB = recordEvents(replicaB);
});

afterAll(async () => {
  await Promise.all([replicaA?.close(), replicaB?.close()]);
  await admin?.end();
  await server?.close();
});

let barriers = 0;

/**
 * Waits until both replicas have heard every notification sent so far: PostgreSQL delivers them
 * in commit order, so once a fresh marker arrives, nothing older is still on its way.
 */
async function drain(): Promise<void> {
  const name = `barrier-${++barriers}`;
  const heard = Promise.all([eventsA.next(isGroup(name)), eventsB.next(isGroup(name))]);
  await admin.query('SELECT pg_notify($1, $2)', [INVALIDATION_CHANNEL, JSON.stringify({ kind: 'group', name })]);
  await heard;
}

/** Runs `write`, then resolves with how long both replicas took to hear the matching event. */
async function latencyOf(match: Parameters<EventLog['next']>[0], write: () => Promise<unknown>): Promise<number> {
  // Without this, the notification of an earlier write to the same key (its creation) could pass for this one.
  await drain();
  const heard = Promise.all([eventsA.next(match), eventsB.next(match)]);
  const start = performance.now();
  await write();
  const arrivals = await heard;
  return Math.max(...arrivals.map((a) => a.at - start));
}

describe('invalidation events', () => {
  it('tells every replica about a disabled key within one second', async () => {
    const { key } = await issueKey(admin, { group: 'basic', id: 'revoke-me' });
    const ms = await latencyOf(isKey(hashKey(key)), () => setKeyDisabled(admin, 'revoke-me', true));
    expect(ms).toBeLessThan(1000);
  });

  it('tells every replica about a debit made by a billing job with plain SQL, within one second', async () => {
    const { key } = await issueKey(admin, { group: 'basic', id: 'billed', balance: '10' });
    const ms = await latencyOf(isKey(hashKey(key)), () =>
      admin.query("UPDATE modelgate.keys SET balance = balance - 0.02 WHERE id = 'billed'"),
    );
    expect(ms).toBeLessThan(1000);
  });

  it('sends the new balance with a change of the balance alone (caches take it without a lookup), and none with any other change', async () => {
    const { key } = await issueKey(admin, { group: 'basic', id: 'metered', balance: '10' });
    const h = hashKey(key);
    await drain();
    let from = eventsA.arrivals.length;
    await admin.query("UPDATE modelgate.keys SET balance = balance - 0.00001515 WHERE id = 'metered'");
    await eventsA.next(isKey(h), 1000, from);
    expect(eventsA.arrivals.slice(from).map((a) => a.event)).toEqual([{ kind: 'key', sha256: h, balance: 9.99998485 }]);
    await drain();
    from = eventsA.arrivals.length;
    await admin.query("UPDATE modelgate.keys SET balance = NULL WHERE id = 'metered'");
    await eventsA.next(isKey(h), 1000, from);
    expect(eventsA.arrivals.slice(from).map((a) => a.event)).toEqual([{ kind: 'key', sha256: h, balance: null }]);
    // The balance and anything else at once: a plain invalidation (look the key up again).
    await drain();
    from = eventsA.arrivals.length;
    await admin.query("UPDATE modelgate.keys SET balance = 5, disabled = true WHERE id = 'metered'");
    await eventsA.next(isKey(h), 1000, from);
    expect(eventsA.arrivals.slice(from).map((a) => a.event)).toEqual([{ kind: 'key', sha256: h }]);
  });

  it('announces a new key, so a cached "not found" for its hash is forgotten', async () => {
    await drain();
    const from = eventsA.arrivals.length;
    const { key } = await issueKey(admin, { group: 'basic', id: 'fresh' });
    await eventsA.next(isKey(hashKey(key)), 1000, from);
    expect(eventsA.arrivals.slice(from).map((a) => a.event)).toEqual([{ kind: 'key', sha256: hashKey(key) }]);
  });

  it('names both the old and the new hash when a key is rotated', async () => {
    const { key: oldKey } = await issueKey(admin, { group: 'basic', id: 'rotating' });
    await drain();
    const oldHeard = eventsB.next(isKey(hashKey(oldKey)));
    const anyKey = eventsB.next((e) => e.kind === 'key' && e.sha256 !== hashKey(oldKey));
    const { key: newKey } = await reissueKey(admin, 'rotating');
    await oldHeard;
    expect((await anyKey).event).toEqual({ kind: 'key', sha256: hashKey(newKey) });
  });

  it('announces debits through addBalance and deletions', async () => {
    const { key } = await issueKey(admin, { group: 'basic', id: 'short-lived', balance: '1' });
    expect(await latencyOf(isKey(hashKey(key)), () => addBalance(admin, 'short-lived', '-1'))).toBeLessThan(1000);
    expect(await latencyOf(isKey(hashKey(key)), () => deleteKey(admin, 'short-lived'))).toBeLessThan(1000);
  });

  it('tells every replica about a group made unavailable, within one second', async () => {
    expect(await latencyOf(isGroup('basic'), () => setGroup(admin, { name: 'basic', available: false }))).toBeLessThan(
      1000,
    );
    await setGroup(admin, { name: 'basic', available: true });
  });

  it('tells every replica about a changed model list, also when written with plain SQL', async () => {
    const viaAdmin = () =>
      setGroup(admin, { name: 'basic', models: [{ name: 'gpt-4o', protocols: ['chat'], available: true }] });
    expect(await latencyOf(isGroup('basic'), viaAdmin)).toBeLessThan(1000);
    const viaSql = () => admin.query("UPDATE modelgate.group_models SET available = false WHERE group_name = 'basic'");
    expect(await latencyOf(isGroup('basic'), viaSql)).toBeLessThan(1000);
  });

  it('announces a removed group', async () => {
    await setGroup(admin, { name: 'doomed' });
    expect(await latencyOf(isGroup('doomed'), () => removeGroup(admin, 'doomed'))).toBeLessThan(1000);
  });

  it('sends nothing for an update that changes nothing, and `all` for a TRUNCATE', async () => {
    // Notifications arrive in commit order, so a stray event from the update would come before `all`.
    await drain();
    const before = eventsA.arrivals.length;
    await admin.query("UPDATE modelgate.keys SET disabled = disabled WHERE id = 'fresh'");
    const truncated = eventsA.next(isAll);
    await admin.query('TRUNCATE modelgate.group_models');
    await truncated;
    expect(eventsA.arrivals.slice(before).map((a) => a.event)).toEqual([{ kind: 'all' }]);
  });
});

describe('the LISTEN connection', () => {
  it('emits `all` when its connection is killed, reconnects by itself, emits `all` again, and hears later changes', async () => {
    await drain();
    const pid = replicaA.listenerPid();
    expect(pid).not.toBeNull();
    const start = eventsA.arrivals.length;
    const dropped = eventsA.next(isAll);
    await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    await dropped;
    const reconnected = await eventsA.next(isAll);
    expect(replicaA.ready()).toBe(true);
    expect(replicaA.listenerPid()).not.toBe(pid);
    expect(replicaA.stats().reconnects).toBe(1);
    expect(eventsA.arrivals.slice(start).map((a) => a.event)).toEqual([{ kind: 'all' }, { kind: 'all' }]);
    expect(reconnected.at).toBeGreaterThan(eventsA.arrivals[start].at);

    const { key } = await issueKey(admin, { group: 'basic', id: 'after-reconnect' });
    expect(await latencyOf(isKey(hashKey(key)), () => setKeyDisabled(admin, 'after-reconnect', true))).toBeLessThan(
      1000,
    );
  });

  it('leaves the other replica undisturbed when one listener is killed', async () => {
    const before = eventsB.arrivals.filter((a) => isAll(a.event)).length;
    const pid = replicaA.listenerPid();
    const back = eventsA.next(isAll).then(() => eventsA.next(isAll));
    await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    await back;
    expect(eventsB.arrivals.filter((a) => isAll(a.event)).length).toBe(before);
    expect(replicaB.ready()).toBe(true);
  });
});

/**
 * Balances that move on PostgreSQL (docs/metering.md), through real Envoys: every protocol debits exactly
 * tokens x price; 100 concurrent requests of one key debit exactly 100 times; strict mode lets at
 * most 10 of 100 concurrent requests through when the balance covers 10; a key driven to zero is
 * denied on two replicas (two Envoys, two modelgates, one database) within a second.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AdminDb } from '../../src/store/pg/admin';
import { setGroup, setPrice } from '../../src/store/pg/groups';
import { startService, type Service } from '../../src/server/service';
import { migrate } from '../../src/store/pg/schema';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { expectedUsage, PROTOCOL_CASES, sendProtocol, waitFor, type ProtocolCase } from '../support/meter-cases';
import { issueKey } from '../support/pg-keys';
import { openPool, startPgServer, type PgServer } from '../support/pg-server';
import { DEMO_CONFIG, LogSink } from '../support/service-harness';

const PRICES: Record<string, [number, number]> = {
  'gpt-4o-mini': [2000, 8000],
  'text-embedding-3-small': [200, 0],
  'claude-3-5-haiku-latest': [3000, 15000],
  'gemini-2.5-flash': [1500, 6000],
};

async function seed(pool: AdminDb): Promise<void> {
  await migrate(pool);
  await setGroup(pool, {
    name: 'basic',
    models: Object.keys(PRICES).map((name) => ({ name, protocols: null, available: true })),
  });
  for (const [model, [input, output]] of Object.entries(PRICES))
    await setPrice(pool, 'basic', model, { price: { input, output, cachedInput: null } });
}

async function newKey(pool: AdminDb, id: string, balance: number | string | null): Promise<string> {
  return (await issueKey(pool, { group: 'basic', id, balance: balance === null ? null : String(balance) })).key;
}

const withStore =
  (url: string, strict = false) =>
  (demo: string): string =>
    `${strict ? demo.replace('  mode: soft ', '  mode: strict ') : demo}\nstore: ${url}\n`;
const balanceOf = async (pool: AdminDb, id: string): Promise<string> =>
  (await pool.query<{ b: string }>('SELECT balance::text AS b FROM modelgate.keys WHERE id = $1', [id])).rows[0].b;
const rows = async (pool: AdminDb, id: string): Promise<number> =>
  (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM modelgate.usage WHERE key_id = $1', [id])).rows[0].n;

describeE2E('metering on PostgreSQL through Envoy', () => {
  let server: PgServer;
  let pool: AdminDb;
  let gw: Gateway;
  beforeAll(async () => {
    server = await startPgServer();
    pool = openPool(server.url);
    await seed(pool);
    gw = await startGateway({ config: withStore(server.url) });
  }, 90_000);
  afterAll(async () => {
    await gw?.close();
    await pool?.end();
    await server?.close();
  });

  it('debits exactly tokens x price, in numeric, for every protocol answer and stream', async () => {
    const key = await newKey(pool, 'every', 100);
    let expected = 0;
    for (const c of PROTOCOL_CASES) {
      const reply = await sendProtocol(gw, c, key);
      expect(reply.status, `${c.name}: ${reply.text}`).toBe(200);
      const u = expectedUsage(c, reply);
      const [pin, pout] = PRICES[c.model];
      expected += u.input * pin + u.output * pout;
      const n = PROTOCOL_CASES.indexOf(c) + 1;
      await waitFor(`the debit of ${c.name}`, async () => (await rows(pool, 'every')) === n);
      const {
        rows: [row],
      } = await pool.query(
        'SELECT input_tokens::int AS i, output_tokens::int AS o, cost::text AS cost, protocol, model FROM modelgate.usage WHERE key_id = $1 ORDER BY time DESC LIMIT 1',
        ['every'],
      );
      expect(row, c.name).toMatchObject({ i: u.input, o: u.output, protocol: c.protocol, model: c.model });
      expect(Number(row.cost), c.name).toBeCloseTo((u.input * pin + u.output * pout) / 1e6, 12);
    }
    // numeric arithmetic: the balance is exactly 100 - sum(tokens x price) / 1e6.
    const {
      rows: [exact],
    } = await pool.query<{ ok: boolean }>(
      `SELECT balance = 100 - $1::numeric / 1000000 AS ok FROM modelgate.keys WHERE id = 'every'`,
      [String(expected)],
    );
    expect(exact.ok).toBe(true);
  });

  it('debits 100 concurrent requests of one key exactly 100 times (no lost update)', async () => {
    // Enough for 100 requests at their maximum (soft mode holds each in flight at it).
    const key = await newKey(pool, 'busy', 100_000);
    const replies = await Promise.all(Array.from({ length: 100 }, () => sendProtocol(gw, PROTOCOL_CASES[0], key)));
    expect(replies.filter((r) => r.status !== 200).map((r) => r.text)).toEqual([]);
    await waitFor('100 debits', async () => (await rows(pool, 'busy')) === 100, 30_000);
    const {
      rows: [r],
    } = await pool.query<{ ok: boolean; n: number }>(
      "SELECT k.balance = 100000 - (SELECT sum(cost) FROM modelgate.usage WHERE key_id = 'busy') AS ok, (SELECT count(DISTINCT request_id)::int FROM modelgate.usage WHERE key_id = 'busy') AS n FROM modelgate.keys k WHERE id = 'busy'",
    );
    expect(r).toEqual({ ok: true, n: 100 });
    expect(Number(await balanceOf(pool, 'busy'))).toBeLessThan(100_000);
  });

  it('serves a key in flight and denies it on its next request once its balance is spent', async () => {
    const key = await newKey(pool, 'spent', '0.5');
    let served = 0;
    for (; served < 40; served++) {
      const reply = await sendProtocol(gw, PROTOCOL_CASES[0], key);
      if (reply.status !== 200) {
        expect(reply.headers['x-modelgate-reason']).toBe('balance_insufficient');
        break;
      }
      await waitFor('the debit', async () => (await rows(pool, 'spent')) === served + 1);
    }
    expect(served).toBeGreaterThan(0);
    expect(served).toBeLessThan(40);
    expect(Number(await balanceOf(pool, 'spent'))).toBeLessThanOrEqual(0);
  });
});

describeE2E('strict metering on PostgreSQL through Envoy', () => {
  let server: PgServer;
  let pool: AdminDb;
  let gw: Gateway;
  beforeAll(async () => {
    server = await startPgServer();
    pool = openPool(server.url);
    await seed(pool);
    // Streams of chunks 100 ms apart: every request is still in flight when the last one is
    // decided (a settled request frees what its reservation held beyond its real cost).
    gw = await startGateway({ config: withStore(server.url, true), upstream: { chunkDelayMs: 100 } });
  }, 90_000);
  afterAll(async () => {
    await gw?.close();
    await pool?.end();
    await server?.close();
  });

  it('lets at most 10 of 100 concurrent requests through when the balance covers 10, and settles them to the real usage', async () => {
    const c: ProtocolCase = {
      ...PROTOCOL_CASES[1],
      body: {
        model: 'gpt-4o-mini',
        max_tokens: 50,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'strict' }],
      },
    };
    const bodyBytes = Buffer.byteLength(JSON.stringify(c.body));
    const maxCost = (bodyBytes * 2000 + 50 * 8000) / 1e6;
    // Exactly ten times what modelgate reserves per request (the same decimal text it sends).
    const key = await newKey(pool, 'tight', null);
    await pool.query("UPDATE modelgate.keys SET balance = 10 * $1::numeric WHERE id = 'tight'", [String(maxCost)]);
    const initial = await balanceOf(pool, 'tight');
    const replies = await Promise.all(Array.from({ length: 100 }, () => sendProtocol(gw, c, key)));
    const ok = replies.filter((r) => r.status === 200);
    const denied = replies.filter((r) => r.status === 403);
    expect(ok.length).toBe(10);
    expect(ok.length + denied.length).toBe(100);
    expect(denied.every((r) => r.headers['x-modelgate-reason'] === 'balance_insufficient')).toBe(true);
    expect(String(denied[0].headers['x-modelgate-hint'])).toMatch(/requests in flight/);
    await waitFor('every settlement', async () => (await rows(pool, 'tight')) === ok.length, 30_000);
    // Settled to the real usage: no reservation left, the leases given back once idle, the balance never below zero.
    expect(
      (await pool.query("SELECT count(*)::int AS n FROM modelgate.reservations WHERE key_id = 'tight'")).rows[0].n,
    ).toBe(0);
    await waitFor(
      'the lease to be given back',
      async () =>
        (await pool.query("SELECT count(*)::int AS n FROM modelgate.leases WHERE key_id = 'tight' AND amount > 0"))
          .rows[0].n === 0,
      15_000,
    );
    const {
      rows: [r],
    } = await pool.query<{ ok: boolean }>(
      `SELECT balance = $1::numeric - (SELECT sum(cost) FROM modelgate.usage WHERE key_id = 'tight') AND balance >= 0 AS ok FROM modelgate.keys WHERE id = 'tight'`,
      [initial],
    );
    expect(r.ok).toBe(true);
  });

  it('settles a response that reports no usage with an estimate, leaving no reservation', async () => {
    const key = await newKey(pool, 'nousage', 10);
    const reply = await gw.send('POST', '/v1/chat/completions', {
      headers: [
        ['authorization', `Bearer ${key}`],
        ['content-type', 'application/json'],
      ],
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        stream: true,
        max_tokens: 10,
        messages: [{ role: 'user', content: 'x' }],
      }),
    });
    expect(reply.status).toBe(200);
    await waitFor('the settlement', async () => (await rows(pool, 'nousage')) === 1);
    expect(
      (await pool.query("SELECT count(*)::int AS n FROM modelgate.reservations WHERE key_id = 'nousage'")).rows[0].n,
    ).toBe(0);
    const {
      rows: [row],
    } = await pool.query(
      "SELECT estimated, cost::float8 AS cost, provisional FROM modelgate.usage WHERE key_id = 'nousage'",
    );
    expect(row).toMatchObject({ estimated: 'stream_without_usage', provisional: false });
    expect(row.cost).toBeGreaterThan(0);
    const {
      rows: [b],
    } = await pool.query<{ ok: boolean }>(
      "SELECT balance = 10 - (SELECT cost FROM modelgate.usage WHERE key_id = 'nousage') AS ok FROM modelgate.keys WHERE id = 'nousage'",
    );
    expect(b.ok).toBe(true);
  });
});

describeE2E('two replicas on one PostgreSQL', () => {
  let server: PgServer;
  let pool: AdminDb;
  let a: Gateway;
  let b: Gateway;
  beforeAll(async () => {
    server = await startPgServer();
    pool = openPool(server.url);
    await seed(pool);
    [a, b] = await Promise.all([
      startGateway({ config: withStore(server.url) }),
      startGateway({ config: withStore(server.url) }),
    ]);
  }, 90_000);
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await pool?.end();
    await server?.close();
  });

  it('denies a key driven to zero on both replicas within one second of the debit', async () => {
    const key = await newKey(pool, 'shared', '0.3');
    // Both replicas have the key cached as allowed.
    for (const g of [a, b]) expect((await sendProtocol(g, PROTOCOL_CASES[0], key)).status).toBe(200);
    await waitFor('two debits', async () => (await rows(pool, 'shared')) === 2);
    while (Number(await balanceOf(pool, 'shared')) > 0) {
      const before = await rows(pool, 'shared');
      expect((await sendProtocol(a, PROTOCOL_CASES[0], key)).status).toBe(200);
      await waitFor('the debit', async () => (await rows(pool, 'shared')) === before + 1);
    }
    const spentAt = Date.now();
    const deniedAt: Record<string, number> = {};
    while (Object.keys(deniedAt).length < 2 && Date.now() - spentAt < 5000) {
      for (const [name, g] of [
        ['a', a],
        ['b', b],
      ] as const) {
        if (deniedAt[name]) continue;
        const r = await sendProtocol(g, PROTOCOL_CASES[0], key);
        if (r.status === 403 && r.headers['x-modelgate-reason'] === 'balance_insufficient') deniedAt[name] = Date.now();
      }
    }
    expect(Object.keys(deniedAt).sort()).toEqual(['a', 'b']);
    expect(Math.max(deniedAt.a, deniedAt.b) - spentAt).toBeLessThan(1000);
  });
});

describeE2E('a replica settling the requests another one allowed', () => {
  let server: PgServer;
  let pool: AdminDb;
  const gateways: Gateway[] = [];
  let settler: Service;
  beforeAll(async () => {
    server = await startPgServer();
    pool = openPool(server.url);
    await seed(pool);
  }, 90_000);
  afterAll(async () => {
    for (const g of gateways) await g.close();
    await settler?.close(1000, 0);
    await pool?.end();
    await server?.close();
  });

  /** One Envoy whose Checks go to its own modelgate and whose reports go to `settler`, another replica. */
  async function split(strict: boolean): Promise<Gateway> {
    const dir = mkdtempSync(join(tmpdir(), 'modelgate-settler-'));
    const configPath = join(dir, 'modelgate.yaml');
    writeFileSync(configPath, withStore(server.url, strict)(readFileSync(DEMO_CONFIG, 'utf8')));
    settler ??= await startService({
      configPath,
      grpcAddress: '127.0.0.1:0',
      httpAddress: '127.0.0.1:0',
      logDestination: new LogSink(),
      watch: false,
    });
    const port = Number(settler.grpcAddress.split(':').pop());
    const gw = await startGateway({
      config: withStore(server.url, strict),
      editEnvoy: (b) => {
        const meter = b.static_resources.clusters.find((c: { name: string }) => c.name === 'modelgate_meter');
        meter.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = port;
      },
    });
    gateways.push(gw);
    return gw;
  }

  it('soft mode: the replica that allowed a request hears it was settled and stops holding it', async () => {
    const gw = await split(false);
    // gpt-4o-mini's maximum here (8,000 per million output tokens, 32,768 tokens) is about 262: the
    // balance covers about three requests held at their maximum at once.
    const key = await newKey(pool, 'split', 800);
    for (let i = 0; i < 12; i++) {
      const r = await sendProtocol(gw, PROTOCOL_CASES[0], key);
      expect(r.status, `request ${i}: ${r.text}`).toBe(200);
      await waitFor('its settlement', async () => (await rows(pool, 'split')) === i + 1);
      // Settled by the other replica, and let go here when its notification comes (not at its
      // deadline). Waited for before the next request: a replica younger than 6 s runs one request
      // of a key at a time (503 store_unavailable), and on a loaded machine the notification can
      // come after the row is visible (CI, once: request 1 refused).
      await waitFor('nothing held', () => gw.modelgate.service!.meter.deps.inFlight.size === 0);
    }
  }, 60_000);

  it("strict mode with leases: never past the balance, and the lease follows the other replica's debits", async () => {
    const gw = await split(true);
    const c: ProtocolCase = {
      ...PROTOCOL_CASES[0],
      body: { model: 'gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'strict, split' }] },
    };
    const maxCost = (Buffer.byteLength(JSON.stringify(c.body)) * 2000 + 50 * 8000) / 1e6;
    const key = await newKey(pool, 'split-strict', null);
    await pool.query("UPDATE modelgate.keys SET balance = 6 * $1::numeric WHERE id = 'split-strict'", [
      String(maxCost),
    ]);
    let served = 0;
    for (let round = 0; round < 5; round++) {
      const replies = await Promise.all(Array.from({ length: 20 }, () => sendProtocol(gw, c, key)));
      served += replies.filter((r) => r.status === 200).length;
      expect(replies.every((r) => r.status === 200 || r.headers['x-modelgate-reason'] === 'balance_insufficient')).toBe(
        true,
      );
      await waitFor("the round's settlements", async () => (await rows(pool, 'split-strict')) === served);
    }
    expect(served).toBeGreaterThanOrEqual(6);
    expect(Number(await balanceOf(pool, 'split-strict'))).toBeGreaterThanOrEqual(0);
    await waitFor(
      'nothing held, the lease given back',
      async () =>
        gw.modelgate.service!.meter.deps.inFlight.size === 0 &&
        (
          await pool.query(
            "SELECT count(*)::int AS n FROM modelgate.leases WHERE key_id = 'split-strict' AND amount > 0",
          )
        ).rows[0].n === 0,
      15_000,
    );
  });
});

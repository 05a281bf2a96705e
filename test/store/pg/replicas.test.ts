/**
 * The PostgreSQL store under the whole service, on a real PostgreSQL:
 * - two replica processes on one database deny within one second of a revocation, a balance set
 *   to zero and a model removed from a group (measured, with a cache TTL of 5 s, so only the
 *   LISTEN/NOTIFY invalidation can explain it);
 * - 1,000 concurrent Checks for one uncached key cause one query;
 * - an outage: cached keys keep working within the stale window, unknown keys get 503
 *   store_unavailable promptly, and after PostgreSQL restarts everything works again without
 *   restarting modelgate.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import type { CheckResponse__Output } from '../../../proto/types/envoy/service/auth/v3/CheckResponse';
import type { AdminDb } from '../../../src/store/pg/admin';
import { addBalance, setBalance } from '../../../src/store/pg/balances';
import { setGroup } from '../../../src/store/pg/groups';
import { setKeyDisabled } from '../../../src/store/pg/keys';
import { issueKey } from '../../support/pg-keys';
import { buildCheckRequest, type HttpRequestLine } from '../../../src/envoy/check-request';
import { authorizationClient } from '../../../src/envoy/protos';
import { generateKey } from '../../../src/contract/key-format';
import { migrate } from '../../../src/store/pg/schema';
import type { PgStore } from '../../../src/store/pg/store';
import { openPool, startPgServer, type PgServer } from '../../support/pg-server';
import { reasonOf, startHarness, tempConfig, type Harness } from '../../support/service-harness';

const CLI = join(__dirname, '..', '..', '..', 'dist', 'src', 'cli', 'main.js');
const CONFIG = 'cache:\n  ttlSeconds: 5\n  staleSeconds: 60\nlog:\n  allows: false\n';
let server: PgServer;
let pool: AdminDb;

const chat = (key: string, model = 'gpt-4o-mini'): HttpRequestLine => ({
  method: 'POST',
  path: '/v1/chat/completions',
  headers: [['authorization', `Bearer ${key}`]],
  body: JSON.stringify({ messages: [], model }),
});

beforeAll(async () => {
  server = await startPgServer();
  pool = openPool(server.url);
  await migrate(pool);
  await setGroup(pool, {
    name: 'team',
    available: true,
    models: [
      { name: 'gpt-4o-mini', protocols: null, available: true },
      { name: 'gpt-4o', protocols: ['chat'], available: true },
    ],
  });
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await server?.close();
});

interface Replica {
  proc: ChildProcessWithoutNullStreams;
  check(line: HttpRequestLine): Promise<CheckResponse__Output>;
  stop(): Promise<void>;
}

async function startReplica(): Promise<Replica> {
  if (!existsSync(CLI)) throw new Error('dist/src/cli/main.js is missing: run `npm run build` (npm test does it)');
  const proc = spawn(process.execPath, [
    CLI,
    'serve',
    '--config',
    tempConfig(CONFIG),
    '--store',
    server.url,
    '--grpc',
    '127.0.0.1:0',
    '--http',
    '127.0.0.1:0',
  ]);
  let out = '';
  const address = await new Promise<string>((resolve, reject) => {
    proc.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /"grpcAddress":"([^"]+)"/.exec(out);
      if (m) resolve(m[1]);
    });
    proc.stderr.on('data', (c: Buffer) => (out += c.toString()));
    proc.once('exit', (code) => reject(new Error(`replica exited (${code}): ${out}`)));
  });
  const client = new (authorizationClient())(address, grpc.credentials.createInsecure());
  return {
    proc,
    check: (line) =>
      new Promise((resolve, reject) =>
        client.Check(buildCheckRequest(line), (err, res) => (err ? reject(err) : resolve(res!))),
      ),
    async stop() {
      client.close();
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
    },
  };
}

/** Milliseconds from `change` until every replica answers `reason` (polled every 5 ms). */
async function timeUntil(
  replicas: Replica[],
  line: HttpRequestLine,
  reason: string,
  change: () => Promise<unknown>,
): Promise<number> {
  const started = performance.now();
  await change();
  const times = await Promise.all(
    replicas.map(async (r) => {
      for (;;) {
        if (reasonOf(await r.check(line)) === reason) return performance.now() - started;
        if (performance.now() - started > 5000) throw new Error(`no ${reason} after 5 s`);
        await new Promise((res) => setTimeout(res, 5));
      }
    }),
  );
  return Math.max(...times);
}

describe('two replicas on one database', () => {
  let replicas: Replica[] = [];
  beforeAll(async () => {
    replicas = await Promise.all([startReplica(), startReplica()]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
  });

  test('a revoked key, a zero balance and a removed model are denied by both replicas within one second', async () => {
    const revoked = await issueKey(pool, { group: 'team', id: 'revoke-me' });
    const spender = await issueKey(pool, { group: 'team', id: 'spender', balance: '3' });
    const user = await issueKey(pool, { group: 'team', id: 'user' });
    // Warm both replicas' caches: every answer below must come from an invalidation, not a TTL.
    for (const r of replicas) {
      expect(reasonOf(await r.check(chat(revoked.key)))).toBe('allowed');
      expect(reasonOf(await r.check(chat(spender.key)))).toBe('allowed');
      expect(reasonOf(await r.check(chat(user.key, 'gpt-4o')))).toBe('allowed');
    }
    const revoke = await timeUntil(replicas, chat(revoked.key), 'key_disabled', () =>
      setKeyDisabled(pool, 'revoke-me', true),
    );
    const zero = await timeUntil(replicas, chat(spender.key), 'balance_insufficient', () =>
      setBalance(pool, 'spender', '0'),
    );
    const removed = await timeUntil(replicas, chat(user.key, 'gpt-4o'), 'model_not_in_group', () =>
      setGroup(pool, { name: 'team', models: [{ name: 'gpt-4o-mini', protocols: null, available: true }] }),
    );
    console.log(
      `both replicas denied after: revoke ${revoke.toFixed(0)} ms, balance 0 ${zero.toFixed(0)} ms, model removed ${removed.toFixed(0)} ms`,
    );
    for (const ms of [revoke, zero, removed]) expect(ms).toBeLessThan(1000);
    // A billing job's plain SQL debit notifies too.
    await setBalance(pool, 'spender', '1');
    await vi.waitFor(async () => expect(reasonOf(await replicas[0].check(chat(spender.key)))).toBe('allowed'), {
      timeout: 1000,
      interval: 5,
    });
    const debit = await timeUntil(replicas, chat(spender.key), 'balance_insufficient', () =>
      pool.query(`UPDATE modelgate.keys SET balance = balance - 1 WHERE id = 'spender'`),
    );
    expect(debit).toBeLessThan(1000);
    await setGroup(pool, {
      name: 'team',
      models: [
        { name: 'gpt-4o-mini', protocols: null, available: true },
        { name: 'gpt-4o', protocols: ['chat'], available: true },
      ],
    });
  }, 60_000);
});

describe('one service on the PostgreSQL store', () => {
  let h: Harness;
  let burst: { key: string };
  let cached: { key: string };
  let later: { key: string };
  beforeAll(async () => {
    // Created before the service listens, so their own NOTIFYs cannot race the first lookups.
    burst = await issueKey(pool, { group: 'team', id: 'burst' });
    cached = await issueKey(pool, { group: 'team', id: 'cached' });
    later = await issueKey(pool, { group: 'team', id: 'later' });
    h = await startHarness({ configPath: tempConfig(CONFIG), storeUrl: server.url });
  }, 30_000);
  afterAll(async () => {
    await h?.close();
  });

  test('1,000 concurrent Checks for one uncached key cause one key query', async () => {
    const k = burst;
    const store = h.service.store as PgStore;
    const before = store.stats().keyQueries;
    const answers = await Promise.all(
      Array.from({ length: 1000 }, () => h.service.check(buildCheckRequest(chat(k.key)) as never)),
    );
    expect(answers.every((a) => (a.status?.code ?? 0) === 0)).toBe(true);
    expect(store.stats().keyQueries - before).toBe(1);
  });

  test('an outage: cached keys keep working, unknown keys get 503 store_unavailable, and it recovers without a restart', async () => {
    if (!server.canRestart) return; // MODELGATE_TEST_DATABASE_URL: not our server to stop
    expect(reasonOf(await h.check(chat(cached.key)))).toBe('allowed');
    await server.stop();
    try {
      const during = await h.check(chat(cached.key));
      expect(reasonOf(during), JSON.stringify(during.denied_response?.headers)).toBe('allowed');
      const t0 = performance.now();
      expect(reasonOf(await h.check(chat(generateKey())))).toBe('store_unavailable');
      expect(performance.now() - t0).toBeLessThan(3000);
      expect(reasonOf(await h.check(chat(later.key)))).toBe('store_unavailable');
      expect((await fetch(`http://${h.service.httpAddress}/healthz/store`)).status).toBe(503);
      expect((await fetch(`http://${h.service.httpAddress}/readyz`)).status).toBe(200); // still answering Checks
    } finally {
      await server.start();
    }
    await vi.waitFor(async () => expect(reasonOf(await h.check(chat(later.key)))).toBe('allowed'), {
      timeout: 15_000,
      interval: 100,
    });
    await vi.waitFor(
      async () => expect((await fetch(`http://${h.service.httpAddress}/healthz/store`)).status).toBe(200),
      { timeout: 15_000, interval: 100 },
    );
    // A change made after the restart still reaches the cache (LISTEN re-established).
    const t = await (async () => {
      const started = performance.now();
      await addBalance(pool, 'cached', '-1');
      await setKeyDisabled(pool, 'cached', true);
      await vi.waitFor(async () => expect(reasonOf(await h.check(chat(cached.key)))).toBe('key_disabled'), {
        timeout: 5000,
        interval: 5,
      });
      return performance.now() - started;
    })();
    expect(t).toBeLessThan(1000);
  }, 60_000);
});

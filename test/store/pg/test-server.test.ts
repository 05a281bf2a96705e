/**
 * The test PostgreSQL itself (test/support/pg-server.ts, pg-binaries.ts): it runs from any checkout
 * location, as root too, and one that cannot start fails at once with one line saying what failed,
 * why and what to do (never a 60 s hook timeout).
 */
import { chmodSync, lstatSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pgRuntime, reachableByOthers } from '../../support/pg-binaries';
import { startPgServer } from '../../support/pg-server';

const scratch: string[] = [];
afterAll(() => {
  for (const d of scratch) rmSync(d, { recursive: true, force: true });
});

/** A folder of fake binaries: name → shell script body, or null for a file that cannot be run. */
function fakeBin(files: Record<string, string | null>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'modelgate-fake-pg-'));
  scratch.push(dir);
  for (const [name, body] of Object.entries(files)) {
    writeFileSync(path.join(dir, name), body === null ? 'not a program' : `#!/bin/sh\n${body}\n`);
    chmodSync(path.join(dir, name), body === null ? 0o644 : 0o755);
  }
  return dir;
}

/**
 * Starts a server on the fake binaries and returns the rejection. "At once" is proved by the test
 * timeout (20 s), well under the 45 s start limit after which a hang would be reported.
 */
async function failedStart(binDir: string): Promise<{ message: string }> {
  const err = await startPgServer({ runtime: { binDir, workBase: tmpdir() } }).then(
    (s) => {
      void s.close();
      throw new Error('the server started');
    },
    (e: Error) => e,
  );
  return { message: err.message };
}

describe('the test PostgreSQL', () => {
  it.runIf(process.getuid?.() === 0)(
    'as root, runs from binaries every folder above which the postgres user can enter, owned by root and writable only by it',
    () => {
      const rt = pgRuntime();
      expect(rt.runAs?.uid).toBeGreaterThan(0);
      expect(reachableByOthers(rt.binDir)).toBe(true);
      expect(reachableByOthers(rt.workBase)).toBe(true);
      for (const name of ['initdb', 'postgres']) {
        const st = statSync(path.join(rt.binDir, name));
        expect(st.uid).toBe(0);
        expect(st.mode & 0o777).toBe(0o755);
      }
      const cache = path.dirname(path.dirname(rt.binDir));
      expect(lstatSync(cache).mode & 0o777).toBe(0o755);
    },
  );

  it('tells a folder closed to other users from an open one', () => {
    const closed = mkdtempSync(path.join(tmpdir(), 'modelgate-closed-'));
    scratch.push(closed);
    chmodSync(closed, 0o700);
    expect(reachableByOthers(closed)).toBe(false);
    expect(reachableByOthers(path.join(closed, 'inside'))).toBe(false);
    chmodSync(closed, 0o755);
    expect(reachableByOthers(closed)).toBe(true);
  });

  it('fails at once with one line when initdb cannot be run', async () => {
    const { message } = await failedStart(fakeBin({ initdb: null, postgres: null }));
    expect(message).toMatch(
      /^PostgreSQL for the tests cannot start: initdb \(.*initdb\) failed to run: EACCES: .*; set MODELGATE_TEST_DATABASE_URL/,
    );
    expect(message).not.toContain('\n');
  });

  it('fails at once with one line quoting the server when it exits before accepting connections', async () => {
    const { message } = await failedStart(
      fakeBin({
        initdb: 'exit 0',
        postgres:
          'echo "2026-01-01 00:00:00.000 UTC [42] FATAL:  could not create lock file: Permission denied" >&2; exit 1',
      }),
    );
    expect(message).toMatch(
      /^PostgreSQL for the tests cannot start: the server exited with 1 before accepting connections: FATAL: {2}could not create lock file: Permission denied; set MODELGATE_TEST_DATABASE_URL/,
    );
    expect(message).not.toContain('\n');
  });

  it('fails at once with one line quoting initdb when it fails', async () => {
    const { message } = await failedStart(
      fakeBin({
        initdb: 'echo "initdb: error: could not access directory: Permission denied" >&2; exit 1',
        postgres: 'exit 1',
      }),
    );
    expect(message).toMatch(
      /^PostgreSQL for the tests cannot start: initdb exited with 1: initdb: error: could not access directory: Permission denied; /,
    );
  });
});

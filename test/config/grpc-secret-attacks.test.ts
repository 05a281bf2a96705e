/**
 * The install secret of `modelgate up` (config/grpc-auth.ts) attacked through its path: a symlink
 * planted where the file goes, a FIFO, a directory. Each is replaced by a private file of this
 * user's with a new secret (or refused), never read through.
 */
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureInstallSecret, installSecretPath, readInstallSecret } from '../../src/config/grpc-auth';
import { GRPC_SECRET } from '../../src/config/schema';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function configFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-secret-'));
  dirs.push(dir);
  const path = join(dir, 'gw.yaml');
  writeFileSync(path, '{}\n');
  return path;
}

describe("the install secret's path", () => {
  // Before: the path was stat()ed and read following symlinks, so a link to any private file of
  // this user's holding a secret-shaped value was taken as the secret (and the check and the read
  // could see two different files).
  it("a symlink to a private file of this user's holding a valid secret is not read through: replaced", () => {
    const path = configFile();
    const known = join(tmpdir(), `modelgate-known-${process.pid}-${Date.now()}`);
    dirs.push(known);
    const value = 'k'.repeat(43);
    expect(value).toMatch(GRPC_SECRET);
    writeFileSync(known, `${value}\n`, { mode: 0o600 });
    symlinkSync(known, installSecretPath(path));
    expect(readInstallSecret(path)).toBeUndefined();
    const made = ensureInstallSecret(path);
    expect(made).not.toBe(value);
    expect(lstatSync(installSecretPath(path)).isSymbolicLink()).toBe(false);
    expect(statSync(installSecretPath(path)).mode & 0o777).toBe(0o600);
    // The link's target is left as it was.
    expect(readFileSync(known, 'utf8')).toBe(`${value}\n`);
  });

  // Before: a FIFO there (private, this user's) passed the checks and its read never returned: `up` hung.
  it('a FIFO there does not hang the read (replaced); a directory there is refused with the path named', () => {
    const path = configFile();
    execFileSync('mkfifo', ['-m', '600', installSecretPath(path)]);
    expect(readInstallSecret(path)).toBeUndefined();
    expect(ensureInstallSecret(path)).toMatch(GRPC_SECRET);
    const other = configFile();
    mkdirSync(installSecretPath(other), { mode: 0o700 });
    chmodSync(installSecretPath(other), 0o700);
    expect(() => ensureInstallSecret(other)).toThrow(/gRPC secret file .*gw\.grpc-secret/);
  });
});

/**
 * promtool (Prometheus's rule checker and rule unit tester), built by scripts/ensure-promtool, for
 * the tests of deploy/prometheus/ and the dashboard's queries. In CI (CI=true) a missing promtool
 * fails the file; elsewhere the file is skipped with the reason.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe } from 'vitest';

const ROOT = join(__dirname, '..', '..');

function find(): { path: string } | { missing: string } {
  const r = spawnSync(join(ROOT, 'scripts', 'ensure-promtool'), { encoding: 'utf8', timeout: 1_800_000 });
  if (r.status === 0) return { path: r.stdout.trim().split('\n').pop()! };
  const why = `promtool is not available (${(r.stderr || String(r.error ?? '')).trim().split('\n').pop()}); run scripts/ensure-promtool`;
  if (process.env.CI) throw new Error(why);
  process.stderr.write(`${why}: skipped\n`);
  return { missing: why };
}

const found = find();

/** `describe` that runs when promtool is there (always in CI, where its absence is a failure). */
export const describePromtool: typeof describe = ('missing' in found ? describe.skip : describe) as typeof describe;

/** Runs promtool with these arguments; its exit status and output. */
export function promtool(args: readonly string[], cwd = ROOT): { status: number | null; out: string } {
  if ('missing' in found) throw new Error(found.missing);
  const r = spawnSync(found.path, args, { cwd, encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

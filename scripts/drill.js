#!/usr/bin/env node
/**
 * `npm run drill`: the full fault drills under load, through the real Envoy (test/e2e/drills.test.ts
 * with DRILL_FULL=1): modelgate killed and restarted, frozen 5 s, one of two workers killed,
 * PostgreSQL stopped 30 s and frozen 10 s, the config replaced by an invalid one then a valid one,
 * stdout blocked 150 s (past the 64 MiB log buffer), a flood of 1,000,000 random keys; then the money
 * drill (test/e2e/money-drill.test.ts): concurrent, cut, re-encoded and restarted streams against a
 * small balance in soft and strict mode. Prints one table row per drill (docs/security.md's and
 * docs/metering.md's tables). About 20 minutes on 2 cores. Exit code 0 when no request was allowed
 * without a valid decision and no key spent past its bound.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const { existsSync, mkdirSync, readFileSync, rmSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
mkdirSync(join(root, 'bench', 'out'), { recursive: true });
const report = join(root, 'bench', 'out', 'drill-report.md');
rmSync(report, { force: true });
const args = process.argv.slice(2);
if (args.some((a) => a !== '--short')) {
  process.stderr.write('drill: the only option is --short (the versions npm test runs)\n');
  process.exit(2);
}
const env = { ...process.env, DRILL_REPORT: report, ...(args.includes('--short') ? {} : { DRILL_FULL: '1' }) };
const run = spawnSync(
  process.execPath,
  [
    join(root, 'node_modules', 'vitest', 'vitest.mjs'),
    'run',
    '--no-file-parallelism',
    'test/e2e/drills.test.ts',
    'test/e2e/money-drill.test.ts',
  ],
  { cwd: root, env, stdio: ['ignore', 'inherit', 'inherit'] },
);
if (!existsSync(report)) {
  process.stderr.write('drill: no report was written (see the output above)\n');
  process.exit(1);
}
process.stdout.write(`\n${readFileSync(report, 'utf8')}`);
process.exit(run.status === 0 ? 0 : 1);

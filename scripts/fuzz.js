#!/usr/bin/env node
/**
 * `npm run fuzz -- [--cases N] [--minutes M] [--seed S]`: a long run of the gateway fuzzer
 * (test/e2e/fuzz.test.ts, through the real Envoy). Prints progress every 2,000 cases, then the
 * count, the time, what the answers were, and every counter-example found, shrunk, as a row to
 * paste into the regression table of test/e2e/fuzz.test.ts. Default: 1,000,000 cases or 60 minutes,
 * whichever comes first. Exit code 0 when the invariant held for every case.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const { mkdirSync, readFileSync, existsSync } = require('node:fs');
const { join } = require('node:path');

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  if (i === -1) return dflt;
  const v = Number(args[i + 1]);
  if (!Number.isFinite(v) || v <= 0) {
    process.stderr.write(`fuzz: --${name} needs a positive number (see the header of scripts/fuzz.js)\n`);
    process.exit(2);
  }
  return v;
};
const unknown = args.filter(
  (a, i) =>
    a.startsWith('--') &&
    !['--cases', '--minutes', '--seed'].includes(a) &&
    !(i > 0 && ['--cases', '--minutes', '--seed'].includes(args[i - 1])),
);
if (unknown.length > 0) {
  process.stderr.write(`fuzz: unknown option ${unknown[0]}; options: --cases N, --minutes M, --seed S\n`);
  process.exit(2);
}
const root = join(__dirname, '..');
mkdirSync(join(root, 'bench', 'out'), { recursive: true });
const report = join(root, 'bench', 'out', 'fuzz-report.txt');
const env = {
  ...process.env,
  FUZZ_CASES: String(opt('cases', 1_000_000)),
  FUZZ_MINUTES: String(opt('minutes', 60)),
  FUZZ_SEED: String(opt('seed', Date.now() % 1_000_000)),
  FUZZ_REPORT: report,
};
process.stderr.write(
  `fuzz: up to ${Number(env.FUZZ_CASES).toLocaleString('en-US')} cases or ${env.FUZZ_MINUTES} min, seeds from ${env.FUZZ_SEED}\n`,
);
const run = spawnSync(
  process.execPath,
  [join(root, 'node_modules', 'vitest', 'vitest.mjs'), 'run', 'test/e2e/fuzz.test.ts', '--reporter=dot'],
  { cwd: root, env, stdio: ['ignore', 'ignore', 'inherit'] },
);
if (!existsSync(report)) {
  process.stderr.write('fuzz: the run wrote no report (see the output above)\n');
  process.exit(1);
}
process.stdout.write(readFileSync(report, 'utf8'));
process.exit(run.status === 0 ? 0 : 1);

/**
 * The formatter's check (CONTRIBUTING.md, "Format"): the repository's TypeScript and JavaScript is as
 * prettier formats it (.prettierrc.json: 120 columns; .prettierignore leaves out generated files and
 * what is not code), and no comment line of it is wider than that limit (prettier wraps code, not
 * comments or strings). `npm run format` fixes the first.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';

const ROOT = join(__dirname, '..');
const LIMIT = 120;
const PRETTIER = join(ROOT, 'node_modules', 'prettier', 'bin', 'prettier.cjs');
const GENERATED = /^(proto\/types\/|test\/support\/admin-api\.d\.ts$)/;

/** The code files of the repository: by extension, or a node script by its first line. */
const code = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], {
  cwd: ROOT,
  encoding: 'utf8',
})
  .split('\n')
  .filter((f) => f !== '' && !GENERATED.test(f))
  .filter((f) => /\.(ts|js|cjs|mjs)$/.test(f) || readFileSync(join(ROOT, f), 'utf8').startsWith('#!/usr/bin/env node'));

test('the repository has its sources to check', () => {
  expect(code.length).toBeGreaterThan(300);
  expect(code).toContain('src/check/pipeline.ts');
  expect(code).toContain('scripts/validate-envoy-versions');
});

test('every code file is as prettier formats it', () => {
  const r = spawnSync(process.execPath, [PRETTIER, '--check', ...code], { cwd: ROOT, encoding: 'utf8' });
  expect(`${r.stdout}${r.stderr}`, 'run `npm run format`').toContain('All matched files use Prettier code style!');
  expect(r.status).toBe(0);
}, 300_000);

test(`no comment line is wider than ${LIMIT} columns`, () => {
  const wide: string[] = [];
  for (const file of code) {
    readFileSync(join(ROOT, file), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (line.length > LIMIT && /^\s*(\/\/|\/\*|\*)/.test(line)) wide.push(`${file}:${i + 1}`);
      });
  }
  expect(wide).toEqual([]);
});

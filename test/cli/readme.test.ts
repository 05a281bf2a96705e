/**
 * README.md's CLI blocks are the real help output: each `<!-- cli:start ARGS -->` block must equal
 * what `modelgate ARGS` prints now (`npm run docs:cli` rewrites them). The README's other CLI
 * examples are checked for the form every example uses: `npx modelgate ...`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { renderCliBlocks } from '../../scripts/docs-cli';
import { runCli } from '../../src/cli/main';

const README = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');

async function output(args: string[]): Promise<string> {
  let out = '';
  const code = await runCli(args, { stdout: (s) => (out += s), stderr: () => {}, env: {} });
  expect(code, `modelgate ${args.join(' ')}`).toBe(0);
  return out;
}

test('README.md holds the CLI blocks, with modelgate --help among them', () => {
  expect(README).toContain('<!-- cli:start -->\n```text\n$ npx modelgate --help\nUsage: modelgate [options] [command]\n');
  expect(README.match(/<!-- cli:start/g)?.length).toBeGreaterThanOrEqual(4);
});

test("every CLI block in README.md is the command's real output (npm run docs:cli)", async () => {
  expect(await renderCliBlocks(README, output)).toBe(README);
});

test('every command example in README.md runs the command as npx modelgate', () => {
  const bare = README.split('\n').filter((line) => /^\$ modelgate |^modelgate (serve|explain|envoy-check|keys|groups|balance|migrate)\b/.test(line));
  expect(bare).toEqual([]);
});

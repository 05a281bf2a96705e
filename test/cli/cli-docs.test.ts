/**
 * The docs' CLI blocks are the real help output: each `<!-- cli:start ARGS -->` block, in README.md,
 * CONTRIBUTING.md or docs/*.md, must equal what `modelgate ARGS` prints now (`npm run docs:cli`
 * rewrites them). The docs' other CLI examples are checked for the form every example uses:
 * `npx modelgate ...`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { docFiles, renderCliBlocks } from '../../scripts/docs-cli';
import { runCli } from '../../src/cli/main';

const ROOT = join(__dirname, '..', '..');
const DOCS = docFiles().map((name) => ({ name, text: readFileSync(join(ROOT, name), 'utf8') }));
const CLI_PAGE = DOCS.find((d) => d.name === 'docs/cli.md')!.text;

async function output(args: string[]): Promise<string> {
  let out = '';
  const code = await runCli(args, { stdout: (s) => (out += s), stderr: () => {}, env: {} });
  expect(code, `modelgate ${args.join(' ')}`).toBe(0);
  return out;
}

test('the docs hold the CLI blocks, with modelgate --help in docs/cli.md', () => {
  expect(CLI_PAGE).toContain(
    '<!-- cli:start -->\n```text\n$ npx modelgate --help\nUsage: modelgate [options] [command]\n',
  );
  const blocks = DOCS.reduce((n, d) => n + (d.text.match(/<!-- cli:start/g)?.length ?? 0), 0);
  expect(blocks).toBeGreaterThanOrEqual(4);
});

test.each(DOCS.map((d) => [d.name, d.text]))(
  "every CLI block in %s is the command's real output (npm run docs:cli)",
  async (_name, text) => {
    expect(await renderCliBlocks(text, output)).toBe(text);
  },
);

test.each(DOCS.map((d) => [d.name, d.text]))(
  'every command example in %s runs the command as npx modelgate',
  (_name, text) => {
    const bare = text
      .split('\n')
      .filter((line) =>
        /^\$ modelgate |^modelgate (serve|explain|envoy-check|keys|groups|balance|migrate)\b/.test(line),
      );
    expect(bare).toEqual([]);
  },
);

#!/usr/bin/env node
'use strict';
// Keeps README.md's CLI blocks equal to what the CLI really prints. A block runs from
// `<!-- cli:start ARGS -->` to `<!-- cli:end -->` and holds `$ npx modelgate ARGS` with its output
// (ARGS defaults to --help). `npm run docs:cli` rewrites them from the build in dist/;
// test/cli/readme.test.ts fails when one differs from the source.
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const BLOCK = /<!-- cli:start(?: ([^>]*?))? -->\n[\s\S]*?<!-- cli:end -->/g;

/**
 * README text with every CLI block rendered again.
 * @param {string} readme
 * @param {(args: string[]) => Promise<string>} output what `modelgate ARGS` prints on stdout
 * @returns {Promise<string>}
 */
async function renderCliBlocks(readme, output) {
  const rendered = [];
  for (const m of readme.matchAll(BLOCK)) {
    const args = (m[1] ?? '--help').trim();
    const text = await output(args.split(/\s+/));
    rendered.push(`<!-- cli:start${m[1] === undefined ? '' : ` ${m[1]}`} -->\n\`\`\`text\n$ npx modelgate ${args}\n${text.trimEnd()}\n\`\`\`\n<!-- cli:end -->`);
  }
  let i = 0;
  return readme.replace(BLOCK, () => rendered[i++]);
}

module.exports = { renderCliBlocks };

if (require.main === module) {
  // A computed path, so TypeScript (which compiles this file for test/cli/readme.test.ts) does not follow it into dist/.
  const { runCli } = require(join(__dirname, '..', 'dist', 'src', 'cli', 'main.js'));
  const file = join(__dirname, '..', 'README.md');
  const output = async (args) => {
    let out = '';
    const code = await runCli(args, { stdout: (s) => (out += s), stderr: (s) => process.stderr.write(s), env: {} });
    if (code !== 0) throw new Error(`modelgate ${args.join(' ')} exited ${code}`);
    return out;
  };
  renderCliBlocks(readFileSync(file, 'utf8'), output).then((text) => {
    writeFileSync(file, text);
    console.log('README.md: CLI blocks rewritten');
  });
}

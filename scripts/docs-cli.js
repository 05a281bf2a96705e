#!/usr/bin/env node
'use strict';
// Keeps the docs' CLI blocks equal to what the CLI really prints. A block runs from
// `<!-- cli:start ARGS -->` to `<!-- cli:end -->` and holds `$ npx modelgate ARGS` with its output
// (ARGS defaults to --help). The blocks live in README.md, CONTRIBUTING.md and docs/*.md (DOC_FILES);
// `npm run docs:cli` rewrites them from the build in dist/; test/cli/cli-docs.test.ts fails when one
// differs from the source.
const { readFileSync, readdirSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const ROOT = join(__dirname, '..');
const BLOCK = /<!-- cli:start(?: ([^>]*?))? -->\n[\s\S]*?<!-- cli:end -->/g;

/**
 * The documentation files that may hold CLI blocks or command examples, relative to the repository.
 * @returns {string[]}
 */
function docFiles() {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', 'CONTRIBUTING.md', ...docs];
}

/**
 * A document's text with every CLI block rendered again.
 * @param {string} text
 * @param {(args: string[]) => Promise<string>} output what `modelgate ARGS` prints on stdout
 * @returns {Promise<string>}
 */
async function renderCliBlocks(text, output) {
  const rendered = [];
  for (const m of text.matchAll(BLOCK)) {
    const args = (m[1] ?? '--help').trim();
    const out = await output(args.split(/\s+/));
    rendered.push(
      `<!-- cli:start${m[1] === undefined ? '' : ` ${m[1]}`} -->\n\`\`\`text\n$ npx modelgate ${args}\n${out.trimEnd()}\n\`\`\`\n<!-- cli:end -->`,
    );
  }
  let i = 0;
  return text.replace(BLOCK, () => rendered[i++]);
}

module.exports = { renderCliBlocks, docFiles };

if (require.main === module) {
  // A computed path, so TypeScript (which compiles this file for test/cli/cli-docs.test.ts) does not follow it into
  // dist/.
  const { runCli } = require(join(__dirname, '..', 'dist', 'src', 'cli', 'main.js'));
  const output = async (args) => {
    let out = '';
    const code = await runCli(args, { stdout: (s) => (out += s), stderr: (s) => process.stderr.write(s), env: {} });
    if (code !== 0) throw new Error(`modelgate ${args.join(' ')} exited ${code}`);
    return out;
  };
  (async () => {
    for (const name of docFiles()) {
      const file = join(ROOT, name);
      const before = readFileSync(file, 'utf8');
      if (!BLOCK.test(before)) continue;
      BLOCK.lastIndex = 0;
      const after = await renderCliBlocks(before, output);
      if (after !== before) writeFileSync(file, after);
      console.log(`${name}: CLI blocks ${after === before ? 'already current' : 'rewritten'}`);
    }
  })().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}

#!/usr/bin/env node
'use strict';
// npm start's fast path: runs the source build (`npm run build`: the workspace packages, then
// tsconfig.json's src/) only when
// one of its inputs is newer than the last source build, so a later start does not wait for tsc to
// find nothing to do. Inputs: tsconfig.json's include folders (src/, proto/), the packages' sources
// and manifests (packages/*/src, package.json, tsconfig.json), package.json (src
// imports it) and tsconfig.json itself; not test/ or bench/ (test/tsconfig.json and
// bench/tsconfig.json compile those, with their own incremental state), not package-lock.json (npm
// install writes it after its own build, `prepare`). The stamp is the source build's own
// incremental state, dist/tsconfig.tsbuildinfo, touched after every build here (tsc leaves it alone
// when nothing changed).
const { execFileSync } = require('node:child_process');
const { existsSync, readdirSync, rmSync, statSync, utimesSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const stamp = join(root, 'dist', 'tsconfig.tsbuildinfo');

function newestIn(path) {
  let st;
  try {
    st = statSync(path);
  } catch {
    return 0;
  }
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs; // a deleted or renamed file changes its folder
  for (const name of readdirSync(path)) newest = Math.max(newest, newestIn(join(path, name)));
  return newest;
}

// tsc --incremental trusts its state, not its outputs: with the entry point gone (a partly cleaned
// dist/), forget the state so that the build emits everything again.
if (!existsSync(join(root, 'dist', 'src', 'cli', 'main.js'))) rmSync(stamp, { force: true });

let built = 0;
try {
  built = statSync(stamp).mtimeMs;
} catch {
  /* never built */
}
const packages = readdirSync(join(root, 'packages'), { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => join('packages', d.name));
const sources = [
  'src',
  'proto',
  'package.json',
  'tsconfig.json',
  'packages/tsconfig.json',
  ...packages.flatMap((p) => [join(p, 'src'), join(p, 'package.json'), join(p, 'tsconfig.json')]),
];
// A package's declarations are gone (a fresh clone built with --ignore-scripts, a cleaned package): build them.
if (packages.some((p) => !existsSync(join(root, p, 'dist')))) built = 0;
if (built === 0 || sources.some((s) => newestIn(join(root, s)) > built)) {
  execFileSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-b', join(root, 'packages')],
    { stdio: 'inherit' },
  );
  execFileSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.json'), '--incremental'],
    { stdio: 'inherit' },
  );
  const now = new Date();
  utimesSync(stamp, now, now); // tsc leaves it alone when nothing changed
}

#!/usr/bin/env node
'use strict';
// npm start's fast path: runs the TypeScript build (`npm run build`) only when a source file is
// newer than the last build, so a later start does not wait ~5 s for tsc to find nothing to do.
// Sources: tsconfig.json's include folders, package.json and tsconfig.json (not package-lock.json:
// npm install writes it after its own build, `prepare`).
const { execFileSync } = require('node:child_process');
const { readdirSync, statSync, utimesSync } = require('node:fs');
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

let built = 0;
try {
  built = statSync(stamp).mtimeMs;
} catch { /* never built */ }
const sources = ['src', 'proto', 'bench', 'test', 'package.json', 'tsconfig.json'];
if (built === 0 || sources.some((s) => newestIn(join(root, s)) > built)) {
  execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.json'), '--incremental'], { stdio: 'inherit' });
  const now = new Date();
  utimesSync(stamp, now, now); // tsc leaves it alone when nothing changed
}

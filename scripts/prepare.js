#!/usr/bin/env node
'use strict';
// npm's `prepare` (run by `npm install`/`npm ci` in a clone): builds the workspace packages
// (packages/*, each into its own dist/) and src/ into dist/ when TypeScript is installed. A
// production install (`npm ci --omit=dev`) has no compiler: it says so and builds nothing; production installs ship the
// built dist/ instead (`npm pack` builds it: `prepack`).
// Installs from the packed tarball never run this (npm runs `prepare` only in a clone or a git dependency).
const { execFileSync } = require('node:child_process');
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
if (!existsSync(tsc)) {
  console.error(
    'modelgate: TypeScript is not installed (a production install), so nothing is built; install the packed tarball for production (docs/kubernetes.md#the-package)',
  );
  process.exit(0);
}
execFileSync(process.execPath, [tsc, '-b', join(root, 'packages')], { stdio: 'inherit' });
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json'), '--incremental'], { stdio: 'inherit' });

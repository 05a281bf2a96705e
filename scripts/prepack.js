#!/usr/bin/env node
'use strict';
// npm's `prepack` (`npm pack`, `npm publish`): a full, fresh build of the workspace packages (each
// into packages/*/dist/) and of src/ into dist/, so the tarball ships exactly today's sources compiled
// (no file of a since-deleted source, no stale incremental state). The tarball's `files`
// (package.json) take dist/src/, dist/proto/ and dist/package.json; the packages go in as bundled
// dependencies (node_modules/@modelgate/*, each with its own package.json's `files`).
const { execFileSync } = require('node:child_process');
const { readdirSync, rmSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const packages = readdirSync(join(root, 'packages'), { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => join(root, 'packages', d.name, 'dist'));
for (const p of ['dist/src', 'dist/proto', 'dist/package.json', 'dist/tsconfig.tsbuildinfo'])
  rmSync(join(root, p), { recursive: true, force: true });
for (const p of packages) rmSync(p, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-b', join(root, 'packages')], { stdio: 'inherit' });
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json')], { stdio: 'inherit' });

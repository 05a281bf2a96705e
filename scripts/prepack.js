#!/usr/bin/env node
'use strict';
// npm's `prepack` (`npm pack`, `npm publish`): a full, fresh build of src/ into dist/, so the tarball
// ships exactly today's sources compiled (no file of a since-deleted source, no stale incremental
// state). The tarball's `files` (package.json) take dist/src/, dist/proto/ and dist/package.json.
const { execFileSync } = require('node:child_process');
const { rmSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
for (const p of ['dist/src', 'dist/proto', 'dist/package.json', 'dist/tsconfig.tsbuildinfo']) rmSync(join(root, p), { recursive: true, force: true });
execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.json')], { stdio: 'inherit' });

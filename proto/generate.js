#!/usr/bin/env node
// Regenerates proto/types/ from Envoy's own API protos of the pinned version (proto/envoy-api/).
// Run with `npm run gen:types`. test/envoy/proto-types.test.ts fails when the checked-in types drift.
'use strict';
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const { includeDirs, LOADER_OPTIONS } = require('./include-dirs.js');

const out = process.argv[2] ?? path.join(__dirname, 'types');
const bin = require.resolve('@grpc/proto-loader/build/bin/proto-loader-gen-types.js');
const args = [
  bin,
  '--keepCase',
  `--longs=${LOADER_OPTIONS.longs.name}`,
  `--enums=${LOADER_OPTIONS.enums.name}`,
  '--grpcLib=@grpc/grpc-js',
  ...includeDirs.flatMap((d) => ['-I', d]),
  '-O',
  out,
  'envoy/service/auth/v3/external_auth.proto',
];
execFileSync(process.execPath, args, { stdio: 'inherit' });

// The generator writes each proto's absolute path into a comment; make it clone-independent.
const fs = require('node:fs');
const root = path.join(__dirname, '..') + path.sep;
for (const file of fs.readdirSync(out, { recursive: true })) {
  const full = path.join(out, String(file));
  if (!full.endsWith('.ts')) continue;
  const text = fs.readFileSync(full, 'utf8');
  const fixed = text.split(root).join('');
  if (fixed !== text) fs.writeFileSync(full, fixed);
}

#!/usr/bin/env node
'use strict';
// Writes docs/admin-api.openapi.json from the admin API's operation table and zod schemas
// (src/admin/openapi.ts, as compiled to dist/: `npm run gen:openapi` builds first), then the typed
// client's types from that document (test/support/admin-api.d.ts, openapi-typescript).
// test/admin/openapi.test.ts fails when either file is stale.
const { writeFileSync } = require('node:fs');
const { execFileSync } = require('node:child_process');
const { join } = require('node:path');
const { openApiText } = require('../dist/src/admin/openapi.js');

const root = join(__dirname, '..');
writeFileSync(join(root, 'docs', 'admin-api.openapi.json'), openApiText());
console.log('wrote docs/admin-api.openapi.json');
execFileSync(
  join(root, 'node_modules', '.bin', 'openapi-typescript'),
  ['docs/admin-api.openapi.json', '-o', 'test/support/admin-api.d.ts'],
  { cwd: root, stdio: 'inherit' },
);

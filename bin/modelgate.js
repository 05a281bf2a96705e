#!/usr/bin/env node
'use strict';
// The CLI is written in TypeScript and compiled to dist/ by `npm run build` (npm start and npm test run it).
try {
  require('../dist/src/cli/main.js');
} catch (err) {
  if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes('dist/src/cli/main.js')) {
    console.error('modelgate: not built yet; run `npm run build` first');
    process.exit(1);
  }
  throw err;
}

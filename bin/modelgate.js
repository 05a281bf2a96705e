#!/usr/bin/env node
'use strict';
// The CLI is written in TypeScript and compiled to dist/ by `npm run build`, which `npm install`
// runs (the `prepare` script), as do `npm start` and `npm test`.
let cli;
try {
  cli = require('../dist/src/cli/main.js');
} catch (err) {
  if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes('dist/src/cli/main.js')) {
    console.error('modelgate: not built yet; run `npm run build` first');
    process.exit(1);
  }
  throw err;
}
cli.main();

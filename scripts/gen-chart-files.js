#!/usr/bin/env node
'use strict';
// Writes the chart's copy of modelgate's Envoy contract (deploy/helm/modelgate/files/), from the same
// sources the plain Envoy bundle is rendered from (src/envoy/, src/providers/endpoints.ts), as compiled
// to dist/ (`npm run gen:chart` builds first): the meter's Lua tail (meter.lua) and contract.json (the
// provider endpoints and where each goes, the headers a Check is shown, the headers removed upstream,
// the access log's name and fields). test/k8s/mesh-resources.test.ts fails when the files are stale.
const { writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { chartFiles } = require('../dist/src/envoy/chart-contract.js');

const dir = join(__dirname, '..', 'deploy', 'helm', 'modelgate', 'files');
for (const [name, text] of Object.entries(chartFiles())) {
  writeFileSync(join(dir, name), text);
  console.log(`wrote deploy/helm/modelgate/files/${name}`);
}

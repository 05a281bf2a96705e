#!/usr/bin/env node
'use strict';
// Writes modelgate.schema.json from the config schema (src/config/schema.ts), as compiled to dist/
// (`npm run gen:schema` builds first). test/config/json-schema.test.ts fails when the file is stale.
const { writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { JSON_SCHEMA_FILE, configJsonSchemaText } = require('../dist/src/config/json-schema.js');

const file = join(__dirname, '..', JSON_SCHEMA_FILE);
writeFileSync(file, configJsonSchemaText());
console.log(`wrote ${JSON_SCHEMA_FILE}`);

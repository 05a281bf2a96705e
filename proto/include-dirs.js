'use strict';
// Envoy's v3 API protos, as the pinned Envoy compiled them: proto/envoy-api/, vendored from that
// binary's own descriptors by proto/envoy-api.js (test/envoy/envoy-api.test.ts checks they match).
// google/protobuf/*.proto come with protobufjs.
const path = require('node:path');

// This file runs from proto/ (scripts, tests) and, compiled, from dist/proto/ (the service).
const protoDir =
  path.basename(path.dirname(__dirname)) === 'dist' ? path.join(__dirname, '..', '..', 'proto') : __dirname;

/** Include paths for @grpc/proto-loader and protobufjs. */
const includeDirs = [path.join(protoDir, 'envoy-api')];

/** The proto-loader options the service runs with; proto/types/ is generated to match them. */
const LOADER_OPTIONS = Object.freeze({ keepCase: true, longs: String, enums: String, includeDirs });

module.exports = { includeDirs, LOADER_OPTIONS };

'use strict';
// Envoy's v3 API protos are never copied into this repo: they come from the npm package
// @grpc/grpc-js-xds (deps/envoy-api, Envoy ~1.31), with its xds, googleapis and validate deps.
const path = require('node:path');

const deps = path.join(path.dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');

/** Include paths for @grpc/proto-loader and protobufjs. */
const includeDirs = ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(deps, d));

/** The proto-loader options the service runs with; proto/types/ is generated to match them. */
const LOADER_OPTIONS = Object.freeze({ keepCase: true, longs: String, enums: String, includeDirs });

module.exports = { includeDirs, LOADER_OPTIONS };

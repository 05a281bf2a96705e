/**
 * What each folder of src/ may import (each folder's README.md says the same in words).
 * test/architecture.test.ts runs `depcruise src` with these rules on every `npm test`, and also
 * runs them on a small synthetic tree that breaks each rule, so a rule that can no longer fail is
 * noticed. Package patterns are not anchored: the synthetic tree resolves node_modules through a
 * symlink, so its paths start with ../.
 */
const pkg = (...names) => `(^|/)node_modules/(@types/)?(${names.join('|')})/`;

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      severity: 'error',
      comment: 'Import cycles make load order matter and hide which module is the lower layer.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'check-path-is-pure',
      severity: 'error',
      comment: 'The Check path (src/check) decides on plain data: no store driver, logger, gRPC or metrics library, and nothing of the servers or the CLI.',
      from: { path: '^src/check/' },
      to: { path: [pkg('pino', 'pg', 'prom-client', '@grpc/grpc-js'), '^src/store/pg/', '^src/server/', '^src/cli/'] },
    },
    {
      name: 'store-below-server-and-cli',
      severity: 'error',
      comment: 'Stores are used by the servers and the CLI, never the other way round.',
      from: { path: '^src/store/' },
      to: { path: ['^src/server/', '^src/cli/'] },
    },
    {
      name: 'config-below-server-and-cli',
      severity: 'error',
      comment: 'The config is read by the servers and the CLI, never the other way round.',
      from: { path: '^src/config/' },
      to: { path: ['^src/server/', '^src/cli/'] },
    },
    {
      name: 'envoy-below-server-and-cli',
      severity: 'error',
      comment: "What knows Envoy's config and protos is used by the servers and the CLI, never the other way round.",
      from: { path: '^src/envoy/' },
      to: { path: ['^src/server/', '^src/cli/'] },
    },
    {
      name: 'meter-below-server-and-cli',
      severity: 'error',
      comment: 'The meter (usage, debits, admission) is used by the servers and the CLI; it knows no gRPC, logger, metrics library or driver.',
      from: { path: '^src/meter/' },
      to: { path: ['^src/server/', '^src/cli/', pkg('pino', 'pg', 'prom-client', '@grpc/grpc-js')] },
    },
    {
      name: 'ratelimit-below-server-and-cli',
      comment: 'Rate limits (src/ratelimit) are pure: the server serves and calls the engine; no gRPC library, logger, metrics library or driver here.',
      severity: 'error',
      from: { path: '^src/ratelimit/' },
      to: { path: ['^src/server/', '^src/cli/', pkg('pino', 'pg', 'prom-client', '@grpc/grpc-js')] },
    },
    {
      name: 'admin-below-server-and-cli',
      severity: 'error',
      comment: 'The admin API (src/admin) is mounted by the server and used by the CLI, never the other way round; no logger or gRPC library of its own.',
      from: { path: '^src/admin/' },
      to: { path: ['^src/server/', '^src/cli/', '^src/console/', '^src/meter/', '^src/envoy/', pkg('pino', 'prom-client', '@grpc/grpc-js')] },
    },
    {
      name: 'console-below-server-and-cli',
      severity: 'error',
      comment: 'The console is mounted by the server and called by the CLI, never the other way round.',
      from: { path: '^src/console/' },
      to: { path: ['^src/server/', '^src/cli/'] },
    },
    {
      name: 'grpc-knows-only-node',
      severity: 'error',
      comment: 'The gRPC server (src/grpc) carries bytes: it knows no message type, no Envoy, no modelgate folder and no package.',
      from: { path: '^src/grpc/' },
      to: { path: ['^src/(?!grpc/)', '(^|/)node_modules/'] },
    },
    {
      name: 'errors-import-nothing',
      severity: 'error',
      comment: 'The error base (src/errors) is the bottom of the tree: node built-ins only.',
      from: { path: '^src/errors/' },
      to: { path: ['^src/(?!errors/)', '(^|/)node_modules/'] },
    },
    {
      name: 'wire-knows-only-errors',
      severity: 'error',
      comment: 'The protobuf wire reader (src/wire) knows no message and no folder above it: node built-ins and the error base.',
      from: { path: '^src/wire/' },
      to: { path: ['^src/(?!wire/|errors/)', '(^|/)node_modules/'] },
    },
    {
      name: 'demo-stands-alone',
      severity: 'error',
      comment: "The demo upstream stands in for a model provider: node built-ins, and the x-modelgate-* names it reads (src/check/headers.ts).",
      from: { path: '^src/demo/' },
      to: { path: ['^src/(?!demo/|check/headers\\.ts$)', '(^|/)node_modules/'] },
    },
    {
      name: 'server-below-cli',
      severity: 'error',
      comment: 'The CLI starts the servers; the servers know nothing of the command line.',
      from: { path: '^src/server/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'pg-only-in-the-pg-store',
      severity: 'error',
      comment: "PostgreSQL is reached through src/store/pg/ alone, its write side too (keys, groups, balances): the CLI and the tests use those modules; test/support/ starts servers and opens pools for the tests. The admin API's PostgreSQL backend (src/admin/pg-backend.ts) is the one other: its transactions write a change and its audit entry together, in the admin API's own types.",
      from: { path: '^(src|test)/', pathNot: '^(src/store/pg/|test/support/|src/admin/pg-backend\\.ts$)' },
      to: { path: pkg('pg') },
    },
    {
      name: 'commander-only-in-cli',
      severity: 'error',
      comment: 'One command line, in src/cli.',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: pkg('commander') },
    },
    {
      name: 'src-stands-alone',
      severity: 'error',
      comment: 'Shipped code never imports tests or benchmarks.',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'no-unresolvable',
      severity: 'error',
      comment: 'An import that cannot be resolved is a typo or a missing dependency.',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // proto/types/ is generated from Envoy's protos, whose messages are recursive (Struct, Value).
    doNotFollow: { path: ['node_modules', '^proto/types/'] },
    // Type-only imports count: a type cycle is still a cycle, and a type of pino is still pino.
    tsPreCompilationDeps: true,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['main', 'types', 'typings'],
    },
    skipAnalysisNotInRules: true,
  },
};

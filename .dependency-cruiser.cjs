/**
 * The import rules of src/. One rule per folder, `folder-<name>`, is read from the folder table of
 * src/README.md (scripts/folder-table.cjs), so the document is the rule. The rules below it are
 * about packages, cycles and resolution. test/architecture.test.ts runs `depcruise src test` with
 * them (and `packages`) on every `npm test`, and runs them on a synthetic tree that breaks each rule. Package
 * patterns are not anchored: the synthetic tree resolves node_modules through a symlink.
 */
const { folderRules, readFolderTableAt } = require('./scripts/folder-table.cjs');

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
    ...folderRules(readFolderTableAt(__dirname)),
    {
      name: 'check-path-is-pure',
      severity: 'error',
      comment: 'The Check path (src/check) decides on plain data: no store driver, logger, gRPC or metrics library.',
      from: { path: '^src/check/' },
      to: { path: [pkg('pino', 'pg', 'prom-client', '@grpc/grpc-js'), '^src/store/pg/'] },
    },
    {
      name: 'meter-and-ratelimit-are-pure',
      severity: 'error',
      comment:
        'The meter and the rate limits know no gRPC library, logger, metrics library or driver: the server serves them.',
      from: { path: '^src/(meter|ratelimit)/' },
      to: { path: pkg('pino', 'pg', 'prom-client', '@grpc/grpc-js') },
    },
    {
      name: 'admin-has-no-logger',
      severity: 'error',
      comment: 'The admin API (src/admin) has no logger, metrics or gRPC library of its own: the server mounts it.',
      from: { path: '^src/admin/' },
      to: { path: pkg('pino', 'prom-client', '@grpc/grpc-js') },
    },
    {
      name: 'demo-uses-no-package',
      severity: 'error',
      comment: 'The demo upstream stands in for a provider: node built-ins only.',
      from: { path: '^src/demo/' },
      to: { path: '(^|/)node_modules/' },
    },
    {
      name: 'errors-and-wire-use-no-package',
      severity: 'error',
      comment:
        'The error base (src/errors) and the protobuf wire reader (src/wire) sit under the hot paths: node built-ins only.',
      from: { path: '^src/(errors|wire)/' },
      to: { path: '(^|/)node_modules/' },
    },
    {
      name: 'packages-know-only-node',
      severity: 'error',
      comment: 'A workspace package (packages/*) knows nothing of modelgate: its own files and node built-ins only.',
      from: { path: '^packages/([^/]+)/src/' },
      to: { pathNot: '^packages/$1/src/', dependencyTypesNot: ['core'] },
    },
    {
      name: 'packages-by-name',
      severity: 'error',
      comment: 'modelgate imports a workspace package by its name and exports, never a file of its sources.',
      from: { path: '^src/' },
      to: { path: '^packages/[^/]+/src/' },
    },
    {
      name: 'pg-only-in-the-pg-store',
      severity: 'error',
      comment:
        "PostgreSQL is reached through src/store/pg/ alone, its write side too (keys, groups, balances): the CLI and the tests use those modules; test/support/ starts servers and opens pools for the tests. The admin API's PostgreSQL backend (src/admin/pg-backend.ts) is the one other: its transactions write a change and its audit entry together, in the admin API's own types.",
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

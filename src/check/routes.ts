/**
 * Classifies a request (`:method`, path without query) into one of the spec's endpoints (docs/spec.md §4.2,
 * endpoints.ts) under the root or the alternate prefix. Pure; Envoy's route table is rendered from
 * the same endpoint list (envoy/render-routes.ts); this is the service's own, fail-closed view of it.
 */
import type { Protocol } from '../store/store';
import { ENDPOINTS, MODEL, familyOf, hasModel, type Endpoint } from '../providers/endpoints';
import type { Family } from '../contract/error-body';
import { PROVIDERS } from '../providers/providers';
import { HINTS } from '../contract/reasons';

/** Which header list carries the key on this route (docs/spec.md §5.2, §5.3; /alt/v1beta accepts both). */
export type KeySource = 'bearer' | 'vendor' | 'both';

export type Route =
  | {
      readonly kind: 'protocol';
      readonly style: Protocol;
      readonly family: Family;
      readonly keys: KeySource;
      readonly alt: boolean;
      readonly model?: string;
      readonly fixedId?: number;
    }
  | {
      readonly kind: 'models';
      readonly style: 'models';
      readonly family: Family;
      readonly keys: KeySource;
      readonly alt: boolean;
      readonly model?: string;
      readonly fixedId?: number;
    }
  | {
      readonly kind: 'wrong_method';
      readonly style: 'unknown';
      readonly family: Family;
      readonly keys: KeySource;
      readonly alt: boolean;
      readonly allow: string;
    }
  | {
      readonly kind: 'unknown';
      readonly style: 'unknown';
      readonly family: Family;
      readonly keys: KeySource;
      readonly alt: boolean;
      readonly detail?: string;
    };

/** The endpoints without a model in the path, by path. */
const FIXED_PATHS: ReadonlyMap<string, Endpoint> = new Map(
  ENDPOINTS.filter((e) => !hasModel(e)).map((e) => [e.path, e]),
);
/** The paths before `{model}` (`/v1beta/models/`), each with its endpoint by id (GET) and by generative method. */
const MODEL_PATHS: ReadonlyMap<string, { readonly byId?: Endpoint; readonly byMethod: ReadonlyMap<string, Endpoint> }> =
  (() => {
    const out = new Map<string, { byId?: Endpoint; byMethod: Map<string, Endpoint> }>();
    for (const e of ENDPOINTS.filter(hasModel)) {
      const before = e.path.slice(0, e.path.indexOf(MODEL));
      let entry = out.get(before);
      if (!entry) out.set(before, (entry = { byMethod: new Map() }));
      if (e.modelMethods) for (const m of e.modelMethods) entry.byMethod.set(m, e);
      else entry.byId = e;
    }
    return out;
  })();

/** Canonical endpoint of each protocol style (its module's first), for hints. */
export function endpointFor(style: Protocol, model: string, alt: string): string {
  const e = PROVIDERS[style].endpoints[0];
  const path = e.modelMethods ? `${e.path.replace(MODEL, model)}:${e.modelMethods[0]}` : e.path;
  return `${e.method} ${alt}${path}`;
}

/** What a request for an endpoint with this method is: the endpoint's route, or a 405. */
function routeTo(
  e: Endpoint,
  method: string,
  base: { family: Family; keys: KeySource; alt: boolean },
  model?: string,
): Route {
  if (method !== e.method) return { kind: 'wrong_method', style: 'unknown', allow: e.method, ...base };
  const withModel = model === undefined ? base : { model, ...base };
  return e.style === 'models'
    ? { kind: 'models', style: 'models', ...withModel }
    : { kind: 'protocol', style: e.style, ...withModel };
}

/**
 * @param path the path without its query string
 * @param anthropicVersion whether the request carries `anthropic-version` (Anthropic SDKs list models on /v1/models)
 */
export function classify(method: string, path: string, altPrefix: string, anthropicVersion: boolean): Route {
  // The fixed endpoints are a small finite set: their Route objects are built once and shared
  // (nothing else is memoised, so arbitrary paths cannot grow this map).
  const memoKey = `${method} ${altPrefix} ${anthropicVersion ? 1 : 0} ${path}`;
  const known = FIXED.get(memoKey);
  if (known) return known;
  const route = classifyNew(method, path, altPrefix, anthropicVersion);
  // A fixed endpoint's Route names its path too (`fixedId`: one per memoised path), so that what is
  // keyed by the path (the encoded CheckResponse, whose metadata carries it) can use a short number.
  if ((route.kind === 'protocol' || route.kind === 'models') && route.model === undefined && FIXED.size < 1024) {
    const fixed = Object.freeze({ ...route, fixedId: FIXED.size });
    FIXED.set(memoKey, fixed);
    return fixed;
  }
  return route;
}

const FIXED = new Map<string, Route>();

function classifyNew(method: string, path: string, altPrefix: string, anthropicVersion: boolean): Route {
  let rest = path;
  let alt = false;
  if (path === altPrefix || path.startsWith(altPrefix + '/')) {
    rest = path.slice(altPrefix.length);
    alt = true;
  }
  const family = familyOf(rest, anthropicVersion);
  const gemini = family === 'gemini';
  const keys: KeySource = gemini ? (alt ? 'both' : 'vendor') : 'bearer';
  const base = { family, keys, alt };

  const fixed = FIXED_PATHS.get(rest);
  if (fixed) return routeTo(fixed, method, base);

  for (const [before, byModel] of MODEL_PATHS) {
    if (!rest.startsWith(before)) continue;
    const tail = rest.slice(before.length);
    const colon = tail.lastIndexOf(':');
    // The model is one path segment (as in a model lookup below); `/models/a/b:generateContent` is no endpoint.
    const byMethod =
      colon > 0 && !tail.slice(0, colon).includes('/') ? byModel.byMethod.get(tail.slice(colon + 1)) : undefined;
    if (byMethod) {
      const model = decodeSegment(tail.slice(0, colon));
      if (model === undefined)
        return { kind: 'unknown', style: 'unknown', detail: HINTS.path_unknown.badModelEscape, ...base };
      return routeTo(byMethod, method, base, model);
    }
    if (byModel.byId && colon === -1 && tail.length > 0 && !tail.includes('/')) {
      const model = decodeSegment(tail);
      if (model === undefined)
        return { kind: 'unknown', style: 'unknown', detail: HINTS.path_unknown.badModelEscape, ...base };
      return routeTo(byModel.byId, method, base, model);
    }
  }
  return { kind: 'unknown', style: 'unknown', ...base };
}

function decodeSegment(s: string): string | undefined {
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    // URIError: an escape that is not UTF-8; the caller refuses the path
    return undefined;
  }
}

/**
 * Classifies a request (`:method`, path without query) into one of the spec's endpoints (seed §4.2)
 * under the root or the alternate prefix. Pure; the route table itself is Envoy's (envoy/envoy.yaml);
 * this is the service's own, fail-closed view of it.
 */
import type { Protocol } from '../store/store';

/** Error body shape the client's SDK parses. */
export type Family = 'openai' | 'anthropic' | 'gemini';
/** Which header list carries the key on this route (seed §5.2, §5.3; /alt/v1beta accepts both). */
export type KeySource = 'bearer' | 'vendor' | 'both';

export type Route =
  | { readonly kind: 'protocol'; readonly style: Protocol; readonly family: Family; readonly keys: KeySource; readonly alt: boolean; readonly model?: string; readonly fixedId?: number }
  | { readonly kind: 'models'; readonly style: 'models'; readonly family: Family; readonly keys: KeySource; readonly alt: boolean; readonly model?: string; readonly fixedId?: number }
  | { readonly kind: 'wrong_method'; readonly style: 'unknown'; readonly family: Family; readonly keys: KeySource; readonly alt: boolean; readonly allow: string }
  | { readonly kind: 'unknown'; readonly style: 'unknown'; readonly family: Family; readonly keys: KeySource; readonly alt: boolean; readonly detail?: string };

/** Gemini-style methods on /v1beta/models/{model}:{method}. */
export const GENERATIVE_METHODS: ReadonlySet<string> = new Set(['generateContent', 'streamGenerateContent', 'countTokens', 'embedContent', 'batchEmbedContents']);

const V1_POST: Readonly<Record<string, Protocol>> = {
  '/v1/chat/completions': 'chat',
  '/v1/responses': 'responses',
  '/v1/embeddings': 'embeddings',
  '/v1/messages': 'messages',
  '/v1/messages/count_tokens': 'messages',
  // Coding agents of the chat/responses kind append these to the root address itself (seed §4.1
  // row 1, "{base_url}, no /v1 suffix"; Codex CLI with `base_url = {base_url}`): the same endpoints.
  '/responses': 'responses',
  '/chat/completions': 'chat',
};

/** Canonical endpoint of each protocol style, for hints. */
export function endpointFor(style: Protocol, model: string, alt: string): string {
  switch (style) {
    case 'chat': return `POST ${alt}/v1/chat/completions`;
    case 'responses': return `POST ${alt}/v1/responses`;
    case 'embeddings': return `POST ${alt}/v1/embeddings`;
    case 'messages': return `POST ${alt}/v1/messages`;
    case 'generative': return `POST ${alt}/v1beta/models/${model}:generateContent`;
  }
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
  const gemini = rest === '/v1beta' || rest.startsWith('/v1beta/');
  const family: Family = gemini ? 'gemini' : rest.startsWith('/v1/messages') || anthropicVersion ? 'anthropic' : 'openai';
  const keys: KeySource = gemini ? (alt ? 'both' : 'vendor') : 'bearer';
  const base = { family, keys, alt };

  const style = V1_POST[rest];
  if (style) return method === 'POST' ? { kind: 'protocol', style, ...base } : { kind: 'wrong_method', style: 'unknown', allow: 'POST', ...base };

  if (rest === '/v1/models' || rest === '/v1beta/models') {
    return method === 'GET' ? { kind: 'models', style: 'models', ...base } : { kind: 'wrong_method', style: 'unknown', allow: 'GET', ...base };
  }

  if (rest.startsWith('/v1/models/') || rest.startsWith('/v1beta/models/')) {
    const tail = rest.slice(rest.indexOf('/models/') + 8);
    const colon = tail.lastIndexOf(':');
    // The model is one path segment (as in a model lookup below); `/models/a/b:generateContent` is no endpoint.
    if (gemini && colon > 0 && !tail.slice(0, colon).includes('/') && GENERATIVE_METHODS.has(tail.slice(colon + 1))) {
      const model = decodeSegment(tail.slice(0, colon));
      if (model === undefined) return { kind: 'unknown', style: 'unknown', detail: 'the model name in the path is not valid percent-encoding', ...base };
      return method === 'POST' ? { kind: 'protocol', style: 'generative', model, ...base } : { kind: 'wrong_method', style: 'unknown', allow: 'POST', ...base };
    }
    if (colon === -1 && tail.length > 0 && !tail.includes('/')) {
      const model = decodeSegment(tail);
      if (model === undefined) return { kind: 'unknown', style: 'unknown', detail: 'the model name in the path is not valid percent-encoding', ...base };
      return method === 'GET' ? { kind: 'models', style: 'models', model, ...base } : { kind: 'wrong_method', style: 'unknown', allow: 'GET', ...base };
    }
  }
  return { kind: 'unknown', style: 'unknown', ...base };
}

function decodeSegment(s: string): string | undefined {
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/**
 * The spec's endpoints (docs/spec.md §4.2), once: the Check's classifier (routes.ts) and the Envoy route
 * table (envoy/render-routes.ts) are both derived from this list, as are the console doctor's
 * endpoint segments (console/doctor.ts). Each is served at the root and under the alternate prefix.
 *
 * A path holds `{model}` where a model name stands (one path segment, percent-encoded); a
 * generative endpoint names its methods (`/v1beta/models/{model}:generateContent`).
 */
import type { Protocol } from '../store/store';

/**
 * A token counting call (`count_tokens`, `:countTokens`): free at every provider and answered at
 * once, so never metered (meter/admission.ts), never marked for the meter's report
 * (write-response.ts) and not counted in flight (check/in-flight-cap.ts).
 */
export function isTokenCount(path: string): boolean {
  return path.endsWith('/count_tokens') || path.endsWith(':countTokens');
}

export interface Endpoint {
  /** The Envoy route's name (its alternate-prefix twin: `alt_` + name). */
  readonly name: string;
  readonly method: 'GET' | 'POST';
  /** The path after the prefix. */
  readonly path: string;
  /** The protocol style it serves, or `models` for what modelgate answers itself (the model lists, the key's own view). */
  readonly style: Protocol | 'models';
  /** After `{model}:`, the generative methods (the first is the style's canonical one). */
  readonly modelMethods?: readonly string[];
  /**
   * The path the upstream gets when it is not the request's (after the prefix): the coding agents'
   * root paths are the provider's `/v1/...` (Envoy's prefix_rewrite; the query stays).
   */
  readonly upstreamPath?: string;
}

/**
 * In order: the first endpoint of a style is its canonical one (routes.ts endpointFor). The
 * generative methods come in two endpoints only because Envoy refuses a regex whose RE2 program is
 * over 100 (re2.max_program_size on 1.36): each is one Envoy route.
 */
export const ENDPOINTS: readonly Endpoint[] = [
  { name: 'chat_completions', method: 'POST', path: '/v1/chat/completions', style: 'chat' },
  { name: 'responses', method: 'POST', path: '/v1/responses', style: 'responses' },
  { name: 'embeddings', method: 'POST', path: '/v1/embeddings', style: 'embeddings' },
  { name: 'messages', method: 'POST', path: '/v1/messages', style: 'messages' },
  { name: 'messages_count_tokens', method: 'POST', path: '/v1/messages/count_tokens', style: 'messages' },
  // Coding agents of the chat/responses kind use the root address itself as their Base URL (docs/spec.md
  // §4.1 row 1: "{base_url}, no /v1 suffix") and append only /responses or /chat/completions
  // (Codex CLI: `base_url = {base_url}` -> POST /responses): the same endpoints, upstream and check.
  { name: 'agent_responses', method: 'POST', path: '/responses', style: 'responses', upstreamPath: '/v1/responses' },
  { name: 'agent_chat_completions', method: 'POST', path: '/chat/completions', style: 'chat', upstreamPath: '/v1/chat/completions' },
  { name: 'generative', method: 'POST', path: '/v1beta/models/{model}', style: 'generative', modelMethods: ['generateContent', 'streamGenerateContent'] },
  { name: 'generative_count_embed', method: 'POST', path: '/v1beta/models/{model}', style: 'generative', modelMethods: ['countTokens', 'embedContent', 'batchEmbedContents'] },
  { name: 'models', method: 'GET', path: '/v1/models', style: 'models' },
  { name: 'generative_models', method: 'GET', path: '/v1beta/models', style: 'models' },
  // A key holder's own view (docs/clients.md, "How much is left"): answered by modelgate like the
  // model lists, the key read where its protocol sends it (Bearer or x-api-key; x-goog-api-key under /v1beta).
  { name: 'me', method: 'GET', path: '/v1/me', style: 'models' },
  { name: 'generative_me', method: 'GET', path: '/v1beta/me', style: 'models' },
  { name: 'model', method: 'GET', path: '/v1/models/{model}', style: 'models' },
  { name: 'generative_model', method: 'GET', path: '/v1beta/models/{model}', style: 'models' },
];

export const MODEL = '{model}';

/** Whether a path names a model (`/v1/models/{model}`, `/v1beta/models/{model}:...`). */
export const hasModel = (e: Endpoint): boolean => e.path.includes(MODEL);

/** Every generative method, from all the endpoints that name one. */
export const GENERATIVE_METHODS: ReadonlySet<string> = new Set(ENDPOINTS.flatMap((e) => e.modelMethods ?? []));

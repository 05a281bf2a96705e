/**
 * The spec's endpoints (docs/spec.md §4.2), once: each protocol module's own (providers.ts), then
 * what modelgate answers itself. The Check's classifier (check/routes.ts) and the Envoy route table
 * (envoy/render-routes.ts) are both derived from this list, as are the console doctor's endpoint
 * segments (console/doctor.ts). Each is served at the root and under the alternate prefix.
 *
 * A path holds `{model}` where a model name stands (one path segment, percent-encoded); a
 * generative endpoint names its methods (`/v1beta/models/{model}:generateContent`).
 */
import { PROTOCOLS } from '../store/store';
import type { Endpoint } from './provider';
import type { Family } from '../contract/error-body';
import { PROVIDERS } from './providers';

export type { Endpoint } from './provider';

/**
 * A token counting call (`count_tokens`, `:countTokens`): free at every provider and answered at
 * once, so never metered (meter/admission.ts), never marked for the meter's report
 * (check/write-response.ts) and not counted in flight (check/in-flight-cap.ts).
 */
export function isTokenCount(path: string): boolean {
  return path.endsWith('/count_tokens') || path.endsWith(':countTokens');
}

/** What modelgate answers itself: the model lists, one model, the key's own view. */
const MODELGATE_ENDPOINTS: readonly Endpoint[] = [
  { name: 'models', method: 'GET', path: '/v1/models', style: 'models' },
  { name: 'generative_models', method: 'GET', path: '/v1beta/models', style: 'models' },
  // A key holder's own view (docs/clients.md, "How much is left"): answered by modelgate like the
  // model lists, the key read where its protocol sends it (Bearer or x-api-key; x-goog-api-key under /v1beta).
  { name: 'me', method: 'GET', path: '/v1/me', style: 'models' },
  { name: 'generative_me', method: 'GET', path: '/v1beta/me', style: 'models' },
  { name: 'model', method: 'GET', path: '/v1/models/{model}', style: 'models' },
  { name: 'generative_model', method: 'GET', path: '/v1beta/models/{model}', style: 'models' },
];

/**
 * Each protocol's endpoints in the store's protocol order, its canonical one first (check/routes.ts
 * endpointFor), then modelgate's own.
 */
export const ENDPOINTS: readonly Endpoint[] = [
  ...PROTOCOLS.flatMap((p) => PROVIDERS[p].endpoints),
  ...MODELGATE_ENDPOINTS,
];

export const MODEL = '{model}';

/** Whether a path names a model (`/v1/models/{model}`, `/v1beta/models/{model}:...`). */
export const hasModel = (e: Endpoint): boolean => e.path.includes(MODEL);

/** Every generative method, from all the endpoints that name one. */
export const GENERATIVE_METHODS: ReadonlySet<string> = new Set(ENDPOINTS.flatMap((e) => e.modelMethods ?? []));

/**
 * The error shape a client of this path (after the prefix) parses: Gemini's under /v1beta, Anthropic's for messages.
 */
export function familyOf(rest: string, anthropicVersion: boolean): Family {
  if (rest === '/v1beta' || rest.startsWith('/v1beta/')) return 'gemini';
  return rest.startsWith('/v1/messages') || anthropicVersion ? 'anthropic' : 'openai';
}

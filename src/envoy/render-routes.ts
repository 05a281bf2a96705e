/**
 * The route table of the rendered Envoy bundle (seed §4.1, §4.2, §7): the spec's endpoints with
 * ext_authz on, then the paths clients get wrong, answered by Envoy itself with a reason and a hint
 * before any key is looked at (seed §4.1 rule 4: a 404 is checked for the path first).
 *
 * Order matters (first match wins): (1) endpoints, and the console; (2) a known path with another method: 405;
 * (3) 404 path_repeated / prefix_wrong; (4) one model by id, after (3) so that "/v1/models/models"
 * is read as a repeated path; (5) 404 path_unknown for everything else. Every direct response
 * turns ext_authz off. Regexes are RE2, full-matched against the path without its query; Envoy
 * refuses a program size over 100 (re2.max_program_size.error_level), so alternations are split
 * over several routes.
 */
import { errorBody } from '../check/error-body';
import { retryHeaders } from '../check/retry-advice';
import type { Family } from '../check/routes';
import type { UpstreamFamily } from '../config/load';

/** Cluster names: a contract between the routes, the clusters and envoy/README.md. */
export const CLUSTER = {
  authz: 'modelgate_authz',
  /** The meter's ext_proc streams: modelgate's gRPC port again, on connections of their own (render.ts meterCluster). */
  meter: 'modelgate_meter',
  http: 'modelgate_http',
  /** The rate limit service: modelgate's gRPC port (embedded engine) or envoyproxy/ratelimit (render-ratelimit.ts). */
  ratelimit: 'modelgate_ratelimit',
  chat: 'upstream_chat',
  messages: 'upstream_messages',
  generative: 'upstream_generative',
  alt: 'upstream_alt',
} as const;

/** The client's address as Envoy determined it, set on the console's route (console/http-handler.ts reads it). */
export const CLIENT_ADDRESS_HEADER = 'x-modelgate-client-address';

export const EXT_AUTHZ_FILTER = 'envoy.filters.http.ext_authz';
/** The meter (issue 11): Envoy's external processing filter, on the protocol routes only. */
export const EXT_PROC_FILTER = 'envoy.filters.http.ext_proc';
/** The filter that drops request trailers on upstream routes (render.ts trailersFilter). */
export const TRAILERS_FILTER = 'modelgate.drop_request_trailers';

type Obj = Record<string, unknown>;

/** What the route table depends on. */
export interface RouteTableInput {
  /** The alternate prefix, e.g. "/alt" (validated: one segment, no regex metacharacters but "."). */
  readonly altPrefix: string;
  /** Written into hints in place of "{base_url}" when set. */
  readonly publicBaseUrl: string | null;
  /** Filters to turn off on direct responses and model lists (besides ext_authz on direct responses). */
  readonly upstreamOnlyFilters: readonly string[];
  /** idle_timeout of the upstream routes (gateway.upstreamIdleTimeoutSeconds; default 300). */
  readonly upstreamIdleTimeoutSeconds?: number;
  /** Request headers each upstream route removes, by the upstream it goes to (render.ts upstreamHeadersToRemove). */
  readonly headersToRemove?: (family: UpstreamFamily) => readonly string[];
  /** Per-filter config every upstream route carries (the rate limit filters' descriptors, render-ratelimit.ts). */
  readonly upstreamPerFilterConfig?: Record<string, unknown>;
}

/** The upstream of each upstream cluster. */
const FAMILY_OF_CLUSTER: Readonly<Record<string, UpstreamFamily>> = {
  [CLUSTER.chat]: 'chat', [CLUSTER.messages]: 'messages', [CLUSTER.generative]: 'generative', [CLUSTER.alt]: 'alt',
};

const header = (key: string, value: string): Obj => ({ header: { key, value }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' });
const method = (m: 'GET' | 'POST'): Obj => ({ name: ':method', string_match: { exact: m } });
const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/-]/g, (c) => (c === '/' || c === '-' ? c : `\\${c}`));

/** Per-route filter config that turns filters off. */
function filtersOff(names: readonly string[]): Obj {
  const out: Obj = {};
  for (const name of names) {
    out[name] = name === EXT_AUTHZ_FILTER
      ? { '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute', disabled: true }
      : name === EXT_PROC_FILTER
        ? { '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute', disabled: true }
        : { '@type': 'type.googleapis.com/envoy.config.route.v3.FilterConfig', disabled: true };
  }
  return out;
}

/** Builds the whole route list. */
export function renderRoutes(input: RouteTableInput): Obj[] {
  const alt = input.altPrefix;
  const A = `(?:${escapeRe(alt)})?`;
  const base = (s: string): string => (input.publicBaseUrl ? s.split('{base_url}').join(input.publicBaseUrl) : s);
  const offDirect = filtersOff([EXT_AUTHZ_FILTER, ...input.upstreamOnlyFilters]);
  const offUpstreamOnly = input.upstreamOnlyFilters.length > 0 ? filtersOff(input.upstreamOnlyFilters) : undefined;

  const idle = `${input.upstreamIdleTimeoutSeconds ?? 300}s`;
  const to = (cluster: string): Obj => ({ cluster, timeout: '0s', idle_timeout: idle, auto_host_rewrite: true });
  const toHttp: Obj = { cluster: CLUSTER.http, timeout: '15s' };
  const endpoint = (name: string, match: Obj, m: 'GET' | 'POST', route: Obj, catalog = false): Obj => ({
    name,
    match: { ...match, headers: [method(m)] },
    route,
    ...(catalog && offUpstreamOnly ? { typed_per_filter_config: offUpstreamOnly } : {}),
  });
  /** A direct response with the reason, the hint and the body in the client's error shape. */
  const direct = (name: string, match: Obj, status: 404 | 405, reason: string, hintText: string, family: Family, allow?: 'GET' | 'POST'): Obj => {
    const hint = base(hintText);
    const headers = [header('content-type', 'application/json'), header('x-modelgate-reason', reason), header('x-modelgate-hint', hint)];
    if (allow) headers.push(header('allow', allow));
    for (const [k, v] of retryHeaders(status)) headers.push(header(k, v));
    return {
      name,
      match,
      direct_response: { status, body: { inline_string: errorBody(family, status, reason, hint) } },
      response_headers_to_add: headers,
      typed_per_filter_config: offDirect,
    };
  };
  const re = (regex: string): Obj => ({ safe_regex: { regex } });
  const GEN = ':(?:streamG|g)enerateContent';
  const GEN2 = ':(?:countTokens|embedContent|batchEmbedContents)';

  const routes: Obj[] = [
    // ---- (1) Endpoints (seed §4.2), ext_authz on. No overall timeout (streamed answers); idle gateway.upstreamIdleTimeoutSeconds.
    endpoint('chat_completions', { path: '/v1/chat/completions' }, 'POST', to(CLUSTER.chat)),
    endpoint('responses', { path: '/v1/responses' }, 'POST', to(CLUSTER.chat)),
    endpoint('embeddings', { path: '/v1/embeddings' }, 'POST', to(CLUSTER.chat)),
    endpoint('messages', { path: '/v1/messages' }, 'POST', to(CLUSTER.messages)),
    endpoint('messages_count_tokens', { path: '/v1/messages/count_tokens' }, 'POST', to(CLUSTER.messages)),
    // A model name is one path segment; it may hold ":" ("llama3:8b"); the method follows the last one.
    endpoint('generative', re(`/v1beta/models/[^/]+${GEN}`), 'POST', to(CLUSTER.generative)),
    endpoint('generative_count_embed', re(`/v1beta/models/[^/]+${GEN2}`), 'POST', to(CLUSTER.generative)),
    endpoint('alt_messages', { path: `${alt}/v1/messages` }, 'POST', to(CLUSTER.alt)),
    endpoint('alt_messages_count_tokens', { path: `${alt}/v1/messages/count_tokens` }, 'POST', to(CLUSTER.alt)),
    endpoint('alt_chat_completions', { path: `${alt}/v1/chat/completions` }, 'POST', to(CLUSTER.alt)),
    endpoint('alt_responses', { path: `${alt}/v1/responses` }, 'POST', to(CLUSTER.alt)),
    endpoint('alt_embeddings', { path: `${alt}/v1/embeddings` }, 'POST', to(CLUSTER.alt)),
    // Coding agents of the chat/responses kind use the root address itself as their Base URL (seed
    // §4.1 row 1: "{base_url}, no /v1 suffix") and append only /responses or /chat/completions
    // (Codex CLI: `base_url = {base_url}` -> POST /responses): the same endpoints, upstream and check.
    // Upstream, the path is the provider's own, /v1/... (prefix_rewrite of an exact path: the whole path; the query stays).
    endpoint('agent_responses', { path: '/responses' }, 'POST', { ...to(CLUSTER.chat), prefix_rewrite: '/v1/responses' }),
    endpoint('agent_chat_completions', { path: '/chat/completions' }, 'POST', { ...to(CLUSTER.chat), prefix_rewrite: '/v1/chat/completions' }),
    endpoint('alt_agent_responses', { path: `${alt}/responses` }, 'POST', { ...to(CLUSTER.alt), prefix_rewrite: `${alt}/v1/responses` }),
    endpoint('alt_agent_chat_completions', { path: `${alt}/chat/completions` }, 'POST', { ...to(CLUSTER.alt), prefix_rewrite: `${alt}/v1/chat/completions` }),
    endpoint('alt_generative', re(`${escapeRe(alt)}/v1beta/models/[^/]+${GEN}`), 'POST', to(CLUSTER.alt)),
    endpoint('alt_generative_count_embed', re(`${escapeRe(alt)}/v1beta/models/[^/]+${GEN2}`), 'POST', to(CLUSTER.alt)),
    // Model lists: answered by modelgate's HTTP listener after ext_authz checked the key.
    endpoint('models', { path: '/v1/models' }, 'GET', toHttp, true),
    endpoint('generative_models', { path: '/v1beta/models' }, 'GET', toHttp, true),
    endpoint('alt_models', { path: `${alt}/v1/models` }, 'GET', toHttp, true),
    endpoint('alt_generative_models', { path: `${alt}/v1beta/models` }, 'GET', toHttp, true),
    // The console (src/console): `/console` and everything under it, any method, to modelgate's
    // HTTP listener with ext_authz off: the console authenticates each API call itself. Before the
    // 404 routes, whose `.*/models/...` regexes would otherwise answer some of its paths.
    // The console's per-address limit counts the client's address as Envoy determined it (the
    // connection's peer, or with gateway.trustedProxyHops the x-forwarded-for hop that many from the
    // right), passed in a header of modelgate's own that a client's copy cannot override.
    {
      name: 'console', match: { path_separated_prefix: '/console' }, route: toHttp, typed_per_filter_config: offDirect,
      request_headers_to_add: [header(CLIENT_ADDRESS_HEADER, '%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%')],
    },

    // ---- (2) A known path with the wrong method: 405 with allow.
    direct('method_post_only', re(`${A}/v1/(?:chat/completions|responses|embeddings)`), 405, 'method_not_allowed', 'method not allowed: this endpoint takes POST', 'openai', 'POST'),
    direct('method_post_only_agent', re(`${A}/(?:chat/completions|responses)`), 405, 'method_not_allowed', 'method not allowed: this endpoint takes POST', 'openai', 'POST'),
    direct('method_post_only_messages', re(`${A}/v1/messages(?:/count_tokens)?`), 405, 'method_not_allowed', 'method not allowed: this endpoint takes POST', 'anthropic', 'POST'),
    direct('method_post_only_generative', re(`${A}/v1beta/models/[^/]+${GEN}`), 405, 'method_not_allowed', 'method not allowed: this endpoint takes POST', 'gemini', 'POST'),
    direct('method_post_only_generative_count_embed', re(`${A}/v1beta/models/[^/]+${GEN2}`), 405, 'method_not_allowed', 'method not allowed: this endpoint takes POST', 'gemini', 'POST'),
    direct('method_get_only_models', re(`${A}/v1/models`), 405, 'method_not_allowed', 'method not allowed: the model list takes GET', 'openai', 'GET'),
    direct('method_get_only_generative_models', re(`${A}/v1beta/models`), 405, 'method_not_allowed', 'method not allowed: the model list takes GET', 'gemini', 'GET'),

    // ---- (3) 404 path_repeated and prefix_wrong: a Base URL wrong in a way we can name (seed §4.1 rules 1, 2, 4; §7).
    direct('repeated_v1beta', re(`${A}/v1beta/v1beta(?:/.*)?`), 404, 'path_repeated',
      `path repeated: /v1beta appears twice. A command-line generative client must use the root address ({base_url} or {base_url}${alt}), not /v1beta`, 'gemini'),
    direct('repeated_generative_models', re(`${A}/v1beta/models/(?:v1beta/)?models(?:/.*)?`), 404, 'path_repeated',
      'path repeated: /models appears twice. The Base URL of a generative HTTP client or editor provider is {base_url}/v1beta, without /models', 'gemini'),
    // A generative call under /v1: a client that adds the API version itself, set to (or defaulting
    // to) v1. @google/genai 3.x defaults to v1; the spec's generative protocol is /v1beta (seed §9).
    ...[['wrong_version_generative', GEN], ['wrong_version_generative_count_embed', GEN2]].map(([name, m]) => direct(name, re(`${A}/v1/models/[^/]+${m}`), 404, 'prefix_wrong',
      `wrong prefix: generative calls are under /v1beta, not /v1. A client that adds the API version itself must be set to v1beta (its Base URL stays {base_url}, or {base_url}${alt} on the alternate route); an editor generative provider uses {base_url}/v1beta`, 'gemini')),
    // A generative :method anywhere but right after /v1beta/models/{model}: "/models/x:generateContent" = a Base URL without /v1beta.
    ...[['wrong_prefix_generative', GEN], ['wrong_prefix_generative_count_embed', GEN2]].map(([name, m]) => direct(name, re(`.*/models/[^/]+${m}`), 404, 'prefix_wrong',
      'wrong prefix: generative calls go to /v1beta/models/{model}:{method}. An editor generative provider must use {base_url}/v1beta; a command-line generative client uses the root address {base_url}', 'gemini')),
    direct('repeated_v1', re(`${A}/v1/v1(?:/.*)?`), 404, 'path_repeated',
      'path repeated: /v1 appears twice. Coding agents and messages-style clients use the root address {base_url} (they add /v1 themselves); chat-completion clients use {base_url}/v1', 'openai'),
    direct('repeated_alt', { path_separated_prefix: `${alt}${alt}` }, 404, 'path_repeated',
      `path repeated: ${alt} appears twice. Alternate Base URLs are {base_url}${alt}, {base_url}${alt}/v1 and {base_url}${alt}/v1beta`, 'openai'),
    // An endpoint path followed by another: the Base URL holds a full endpoint path (rule 1). After
    // /v1/models/ a bare "chat" is left alone: it could be a model id.
    ...[
      ['repeated_endpoint_chat', `${A}/v1/chat/completions/(?:v1/)?(?:chat|responses|embeddings|messages|models)(?:/.*)?`],
      ['repeated_endpoint_responses', `${A}/v1/(?:responses|embeddings)/(?:v1/)?(?:chat|responses|embeddings|messages|models)(?:/.*)?`],
      ['repeated_endpoint_messages', `${A}/v1/(?:messages|models)/(?:v1/)?(?:chat/|(?:responses|embeddings|messages|models)(?:/|$)).*`],
    ].map(([name, regex]) => direct(name, re(regex), 404, 'path_repeated',
      'path repeated: the Base URL holds a full endpoint path. A Base URL ends before /chat/completions, /responses, /embeddings, /messages or /models, e.g. {base_url}/v1', 'openai')),
    direct('wrong_prefix_v1beta_v1', re(`${A}/v1beta/v1(?:/.*)?`), 404, 'prefix_wrong',
      'wrong prefix: /v1beta/v1. Generative calls use {base_url}/v1beta/models/...; chat-completion calls use {base_url}/v1/...', 'gemini'),
    direct('wrong_prefix_v1_v1beta', re(`${A}/v1/v1beta(?:/.*)?`), 404, 'prefix_wrong',
      'wrong prefix: /v1/v1beta. A command-line generative client uses the root address {base_url}; an editor generative provider uses {base_url}/v1beta', 'openai'),
    direct('wrong_prefix_chat_under_v1beta', re(`${A}/v1beta/(?:chat/completions|responses|embeddings|messages)(?:/.*)?`), 404, 'prefix_wrong',
      'wrong prefix: chat-completion, responses, embeddings and messages endpoints are under /v1, not /v1beta. Use {base_url}/v1 (messages-style clients: {base_url})', 'gemini'),
    // (POST /responses and /chat/completions themselves are the coding agents' endpoints, above.)
    direct('wrong_prefix_missing_v1', re(`${A}/(?:chat/completions|responses|embeddings|models)(?:/.*)?`), 404, 'prefix_wrong',
      `wrong prefix: /v1 is missing. Chat-completion, responses and embeddings clients use the Base URL {base_url}/v1 (alternate route: {base_url}${alt}/v1); only coding agents append /responses or /chat/completions to {base_url} itself`, 'openai'),
    direct('wrong_prefix_missing_v1_messages', re(`${A}/messages(?:/.*)?`), 404, 'prefix_wrong',
      `wrong prefix: /v1 is missing. Messages-style clients use the root address {base_url} (alternate route: {base_url}${alt}) and request /v1/messages`, 'anthropic'),

    // ---- (4) One model by id (answered by modelgate, key checked first), and its 405. As in
    // src/check/routes.ts, an id has no "/" and no ":".
    endpoint('model', re(`${A}/v1/models/[^/:]+`), 'GET', toHttp, true),
    endpoint('generative_model', re(`${A}/v1beta/models/[^/:]+`), 'GET', toHttp, true),
    direct('method_get_only_model', re(`${A}/v1/models/[^/:]+`), 405, 'method_not_allowed', 'method not allowed: a model takes GET', 'openai', 'GET'),
    direct('method_get_only_generative_model', re(`${A}/v1beta/models/[^/:]+`), 405, 'method_not_allowed', 'method not allowed: a model takes GET', 'gemini', 'GET'),
  ];

  // ---- (5) 404 path_unknown, with the Base URL table of seed §4.1 in the message.
  const table = `unknown path. Base URL per client: coding agents (chat/responses), messages-style clients and command-line generative clients: {base_url}; chat-completion apps and SDKs, responses, embeddings: {base_url}/v1; generative HTTP or editor providers: {base_url}/v1beta; alternate route: {base_url}${alt} (messages, command-line generative), {base_url}${alt}/v1 (chat-completion), {base_url}${alt}/v1beta (generative HTTP or editor)`;
  routes.push(
    direct('unknown_generative', re(`${A}/v1beta(?:/.*)?`), 404, 'path_unknown', table, 'gemini'),
    direct('unknown_generative_method', re('.*:(?:(?:streamG|g)enerateContent|countTokens|embedContent|batchEmbedContents)'), 404, 'path_unknown', table, 'gemini'),
    // Catch-all: no request reaches ext_authz without a route (Envoy would skip the check and answer a bare 404).
    direct('unknown', { prefix: '/' }, 404, 'path_unknown', table, 'openai'),
  );
  // Upstream routes remove the credential headers nobody reads (issue 14: they reached providers)
  // and every credential header but their own upstream's (issue 21); they carry the rate limit
  // filters' descriptors (issue 25).
  for (const r of routes) {
    const family = r.route ? FAMILY_OF_CLUSTER[String((r.route as Obj).cluster)] : undefined;
    if (!family) continue;
    if (input.headersToRemove) r.request_headers_to_remove = [...input.headersToRemove(family)];
    if (input.upstreamPerFilterConfig) r.typed_per_filter_config = { ...(r.typed_per_filter_config as Obj | undefined), ...input.upstreamPerFilterConfig };
  }
  return routes;
}

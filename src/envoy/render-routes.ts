/**
 * The route table of the rendered Envoy bundle (docs/spec.md §4.1, §4.2, §7): the spec's endpoints with
 * ext_authz on (derived from providers/endpoints.ts, the list the Check classifies by), then the paths
 * clients get wrong, answered by Envoy itself with a reason and a hint (contract/reasons.ts) before
 * any key is looked at (docs/spec.md §4.1 rule 4: a 404 is checked for the path first).
 *
 * Order matters (first match wins): (1) endpoints, and the console; (2) a known path with another method: 405;
 * (3) 404 path_repeated / prefix_wrong; (4) one model by id, after (3) so that "/v1/models/models"
 * is read as a repeated path; (5) 404 path_unknown for everything else. Every direct response
 * turns ext_authz off. Regexes are RE2, full-matched against the path without its query; Envoy
 * refuses a program size over 100 (re2.max_program_size.error_level), so alternations are split
 * over several routes.
 */
import { ENDPOINTS, MODEL, familyOf, hasModel, type Endpoint } from '../providers/endpoints';
import { errorBody } from '../contract/error-body';
import { HEADER } from '../contract/headers';
import { HINTS, statusOf } from '../contract/reasons';
import { retryHeaders } from '../contract/retry-advice';
import type { Family } from '../contract/error-body';
import { upstreamOf, type UpstreamFamily } from '../config/load';

/** Cluster names: a contract between the routes, the clusters and envoy/README.md. */
export const CLUSTER = {
  authz: 'modelgate_authz',
  /** The meter's access-log streams: modelgate's gRPC port again (envoy/meter-filters.ts). */
  meter: 'modelgate_meter',
  http: 'modelgate_http',
  /** The rate limit service: modelgate's gRPC port (embedded engine) or envoyproxy/ratelimit (render-ratelimit.ts). */
  ratelimit: 'modelgate_ratelimit',
  chat: 'upstream_chat',
  messages: 'upstream_messages',
  generative: 'upstream_generative',
  alt: 'upstream_alt',
} as const;

export const EXT_AUTHZ_FILTER = 'envoy.filters.http.ext_authz';
/** The filter that drops request trailers on upstream routes (render.ts trailersFilter). */
export const TRAILERS_FILTER = 'modelgate.drop_request_trailers';

type Obj = Record<string, unknown>;

/** What the route table depends on. */
export interface RouteTableInput {
  /** The alternate prefix, e.g. "/alt" (validated: one segment, no regex metacharacters but "."). */
  readonly altPrefix: string;
  /** Written into hints in place of "{base_url}" when set. */
  readonly publicBaseUrl: string | null;
  /**
   * Per-route filter configs that turn modelgate's filters on (they are off by default,
   * request-mark.ts): on the upstream routes (the request mark, ext_authz's check_settings, the
   * meter, the trailer filter, the rate limits), the model lists (the mark and ext_authz) and the
   * direct responses (the base-URL filter, if any).
   */
  readonly perRoute: { readonly upstream: Obj; readonly models: Obj; readonly direct: Obj };
  /** idle_timeout of the upstream routes (gateway.upstreamIdleTimeoutSeconds; default 300). */
  readonly upstreamIdleTimeoutSeconds?: number;
  /** Request headers each upstream route removes, by the upstream it goes to (render.ts upstreamHeadersToRemove). */
  readonly headersToRemove?: (family: UpstreamFamily) => readonly string[];
  /** Request headers each upstream route sets (the meter's accept-encoding). */
  readonly upstreamRequestHeaders?: Readonly<Record<string, string>>;
  /**
   * The cluster of each upstream (default UPSTREAM_CLUSTER; `modelgate adopt`: the team's,
   * gateway.upstreams.<name>.cluster).
   */
  readonly clusterOf?: (family: UpstreamFamily) => string;
  /**
   * `modelgate adopt`: only the endpoints (to the upstreams and the model lists) of these
   * upstreams, each route's name prefixed `modelgate.`: no console, no 404/405 answers, no
   * catch-all, so no route of a team's is shadowed but the endpoints' own paths.
   */
  readonly adopt?: { readonly upstreams: ReadonlySet<UpstreamFamily>; readonly modelLists: boolean };
}

/** The prefix of every route name `modelgate adopt` writes (how a re-run finds its own routes). */
export const ADOPT_ROUTE_PREFIX = 'modelgate.';

/** A header Envoy sets, replacing one the request or answer carries. */
export const header = (key: string, value: string): Obj => ({
  header: { key, value },
  append_action: 'OVERWRITE_IF_EXISTS_OR_ADD',
});
const method = (m: 'GET' | 'POST'): Obj => ({ name: ':method', string_match: { exact: m } });
const escapeRe = (s: string): string =>
  s.replace(/[.*+?^${}()|[\]\\/-]/g, (c) => (c === '/' || c === '-' ? c : `\\${c}`));

/**
 * The cluster of each upstream (an endpoint's: config/load.ts upstreamOf its style, at the root or under the alternate
 * prefix).
 */
export const UPSTREAM_CLUSTER: Readonly<Record<UpstreamFamily, string>> = {
  chat: CLUSTER.chat,
  messages: CLUSTER.messages,
  generative: CLUSTER.generative,
  alt: CLUSTER.alt,
};

/**
 * An RE2 alternation of words as one term: a shared suffix written once, longer prefixes first
 * (`(?:streamG|g)enerateContent`): Envoy refuses a program over 100 (re2.max_program_size).
 */
function oneOf(words: readonly string[]): string {
  if (words.length === 1) return words[0];
  let n = 0;
  while (
    n < Math.min(...words.map((w) => w.length)) &&
    words.every((w) => w[w.length - 1 - n] === words[0][words[0].length - 1 - n])
  )
    n++;
  if (n < 2) return `(?:${words.join('|')})`;
  const heads = words.map((w) => w.slice(0, w.length - n)).sort((a, b) => b.length - a.length);
  return `(?:${heads.join('|')})${words[0].slice(words[0].length - n)}`;
}

/** The alternatives of oneOf, without a group of their own when they have none (to sit in a larger alternation). */
const alternatives = (words: readonly string[]): string => {
  const one = oneOf(words);
  return words.length > 1 && one.startsWith('(?:') && one.endsWith(')') ? one.slice(3, -1) : one;
};

/** Paths as one regex: their common start once, then what follows (`/v1/messages(?:/count_tokens)?`). */
function pathsRegex(paths: readonly string[]): string {
  if (paths.length === 1) return escapeRe(paths[0]);
  let n = 0;
  while (paths.every((p) => p[n] === paths[0][n] && n < p.length)) n++;
  const rests = paths.map((p) => p.slice(n));
  const some = rests.filter((r) => r !== '').map(escapeRe);
  return `${escapeRe(paths[0].slice(0, n))}(?:${some.join('|')})${some.length < rests.length ? '?' : ''}`;
}

/**
 * The regex of an endpoint with a model in its path: a model is one segment; it may hold ":" ("llama3:8b"), and the
 * method follows the last one.
 */
function modelPathRegex(e: Endpoint): string {
  const [before, after] = e.path.split(MODEL).map(escapeRe);
  return e.modelMethods ? `${before}[^/]+${after}:${oneOf(e.modelMethods)}` : `${before}[^/:]+${after}`;
}

/**
 * The generative methods of the table, as the groups its endpoints hold (the local replies' Gemini paths use them too,
 * render.ts).
 */
export const GENERATIVE_METHOD_REGEXES: readonly string[] = ENDPOINTS.filter((e) => e.modelMethods).map(
  (e) => `:${oneOf(e.modelMethods!)}`,
);

/** Builds the whole route list. */
export function renderRoutes(input: RouteTableInput): Obj[] {
  const alt = input.altPrefix;
  const A = `(?:${escapeRe(alt)})?`;
  const base = (s: string): string => (input.publicBaseUrl ? s.split('{base_url}').join(input.publicBaseUrl) : s);
  const perFilter = (o: Obj): Obj => (Object.keys(o).length > 0 ? { typed_per_filter_config: o } : {});
  const clusterOf = input.clusterOf ?? ((f: UpstreamFamily): string => UPSTREAM_CLUSTER[f]);

  const idle = `${input.upstreamIdleTimeoutSeconds ?? 300}s`;
  const to = (cluster: string): Obj => ({ cluster, timeout: '0s', idle_timeout: idle, auto_host_rewrite: true });
  const toHttp: Obj = { cluster: CLUSTER.http, timeout: '15s' };
  const upstreamHeadersToAdd = input.upstreamRequestHeaders
    ? Object.entries(input.upstreamRequestHeaders).map(([k, v]) => header(k, v))
    : undefined;
  /**
   * An endpoint's route: to its upstream (the path rewritten to the provider's when the endpoint
   * names one), removing the request headers that upstream must not get (its own credential header
   * kept), carrying the rate limit filters' descriptors and asking the provider only for encodings
   * the meter reads; or to modelgate's HTTP listener (model lists).
   */
  const endpoint = (name: string, match: Obj, e: Endpoint, underAlt: boolean): Obj => {
    if (e.style === 'models') {
      return {
        name,
        match: { ...match, headers: [method(e.method)] },
        route: toHttp,
        ...perFilter(input.perRoute.models),
      };
    }
    const goesTo = upstreamOf(e.style, underAlt);
    // prefix_rewrite of an exact path: the whole path (the query stays).
    const rewrite = e.upstreamPath ? { prefix_rewrite: `${underAlt ? alt : ''}${e.upstreamPath}` } : {};
    return {
      name,
      match: { ...match, headers: [method(e.method)] },
      route: { ...to(clusterOf(goesTo)), ...rewrite },
      ...(input.headersToRemove ? { request_headers_to_remove: [...input.headersToRemove(goesTo)] } : {}),
      // A provider's answer never speaks for modelgate: its own reason and hint headers are dropped
      // (the route's removal runs at the router, on upstream answers only: denials keep theirs).
      response_headers_to_remove: [HEADER.reason, HEADER.hint],
      ...perFilter(input.perRoute.upstream),
      ...(upstreamHeadersToAdd ? { request_headers_to_add: upstreamHeadersToAdd } : {}),
    };
  };
  /** A direct response with the reason, the hint and the body in the client's error shape. */
  const direct = (
    name: string,
    match: Obj,
    reason: 'path_repeated' | 'prefix_wrong' | 'path_unknown' | 'method_not_allowed',
    hintText: string,
    family: Family,
    allow?: 'GET' | 'POST',
  ): Obj => {
    const hint = base(hintText);
    const status = statusOf(reason);
    const headers = [
      header('content-type', 'application/json'),
      header(HEADER.reason, reason),
      header(HEADER.hint, hint),
    ];
    if (allow) headers.push(header('allow', allow));
    for (const [k, v] of retryHeaders(status)) headers.push(header(k, v));
    return {
      name,
      match,
      direct_response: { status, body: { inline_string: errorBody(family, status, reason, hint) } },
      response_headers_to_add: headers,
      ...perFilter(input.perRoute.direct),
    };
  };
  const re = (regex: string): Obj => ({ safe_regex: { regex } });
  const family = (e: Endpoint): Family => familyOf(e.path, false);
  const byModel = ENDPOINTS.filter(hasModel);
  const fixed = ENDPOINTS.filter((e) => !hasModel(e));
  const upstream = ENDPOINTS.filter((e) => e.style !== 'models');
  const lists = ENDPOINTS.filter((e) => e.style === 'models' && !hasModel(e));
  const models = ENDPOINTS.filter((e) => e.style === 'models' && hasModel(e));
  /** An endpoint's route at the root, or its twin under the alternate prefix. */
  const at =
    (underAlt: boolean) =>
    (e: Endpoint): Obj => {
      const prefix = underAlt ? alt : '';
      return endpoint(
        `${underAlt ? 'alt_' : ''}${e.name}`,
        hasModel(e) ? re(`${escapeRe(prefix)}${modelPathRegex(e)}`) : { path: `${prefix}${e.path}` },
        e,
        underAlt,
      );
    };
  const generative = ENDPOINTS.filter((e) => e.modelMethods);
  // The fixed POST endpoints by family and place (under /v1/ or at the root: the coding agents'),
  // each group one 405 route (one alternation would be over RE2's program size).
  const postGroups: Endpoint[][] = [];
  const groupOf = new Map<string, Endpoint[]>();
  for (const e of fixed.filter((x) => x.method === 'POST')) {
    const where = `${family(e)} ${e.path.startsWith('/v1/')}`;
    let group = groupOf.get(where);
    if (!group) {
      groupOf.set(where, (group = []));
      postGroups.push(group);
    }
    group.push(e);
  }
  /** `_` and the words a group's names start with (`_messages`, `_agent`), or '' when they share none. */
  const commonName = (group: readonly Endpoint[]): string => {
    const words = group.map((e) => e.name.split('_'));
    let n = 0;
    while (words.every((w) => n < w.length && w[n] === words[0][n])) n++;
    return n === 0 ? '' : `_${words[0].slice(0, n).join('_')}`;
  };
  // The first path segments after /v1/ of the endpoints (chat, responses, ...), and the endpoint paths under /v1/
  // that no other one extends (chat/completions, ..., messages): the words of the 404 regexes below.
  const v1 = fixed.filter((e) => e.path.startsWith('/v1/')).map((e) => e.path.slice(4));
  const v1Segments = [...new Set(v1.map((p) => p.split('/')[0]))];
  /** Paths under /v1/ that no other one extends, as one regex term. */
  const v1Shortest = (paths: readonly string[]): string =>
    oneOf(paths.filter((p) => !paths.some((q) => q !== p && p.startsWith(`${q}/`))));
  const v1Post = v1Shortest(
    fixed.filter((e) => e.method === 'POST' && e.path.startsWith('/v1/')).map((e) => e.path.slice(4)),
  );
  const v1Of = (f: Family): string =>
    v1Shortest(fixed.filter((e) => e.path.startsWith('/v1/') && family(e) === f).map((e) => e.path.slice(4)));
  const allGenerativeMethods = `:(?:${generative.map((e) => alternatives(e.modelMethods!)).join('|')})`;
  const H = HINTS;

  if (input.adopt) {
    const { upstreams, modelLists } = input.adopt;
    const wanted =
      (underAlt: boolean) =>
      (e: Endpoint): boolean =>
        e.style !== 'models' && upstreams.has(upstreamOf(e.style, underAlt));
    const named = (r: Obj): Obj => ({ ...r, name: `${ADOPT_ROUTE_PREFIX}${String(r.name)}` });
    return [
      ...upstream.filter(wanted(false)).map(at(false)),
      ...(upstreams.has('alt') ? upstream.map(at(true)) : []),
      ...(modelLists
        ? [
            ...lists.map(at(false)),
            ...(upstreams.has('alt') ? lists.map(at(true)) : []),
            ...models.map((e) => endpoint(e.name, re(`${A}${modelPathRegex(e)}`), e, false)),
          ]
        : []),
    ].map(named);
  }

  const routes: Obj[] = [
    // ---- (1) Endpoints (docs/spec.md §4.2), ext_authz on. No overall timeout (streamed answers); idle
    // gateway.upstreamIdleTimeoutSeconds.
    ...upstream.map(at(false)),
    ...upstream.map(at(true)),
    // Model lists: answered by modelgate's HTTP listener after ext_authz checked the key.
    ...lists.map(at(false)),
    ...lists.map(at(true)),
    // The console (src/console): `/console` and everything under it, any method, to modelgate's
    // HTTP listener with ext_authz off: the console authenticates each API call itself. Before the
    // 404 routes, whose `.*/models/...` regexes would otherwise answer some of its paths.
    // The console's per-address limit counts the client's address as Envoy determined it (the
    // connection's peer, or with gateway.trustedProxyHops the x-forwarded-for hop that many from the
    // right), passed in a header of modelgate's own that a client's copy cannot override.
    {
      name: 'console',
      match: { path_separated_prefix: '/console' },
      route: toHttp,
      request_headers_to_add: [header(HEADER.clientAddress, '%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%')],
    },

    // ---- (2) A known path with the wrong method: 405 with allow. The fixed paths by family and
    // place (under /v1/ or at the root), then each path with a model.
    ...postGroups.map((group) =>
      direct(
        `method_post_only${commonName(group)}`,
        re(`${A}${pathsRegex(group.map((e) => e.path))}`),
        'method_not_allowed',
        H.method_not_allowed.endpoint,
        family(group[0]),
        'POST',
      ),
    ),
    ...byModel
      .filter((e) => e.method === 'POST')
      .map((e) =>
        direct(
          `method_post_only_${e.name}`,
          re(`${A}${modelPathRegex(e)}`),
          'method_not_allowed',
          H.method_not_allowed.endpoint,
          family(e),
          'POST',
        ),
      ),
    ...lists.map((e) =>
      direct(
        `method_get_only_${e.name}`,
        re(`${A}${escapeRe(e.path)}`),
        'method_not_allowed',
        H.method_not_allowed.modelList,
        family(e),
        'GET',
      ),
    ),

    // ---- (3) 404 path_repeated and prefix_wrong: a Base URL wrong in a way we can name (docs/spec.md §4.1 rules 1, 2,
    // 4; §7).
    direct('repeated_v1beta', re(`${A}/v1beta/v1beta(?:/.*)?`), 'path_repeated', H.path_repeated.v1beta(alt), 'gemini'),
    direct(
      'repeated_generative_models',
      re(`${A}/v1beta/models/(?:v1beta/)?models(?:/.*)?`),
      'path_repeated',
      H.path_repeated.generativeModels,
      'gemini',
    ),
    // A generative call under /v1: a client that adds the API version itself, set to (or defaulting
    // to) v1. @google/genai 3.x defaults to v1; the spec's generative protocol is /v1beta (docs/spec.md §9).
    ...generative.map((e) =>
      direct(
        `wrong_version_${e.name}`,
        re(`${A}/v1/models/[^/]+:${oneOf(e.modelMethods!)}`),
        'prefix_wrong',
        H.prefix_wrong.generativeUnderV1(alt),
        'gemini',
      ),
    ),
    // A generative :method anywhere but right after /v1beta/models/{model}: "/models/x:generateContent" = a Base URL
    // without /v1beta.
    ...generative.map((e) =>
      direct(
        `wrong_prefix_${e.name}`,
        re(`.*/models/[^/]+:${oneOf(e.modelMethods!)}`),
        'prefix_wrong',
        H.prefix_wrong.generativeElsewhere,
        'gemini',
      ),
    ),
    direct('repeated_v1', re(`${A}/v1/v1(?:/.*)?`), 'path_repeated', H.path_repeated.v1, 'openai'),
    direct(
      'repeated_alt',
      { path_separated_prefix: `${alt}${alt}` },
      'path_repeated',
      H.path_repeated.alt(alt),
      'openai',
    ),
    // An endpoint path followed by another: the Base URL holds a full endpoint path (rule 1). After
    // /v1/models/ a bare "chat" is left alone: it could be a model id.
    ...[
      ['repeated_endpoint_chat', `${A}/v1/chat/completions/(?:v1/)?${oneOf(v1Segments)}(?:/.*)?`],
      ['repeated_endpoint_responses', `${A}/v1/(?:responses|embeddings)/(?:v1/)?${oneOf(v1Segments)}(?:/.*)?`],
      [
        'repeated_endpoint_messages',
        `${A}/v1/(?:messages|models)/(?:v1/)?(?:chat/|${oneOf(v1Segments.filter((x) => x !== 'chat'))}(?:/|$)).*`,
      ],
    ].map(([name, regex]) => direct(name, re(regex), 'path_repeated', H.path_repeated.endpoint, 'openai')),
    direct('wrong_prefix_v1beta_v1', re(`${A}/v1beta/v1(?:/.*)?`), 'prefix_wrong', H.prefix_wrong.v1betaV1, 'gemini'),
    direct('wrong_prefix_v1_v1beta', re(`${A}/v1/v1beta(?:/.*)?`), 'prefix_wrong', H.prefix_wrong.v1V1beta, 'openai'),
    direct(
      'wrong_prefix_chat_under_v1beta',
      re(`${A}/v1beta/${v1Post}(?:/.*)?`),
      'prefix_wrong',
      H.prefix_wrong.chatUnderV1beta,
      'gemini',
    ),
    // (POST /responses and /chat/completions themselves are the coding agents' endpoints, above.)
    direct(
      'wrong_prefix_missing_v1',
      re(`${A}/${v1Of('openai')}(?:/.*)?`),
      'prefix_wrong',
      H.prefix_wrong.missingV1(alt),
      'openai',
    ),
    direct(
      'wrong_prefix_missing_v1_messages',
      re(`${A}/${v1Of('anthropic')}(?:/.*)?`),
      'prefix_wrong',
      H.prefix_wrong.missingV1Messages(alt),
      'anthropic',
    ),

    // ---- (4) One model by id (answered by modelgate, key checked first), and its 405. As in
    // src/check/routes.ts, an id has no "/" and no ":". After (3), so that "/v1/models/models" is
    // read as a repeated path.
    ...models.map((e) => endpoint(e.name, re(`${A}${modelPathRegex(e)}`), e, false)),
    ...models.map((e) =>
      direct(
        `method_get_only_${e.name}`,
        re(`${A}${modelPathRegex(e)}`),
        'method_not_allowed',
        H.method_not_allowed.model,
        family(e),
        'GET',
      ),
    ),
  ];

  // ---- (5) 404 path_unknown, with the Base URL table of docs/spec.md §4.1 in the message.
  const table = H.path_unknown.table(alt);
  routes.push(
    direct('unknown_generative', re(`${A}/v1beta(?:/.*)?`), 'path_unknown', table, 'gemini'),
    direct('unknown_generative_method', re(`.*${allGenerativeMethods}`), 'path_unknown', table, 'gemini'),
    // Catch-all: no request reaches ext_authz without a route (Envoy would skip the check and answer a bare 404).
    direct('unknown', { prefix: '/' }, 'path_unknown', table, 'openai'),
  );
  return routes;
}

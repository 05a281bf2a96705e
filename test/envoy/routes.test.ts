/**
 * Where envoy/envoy.yaml sends each request line of the spec (seed §4.1 Base URL table, §4.2
 * endpoint list, §4.1 rule 4 and §7 404 hints), evaluated with Envoy's route-matching rules by
 * test/support/route-table.ts. Each line is what a client produces from a Base URL + its path.
 */
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/check/routes';
import { envoyBundle } from '../support/envoy-bundle';
import { RouteTable, routeTableOf, uriTemplateRegex, re2FullMatch } from '../support/route-table';

type Expect =
  | { cluster: 'upstream_chat' | 'upstream_messages' | 'upstream_generative' | 'upstream_alt' | 'modelgate_catalog' }
  | { status: 404; reason: 'path_repeated' | 'prefix_wrong' | 'path_unknown'; hint?: RegExp }
  | { status: 405; allow: 'GET' | 'POST' };

/** [request line, expectation, where it comes from]. */
const LINES: Array<[string, Expect, string]> = [
  // §4.2 endpoint list, and the paths each protocol family adds.
  ['GET /v1/models', { cluster: 'modelgate_catalog' }, '§4.2 model list, chat/messages clients'],
  ['GET /v1beta/models', { cluster: 'modelgate_catalog' }, '§4.2 model list, generative clients'],
  ['GET /alt/v1/models', { cluster: 'modelgate_catalog' }, '§4.2 alternate model list'],
  ['GET /alt/v1beta/models', { cluster: 'modelgate_catalog' }, '§9 alternate generative model list'],
  ['GET /v1/models/gpt-4o', { cluster: 'modelgate_catalog' }, 'one model'],
  ['GET /v1/models/chat', { cluster: 'modelgate_catalog' }, 'a model id that is also an endpoint word'],
  ['GET /v1/models/ft:gpt-4o-mini:acme::abc123', { status: 404, reason: 'path_unknown' }, 'an id with ":" is no model lookup, as in src/check/routes.ts'],
  ['GET /v1beta/models/gemini-2.5-pro', { cluster: 'modelgate_catalog' }, 'one generative model'],
  ['POST /v1/chat/completions', { cluster: 'upstream_chat' }, '§4.2 chat completions'],
  ['POST /v1/responses', { cluster: 'upstream_chat' }, '§4.2 responses'],
  ['POST /v1/embeddings', { cluster: 'upstream_chat' }, '§4.2 embeddings'],
  ['POST /v1/messages', { cluster: 'upstream_messages' }, '§4.2 messages'],
  ['POST /v1/messages/count_tokens', { cluster: 'upstream_messages' }, 'messages token count'],
  ['POST /v1beta/models/gemini-2.5-pro:generateContent', { cluster: 'upstream_generative' }, '§4.2 generateContent'],
  ['POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse', { cluster: 'upstream_generative' }, 'streaming, query ignored'],
  ['POST /v1beta/models/gemini-2.5-flash:countTokens', { cluster: 'upstream_generative' }, 'countTokens'],
  ['POST /v1beta/models/text-embedding-004:embedContent', { cluster: 'upstream_generative' }, 'embedContent'],
  ['POST /v1beta/models/text-embedding-004:batchEmbedContents', { cluster: 'upstream_generative' }, 'batchEmbedContents'],
  ['POST /v1beta/models/llama3:8b:generateContent', { cluster: 'upstream_generative' }, 'a model name with ":"'],
  ['POST /v1beta/models/gemini-2.5-pro:generateContent?key=SECRET', { cluster: 'upstream_generative' }, 'key in URL: routed, ext_authz denies it'],
  ['POST /alt/v1/messages', { cluster: 'upstream_alt' }, '§4.1 alternate messages'],
  ['POST /alt/v1/messages/count_tokens', { cluster: 'upstream_alt' }, 'alternate token count'],
  ['POST /alt/v1/chat/completions', { cluster: 'upstream_alt' }, '§4.1 alternate chat completion'],
  ['POST /alt/v1/responses', { cluster: 'upstream_alt' }, 'alternate responses'],
  ['POST /alt/v1/embeddings', { cluster: 'upstream_alt' }, 'alternate embeddings'],
  ['POST /alt/v1beta/models/gemini-2.5-pro:generateContent', { cluster: 'upstream_alt' }, '§4.1 alternate generative'],
  ['POST /alt/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse', { cluster: 'upstream_alt' }, 'alternate generative streaming'],
  ['POST /alt/v1beta/models/text-embedding-004:batchEmbedContents', { cluster: 'upstream_alt' }, 'alternate generative embeddings'],

  // §4.1 rule 1: a Base URL saved with a trailing "/" still works (merge_slashes), and so do dot segments.
  ['POST //v1/responses', { cluster: 'upstream_chat' }, 'coding agent, Base URL {base_url}/'],
  ['POST //v1/chat/completions', { cluster: 'upstream_chat' }, 'chat-kind coding agent, Base URL {base_url}/'],
  ['POST /v1//chat/completions', { cluster: 'upstream_chat' }, 'chat client, Base URL {base_url}/v1/'],
  ['POST //v1/messages', { cluster: 'upstream_messages' }, 'messages client, Base URL {base_url}/'],
  ['POST //v1beta/models/gemini-2.5-pro:generateContent', { cluster: 'upstream_generative' }, 'generative CLI, Base URL {base_url}/'],
  ['POST /v1beta//models/gemini-2.5-pro:generateContent', { cluster: 'upstream_generative' }, 'editor provider, Base URL {base_url}/v1beta/'],
  ['POST /alt//v1/messages', { cluster: 'upstream_alt' }, 'alternate messages, Base URL {base_url}/alt/'],
  ['GET /v1/./models', { cluster: 'modelgate_catalog' }, 'dot segment'],
  ['POST /v1/chat/completions?api-version=2024-10-21', { cluster: 'upstream_chat' }, 'exact path ignores the query'],

  // §4.1 rule 4 / §7: repeated path.
  ['POST /v1/v1/responses', { status: 404, reason: 'path_repeated', hint: /root address \{base_url\}/ }, 'coding agent with Base URL {base_url}/v1'],
  ['POST /v1/v1/messages', { status: 404, reason: 'path_repeated', hint: /messages-style clients use the root address/ }, 'messages client with Base URL {base_url}/v1'],
  ['POST /v1/v1/chat/completions', { status: 404, reason: 'path_repeated' }, 'chat client appending /v1/chat/completions to {base_url}/v1'],
  ['GET /v1/v1/models', { status: 404, reason: 'path_repeated' }, 'model list with /v1 twice'],
  ['POST /v1/chat/completions/chat/completions', { status: 404, reason: 'path_repeated', hint: /full endpoint path/ }, 'Base URL holds /v1/chat/completions'],
  ['GET /v1/chat/completions/models', { status: 404, reason: 'path_repeated' }, 'model fetch with Base URL {base_url}/v1/chat/completions'],
  ['POST /v1/chat/completions/v1/chat/completions', { status: 404, reason: 'path_repeated' }, 'full URL pasted as Base URL'],
  ['POST /v1/responses/responses', { status: 404, reason: 'path_repeated' }, 'Base URL holds /v1/responses'],
  ['POST /v1/embeddings/embeddings', { status: 404, reason: 'path_repeated' }, 'Base URL holds /v1/embeddings'],
  ['POST /v1/messages/v1/messages', { status: 404, reason: 'path_repeated' }, 'messages client with Base URL {base_url}/v1/messages'],
  ['GET /v1/models/models', { status: 404, reason: 'path_repeated' }, 'Base URL holds /v1/models'],
  ['POST /v1/models/chat/completions', { status: 404, reason: 'path_repeated' }, 'chat client with Base URL {base_url}/v1/models'],
  ['POST /v1beta/v1beta/models/gemini-2.5-pro:streamGenerateContent', { status: 404, reason: 'path_repeated', hint: /command-line generative client must use the root address/ }, '§7: generative CLI with Base URL {base_url}/v1beta'],
  ['GET /v1beta/v1beta/models', { status: 404, reason: 'path_repeated' }, 'generative CLI listing models'],
  ['POST /v1beta/models/models/gemini-2.5-pro:generateContent', { status: 404, reason: 'path_repeated' }, 'editor provider with Base URL {base_url}/v1beta/models'],
  ['POST /alt/alt/v1/messages', { status: 404, reason: 'path_repeated', hint: /\/alt appears twice/ }, 'alternate prefix twice'],
  ['POST /alt/v1/v1/messages', { status: 404, reason: 'path_repeated' }, 'alternate messages client with Base URL {base_url}/alt/v1'],
  ['POST /alt/v1beta/v1beta/models/gemini-2.5-pro:generateContent', { status: 404, reason: 'path_repeated' }, 'alternate generative CLI with Base URL {base_url}/alt/v1beta'],
  ['POST /alt/v1/chat/completions/chat/completions', { status: 404, reason: 'path_repeated' }, 'alternate Base URL holds the endpoint'],

  // §4.1 rule 4 / §7: wrong or missing prefix.
  ['POST /chat/completions', { status: 404, reason: 'prefix_wrong', hint: /\{base_url\}\/v1/ }, 'chat client with Base URL {base_url}'],
  ['POST /responses', { status: 404, reason: 'prefix_wrong' }, 'responses SDK with Base URL {base_url}'],
  ['POST /embeddings', { status: 404, reason: 'prefix_wrong' }, 'embeddings SDK with Base URL {base_url}'],
  ['GET /models', { status: 404, reason: 'prefix_wrong' }, 'model list with Base URL {base_url}'],
  ['POST /messages', { status: 404, reason: 'prefix_wrong', hint: /root address \{base_url\}/ }, 'messages client that dropped /v1'],
  ['POST /models/gemini-2.5-pro:generateContent', { status: 404, reason: 'prefix_wrong', hint: /editor generative provider must use \{base_url\}\/v1beta/ }, '§7: editor provider with Base URL {base_url}'],
  ['POST /v1/models/gemini-2.5-pro:generateContent', { status: 404, reason: 'prefix_wrong' }, 'generative call under /v1'],
  ['GET /v1/models/gemini-2.5-pro:generateContent', { status: 404, reason: 'prefix_wrong' }, 'generative call under /v1, any method'],
  ['POST /v1beta/v1/chat/completions', { status: 404, reason: 'prefix_wrong' }, 'chat client with Base URL {base_url}/v1beta, /v1 appended'],
  ['GET /v1/v1beta/models', { status: 404, reason: 'prefix_wrong' }, 'generative client with Base URL {base_url}/v1'],
  ['POST /v1/v1beta/models/gemini-2.5-pro:generateContent', { status: 404, reason: 'prefix_wrong' }, 'generative CLI with Base URL {base_url}/v1'],
  ['POST /v1beta/chat/completions', { status: 404, reason: 'prefix_wrong', hint: /under \/v1, not \/v1beta/ }, 'chat client with Base URL {base_url}/v1beta'],
  ['POST /v1beta/messages', { status: 404, reason: 'prefix_wrong' }, 'messages client with Base URL {base_url}/v1beta'],
  ['POST /alt/chat/completions', { status: 404, reason: 'prefix_wrong', hint: /\{base_url\}\/alt\/v1/ }, 'alternate chat client with Base URL {base_url}/alt'],
  ['POST /alt/messages', { status: 404, reason: 'prefix_wrong' }, 'alternate messages without /v1'],
  ['POST /alt/models/gemini-2.5-pro:generateContent', { status: 404, reason: 'prefix_wrong' }, 'alternate editor provider with Base URL {base_url}/alt'],
  ['POST /alt/v1/models/gemini-2.5-pro:generateContent', { status: 404, reason: 'prefix_wrong' }, 'alternate generative under /alt/v1'],
  ['POST /models/text-embedding-004:embedContent', { status: 404, reason: 'prefix_wrong', hint: /\{base_url\}\/v1beta/ }, 'editor provider embeddings with Base URL {base_url}'],
  ['POST /v1/models/gemini-2.5-flash:countTokens', { status: 404, reason: 'prefix_wrong' }, 'generative token count under /v1'],

  // Everything else: 404 path_unknown with the Base URL table.
  ['GET /', { status: 404, reason: 'path_unknown', hint: /Base URL per client/ }, 'the bare root'],
  ['POST /v1/completions', { status: 404, reason: 'path_unknown' }, 'a legacy endpoint not in the spec'],
  ['POST /v2/chat/completions', { status: 404, reason: 'path_unknown' }, 'another version'],
  ['POST /V1/chat/completions', { status: 404, reason: 'path_unknown' }, 'paths are case-sensitive'],
  ['POST /v1/chat/completions/', { status: 404, reason: 'path_unknown' }, 'an endpoint with a trailing slash'],
  ['GET /v1/responses/resp_123', { status: 404, reason: 'path_unknown' }, 'retrieving a stored response is not offered'],
  ['POST /v1beta/models/gemini-2.5-pro:generatecontent', { status: 404, reason: 'path_unknown' }, 'a misspelled generative method'],
  ['POST /v1beta/tunedModels/mine:generateContent', { status: 404, reason: 'path_unknown' }, 'tuned models are not offered'],
  ['POST /api/models/a/b:generateContent', { status: 404, reason: 'path_unknown' }, 'a generative method under an unknown path'],
  ['GET /alt', { status: 404, reason: 'path_unknown' }, 'the alternate prefix alone'],
  ['GET /healthz', { status: 404, reason: 'path_unknown' }, 'no health endpoint on the public listener'],

  // A known path with the wrong method: 405 and allow.
  ['GET /v1/chat/completions', { status: 405, allow: 'POST' }, 'browser opening the endpoint'],
  ['PUT /v1/responses', { status: 405, allow: 'POST' }, 'wrong method'],
  ['GET /v1/messages', { status: 405, allow: 'POST' }, 'wrong method'],
  ['GET /alt/v1/messages/count_tokens', { status: 405, allow: 'POST' }, 'wrong method, alternate'],
  ['GET /v1beta/models/gemini-2.5-pro:generateContent', { status: 405, allow: 'POST' }, 'generative call with GET'],
  ['GET /alt/v1beta/models/gemini-2.5-flash:countTokens', { status: 405, allow: 'POST' }, 'generative token count with GET'],
  ['POST /v1/models', { status: 405, allow: 'GET' }, 'model list with POST'],
  ['DELETE /v1beta/models', { status: 405, allow: 'GET' }, 'generative model list with DELETE'],
  ['HEAD /alt/v1/models', { status: 405, allow: 'GET' }, 'HEAD is not GET for Envoy routes'],
  ['POST /v1/models/gpt-4o', { status: 405, allow: 'GET' }, 'one model with POST'],
  ['DELETE /v1beta/models/gemini-2.5-pro', { status: 405, allow: 'GET' }, 'one generative model with DELETE'],
];

const GENERATIVE_METHOD = /:(generateContent|streamGenerateContent|countTokens|embedContent|batchEmbedContents)$/;

/** The body shape rule of envoy.yaml: generative shape under /v1beta or with a generative :method. */
function expectsGenerativeShape(path: string): boolean {
  const bare = path.split('?')[0];
  return /^(\/alt)?\/v1beta(\/|$)/.test(bare) || GENERATIVE_METHOD.test(bare);
}

function describeExpect(e: Expect): string {
  if ('cluster' in e) return `goes to ${e.cluster} with ext_authz on`;
  if (e.status === 405) return `is answered 405 method_not_allowed (allow: ${e.allow}) with ext_authz off`;
  return `is answered 404 ${e.reason} with ext_authz off`;
}

describe('envoy.yaml routes', () => {
  const { config } = envoyBundle();
  const table = routeTableOf(config);
  const cases = LINES.map(([line, expected, why]) => {
    const [method, path] = line.split(' ');
    return { name: `${line} ${describeExpect(expected)} (${why})`, method, path, expected };
  });

  it('has at least 40 request lines covering every cluster and every 404/405 reason', () => {
    expect(LINES.length).toBeGreaterThanOrEqual(40);
    const seen = new Set(LINES.map(([, e]) => ('cluster' in e ? e.cluster : e.status === 405 ? 'method_not_allowed' : e.reason)));
    expect([...seen].sort()).toEqual(['method_not_allowed', 'modelgate_catalog', 'path_repeated', 'path_unknown', 'prefix_wrong',
      'upstream_alt', 'upstream_chat', 'upstream_generative', 'upstream_messages']);
  });

  it.each(cases)('$name', ({ method, path, expected }) => {
    const out = table.route({ method, path });
    expect(out.route, 'some route must match').toBeDefined();
    if ('cluster' in expected) {
      expect(out.cluster).toBe(expected.cluster);
      expect(out.status).toBeUndefined();
      expect(out.extAuthz).toBe(true);
      return;
    }
    expect(out.cluster).toBeUndefined();
    expect(out.status).toBe(expected.status);
    expect(out.extAuthz).toBe(false);
    const h = out.responseHeaders;
    expect(h['content-type']).toBe('application/json');
    const reason = expected.status === 405 ? 'method_not_allowed' : expected.reason;
    expect(h['x-modelgate-reason']).toBe(reason);
    if (expected.status === 405) expect(h.allow).toBe(expected.allow);
    else expect(h.allow).toBeUndefined();
    if ('hint' in expected && expected.hint) expect(h['x-modelgate-hint']).toMatch(expected.hint);
    const error = JSON.parse(out.body!).error;
    expect(error.message).toBe(h['x-modelgate-hint']);
    if (expectsGenerativeShape(out.path)) {
      expect(error).toEqual({ code: expected.status, message: error.message, status: expected.status === 404 ? 'NOT_FOUND' : 'UNIMPLEMENTED' });
    } else {
      expect(error).toEqual({ message: error.message, type: 'invalid_request_error', code: reason });
    }
  });

  it('exercises every route of the configuration with at least one request line', () => {
    const routes = (config.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes as Array<{ name: string }>).map((r) => r.name);
    const hit = new Set(cases.map((c) => table.route({ method: c.method, path: c.path }).route));
    expect(routes.filter((r) => !hit.has(r))).toEqual([]);
    expect(new Set(routes).size).toBe(routes.length);
  });
});

describe('envoy.yaml and the service agree', () => {
  const table = routeTableOf(envoyBundle().config);
  /** Envoy's verdict in the terms of the service's classify(): forwarded, catalog, 405 or 404. */
  const envoyKind = (method: string, path: string): { kind: string; path: string; allow?: string } => {
    const out = table.route({ method, path });
    const kind = out.cluster === 'modelgate_catalog' ? 'models' : out.cluster ? 'protocol' : out.status === 405 ? 'wrong_method' : 'unknown';
    return { kind, path: out.path.split('?')[0], allow: out.responseHeaders.allow };
  };
  // By design Envoy reports "/v1/models/models" (Base URL {base_url}/v1/models) as path_repeated;
  // the service alone would look up a model named "models".
  const ENDPOINT_WORD_AS_MODEL = /^(\/alt)?\/v1(beta)?\/models\/(models|responses|embeddings|messages)$/;

  it('on every request line above: what Envoy forwards, the service accepts; its 405s and 404s match', () => {
    for (const [line] of LINES) {
      const [method, raw] = line.split(' ');
      const e = envoyKind(method, raw);
      const s = classify(method, e.path, '/alt', false);
      if (ENDPOINT_WORD_AS_MODEL.test(e.path)) continue;
      expect(`${line}: ${s.kind}`).toBe(`${line}: ${e.kind}`);
      if (s.kind === 'wrong_method') expect(e.allow, line).toBe(s.allow);
    }
  });

  it('on every path built from up to three spec segments, for GET and POST', () => {
    const tokens = ['/alt', '/v1', '/v1beta', '/models', '/chat/completions', '/responses', '/embeddings', '/messages',
      '/count_tokens', '/gpt-4o', '/m:generateContent', '/m:countTokens', '/l:8b:embedContent', '/', '/x:y', '/chat'];
    const paths = new Set(tokens.flatMap((a) => ['', ...tokens].flatMap((b) => ['', ...tokens].map((c) => a + b + c))));
    const disagreements: string[] = [];
    for (const path of paths) {
      for (const method of ['GET', 'POST']) {
        const e = envoyKind(method, path);
        const s = classify(method, e.path, '/alt', false);
        if (e.kind !== s.kind && !ENDPOINT_WORD_AS_MODEL.test(e.path)) disagreements.push(`${method} ${path}: envoy ${e.kind}, service ${s.kind}`);
      }
    }
    expect(paths.size).toBeGreaterThan(4000);
    expect(disagreements).toEqual([]);
  });
});

describe('the route evaluator', () => {
  const routes = (list: unknown[]): RouteTable => new RouteTable({ virtual_hosts: [{ name: 'v', domains: ['*'], routes: list }] }, { mergeSlashes: true, normalizePath: true });

  it('matches a prefix against the path with its query, and an exact path without it', () => {
    const t = routes([
      { name: 'q', match: { prefix: '/a?x=' }, route: { cluster: 'query' } },
      { name: 'p', match: { path: '/a' }, route: { cluster: 'path' } },
    ]);
    expect(t.route({ method: 'GET', path: '/a?x=1' }).cluster).toBe('query');
    expect(t.route({ method: 'GET', path: '/a?y=1' }).cluster).toBe('path');
  });

  it('honours case_sensitive: false for prefix and path, and first match wins', () => {
    const t = routes([
      { name: 'ci', match: { path: '/v1/models', case_sensitive: false }, route: { cluster: 'ci' } },
      { name: 'later', match: { prefix: '/' }, route: { cluster: 'later' } },
    ]);
    expect(t.route({ method: 'GET', path: '/V1/Models' }).cluster).toBe('ci');
    expect(t.route({ method: 'GET', path: '/v1/models/x' }).cluster).toBe('later');
  });

  it('compiles uri_template path templates like uri_template_internal.cc, suffix after a variable included', () => {
    expect(uriTemplateRegex('/v1beta/models/{model}:generateContent')).toBe("/v1beta/models/[a-zA-Z0-9._~%!$&'()+,;:@-]+:generateContent");
    const t = routes([{
      name: 'tpl',
      match: { path_match_policy: { name: 'envoy.path.match.uri_template.uri_template_matcher', typed_config: { path_template: '/v1beta/models/{model}:generateContent' } } },
      route: { cluster: 'gen' },
    }]);
    expect(t.route({ method: 'POST', path: '/v1beta/models/gemini-2.5:generateContent?alt=sse' }).cluster).toBe('gen');
    expect(t.route({ method: 'POST', path: '/v1beta/models/a/b:generateContent' }).route).toBeUndefined();
    expect(() => uriTemplateRegex('/{a}x/{b}')).toThrow(/last segment/);
  });

  it('applies header matchers on :method, including invert_match', () => {
    const t = routes([
      { name: 'not-get', match: { prefix: '/', headers: [{ name: ':method', string_match: { exact: 'GET' }, invert_match: true }] }, route: { cluster: 'other' } },
      { name: 'get', match: { prefix: '/' }, route: { cluster: 'get' } },
    ]);
    expect(t.route({ method: 'POST', path: '/' }).cluster).toBe('other');
    expect(t.route({ method: 'GET', path: '/' }).cluster).toBe('get');
  });

  it('skips ext_authz when no route matches, as Envoy does, and reads per-route disabling', () => {
    const t = routes([{ name: 'off', match: { path: '/off' }, direct_response: { status: 404 }, typed_per_filter_config: { 'envoy.filters.http.ext_authz': { disabled: true } } }]);
    const none = t.route({ method: 'GET', path: '/nothing' });
    expect(none.route).toBeUndefined();
    expect(none).toMatchObject({ status: 404, extAuthz: false });
    expect(t.route({ method: 'GET', path: '/off' })).toMatchObject({ route: 'off', extAuthz: false });
  });

  it('normalises dot segments, then merges slashes, before matching', () => {
    const t = routes([]);
    expect(t.normalise('//v1/./x/../chat//completions?a=//b')).toBe('/v1/chat/completions?a=//b');
    expect(t.normalise('/a/b/..')).toBe('/a/');
  });

  it('uses RE2 full-match semantics for safe_regex', () => {
    expect(re2FullMatch('/v1/models', '/v1/models/x')).toBe(false);
    expect(re2FullMatch('(?:/alt)?/v1/models', '/alt/v1/models')).toBe(true);
    expect(() => re2FullMatch('(a)\\1', 'aa')).toThrow();
  });

  it('refuses to evaluate a match field it does not model', () => {
    const t = routes([{ name: 'q', match: { prefix: '/', query_parameters: [{ name: 'x' }] }, route: { cluster: 'c' } }]);
    expect(() => t.route({ method: 'GET', path: '/' })).toThrow(/query_parameters is not modelled/);
  });
});

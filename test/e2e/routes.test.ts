/**
 * Where the rendered bundle sends each request line of the spec (docs/spec.md §4.1 Base URL table, §4.2
 * endpoint list, §4.1 rule 4 and §7 404 hints), asked of a real Envoy: each line is what a client
 * produces from a Base URL plus its path. Endpoint lines are sent without a key, so the check must
 * run (Envoy's access log names the route and cluster; modelgate answers key_missing, which also
 * shows that its own route table knows the path); path mistakes are answered by Envoy itself.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { errorBody } from '../../src/contract/error-body';
import { gatewayAnswer } from '../../src/console/gateway-answer';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

type Expect =
  | { cluster: 'upstream_chat' | 'upstream_messages' | 'upstream_generative' | 'upstream_alt' | 'modelgate_http' }
  | { status: 404; reason: 'path_repeated' | 'prefix_wrong' | 'path_unknown'; hint?: RegExp }
  | { status: 405; allow: 'GET' | 'POST' };

/** [request line, expectation, where it comes from]. */
const LINES: Array<[string, Expect, string]> = [
  // §4.2 endpoint list, and the paths each protocol family adds.
  ['GET /v1/models', { cluster: 'modelgate_http' }, '§4.2 model list, chat/messages clients'],
  ['GET /v1beta/models', { cluster: 'modelgate_http' }, '§4.2 model list, generative clients'],
  ['GET /alt/v1/models', { cluster: 'modelgate_http' }, '§4.2 alternate model list'],
  ['GET /alt/v1beta/models', { cluster: 'modelgate_http' }, '§9 alternate generative model list'],
  ['GET /v1/me', { cluster: 'modelgate_http' }, "a key holder's own view (docs/clients.md)"],
  ['GET /v1beta/me', { cluster: 'modelgate_http' }, "a key holder's own view, generative clients"],
  ['GET /alt/v1/me', { cluster: 'modelgate_http' }, "a key holder's own view under the alternate prefix"],
  ['GET /alt/v1beta/me', { cluster: 'modelgate_http' }, "a key holder's own view, generative, alternate prefix"],
  ['GET /v1/models/gpt-4o', { cluster: 'modelgate_http' }, 'one model'],
  ['GET /v1/models/chat', { cluster: 'modelgate_http' }, 'a model id that is also an endpoint word'],
  [
    'GET /v1/models/ft:gpt-4o-mini:acme::abc123',
    { status: 404, reason: 'path_unknown' },
    'an id with ":" is no model lookup, as in src/check/routes.ts',
  ],
  ['GET /v1beta/models/gemini-2.5-pro', { cluster: 'modelgate_http' }, 'one generative model'],
  ['POST /v1/chat/completions', { cluster: 'upstream_chat' }, '§4.2 chat completions'],
  ['POST /v1/responses', { cluster: 'upstream_chat' }, '§4.2 responses'],
  ['POST /v1/embeddings', { cluster: 'upstream_chat' }, '§4.2 embeddings'],
  ['POST /v1/messages', { cluster: 'upstream_messages' }, '§4.2 messages'],
  ['POST /v1/messages/count_tokens', { cluster: 'upstream_messages' }, 'messages token count'],
  ['POST /responses', { cluster: 'upstream_chat' }, '§4.1 row 1: a coding agent with Base URL {base_url} (Codex CLI)'],
  [
    'POST /chat/completions',
    { cluster: 'upstream_chat' },
    '§4.1 row 1: a chat-kind coding agent with Base URL {base_url}',
  ],
  ['POST /alt/responses', { cluster: 'upstream_alt' }, 'a coding agent with Base URL {base_url}/alt'],
  ['POST /alt/chat/completions', { cluster: 'upstream_alt' }, 'a chat-kind coding agent with Base URL {base_url}/alt'],
  ['POST /v1beta/models/gemini-2.5-pro:generateContent', { cluster: 'upstream_generative' }, '§4.2 generateContent'],
  [
    'POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
    { cluster: 'upstream_generative' },
    'streaming, query ignored',
  ],
  ['POST /v1beta/models/gemini-2.5-flash:countTokens', { cluster: 'upstream_generative' }, 'countTokens'],
  ['POST /v1beta/models/text-embedding-004:embedContent', { cluster: 'upstream_generative' }, 'embedContent'],
  [
    'POST /v1beta/models/text-embedding-004:batchEmbedContents',
    { cluster: 'upstream_generative' },
    'batchEmbedContents',
  ],
  ['POST /v1beta/models/llama3:8b:generateContent', { cluster: 'upstream_generative' }, 'a model name with ":"'],
  [
    'POST /v1beta/models/gemini-2.5-pro:generateContent?key=SECRET',
    { cluster: 'upstream_generative' },
    'key in URL: routed, ext_authz denies it',
  ],
  ['POST /alt/v1/messages', { cluster: 'upstream_alt' }, '§4.1 alternate messages'],
  ['POST /alt/v1/messages/count_tokens', { cluster: 'upstream_alt' }, 'alternate token count'],
  ['POST /alt/v1/chat/completions', { cluster: 'upstream_alt' }, '§4.1 alternate chat completion'],
  ['POST /alt/v1/responses', { cluster: 'upstream_alt' }, 'alternate responses'],
  ['POST /alt/v1/embeddings', { cluster: 'upstream_alt' }, 'alternate embeddings'],
  ['POST /alt/v1beta/models/gemini-2.5-pro:generateContent', { cluster: 'upstream_alt' }, '§4.1 alternate generative'],
  [
    'POST /alt/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse',
    { cluster: 'upstream_alt' },
    'alternate generative streaming',
  ],
  [
    'POST /alt/v1beta/models/text-embedding-004:batchEmbedContents',
    { cluster: 'upstream_alt' },
    'alternate generative embeddings',
  ],

  // §4.1 rule 1: a Base URL saved with a trailing "/" still works (merge_slashes), and so do dot segments.
  ['POST //v1/responses', { cluster: 'upstream_chat' }, 'coding agent, Base URL {base_url}/'],
  ['POST //v1/chat/completions', { cluster: 'upstream_chat' }, 'chat-kind coding agent, Base URL {base_url}/'],
  ['POST /v1//chat/completions', { cluster: 'upstream_chat' }, 'chat client, Base URL {base_url}/v1/'],
  ['POST //v1/messages', { cluster: 'upstream_messages' }, 'messages client, Base URL {base_url}/'],
  [
    'POST //v1beta/models/gemini-2.5-pro:generateContent',
    { cluster: 'upstream_generative' },
    'generative CLI, Base URL {base_url}/',
  ],
  [
    'POST /v1beta//models/gemini-2.5-pro:generateContent',
    { cluster: 'upstream_generative' },
    'editor provider, Base URL {base_url}/v1beta/',
  ],
  ['POST /alt//v1/messages', { cluster: 'upstream_alt' }, 'alternate messages, Base URL {base_url}/alt/'],
  ['GET /v1/./models', { cluster: 'modelgate_http' }, 'dot segment'],
  ['POST /v1/chat/completions?api-version=2024-10-21', { cluster: 'upstream_chat' }, 'exact path ignores the query'],

  // §4.1 rule 4 / §7: repeated path.
  [
    'POST /v1/v1/responses',
    { status: 404, reason: 'path_repeated', hint: /root address \{base_url\}/ },
    'coding agent with Base URL {base_url}/v1',
  ],
  [
    'POST /v1/v1/messages',
    { status: 404, reason: 'path_repeated', hint: /messages-style clients use the root address/ },
    'messages client with Base URL {base_url}/v1',
  ],
  [
    'POST /v1/v1/chat/completions',
    { status: 404, reason: 'path_repeated' },
    'chat client appending /v1/chat/completions to {base_url}/v1',
  ],
  ['GET /v1/v1/models', { status: 404, reason: 'path_repeated' }, 'model list with /v1 twice'],
  [
    'POST /v1/chat/completions/chat/completions',
    { status: 404, reason: 'path_repeated', hint: /full endpoint path/ },
    'Base URL holds /v1/chat/completions',
  ],
  [
    'GET /v1/chat/completions/models',
    { status: 404, reason: 'path_repeated' },
    'model fetch with Base URL {base_url}/v1/chat/completions',
  ],
  [
    'POST /v1/chat/completions/v1/chat/completions',
    { status: 404, reason: 'path_repeated' },
    'full URL pasted as Base URL',
  ],
  ['POST /v1/responses/responses', { status: 404, reason: 'path_repeated' }, 'Base URL holds /v1/responses'],
  ['POST /v1/embeddings/embeddings', { status: 404, reason: 'path_repeated' }, 'Base URL holds /v1/embeddings'],
  [
    'POST /v1/messages/v1/messages',
    { status: 404, reason: 'path_repeated' },
    'messages client with Base URL {base_url}/v1/messages',
  ],
  ['GET /v1/models/models', { status: 404, reason: 'path_repeated' }, 'Base URL holds /v1/models'],
  [
    'POST /v1/models/chat/completions',
    { status: 404, reason: 'path_repeated' },
    'chat client with Base URL {base_url}/v1/models',
  ],
  [
    'POST /v1beta/v1beta/models/gemini-2.5-pro:streamGenerateContent',
    { status: 404, reason: 'path_repeated', hint: /command-line generative client must use the root address/ },
    '§7: generative CLI with Base URL {base_url}/v1beta',
  ],
  ['GET /v1beta/v1beta/models', { status: 404, reason: 'path_repeated' }, 'generative CLI listing models'],
  [
    'POST /v1beta/models/models/gemini-2.5-pro:generateContent',
    { status: 404, reason: 'path_repeated' },
    'editor provider with Base URL {base_url}/v1beta/models',
  ],
  [
    'POST /alt/alt/v1/messages',
    { status: 404, reason: 'path_repeated', hint: /\/alt appears twice/ },
    'alternate prefix twice',
  ],
  [
    'POST /alt/v1/v1/messages',
    { status: 404, reason: 'path_repeated' },
    'alternate messages client with Base URL {base_url}/alt/v1',
  ],
  [
    'POST /alt/v1beta/v1beta/models/gemini-2.5-pro:generateContent',
    { status: 404, reason: 'path_repeated' },
    'alternate generative CLI with Base URL {base_url}/alt/v1beta',
  ],
  [
    'POST /alt/v1/chat/completions/chat/completions',
    { status: 404, reason: 'path_repeated' },
    'alternate Base URL holds the endpoint',
  ],

  // §4.1 rule 4 / §7: wrong or missing prefix.
  [
    'POST /embeddings',
    { status: 404, reason: 'prefix_wrong', hint: /\{base_url\}\/v1/ },
    'embeddings SDK with Base URL {base_url}',
  ],
  [
    'POST /responses/responses',
    { status: 404, reason: 'prefix_wrong' },
    'a coding agent whose Base URL holds /responses',
  ],
  ['GET /models', { status: 404, reason: 'prefix_wrong' }, 'model list with Base URL {base_url}'],
  [
    'POST /messages',
    { status: 404, reason: 'prefix_wrong', hint: /root address \{base_url\}/ },
    'messages client that dropped /v1',
  ],
  [
    'POST /models/gemini-2.5-pro:generateContent',
    { status: 404, reason: 'prefix_wrong', hint: /editor generative provider must use \{base_url\}\/v1beta/ },
    '§7: editor provider with Base URL {base_url}',
  ],
  [
    'POST /v1/models/gemini-2.5-pro:generateContent',
    {
      status: 404,
      reason: 'prefix_wrong',
      hint: /under \/v1beta, not \/v1\. A client that adds the API version itself must be set to v1beta/,
    },
    'generative call under /v1 (@google/genai 3.x by default)',
  ],
  [
    'GET /v1/models/gemini-2.5-pro:generateContent',
    { status: 404, reason: 'prefix_wrong' },
    'generative call under /v1, any method',
  ],
  [
    'POST /v1beta/v1/chat/completions',
    { status: 404, reason: 'prefix_wrong' },
    'chat client with Base URL {base_url}/v1beta, /v1 appended',
  ],
  ['GET /v1/v1beta/models', { status: 404, reason: 'prefix_wrong' }, 'generative client with Base URL {base_url}/v1'],
  [
    'POST /v1/v1beta/models/gemini-2.5-pro:generateContent',
    { status: 404, reason: 'prefix_wrong' },
    'generative CLI with Base URL {base_url}/v1',
  ],
  [
    'POST /v1beta/chat/completions',
    { status: 404, reason: 'prefix_wrong', hint: /under \/v1, not \/v1beta/ },
    'chat client with Base URL {base_url}/v1beta',
  ],
  ['POST /v1beta/messages', { status: 404, reason: 'prefix_wrong' }, 'messages client with Base URL {base_url}/v1beta'],
  [
    'POST /alt/embeddings',
    { status: 404, reason: 'prefix_wrong', hint: /\{base_url\}\/alt\/v1/ },
    'alternate embeddings client with Base URL {base_url}/alt',
  ],
  ['POST /alt/messages', { status: 404, reason: 'prefix_wrong' }, 'alternate messages without /v1'],
  [
    'POST /alt/models/gemini-2.5-pro:generateContent',
    { status: 404, reason: 'prefix_wrong' },
    'alternate editor provider with Base URL {base_url}/alt',
  ],
  [
    'POST /alt/v1/models/gemini-2.5-pro:generateContent',
    { status: 404, reason: 'prefix_wrong' },
    'alternate generative under /alt/v1',
  ],
  [
    'POST /models/text-embedding-004:embedContent',
    { status: 404, reason: 'prefix_wrong', hint: /\{base_url\}\/v1beta/ },
    'editor provider embeddings with Base URL {base_url}',
  ],
  [
    'POST /v1/models/gemini-2.5-flash:countTokens',
    { status: 404, reason: 'prefix_wrong', hint: /set to v1beta/ },
    'generative token count under /v1',
  ],
  [
    'POST /alt/v1/models/gemini-2.5-flash:streamGenerateContent',
    {
      status: 404,
      reason: 'prefix_wrong',
      hint: /set to v1beta \(its Base URL stays \{base_url\}, or \{base_url\}\/alt on the alternate route\)/,
    },
    'alternate generative streaming under /alt/v1',
  ],

  // Everything else: 404 path_unknown with the Base URL table.
  ['GET /', { status: 404, reason: 'path_unknown', hint: /Base URL per client/ }, 'the bare root'],
  ['POST /v1/completions', { status: 404, reason: 'path_unknown' }, 'a legacy endpoint not in the spec'],
  ['POST /v2/chat/completions', { status: 404, reason: 'path_unknown' }, 'another version'],
  ['POST /V1/chat/completions', { status: 404, reason: 'path_unknown' }, 'paths are case-sensitive'],
  ['POST /v1/chat/completions/', { status: 404, reason: 'path_unknown' }, 'an endpoint with a trailing slash'],
  [
    'GET /v1/responses/resp_123',
    { status: 404, reason: 'path_unknown' },
    'retrieving a stored response is not offered',
  ],
  [
    'POST /v1beta/models/gemini-2.5-pro:generatecontent',
    { status: 404, reason: 'path_unknown' },
    'a misspelled generative method',
  ],
  [
    'POST /v1beta/tunedModels/mine:generateContent',
    { status: 404, reason: 'path_unknown' },
    'tuned models are not offered',
  ],
  [
    'POST /api/models/a/b:generateContent',
    { status: 404, reason: 'path_unknown' },
    'a generative method under an unknown path',
  ],
  ['GET /alt', { status: 404, reason: 'path_unknown' }, 'the alternate prefix alone'],
  ['GET /healthz', { status: 404, reason: 'path_unknown' }, 'no health endpoint on the public listener'],

  // A known path with the wrong method: 405 and allow.
  ['GET /v1/chat/completions', { status: 405, allow: 'POST' }, 'browser opening the endpoint'],
  ['PUT /v1/responses', { status: 405, allow: 'POST' }, 'wrong method'],
  ['GET /responses', { status: 405, allow: 'POST' }, "a coding agent's endpoint with GET"],
  ['GET /alt/chat/completions', { status: 405, allow: 'POST' }, "a coding agent's alternate endpoint with GET"],
  ['GET /v1/messages', { status: 405, allow: 'POST' }, 'wrong method'],
  ['GET /alt/v1/messages/count_tokens', { status: 405, allow: 'POST' }, 'wrong method, alternate'],
  ['GET /v1beta/models/gemini-2.5-pro:generateContent', { status: 405, allow: 'POST' }, 'generative call with GET'],
  [
    'GET /alt/v1beta/models/gemini-2.5-flash:countTokens',
    { status: 405, allow: 'POST' },
    'generative token count with GET',
  ],
  ['POST /v1/models', { status: 405, allow: 'GET' }, 'model list with POST'],
  ['POST /v1/me', { status: 405, allow: 'GET' }, "the key holder's view with POST"],
  ['DELETE /v1beta/me', { status: 405, allow: 'GET' }, "the generative key holder's view with DELETE"],
  ['DELETE /v1beta/models', { status: 405, allow: 'GET' }, 'generative model list with DELETE'],
  ['HEAD /alt/v1/models', { status: 405, allow: 'GET' }, 'HEAD is not GET for Envoy routes'],
  ['POST /v1/models/gpt-4o', { status: 405, allow: 'GET' }, 'one model with POST'],
  ['DELETE /v1beta/models/gemini-2.5-pro', { status: 405, allow: 'GET' }, 'one generative model with DELETE'],
];

const GENERATIVE_METHOD = /:(generateContent|streamGenerateContent|countTokens|embedContent|batchEmbedContents)$/;

/**
 * The error shape a client of this path parses: Gemini under /v1beta or with a generative :method, Anthropic for
 * messages paths.
 */
function familyOf(path: string): 'gemini' | 'anthropic' | 'openai' {
  const bare = path.split('?')[0].replace(/\/{2,}/g, '/');
  if (/^(\/alt)?\/v1beta(\/|$)/.test(bare) || GENERATIVE_METHOD.test(bare)) return 'gemini';
  if (/^(\/alt)?\/(v1\/messages(\/count_tokens)?|messages(\/.*)?)$/.test(bare)) return 'anthropic';
  return 'openai';
}

function describeExpect(e: Expect): string {
  if ('cluster' in e) return `goes to ${e.cluster} with ext_authz on`;
  if (e.status === 405) return `is answered 405 method_not_allowed (allow: ${e.allow}) with ext_authz off`;
  return `is answered 404 ${e.reason} with ext_authz off`;
}

describeE2E('the rendered routes, through a real Envoy', () => {
  let gw: Gateway;
  const routesHit = new Set<string>();
  beforeAll(async () => {
    gw = await startGateway();
  });
  afterAll(async () => gw?.close());

  /** Sends one line and returns the answer with Envoy's access-log line for it. */
  async function sendLine(method: string, path: string) {
    const before = gw.accessLog().length;
    const reply = await gw.send(
      method,
      path,
      method === 'POST' ? { headers: [['content-type', 'application/json']], body: '{}' } : {},
    );
    const until = Date.now() + 5000;
    while (gw.accessLog().length <= before && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
    const log = gw.accessLog()[before];
    expect(log, 'an access-log line for the request').toBeDefined();
    routesHit.add(String(log.route));
    // The console's doctor predicts Envoy's answer from the same rendered table: it must match Envoy.
    expect(gatewayAnswer(method, path, '/alt').route, "the doctor's prediction of the route").toBe(log.route);
    return { reply, log };
  }

  const cases = LINES.map(([line, expected, why]) => {
    const [method, path] = line.split(' ');
    return { name: `${line} ${describeExpect(expected)} (${why})`, method, path, expected };
  });

  it('has at least 40 request lines covering every cluster and every 404/405 reason', () => {
    expect(LINES.length).toBeGreaterThanOrEqual(40);
    const seen = new Set(
      LINES.map(([, e]) => ('cluster' in e ? e.cluster : e.status === 405 ? 'method_not_allowed' : e.reason)),
    );
    expect([...seen].sort()).toEqual([
      'method_not_allowed',
      'modelgate_http',
      'path_repeated',
      'path_unknown',
      'prefix_wrong',
      'upstream_alt',
      'upstream_chat',
      'upstream_generative',
      'upstream_messages',
    ]);
  });

  it.each(cases)('$name', async ({ method, path, expected }) => {
    const { reply, log } = await sendLine(method, path);
    if ('cluster' in expected) {
      // The route was taken and the check ran: modelgate knows the endpoint and asks for the key.
      expect(log.upstream_cluster).toBe(expected.cluster);
      expect(reply.status).toBe(401);
      // (The key-in-URL line is refused for that first: the spec's order of checks.)
      expect(reply.headers['x-modelgate-reason']).toBe(path.includes('key=') ? 'key_in_url' : 'key_missing');
      expect(log.details).toBe('ext_authz_denied');
      expect(gw.received).toEqual([]);
      return;
    }
    expect(log.details).toBe('direct_response');
    expect(reply.status).toBe(expected.status);
    const h = reply.headers;
    expect(h['content-type']).toBe('application/json');
    const reason = expected.status === 405 ? 'method_not_allowed' : expected.reason;
    expect(h['x-modelgate-reason']).toBe(reason);
    if (expected.status === 405) expect(h.allow).toBe(expected.allow);
    else expect(h.allow).toBeUndefined();
    const hint = String(h['x-modelgate-hint']);
    // No publicBaseUrl: the hint names the address the client used (envoy/base-url-filter.ts), never the placeholder.
    expect(hint).not.toContain('{base_url}');
    if ('hint' in expected && expected.hint) expect(hint.split(gw.baseUrl).join('{base_url}')).toMatch(expected.hint);
    expect(h['x-should-retry']).toBe('false');
    // The body is the one modelgate itself would write for this reason, in the client's own error shape.
    // (A HEAD answer has no body, by HTTP's rules.)
    expect(reply.text).toBe(method === 'HEAD' ? '' : errorBody(familyOf(path), expected.status, reason, hint));
  });

  it("agrees with modelgate's own route table on every path built from up to three spec segments, GET and POST", async () => {
    // What Envoy forwards to the check, modelgate must know as an endpoint: it may never answer
    // path_unknown or method_not_allowed itself (those are Envoy's to answer, before the key).
    const tokens = [
      '/alt',
      '/v1',
      '/v1beta',
      '/models',
      '/chat/completions',
      '/responses',
      '/embeddings',
      '/messages',
      '/count_tokens',
      '/gpt-4o',
      '/m:generateContent',
      '/m:countTokens',
      '/l:8b:embedContent',
      '/',
      '/x:y',
      '/chat',
    ];
    const paths = [
      ...new Set(tokens.flatMap((a) => ['', ...tokens].flatMap((b) => ['', ...tokens].map((c) => a + b + c)))),
    ];
    expect(paths.length).toBeGreaterThan(4000);
    const lines = paths.flatMap(
      (p) =>
        [
          ['GET', p],
          ['POST', p],
        ] as const,
    );
    const answers = new Map<string, number>();
    // The console's doctor predicts Envoy's own answers (src/console/gateway-answer.ts): every
    // prediction is checked against what this Envoy answered.
    const mispredicted: string[] = [];
    for (let i = 0; i < lines.length; i += 32) {
      await Promise.all(
        lines.slice(i, i + 32).map(async ([m, p]) => {
          const r = await gw.send(m, p, m === 'POST' ? { body: '{}' } : {});
          const key = `${r.status} ${String(r.headers['x-modelgate-reason'])}`;
          answers.set(key, (answers.get(key) ?? 0) + 1);
          const predicted = gatewayAnswer(m, p, '/alt');
          const got =
            predicted.status !== undefined
              ? `${r.status} ${String(r.headers['x-modelgate-reason'])}`
              : r.status === 401
                ? 'checked'
                : `${r.status}`;
          const want = predicted.status !== undefined ? `${predicted.status} ${predicted.reason}` : 'checked';
          if (got !== want) mispredicted.push(`${m} ${p}: the doctor predicts ${want}, Envoy answered ${got}`);
        }),
      );
    }
    expect(mispredicted).toEqual([]);
    const decisions = gw.modelgate
      .logLines()
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'decision');
    expect(decisions.length, 'some lines reach the check').toBeGreaterThan(30);
    expect(
      decisions
        .filter((d) => d.reason === 'path_unknown' || d.reason === 'method_not_allowed')
        .map((d) => `${String(d.method)} ${String(d.path)}`),
    ).toEqual([]);
    // Every answer is a reasoned one: Envoy's 404/405 or modelgate's 401 (no key sent).
    expect(
      [...answers.keys()].filter(
        (k) =>
          !/^(404 (path_unknown|path_repeated|prefix_wrong)|405 method_not_allowed|401 key_(missing|in_url))$/.test(k),
      ),
    ).toEqual([]);
  }, 120_000);

  it('sends /console and everything under it to modelgate with no check: the console authenticates itself', async () => {
    for (const [method, path] of [
      ['GET', '/console/'],
      ['POST', '/console/api/access'],
    ]) {
      // The access log never shows a path modelgate was not asked about (`path` is null there: a
      // client can put a key anywhere in it), so the line is the first after a quiet log.
      for (let n = -1; n !== gw.accessLog().length;) {
        n = gw.accessLog().length;
        await new Promise((r) => setTimeout(r, 300));
      }
      const seen = gw.accessLog().length;
      const reply = await gw.send(method, path);
      const until = Date.now() + 5000;
      const find = () =>
        gw
          .accessLog()
          .slice(seen)
          .find((l) => l.method === method);
      while (!find() && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
      const log = find()!;
      expect(log.path ?? null).toBeNull();
      routesHit.add(String(log.route));
      expect(log.route).toBe('console');
      expect(log.upstream_cluster).toBe('modelgate_http');
      expect(log.details).toBe('via_upstream');
      expect(reply.headers['x-frame-options']).toBe('DENY');
    }
  });

  it('names the address only when the Host header is a plain host name: anything else keeps the placeholder', async () => {
    const plain = await gw.send('POST', '/embeddings', { headers: [['host', 'gateway.example:8080']], body: '{}' });
    expect(plain.headers['x-modelgate-hint']).toContain('use the Base URL http://gateway.example:8080/v1 ');
    expect(plain.text).toContain('use the Base URL http://gateway.example:8080/v1 ');
    expect(JSON.parse(plain.text)).toMatchObject({ error: { code: 'prefix_wrong' } });
    const v6 = await gw.send('POST', '/embeddings', { headers: [['host', '[::1]:10000']], body: '{}' });
    expect(v6.headers['x-modelgate-hint']).toContain('http://[::1]:10000/v1');
    for (const host of ['gateway.example@evil.example', "x'y", 'a(b)', 'a'.repeat(300)]) {
      const r = await gw.send('POST', '/embeddings', { headers: [['host', host]], body: '{}' });
      if (r.status === 400) continue; // Envoy refused the Host itself (request_invalid)
      expect(r.headers['x-modelgate-hint'], host).toContain('{base_url}/v1');
      expect(r.text, host).not.toContain(host);
    }
  });

  it('exercises every route of the rendered table with at least one request line', () => {
    const names = gw.routeNames();
    expect(names.filter((r) => !routesHit.has(r))).toEqual([]);
    expect(new Set(names).size).toBe(names.length);
  });
});

/**
 * Every reason of the catalogue (src/contract/reasons.ts) as the client sees it through the real
 * Envoy: status, x-modelgate-reason, x-modelgate-hint, www-authenticate on 401, and the body in the
 * error shape of the client's own protocol (OpenAI, Anthropic, Gemini), under the root and the
 * alternate prefix; a denied request never reaches an upstream.
 *
 * Reasons a client cannot cause through Envoy, and where they are proven instead:
 * - check_request_malformed: Envoy always sends a valid CheckRequest (test/check/bad-input.test.ts
 *   feeds modelgate broken bytes over gRPC);
 * - internal_error: an unexpected failure inside modelgate's decision (test/server/store-failures.test.ts
 *   makes the store return a corrupt record).
 * The 404/405 routes are all proven in routes.test.ts; here one of each shows the headers.
 *
 * To cause the rest, this gateway runs with a store that fails for one key (store_unavailable) and
 * hangs for another (Envoy's ext_authz timeout: authz_unavailable), the alternate family pointed at
 * a closed port (upstream_unavailable), an upstream that can be told to go silent with a 1 s idle
 * timeout (upstream_timeout), and a 64 KiB body limit (body_too_large).
 */
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { errorBody } from '../../src/contract/error-body';
import { generateKey, hashKey } from '../../src/contract/key-format';
import { REASONS, type Reason } from '../../src/contract/reasons';
import { parseConfig } from '../../src/config/load';
import { FileStore } from '../../src/store/file-store';
import type { GroupRecord, InvalidationEvent, KeyRecord, Store } from '../../src/store/store';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway, type Reply } from '../support/gateway';
import { DEMO_CONFIG } from '../support/service-harness';
import { REFUSED_PORT } from '../support/refused-port';

/** Not causable through Envoy (see the module comment). */
const NOT_THROUGH_ENVOY: Partial<Record<Reason, string>> = {
  check_request_malformed: 'Envoy always sends a valid CheckRequest; test/check/bad-input.test.ts',
  internal_error: 'needs a fault inside modelgate; test/server/store-failures.test.ts',
  authz_unauthenticated:
    "needs an Envoy without the gRPC port's secret; test/e2e/grpc-auth.test.ts (through Envoy, set to fail open) and test/server/grpc-auth.test.ts",
  // Through Envoy too, in the rate limit files (they need tokens used up, slow streams, or a stopped engine).
  tokens_rate_limited: 'test/e2e/rate-limits-embedded.test.ts, rate-limits-global.test.ts',
  concurrency_limited: 'test/e2e/rate-limits-embedded.test.ts (200 parallel streams)',
  rate_limit_unavailable: 'test/e2e/drills.test.ts (the rate limit service stopped, failureMode deny)',
};

const DOWN_KEY = generateKey();
const HANG_KEY = generateKey();

/** The demo's file store, except that one key's lookup fails and another's never answers. */
class FaultyStore implements Store {
  readonly kind = 'faulty-file';
  constructor(private readonly inner: Store) {}
  findKey(sha256: string): Promise<KeyRecord | null> {
    if (sha256 === hashKey(DOWN_KEY)) return Promise.reject(new Error('connection refused'));
    if (sha256 === hashKey(HANG_KEY)) return new Promise(() => {});
    return this.inner.findKey(sha256);
  }
  findGroup(name: string): Promise<GroupRecord | null> {
    return this.inner.findGroup(name);
  }
  // The demo's in-memory ledger, so a budget per window is counted (budget_exhausted).
  get meter(): Store['meter'] {
    return this.inner.meter;
  }
  onInvalidate(listener: (e: InvalidationEvent) => void): () => void {
    return this.inner.onInvalidate(listener);
  }
  ready(): boolean {
    return true;
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

const CONFIG = (demo: string): string =>
  demo
    .replace('authzTimeoutMs: 1000', 'authzTimeoutMs: 300')
    .replace('upstreamIdleTimeoutSeconds: 300', 'upstreamIdleTimeoutSeconds: 1')
    .replace('maxRequestBytes: 33554432', 'maxRequestBytes: 65536')
    .replace('unmeteredStreams: estimate', 'unmeteredStreams: deny')
    // trial gets a daily budget below one chat request's cost: its second request is over it.
    .replace(
      /(  - id: trial[^\n]*\n(?:    [^\n]*\n)*?    balance: 0\.00006[^\n]*\n)/,
      '$1    budget: { amount: 0.00001, period: day, timeZone: UTC }\n',
    )
    // alice gets a weekly budget on gpt-5.5 below one chat request's cost: her second request to it is over it.
    .replace(
      /(  - id: alice[^\n]*\n(?:    [^\n]*\n)*?    balance: 12\.5[^\n]*\n)/,
      '$1    modelBudgets: { gpt-5.5: { amount: 0.00001, period: week, timeZone: Asia/Tokyo } }\n',
    ) + '\nconsole:\n  rateLimit:\n    perAddressPerMinute: 3\n    perKeyPerMinute: 100\n';

const { alice, bob, carol, dave, erin, frank } = DEMO_KEYS;
const CHAT = (model: string): string => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] });
const MESSAGES = (model: string): string =>
  JSON.stringify({ model, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
const GEN = '{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}';
const bearer = (k: string): [string, string] => ['authorization', `Bearer ${k}`];

interface Case {
  readonly reason: Reason;
  readonly why: string;
  readonly method?: string;
  readonly path: string;
  readonly headers?: Array<[string, string]>;
  readonly body?: string | Buffer;
  /** What the hint must say. */
  readonly hint?: RegExp;
  readonly http2?: boolean;
  /** The Content-Type sent (default application/json). */
  readonly contentType?: string;
  /** Allowed by modelgate, so the upstream did get it (upstream_timeout). */
  readonly reachedUpstream?: boolean;
}

/** The denials, each under the root and (via `alt`) the alternate prefix. */
function cases(p: '' | '/alt'): Case[] {
  const generativeKey = (k: string): [string, string] => (p ? bearer(k) : ['x-goog-api-key', k]);
  return [
    // 404/405: Envoy's own routes, before any key (all of them in routes.test.ts).
    {
      reason: 'path_repeated',
      why: 'a Base URL ending in /v1 for a messages client',
      path: `${p}/v1/v1/messages`,
      body: '{}',
    },
    { reason: 'prefix_wrong', why: 'an embeddings client with the root Base URL', path: `${p}/embeddings`, body: '{}' },
    { reason: 'path_unknown', why: 'a legacy endpoint', path: `${p}/v1/completions`, body: '{}' },
    { reason: 'method_not_allowed', why: 'GET on a POST endpoint', method: 'GET', path: `${p}/v1/messages` },
    // 401: the key.
    {
      reason: 'key_in_url',
      why: 'a key in ?key= (never echoed)',
      path: `${p}/v1beta/models/gemini-2.5-flash:generateContent?key=${alice}`,
      body: GEN,
      hint: /query parameter "key"/,
    },
    {
      reason: 'key_in_url',
      why: 'a key in ?api_key=',
      path: `${p}/v1/chat/completions?api_key=${alice}`,
      headers: [bearer(alice)],
      body: CHAT('gpt-4o-mini'),
    },
    {
      reason: 'key_missing',
      why: 'no key at all',
      path: `${p}/v1/chat/completions`,
      body: CHAT('gpt-4o-mini'),
      hint: /no key: send it in the header Authorization: Bearer <key>/,
    },
    {
      reason: 'key_missing',
      why: 'the key in a header this route does not read',
      path: `${p}/v1/messages`,
      headers: [['x-goog-api-key', alice]],
      body: MESSAGES('claude-3-5-haiku-latest'),
      hint: /it was sent in x-goog-api-key/,
    },
    {
      reason: 'key_conflict',
      why: 'two different keys',
      path: `${p}/v1/messages`,
      headers: [bearer(alice), ['x-api-key', bob]],
      body: MESSAGES('claude-3-5-haiku-latest'),
      hint: /two different keys/,
    },
    {
      reason: 'key_malformed',
      why: 'the key in quotes',
      path: `${p}/v1/chat/completions`,
      headers: [['authorization', `Bearer "${alice}"`]],
      body: CHAT('gpt-4o-mini'),
      hint: /quote/,
    },
    {
      reason: 'key_malformed',
      why: '"Bearer " pasted into x-api-key',
      path: `${p}/v1/messages`,
      headers: [['x-api-key', `Bearer ${alice}`]],
      body: MESSAGES('claude-3-5-haiku-latest'),
      hint: /"Bearer " belongs only in the Authorization header/,
    },
    {
      reason: 'key_incomplete',
      why: 'a key cut short',
      path: `${p}/v1beta/models/gemini-2.5-flash:generateContent`,
      headers: [generativeKey(alice.slice(0, -1))],
      body: GEN,
    },
    {
      reason: 'key_unknown',
      why: 'a well-formed key nobody issued',
      path: `${p}/v1/chat/completions`,
      headers: [bearer(generateKey())],
      body: CHAT('gpt-4o-mini'),
    },
    {
      reason: 'key_disabled',
      why: 'dave',
      path: `${p}/v1/messages`,
      headers: [['x-api-key', dave]],
      body: MESSAGES('claude-3-5-haiku-latest'),
    },
    {
      reason: 'key_expired',
      why: 'erin',
      path: `${p}/v1beta/models/gemini-2.5-pro:generateContent`,
      headers: [generativeKey(erin)],
      body: GEN,
    },
    // 403: group, model, balance.
    {
      reason: 'group_unavailable',
      why: 'frank',
      path: `${p}/v1/chat/completions`,
      headers: [bearer(frank)],
      body: CHAT('gpt-4o-mini'),
    },
    {
      reason: 'model_not_in_group',
      why: 'a typo',
      path: `${p}/v1/chat/completions`,
      headers: [bearer(alice)],
      body: CHAT('gpt-4o-mni'),
      hint: /did you mean "gpt-4o-mini"/,
    },
    {
      reason: 'model_not_in_group',
      why: "another group's model, in the path",
      path: `${p}/v1beta/models/gemini-2.5-pro:generateContent`,
      headers: [generativeKey(alice)],
      body: GEN,
    },
    {
      reason: 'model_wrong_protocol',
      why: 'a messages model on chat completions',
      path: `${p}/v1/chat/completions`,
      headers: [bearer(alice)],
      body: CHAT('claude-3-5-haiku-latest'),
      hint: /\/v1\/messages/,
    },
    {
      reason: 'model_unavailable',
      why: 'its channel is down',
      path: `${p}/v1/responses`,
      headers: [bearer(alice)],
      body: CHAT('gpt-4.1-nano'),
    },
    {
      reason: 'balance_insufficient',
      why: 'carol, balance 0',
      path: `${p}/v1/messages`,
      headers: [['x-api-key', carol]],
      body: MESSAGES('claude-3-5-haiku-latest'),
    },
    // 400: the body.
    {
      reason: 'body_invalid',
      why: 'invalid JSON',
      path: `${p}/v1/chat/completions`,
      headers: [bearer(alice)],
      body: '{"model":"gpt-4o-mini",',
    },
    {
      reason: 'body_invalid',
      why: 'a gzip body',
      path: `${p}/v1/embeddings`,
      headers: [bearer(alice), ['content-encoding', 'gzip']],
      body: gzipSync(CHAT('text-embedding-3-small')),
    },
    {
      reason: 'content_type_unsupported',
      why: 'a form body',
      path: `${p}/v1/chat/completions`,
      headers: [bearer(alice)],
      contentType: 'application/x-www-form-urlencoded',
      body: 'model=gpt-4o-mini',
      hint: /Content-Type: application\/json/,
    },
    {
      reason: 'content_type_unsupported',
      why: 'JSON in another charset',
      path: `${p}/v1/messages`,
      headers: [['x-api-key', alice]],
      contentType: 'application/json; charset=utf-16',
      body: MESSAGES('claude-3-5-haiku-latest'),
    },
    // 400 from Envoy itself, before any Check.
    {
      reason: 'request_invalid',
      why: 'an escaped slash in the model (Envoy refuses it)',
      path: `${p}/v1beta/models/tuned%2Fgemini-2.5-flash:generateContent`,
      headers: [generativeKey(alice)],
      body: GEN,
    },
    {
      reason: 'response_format_unsupported',
      why: 'an answer in binary protobuf the meter cannot read (alt=proto)',
      path: `${p}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=proto`,
      headers: [generativeKey(alice)],
      body: GEN,
      hint: /\$alt=json;enum-encoding=int/,
    },
    {
      reason: 'model_missing',
      why: 'no model',
      path: `${p}/v1/messages`,
      headers: [['x-api-key', alice]],
      body: '{"max_tokens":8,"messages":[]}',
    },
    // 503: modelgate cannot decide.
    {
      reason: 'store_unavailable',
      why: "the store fails on this key's lookup",
      path: `${p}/v1/chat/completions`,
      headers: [bearer(DOWN_KEY)],
      body: CHAT('gpt-4o-mini'),
    },
    {
      reason: 'authz_unavailable',
      why: "the store hangs on this key's lookup, past gateway.authzTimeoutMs (Envoy's timeout)",
      path: `${p}/v1beta/models/gemini-2.5-flash:generateContent`,
      headers: [generativeKey(HANG_KEY)],
      body: GEN,
      hint: /could not get an authorization decision/,
    },
    {
      reason: 'authz_unavailable',
      why: 'the same, messages shape',
      path: `${p}/v1/messages`,
      headers: [['x-api-key', HANG_KEY]],
      body: MESSAGES('claude-3-5-haiku-latest'),
    },
  ];
}

/** The error shape of a path: Gemini under /v1beta, Anthropic for messages (or anthropic-version), else OpenAI. */
function familyOf(path: string): 'gemini' | 'anthropic' | 'openai' {
  const bare = path.split('?')[0];
  if (/^(\/alt)?\/v1beta\//.test(bare) || /:(\w+)$/.test(bare)) return 'gemini';
  // As the routes answer: a path repeated before /messages is one answer for every client (OpenAI's shape).
  if (/^(\/alt)?\/v1\/messages(\/count_tokens)?$/.test(bare)) return 'anthropic';
  return 'openai';
}

describeE2E('every reason as the client sees it, through a real Envoy', () => {
  let gw: Gateway;
  let seq = 0;
  const seen = new Set<Reason>();
  beforeAll(async () => {
    const text = CONFIG(readFileSync(DEMO_CONFIG, 'utf8'));
    expect(text).toMatch(/authzTimeoutMs: 300[\s\S]*upstreamIdleTimeoutSeconds: 1\b/);
    const c = parseConfig(text, process.env);
    gw = await startGateway({
      config: text,
      // With an in-memory meter: the ledger a budget per window is counted against.
      store: new FaultyStore(new FileStore(c.groups, c.keys, { meter: true })),
      upstreamTargets: { alt: { host: '127.0.0.1', port: REFUSED_PORT } },
      upstream: {
        // x-test-silent: the upstream takes the request and never answers.
        override: (r) => r.headers['x-test-silent'] !== undefined,
      },
    });
  });
  afterAll(async () => gw?.close());

  /** Envoy's access-log lines once `ok` holds for them (the log is flushed every 20 ms). */
  async function accessLogWhen(
    ok: (lines: Array<Record<string, unknown>>) => boolean,
  ): Promise<Array<Record<string, unknown>>> {
    const until = Date.now() + 5000;
    while (!ok(gw.accessLog()) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    return gw.accessLog();
  }

  /** Sends one request and checks everything a client sees of a denial. */
  async function expectDenial(c: Case): Promise<Reply> {
    const id = `r${++seq}`;
    const method = c.method ?? 'POST';
    const headers: Array<[string, string]> = [
      ['content-type', c.contentType ?? 'application/json'],
      ['x-test-id', id],
      ...(c.headers ?? []),
    ];
    const reply = await gw.send(method, c.path, {
      headers,
      body: method === 'GET' ? undefined : c.body,
      http2: c.http2,
    });
    const status = REASONS[c.reason].status;
    expect(reply.status, reply.text).toBe(status);
    const h = reply.headers;
    expect(h['x-modelgate-reason']).toBe(c.reason);
    const hint = String(h['x-modelgate-hint']);
    expect(hint).toMatch(/^[\x20-\x7e]+$/);
    if (c.hint) expect(hint).toMatch(c.hint);
    expect(h['content-type']).toBe('application/json');
    expect(reply.text).toBe(errorBody(familyOf(c.path), status, c.reason, hint));
    if (status === 401) {
      expect(h['www-authenticate']).toBe(
        c.reason === 'key_missing'
          ? 'Bearer realm="modelgate"'
          : `Bearer realm="modelgate", error="invalid_token", error_description="${hint.replace(/["\\]/g, "'")}"`,
      );
    } else expect(h['www-authenticate']).toBeUndefined();
    if (status === 405) expect(h.allow).toBeDefined();
    // Nothing reached an upstream (unless modelgate allowed it), and no key was echoed.
    expect(gw.received.filter((r) => r.headers['x-test-id'] === id).length).toBe(c.reachedUpstream ? 1 : 0);
    for (const k of [...Object.values(DEMO_KEYS), DOWN_KEY, HANG_KEY])
      expect(reply.text + hint + String(h['www-authenticate'])).not.toContain(k);
    seen.add(c.reason);
    return reply;
  }

  const all = (['', '/alt'] as const).flatMap((p) =>
    cases(p).map((c) => ({
      ...c,
      title: `${REASONS[c.reason].status} ${c.reason}: ${c.why} (${c.method ?? 'POST'} ${c.path.replace(/sk-mg-\w+/, 'sk-mg-…')})`,
    })),
  );

  it.each(all)('$title', async (c) => {
    await expectDenial(c);
  });

  it("answers 403 budget_exhausted naming the reset once a key's budget per window is spent (trial: 0.00001 a day)", async () => {
    expect(CONFIG(readFileSync(DEMO_CONFIG, 'utf8'))).toContain('budget: { amount: 0.00001');
    // Soft mode: the budget's lone request runs (and costs more than the day's amount).
    const first = await gw.send('POST', '/v1/chat/completions', {
      headers: [bearer(DEMO_KEYS.trial), ['content-type', 'application/json']],
      body: CHAT('gpt-4o-mini'),
    });
    expect(first.status, first.text).toBe(200);
    await expectDenial({
      reason: 'budget_exhausted',
      why: 'trial',
      path: '/v1/chat/completions',
      headers: [bearer(DEMO_KEYS.trial)],
      body: CHAT('gpt-4o-mini'),
      hint: /^the key's daily budget \(0\.00001\) .* it resets at \d{4}-\d\d-\d\dT00:00:00\.000Z; lower max_tokens, or wait for the reset$/,
    });
  });

  it("answers 403 model_budget_exhausted naming the model and the reset once a key's budget on that model is spent (alice: 0.00001 a week on gpt-5.5)", async () => {
    expect(CONFIG(readFileSync(DEMO_CONFIG, 'utf8'))).toContain('modelBudgets: { gpt-5.5');
    // Soft mode: the budget's lone request runs (and costs more than the week's amount).
    const first = await gw.send('POST', '/v1/chat/completions', {
      headers: [bearer(alice), ['content-type', 'application/json']],
      body: CHAT('gpt-5.5'),
    });
    expect(first.status, first.text).toBe(200);
    await expectDenial({
      reason: 'model_budget_exhausted',
      why: 'alice on gpt-5.5',
      path: '/v1/chat/completions',
      headers: [bearer(alice)],
      body: CHAT('gpt-5.5'),
      hint: /^the key's weekly budget for the model "gpt-5\.5" \(0\.00001\) .* it resets at \d{4}-\d\d-\d\dT15:00:00\.000Z; use another model of your group, lower max_tokens, or wait for the reset$/,
    });
    // Her other models are not held to it.
    const other = await gw.send('POST', '/v1/chat/completions', {
      headers: [bearer(alice), ['content-type', 'application/json']],
      body: CHAT('gpt-4o-mini'),
    });
    expect(other.status, other.text).toBe(200);
  });

  it("answers 200 allowed with the upstream's answer", async () => {
    const reply = await gw.send('POST', '/v1/chat/completions', {
      headers: [bearer(alice), ['content-type', 'application/json']],
      body: CHAT('gpt-4o-mini'),
    });
    expect(reply.status).toBe(200);
    expect(reply.headers['x-modelgate-reason']).toBeUndefined();
    expect(reply.json().choices[0].message.content).toContain('as key alice');
    seen.add('allowed');
  });

  it('answers a body over gateway.maxRequestBytes with 413 body_too_large, over HTTP/1.1 and h2c, with and without content-length, and nothing goes upstream', async () => {
    // Envoy answers 413 itself before any Check (request_payload_too_large), except over HTTP/2 for
    // a body a little over the limit: then it checks the body cut to the limit, flagged
    // x-envoy-auth-partial-body: true, and modelgate answers 413 (ext_authz_denied). Either way the
    // client gets the same reason, hint and body, and the upstream nothing.
    const body = (n: number): string =>
      `{"messages":[{"role":"user","content":"${'x'.repeat(n)}"}],"model":"gpt-4o-mini"}`;
    const gen = (n: number): string => `{"contents":[{"role":"user","parts":[{"text":"${'x'.repeat(n)}"}]}]}`;
    const attempts: Array<[string, boolean, Array<[string, string]>, string]> = [
      ['/v1/chat/completions', false, [bearer(alice)], body(70_000)],
      [
        '/alt/v1/messages',
        false,
        [
          ['x-api-key', alice],
          ['transfer-encoding', 'chunked'],
        ],
        body(70_000),
      ],
      ['/v1/chat/completions', true, [bearer(alice)], body(70_000)],
      ['/v1beta/models/gemini-2.5-flash:generateContent', true, [['x-goog-api-key', alice]], gen(70_000)],
      ['/alt/v1beta/models/gemini-2.5-flash:generateContent', true, [bearer(alice)], gen(200_000)],
    ];
    for (const [path, http2, headers, b] of attempts) {
      await expectDenial({
        reason: 'body_too_large',
        why: '',
        path,
        http2,
        headers,
        body: b,
        hint: /^the request body is over the gateway's limit of 65536 bytes: send a smaller body$/,
      });
    }
    const log = (await accessLogWhen((ls) => ls.filter((l) => l.status === 413).length >= attempts.length)).filter(
      (l) => l.status === 413,
    );
    expect(log.length).toBe(attempts.length);
    for (const l of log) expect(['request_payload_too_large', 'ext_authz_denied']).toContain(l.details);
    // The HTTP/1.1 ones never reached modelgate.
    expect(log.filter((l) => l.protocol === 'HTTP/1.1').map((l) => l.details)).toEqual([
      'request_payload_too_large',
      'request_payload_too_large',
    ]);
  });

  it("answers 503 upstream_unavailable when the provider cannot be reached, in each protocol's shape", async () => {
    for (const [path, headers, body] of [
      ['/alt/v1/chat/completions', [bearer(alice)], CHAT('gpt-4o-mini')],
      ['/alt/v1/messages', [bearer(alice)], MESSAGES('claude-3-5-haiku-latest')],
      ['/alt/v1beta/models/gemini-2.5-flash:generateContent', [bearer(alice)], GEN],
    ] as const) {
      await expectDenial({
        reason: 'upstream_unavailable',
        why: '',
        path,
        headers: [...headers],
        body,
        hint: /could not reach the model provider/,
      });
    }
    const failed = (
      await accessLogWhen((ls) => ls.filter((l) => l.status === 503 && l.decision === 'allow').length >= 3)
    ).filter((l) => l.status === 503 && l.decision === 'allow');
    expect(failed.map((l) => [l.flags, l.upstream_cluster])).toEqual([
      ['UF', 'upstream_alt'],
      ['UF', 'upstream_alt'],
      ['UF', 'upstream_alt'],
    ]);
  });

  it("answers 504 upstream_timeout when the provider goes silent past gateway.upstreamIdleTimeoutSeconds, in each protocol's shape", async () => {
    const silent: Array<[string, [string, string], string]> = [
      ['/v1/chat/completions', bearer(alice), CHAT('gpt-4o-mini')],
      ['/v1/messages', ['x-api-key', alice], MESSAGES('claude-3-5-haiku-latest')],
      ['/v1beta/models/gemini-2.5-flash:generateContent', ['x-goog-api-key', alice], GEN],
    ];
    await Promise.all(
      silent.map(async ([path, key, body]) => {
        await expectDenial({
          reason: 'upstream_timeout',
          why: '',
          path,
          headers: [key, ['x-test-silent', '1']],
          body,
          hint: /did not answer in time/,
          reachedUpstream: true,
        });
      }),
    );
    const log = (await accessLogWhen((ls) => ls.filter((l) => l.status === 504).length >= 3)).filter(
      (l) => l.status === 504,
    );
    expect(log.map((l) => [l.flags, l.details])).toEqual(silent.map(() => ['SI', 'stream_idle_timeout']));
  });

  it('answers 400 stream_usage_required for a chat stream the meter could not meter (meter.unmeteredStreams: deny), and lets it through with include_usage', async () => {
    const stream = (extra: object) =>
      JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'hi' }], ...extra });
    for (const path of ['/v1/chat/completions', '/alt/v1/chat/completions']) {
      await expectDenial({
        reason: 'stream_usage_required',
        why: '',
        path,
        headers: [bearer(alice)],
        body: stream({}),
        hint: /stream_options/,
      });
    }
    const ok = await gw.send('POST', '/v1/chat/completions', {
      headers: [bearer(alice), ['content-type', 'application/json']],
      body: stream({ stream_options: { include_usage: true } }),
    });
    expect(ok.status).toBe(200);
    expect(ok.text).toContain('data: [DONE]');
  });

  it('answers 400 background_unsupported for a Responses API request in background mode (the meter never sees its answer), however `background` is spelled, and serves it without', async () => {
    const body = (background: unknown) => JSON.stringify({ model: 'gpt-4o-mini', input: 'hi', background });
    for (const [path, background] of [
      ['/v1/responses', true],
      ['/alt/v1/responses', 'true'],
      ['/responses', 1],
    ] as const) {
      await expectDenial({
        reason: 'background_unsupported',
        why: '',
        path,
        headers: [bearer(alice)],
        body: body(background),
        hint: /background/,
      });
    }
    const ok = await gw.send('POST', '/v1/responses', {
      headers: [bearer(alice), ['content-type', 'application/json']],
      body: body(false),
    });
    expect(ok.status, ok.text).toBe(200);
  });

  it('answers 400 hosted_tool_unpriced for a tool the provider bills per call that the price does not name, in each protocol, and serves the same request with a client function of that name', async () => {
    // The demo prices web_search (and google_search on Gemini), not these.
    const cases: Array<[string, [string, string], object]> = [
      [
        '/v1/responses',
        bearer(alice),
        { model: 'gpt-4o-mini', input: 'hi', tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] },
      ],
      [
        '/alt/v1/responses',
        bearer(alice),
        { model: 'gpt-4o-mini', input: 'hi', tools: [{ type: 'image_generation' }] },
      ],
      [
        '/v1/messages',
        ['x-api-key', alice],
        {
          model: 'claude-3-5-haiku-latest',
          max_tokens: 10,
          tools: [{ type: 'code_execution_20250522', name: 'code_execution' }],
          messages: [{ role: 'user', content: 'hi' }],
        },
      ],
      [
        '/v1beta/models/gemini-2.5-flash:generateContent',
        ['x-goog-api-key', alice],
        { contents: [{ parts: [{ text: 'hi' }] }], tools: [{ google_maps: {} }] },
      ],
    ];
    for (const [path, key, body] of cases) {
      await expectDenial({
        reason: 'hosted_tool_unpriced',
        why: '',
        path,
        headers: path.endsWith('/messages') ? [key, ['anthropic-version', '2023-06-01']] : [key],
        body: JSON.stringify(body),
        hint: /hosted tool "(code_interpreter|image_generation|code_execution|google_maps)"/,
      });
    }
    const ok = await gw.send('POST', '/v1/responses', {
      headers: [bearer(alice), ['content-type', 'application/json']],
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        input: 'hi',
        tools: [{ type: 'function', name: 'code_interpreter', parameters: {} }],
      }),
    });
    expect(ok.status, ok.text).toBe(200);
  });

  it("answers 400 service_tier_unpriced for a tier billed above the model's price (OpenAI priority, Anthropic fast mode and US-only inference), and serves the standard tiers", async () => {
    const cases: Array<[string, [string, string], object, RegExp]> = [
      [
        '/v1/chat/completions',
        bearer(alice),
        { model: 'gpt-4o-mini', service_tier: 'priority', messages: [{ role: 'user', content: 'hi' }] },
        /"service_tier": "priority"/,
      ],
      [
        '/v1/responses',
        bearer(alice),
        { model: 'gpt-4o-mini', service_tier: 'Scale', input: 'hi' },
        /"service_tier": "Scale"/,
      ],
      [
        '/v1/messages',
        ['x-api-key', alice],
        {
          model: 'claude-3-5-haiku-latest',
          max_tokens: 10,
          speed: 'fast',
          messages: [{ role: 'user', content: 'hi' }],
        },
        /"speed": "fast"/,
      ],
      [
        '/v1/messages',
        ['x-api-key', alice],
        {
          model: 'claude-3-5-haiku-latest',
          max_tokens: 10,
          inference_geo: 'us',
          messages: [{ role: 'user', content: 'hi' }],
        },
        /"inference_geo": "us"/,
      ],
    ];
    for (const [path, key, body, hint] of cases) {
      await expectDenial({
        reason: 'service_tier_unpriced',
        why: '',
        path,
        headers: path.endsWith('/messages') ? [key, ['anthropic-version', '2023-06-01']] : [key],
        body: JSON.stringify(body),
        hint,
      });
    }
    const ok = await gw.send('POST', '/v1/messages', {
      headers: [
        ['x-api-key', alice],
        ['anthropic-version', '2023-06-01'],
        ['content-type', 'application/json'],
      ],
      body: JSON.stringify({
        model: 'claude-3-5-haiku-latest',
        max_tokens: 10,
        speed: 'standard',
        inference_geo: 'global',
        service_tier: 'auto',
        messages: [{ role: 'user', content: 'hi' }],
      }),
    });
    expect(ok.status, ok.text).toBe(200);
  });

  it("answers 400 modality_unpriced for audio sent or audio and image asked for where the model's price names none, and serves the audio its price names", async () => {
    const cases: Array<[string, [string, string], object, RegExp]> = [
      [
        '/v1/chat/completions',
        bearer(alice),
        {
          model: 'gpt-4o-mini',
          messages: [
            { role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] },
          ],
        },
        /"input_audio" part.*"audioInput"/,
      ],
      [
        '/v1/chat/completions',
        bearer(alice),
        {
          model: 'gpt-4o-mini',
          modalities: ['text', 'audio'],
          audio: { voice: 'alloy', format: 'wav' },
          messages: [{ role: 'user', content: 'hi' }],
        },
        /"modalities": "audio".*"audioOutput"/,
      ],
      [
        '/v1beta/models/gemini-2.5-flash:generateContent',
        ['x-goog-api-key', alice],
        { contents: [{ parts: [{ text: 'hi' }] }], generationConfig: { responseModalities: ['TEXT', 'IMAGE'] } },
        /responseModalities "IMAGE".*"imageOutput"/,
      ],
      [
        '/v1beta/models/gemini-3.8-flash:generateContent',
        ['x-goog-api-key', alice],
        { contents: [{ parts: [{ inlineData: { mimeType: 'audio/wav', data: 'AAAA' } }] }] },
        /"mimeType" is audio/,
      ],
    ];
    for (const [path, key, body, hint] of cases)
      await expectDenial({
        reason: 'modality_unpriced',
        why: '',
        path,
        headers: [key],
        body: JSON.stringify(body),
        hint,
      });
    // gemini-2.5-flash prices audio input in the demo: served.
    const ok = await gw.send('POST', '/v1beta/models/gemini-2.5-flash:generateContent', {
      headers: [
        ['x-goog-api-key', alice],
        ['content-type', 'application/json'],
      ],
      body: JSON.stringify({
        contents: [{ parts: [{ text: 'hi' }, { inlineData: { mimeType: 'audio/wav', data: 'AAAA' } }] }],
      }),
    });
    expect(ok.status, ok.text).toBe(200);
  });

  it('answers 400 body_invalid for a field the meter reads sent twice with different values, and for a Gemini body it cannot read (compressed, not JSON)', async () => {
    await expectDenial({
      reason: 'body_invalid',
      why: '',
      path: '/v1/chat/completions',
      headers: [bearer(alice)],
      body: '{"model":"gpt-4o-mini","n":8,"messages":[{"role":"user","content":"hi"}],"n":1}',
      hint: /"n" appears more than once/,
    });
    await expectDenial({
      reason: 'body_invalid',
      why: '',
      path: '/v1beta/models/gemini-2.5-flash:generateContent',
      headers: [['x-goog-api-key', alice]],
      body: '{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"candidateCount":8,"candidateCount":1}}',
      hint: /"candidateCount" appears more than once/,
    });
    await expectDenial({
      reason: 'body_invalid',
      why: '',
      path: '/v1beta/models/gemini-2.5-flash:generateContent',
      headers: [['x-goog-api-key', alice]],
      body: '{"contents": [',
      hint: /not a usable JSON object/,
    });
    await expectDenial({
      reason: 'content_type_unsupported',
      why: '',
      path: '/v1beta/models/gemini-2.5-flash:generateContent',
      headers: [['x-goog-api-key', alice]],
      contentType: 'application/json; charset=utf-7',
      body: '{"contents":[{"parts":[{"text":"hi"}]}]}',
      hint: /charset=utf-7/,
    });
    const same = await gw.send('POST', '/v1/chat/completions', {
      headers: [bearer(alice), ['content-type', 'application/json']],
      body: '{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"max_tokens":5}',
    });
    expect(same.status, same.text).toBe(200);
  });

  it("answers 429 console_rate_limited (the console's own JSON, retry-after) past the per-address limit of its API, through Envoy", async () => {
    const answers: Reply[] = [];
    for (let i = 0; i < 4; i++)
      answers.push(
        await gw.send('POST', '/console/api/access', {
          headers: [['x-modelgate-console-key', encodeURIComponent(alice)]],
          body: '{}',
        }),
      );
    expect(answers.slice(0, 3).map((a) => a.status)).toEqual([200, 200, 200]);
    const limited = answers[3];
    expect(limited.status).toBe(429);
    expect(limited.headers['x-modelgate-reason']).toBe('console_rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(limited.json()).toMatchObject({
      error: {
        reason: 'console_rate_limited',
        status: 429,
        hint: expect.stringMatching(/^too many console requests from this address: retry in \d+ s$/),
      },
    });
    expect(limited.text).not.toContain(alice);
    seen.add('console_rate_limited');
  });

  it("answers 429 rate_limited (Envoy's rate limit filter, the embedded engine) to the demo key grace's fourth request in a minute", async () => {
    const send = () =>
      gw.send('POST', '/v1/chat/completions', {
        headers: [bearer(DEMO_KEYS.grace), ['content-type', 'application/json']],
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
      });
    // Four in a row, within one minute window (its reset would let a fifth through): retried once at the next window if
    // split.
    let answers: Reply[] = [];
    for (let attempt = 0; attempt < 2 && !answers.some((a) => a.status === 429); attempt++)
      answers = [await send(), await send(), await send(), await send()];
    const limited = answers.find((a) => a.status === 429)!;
    expect(limited.headers['x-modelgate-reason']).toBe('rate_limited');
    expect(limited.headers['x-modelgate-hint']).toMatch(
      /^rate limit reached: the key "grace" may use 3 requests per minute; the limit reached resets in \d+ s: retry then$/,
    );
    expect(limited.json()).toMatchObject({ error: { type: 'rate_limit_error', code: 'rate_limited' } });
    seen.add('rate_limited');
  });

  it('has produced every reason of the catalogue a client can cause, and names where the others are proven', () => {
    const missing = (Object.keys(REASONS) as Reason[]).filter((r) => !seen.has(r) && !NOT_THROUGH_ENVOY[r]);
    expect(missing).toEqual([]);
    for (const r of Object.keys(NOT_THROUGH_ENVOY) as Reason[]) expect(seen.has(r)).toBe(false);
  });
});

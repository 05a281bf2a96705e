/**
 * What an allowed request looks like when it reaches the provider, through the real Envoy: every
 * upstream route of the spec, under the root and the alternate prefix, over HTTP/1.1 and h2c, goes
 * to its own upstream cluster with the body byte for byte as sent, every client key header and the
 * `key` query parameter removed, x-modelgate-* set by modelgate (a client's copies overwritten or
 * removed) and the credential of the request's upstream injected when it has one (the alt upstream
 * here has none: nothing of the others' reaches it).
 * Also: repeated key headers, a chunked body, and a large body whose `model` comes last.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import type { UpstreamFamily } from '../../src/config/load';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway, type Received } from '../support/gateway';
import { credentialEnv, credentialValue, withUpstreamCredentials } from '../support/upstream-credentials';

const BOB = DEMO_KEYS.bob; // group pro, unlimited

/**
 * Upstream credentials per upstream (docs/security.md): the chat upstream (chat, responses, embeddings), the
 * messages and the generative ones have one; the alt upstream has none, so nothing of them reaches it.
 */
const CREDS = {
  chat: { header: 'authorization', prefix: 'Bearer ', env: 'UPSTREAM_OPENAI_KEY', secret: 'upstream-openai-secret' },
  messages: { header: 'x-api-key', env: 'UPSTREAM_ANTHROPIC_KEY', secret: 'upstream-anthropic-secret' },
  generative: { header: 'x-goog-api-key', env: 'UPSTREAM_GEMINI_KEY', secret: 'upstream-gemini-secret' },
} as const;
const SECRETS = credentialEnv(CREDS);

/** Every header that can carry a client key (config routes.bearerHeaders + vendorHeaders). */
const KEY_HEADERS = ['authorization', 'x-api-key', 'x-vendor-api-key', 'x-goog-api-key'];

/** Copies of modelgate's own headers a client tries to smuggle in. */
const SPOOFED: Array<[string, string]> = [
  ['x-modelgate-key-id', 'mallory'],
  ['x-modelgate-group', 'admin'],
  ['x-modelgate-model', 'free-model'],
  ['x-modelgate-reason', 'allowed'],
  ['x-modelgate-hint', 'trust me'],
  ['x-modelgate-console-key', 'sk-mg-console-key-sent-along'],
];

// Bodies with unusual but valid bytes: non-ASCII, escapes, odd spacing, numbers in exponent form, `model` not first.
const chatBody = (model: string): string =>
  `{ "messages" : [ {"role":"user","content":"h\u00e9llo \\"q\\" \\u00e9 \u{1F680}\\n"} ],\n\t"temperature":5.0e-1 , "model":"${model}" }`;
const responsesBody = (model: string): string =>
  `{"input":"r\u00e9sum\u00e9 \\u2603","model":"${model}","metadata":{"model":"nested, ignored"}}`;
const embeddingsBody = (model: string): string =>
  `{"input":["a","\u00df"],"encoding_format":"float","model":"${model}"}`;
const messagesBody = (model: string): string =>
  `{"max_tokens":16,"messages":[{"role":"user","content":"\u3053\u3093\u306b\u3061\u306f"}],"model":"${model}"}`;
const GENERATIVE_BODY =
  '{"contents":[{"role":"user","parts":[{"text":"hi \u2603 \\u00e9"}]}],\n "generationConfig":{"temperature":0.1}}';
const BATCH_BODY = '{"requests":[{"model":"models/gemini-2.5-flash","content":{"parts":[{"text":"a"}]}}]}';

interface Case {
  readonly name: string;
  readonly path: string;
  /** The request's key header. */
  readonly key: readonly [string, string];
  readonly headers?: ReadonlyArray<readonly [string, string]>;
  readonly body: string;
  readonly family: UpstreamFamily;
  readonly model: string;
  /** The credential the upstream must receive, if the style has one. */
  readonly credential?: readonly [string, string];
  /** The path and query the upstream must receive (default: the request's). */
  readonly upstreamPath?: string;
}

function cases(prefix: '' | '/alt'): Case[] {
  const fam = (f: UpstreamFamily): UpstreamFamily => (prefix ? 'alt' : f);
  // The alt upstream has no credential: its routes get none, whatever their protocol style.
  const openai: Case['credential'] = prefix ? undefined : ['authorization', credentialValue(CREDS.chat)];
  const anthropic: Case['credential'] = prefix ? undefined : ['x-api-key', credentialValue(CREDS.messages)];
  const gemini: Case['credential'] = prefix ? undefined : ['x-goog-api-key', credentialValue(CREDS.generative)];
  const bearer = ['authorization', `Bearer ${BOB}`] as const;
  // The alternate generative route also reads the Bearer headers (routes.vendorHeaders + bearerHeaders).
  const generativeKey = prefix ? (['authorization', `Bearer ${BOB}`] as const) : (['x-goog-api-key', BOB] as const);
  return [
    {
      name: 'chat completions',
      path: `${prefix}/v1/chat/completions`,
      key: bearer,
      body: chatBody('gpt-4o'),
      family: fam('chat'),
      model: 'gpt-4o',
      credential: openai,
    },
    {
      name: 'chat completions, key in x-api-key',
      path: `${prefix}/v1/chat/completions`,
      key: ['x-api-key', BOB],
      body: chatBody('gpt-4o-mini'),
      family: fam('chat'),
      model: 'gpt-4o-mini',
      credential: openai,
    },
    {
      name: 'responses',
      path: `${prefix}/v1/responses`,
      key: bearer,
      body: responsesBody('o3'),
      family: fam('chat'),
      model: 'o3',
      credential: openai,
    },
    // The coding agents' paths (Base URL {base_url}, docs/spec.md §4.1 row 1): upstream as the provider's own /v1/...
    // path.
    {
      name: "a coding agent's responses (Codex CLI's POST /responses)",
      path: `${prefix}/responses`,
      key: bearer,
      body: responsesBody('gpt-6.1-sol'),
      family: fam('chat'),
      model: 'gpt-6.1-sol',
      credential: openai,
      upstreamPath: `${prefix}/v1/responses`,
    },
    {
      name: "a coding agent's chat completions",
      path: `${prefix}/chat/completions`,
      key: bearer,
      body: chatBody('gpt-4o'),
      family: fam('chat'),
      model: 'gpt-4o',
      credential: openai,
      upstreamPath: `${prefix}/v1/chat/completions`,
    },
    {
      name: 'embeddings',
      path: `${prefix}/v1/embeddings`,
      key: bearer,
      body: embeddingsBody('text-embedding-3-large'),
      family: fam('chat'),
      model: 'text-embedding-3-large',
      credential: openai,
    },
    {
      name: 'messages',
      path: `${prefix}/v1/messages`,
      key: ['x-api-key', BOB],
      headers: [['anthropic-version', '2023-06-01']],
      body: messagesBody('claude-sonnet-4-5'),
      family: fam('messages'),
      model: 'claude-sonnet-4-5',
      credential: anthropic,
    },
    {
      name: 'messages, key in Authorization',
      path: `${prefix}/v1/messages`,
      key: bearer,
      headers: [['anthropic-version', '2023-06-01']],
      body: messagesBody('claude-sonnet-4-5'),
      family: fam('messages'),
      model: 'claude-sonnet-4-5',
      credential: anthropic,
    },
    {
      name: 'messages count_tokens',
      path: `${prefix}/v1/messages/count_tokens`,
      key: ['x-api-key', BOB],
      headers: [['anthropic-version', '2023-06-01']],
      body: messagesBody('claude-sonnet-4-5'),
      family: fam('messages'),
      model: 'claude-sonnet-4-5',
      credential: anthropic,
    },
    {
      name: 'generateContent',
      path: `${prefix}/v1beta/models/gemini-2.5-pro:generateContent`,
      key: generativeKey,
      body: GENERATIVE_BODY,
      family: fam('generative'),
      model: 'gemini-2.5-pro',
      credential: gemini,
    },
    {
      name: 'generateContent, key in x-vendor-api-key',
      path: `${prefix}/v1beta/models/gemini-2.5-flash:generateContent`,
      key: ['x-vendor-api-key', BOB],
      body: GENERATIVE_BODY,
      family: fam('generative'),
      model: 'gemini-2.5-flash',
      credential: gemini,
    },
    {
      name: 'streamGenerateContent, with an empty key= removed from the query',
      path: `${prefix}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=`,
      key: generativeKey,
      body: GENERATIVE_BODY,
      family: fam('generative'),
      model: 'gemini-2.5-flash',
      credential: gemini,
      upstreamPath: `${prefix}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`,
    },
    {
      name: 'countTokens',
      path: `${prefix}/v1beta/models/gemini-2.5-pro:countTokens`,
      key: generativeKey,
      body: GENERATIVE_BODY,
      family: fam('generative'),
      model: 'gemini-2.5-pro',
      credential: gemini,
    },
    {
      name: 'embedContent',
      path: `${prefix}/v1beta/models/gemini-2.5-flash:embedContent`,
      key: generativeKey,
      body: GENERATIVE_BODY,
      family: fam('generative'),
      model: 'gemini-2.5-flash',
      credential: gemini,
    },
    {
      name: 'batchEmbedContents',
      path: `${prefix}/v1beta/models/gemini-2.5-flash:batchEmbedContents`,
      key: generativeKey,
      body: BATCH_BODY,
      family: fam('generative'),
      model: 'gemini-2.5-flash',
      credential: gemini,
    },
    {
      name: 'chat completions with a query, an empty key parameter removed',
      path: `${prefix}/v1/chat/completions?api-version=2024-10-21&key=`,
      key: bearer,
      body: chatBody('gpt-4o'),
      family: fam('chat'),
      model: 'gpt-4o',
      credential: openai,
      upstreamPath: `${prefix}/v1/chat/completions?api-version=2024-10-21`,
    },
    // Envoy re-serialises the query once it removes a parameter: sorted by name, a bare flag gets "=".
    {
      name: 'a query with a bare flag, re-serialised by Envoy',
      path: `${prefix}/v1/embeddings?b=2&flag&a=1&key=`,
      key: bearer,
      body: embeddingsBody('text-embedding-3-large'),
      family: fam('chat'),
      model: 'text-embedding-3-large',
      credential: openai,
      upstreamPath: `${prefix}/v1/embeddings?a=1&b=2&flag=`,
    },
  ];
}

describeE2E('allowed requests, as the provider receives them through a real Envoy', () => {
  let gw: Gateway;
  let seq = 0;
  beforeAll(async () => {
    gw = await startGateway({ config: (demo) => withUpstreamCredentials(demo, CREDS), env: SECRETS });
  });
  afterAll(async () => gw?.close());

  /** Sends one request tagged with a unique x-test-id and returns the reply and what the upstream received. */
  async function through(
    c: Pick<Case, 'path' | 'key' | 'headers' | 'body'>,
    http2: boolean,
    extra: ReadonlyArray<readonly [string, string]> = [],
  ) {
    const id = `t${++seq}`;
    const reply = await gw.send('POST', c.path, {
      http2,
      body: c.body,
      headers: [['content-type', 'application/json'], ['x-test-id', id], c.key, ...(c.headers ?? []), ...extra],
    });
    const got = gw.received.filter((r) => r.headers['x-test-id'] === id);
    return { reply, got };
  }

  /** Header lines of one name as the upstream received them (repeats kept apart). */
  const lines = (r: Received, name: string): string[] =>
    r.rawHeaders.flatMap((v, i) => (i % 2 === 1 && r.rawHeaders[i - 1].toLowerCase() === name ? [v] : []));

  const all = (['', '/alt'] as const).flatMap((prefix) =>
    cases(prefix).flatMap((c) =>
      [false, true].map((http2) => ({
        ...c,
        http2,
        title: `${prefix || 'root'} ${c.name} over ${http2 ? 'h2c' : 'HTTP/1.1'}: ${c.path} → upstream_${c.family}`,
      })),
    ),
  );

  it.each(all)('$title', async (c) => {
    // A key header this route does not read is removed too (the alternate generative routes read them all).
    const generative = c.path.includes('/v1beta/');
    const stray: Array<[string, string]> = !generative
      ? [['x-goog-api-key', 'not-read-here']]
      : c.family === 'alt'
        ? []
        : [['authorization', 'Bearer not-read-here']];
    const { reply, got } = await through(c, c.http2, [...SPOOFED, ...stray, ['x-trace', 'kept']]);
    expect(reply.status, reply.text).toBe(200);
    expect(got).toHaveLength(1);
    const r = got[0];
    expect(r.family).toBe(c.family);
    expect(r.method).toBe('POST');
    expect(r.url).toBe(c.upstreamPath ?? c.path);
    // The body, byte for byte.
    expect(r.body.equals(Buffer.from(c.body)), 'body bytes unchanged').toBe(true);
    // modelgate's headers, each exactly once, whatever the client sent.
    expect(lines(r, 'x-modelgate-key-id')).toEqual(['bob']);
    expect(lines(r, 'x-modelgate-group')).toEqual(['pro']);
    expect(lines(r, 'x-modelgate-model')).toEqual([c.model]);
    expect(r.headers['x-modelgate-reason']).toBeUndefined();
    expect(r.headers['x-modelgate-hint']).toBeUndefined();
    // No client key header; the style's own credential if it has one.
    for (const h of KEY_HEADERS) {
      if (c.credential?.[0] === h) expect(lines(r, h), h).toEqual([c.credential[1]]);
      else expect(r.headers[h], h).toBeUndefined();
    }
    expect(JSON.stringify(r.rawHeaders) + r.url).not.toContain(BOB);
    // No other upstream's credential, anywhere in the request (docs/security.md).
    for (const [family, cred] of Object.entries(CREDS)) {
      if (family !== c.family)
        expect(JSON.stringify(r.rawHeaders) + r.url, `${family}'s credential at upstream_${c.family}`).not.toContain(
          cred.secret,
        );
    }
    // modelgate's own credential header never leaves (docs/security.md).
    expect(r.headers['x-modelgate-console-key']).toBeUndefined();
    // Everything else the client sent goes on.
    expect(r.headers['x-trace']).toBe('kept');
    expect(r.headers['content-type']).toBe('application/json');
    if (c.headers) for (const [h, v] of c.headers) expect(r.headers[h]).toBe(v);
    // The demo upstream's answer reached the client (it names the key id modelgate set, where it has text).
    if (/"text"|"content"/.test(reply.text) && !String(reply.headers['content-type']).includes('event-stream'))
      expect(reply.text).toContain('as key bob;');
  });

  it('took every upstream route of the rendered table, each to its own cluster', async () => {
    const hcm = (parseYaml(gw.envoyYaml) as any).static_resources.listeners[0].filter_chains[0].filters[0].typed_config; // eslint-disable-line @typescript-eslint/no-explicit-any
    const upstreamRoutes = (
      hcm.route_config.virtual_hosts[0].routes as Array<{ name: string; route?: { cluster: string } }>
    ).filter((r) => r.route?.cluster.startsWith('upstream_'));
    // 14 spec endpoints (root and alternate) and the coding agents' /responses and /chat/completions (root and
    // alternate).
    expect(upstreamRoutes.length).toBe(18);
    // The access log is written every 20 ms (later on a busy machine): wait for every route's line.
    const log = await gw.accessLogWhen((lines) =>
      upstreamRoutes.every((r) => lines.some((l) => l.status === 200 && l.route === r.name)),
    );
    const taken = new Map(
      log.filter((l) => l.status === 200).map((l) => [String(l.route), String(l.upstream_cluster)]),
    );
    expect(upstreamRoutes.filter((r) => taken.get(r.name) !== r.route!.cluster).map((r) => r.name)).toEqual([]);
  });

  /**
   * Node's http2 client refuses to send Authorization twice, so the h2c cases go through curl
   * (--http2-prior-knowledge), which sends header lines exactly as given.
   */
  async function twiceOverH2c(headers: ReadonlyArray<readonly [string, string]>, body: string) {
    const id = `t${++seq}`;
    const args = [
      '-s',
      '--http2-prior-knowledge',
      '-D',
      '-',
      '-o',
      '-',
      '-X',
      'POST',
      `${gw.baseUrl}/v1/chat/completions`,
      '-H',
      'content-type: application/json',
      '-H',
      `x-test-id: ${id}`,
      ...headers.flatMap(([k, v]) => ['-H', `${k}: ${v}`]),
      '--data-binary',
      body,
    ];
    const out = await new Promise<string>((resolve, reject) =>
      execFile('curl', args, (err, stdout) => (err ? reject(err) : resolve(stdout))),
    );
    const [head, ...rest] = out.split('\r\n\r\n');
    const status = Number(/^HTTP\/2 (\d+)/.exec(head)?.[1]);
    const reason = /^x-modelgate-reason: (.*)$/m.exec(head)?.[1].trim();
    const hint = /^x-modelgate-hint: (.*)$/m.exec(head)?.[1].trim() ?? '';
    return {
      status,
      reason,
      hint,
      text: rest.join('\r\n\r\n'),
      got: gw.received.filter((r) => r.headers['x-test-id'] === id),
    };
  }

  describe('repeated and extra key headers', () => {
    const chat = { path: '/v1/chat/completions', body: chatBody('gpt-4o') };
    const bearer = ['authorization', `Bearer ${BOB}`] as const;
    /** One request over HTTP/1.1 (the harness) or h2c (curl), as status, reason, hint and what went upstream. */
    const twice = async (extra: ReadonlyArray<readonly [string, string]>, http2: boolean) => {
      if (http2) return twiceOverH2c([bearer, ...extra], chat.body);
      const { reply, got } = await through({ ...chat, key: bearer }, false, extra);
      return {
        status: reply.status,
        reason: reply.headers['x-modelgate-reason'],
        hint: String(reply.headers['x-modelgate-hint'] ?? ''),
        text: reply.text,
        got,
      };
    };
    for (const http2 of [false, true]) {
      const over = http2 ? 'h2c' : 'HTTP/1.1';
      it(`refuses Authorization sent twice (even with the same key) with 401 key_malformed, over ${over}, and nothing goes upstream`, async () => {
        const r = await twice([['authorization', `Bearer ${BOB}`]], http2);
        expect(r.status).toBe(401);
        expect(r.reason).toBe('key_malformed');
        expect(r.hint).toMatch(/authorization header was sent more than once/);
        expect(r.got).toEqual([]);
      });
      it(`refuses Authorization twice with two different keys with 401 key_malformed, over ${over}`, async () => {
        const r = await twice([['authorization', `Bearer ${DEMO_KEYS.alice}`]], http2);
        expect(r.status).toBe(401);
        expect(r.reason).toBe('key_malformed');
        expect(r.text).not.toContain(BOB);
        expect(r.got).toEqual([]);
      });
      it(`allows the same key in Authorization and x-api-key and removes both, over ${over}`, async () => {
        const r = await twice([['x-api-key', BOB]], http2);
        expect(r.status).toBe(200);
        expect(r.got[0].headers['x-api-key']).toBeUndefined();
        expect(r.got[0].headers.authorization).toBe(`Bearer ${SECRETS.UPSTREAM_OPENAI_KEY}`);
      });
      it(`refuses two different keys in Authorization and x-api-key with 401 key_conflict, over ${over}`, async () => {
        const r = await twice([['x-api-key', DEMO_KEYS.alice]], http2);
        expect(r.status).toBe(401);
        expect(r.reason).toBe('key_conflict');
        expect(r.got).toEqual([]);
      });
    }
  });

  it('forwards a chunked HTTP/1.1 body byte for byte', async () => {
    const body = chatBody('gpt-4o');
    const { reply, got } = await through(
      { path: '/v1/chat/completions', key: ['authorization', `Bearer ${BOB}`], body },
      false,
      [['transfer-encoding', 'chunked']],
    );
    expect(reply.status).toBe(200);
    expect(got[0].body.equals(Buffer.from(body))).toBe(true);
  });

  for (const http2 of [false, true]) {
    it(`reads the model from an 8 MiB body whose "model" comes last and forwards the body byte for byte, over ${http2 ? 'h2c' : 'HTTP/1.1'}`, async () => {
      const filler = 'x\u00e9'.repeat(4 * 1024 * 1024 - 40);
      const body = `{"messages":[{"role":"user","content":"${filler}"}],"model":"gpt-4o"}`;
      expect(Buffer.byteLength(body)).toBeGreaterThan(8 * 1024 * 1024);
      const { reply, got } = await through(
        { path: '/alt/v1/chat/completions', key: ['authorization', `Bearer ${BOB}`], body },
        http2,
      );
      expect(reply.status).toBe(200);
      expect(got).toHaveLength(1);
      const sha = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');
      expect(got[0].body.length).toBe(Buffer.byteLength(body));
      expect(sha(got[0].body)).toBe(sha(body));
      expect(got[0].headers['x-modelgate-model']).toBe('gpt-4o');
      expect(got[0].family).toBe('alt');
    }, 60_000);
  }
});

/**
 * Operator credentials belong to an upstream, not to a protocol style. With a
 * credential on every upstream (the alt upstream's in the same header as the chat upstream's, with
 * another value), every upstream route of the spec, under the root and the alternate prefix, over
 * HTTP/1.1 and h2c, goes through the real Envoy to its own recording server, which receives exactly
 * its own credential and nothing of any other upstream's. Before the fix, `POST /alt/v1/chat/completions`
 * and `POST /alt/v1/messages` delivered the operator's OpenAI and Anthropic keys to the alt host.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { UpstreamFamily } from '../../src/config/load';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway, type Received } from '../support/gateway';
import {
  credentialEnv,
  credentialValue,
  withUpstreamCredentials,
  type TestCredential,
} from '../support/upstream-credentials';

const BOB = DEMO_KEYS.bob;

const CREDS: Record<UpstreamFamily, TestCredential> = {
  chat: { header: 'authorization', prefix: 'Bearer ', env: 'CRED_CHAT', secret: 'operator-openai-7c1e' },
  messages: { header: 'x-api-key', env: 'CRED_MESSAGES', secret: 'operator-anthropic-5d2a' },
  generative: { header: 'x-goog-api-key', env: 'CRED_GENERATIVE', secret: 'operator-gemini-9b3f' },
  // Another party: the same header as the chat upstream's, its own value.
  alt: { header: 'authorization', prefix: 'Bearer ', env: 'CRED_ALT', secret: 'alt-party-token-1f4c' },
};
/** The header names of every credential: none but the upstream's own may carry anything upstream. */
const CREDENTIAL_HEADERS = [...new Set(Object.values(CREDS).map((c) => c.header))];

const CHAT = '{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}';
const RESPONSES = '{"model":"o3","input":"hi"}';
const EMBEDDINGS = '{"model":"text-embedding-3-large","input":"hi"}';
const MESSAGES = '{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}';
const GENERATIVE = '{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}';

/** Every upstream route of the spec (docs/spec.md §4.2, §1 for /alt): path, body, the upstream it goes to. */
function routes(prefix: '' | '/alt'): Array<{
  path: string;
  body: string;
  family: UpstreamFamily;
  key: [string, string];
  headers: Array<[string, string]>;
}> {
  const to = (f: UpstreamFamily): UpstreamFamily => (prefix ? 'alt' : f);
  const bearer: [string, string] = ['authorization', `Bearer ${BOB}`];
  const vendor: [string, string] = prefix ? bearer : ['x-goog-api-key', BOB];
  const anthropic: Array<[string, string]> = [['anthropic-version', '2023-06-01']];
  return [
    { path: `${prefix}/v1/chat/completions`, body: CHAT, family: to('chat'), key: bearer, headers: [] },
    { path: `${prefix}/v1/responses`, body: RESPONSES, family: to('chat'), key: bearer, headers: [] },
    { path: `${prefix}/v1/embeddings`, body: EMBEDDINGS, family: to('chat'), key: bearer, headers: [] },
    {
      path: `${prefix}/v1/messages`,
      body: MESSAGES,
      family: to('messages'),
      key: ['x-api-key', BOB],
      headers: anthropic,
    },
    {
      path: `${prefix}/v1/messages/count_tokens`,
      body: MESSAGES,
      family: to('messages'),
      key: ['x-api-key', BOB],
      headers: anthropic,
    },
    ...['generateContent', 'streamGenerateContent', 'countTokens', 'embedContent', 'batchEmbedContents'].map((m) => ({
      path: `${prefix}/v1beta/models/gemini-2.5-flash:${m}`,
      body: GENERATIVE,
      family: to('generative'),
      key: vendor,
      headers: [] as Array<[string, string]>,
    })),
  ];
}

describeE2E('operator credentials reach only their own upstream, through a real Envoy (docs/security.md)', () => {
  let gw: Gateway;
  let seq = 0;
  beforeAll(async () => {
    gw = await startGateway({ config: (demo) => withUpstreamCredentials(demo, CREDS), env: credentialEnv(CREDS) });
  });
  afterAll(async () => gw?.close());

  const lines = (r: Received, name: string): string[] =>
    r.rawHeaders.flatMap((v, i) => (i % 2 === 1 && r.rawHeaders[i - 1].toLowerCase() === name ? [v] : []));

  const all = (['', '/alt'] as const)
    .flatMap((prefix) => routes(prefix))
    .flatMap((r) => [false, true].map((http2) => ({ ...r, http2, over: http2 ? 'h2c' : 'HTTP/1.1' })));

  it.each(all)('POST $path over $over reaches upstream_$family with its credential and no other', async (c) => {
    const id = `cred-${++seq}`;
    // The client also sends the credential headers its route does not read a key from (values that must never survive).
    const reads = c.path.startsWith('/alt/v1beta/')
      ? ['authorization', 'x-api-key', 'x-goog-api-key']
      : c.path.startsWith('/v1beta/')
        ? ['x-goog-api-key']
        : ['authorization', 'x-api-key'];
    const forged = ['authorization', 'x-api-key', 'x-goog-api-key']
      .filter((h) => !reads.includes(h))
      .map((h): [string, string] => [h, h === 'authorization' ? 'Bearer client-forged' : 'client-forged']);
    const reply = await gw.send('POST', c.path, {
      http2: c.http2,
      body: c.body,
      headers: [['content-type', 'application/json'], ['x-test-id', id], c.key, ...c.headers, ...forged],
    });
    expect(reply.status, reply.text).toBe(200);
    const got = gw.received.filter((r) => r.headers['x-test-id'] === id);
    expect(got).toHaveLength(1);
    const r = got[0];
    expect(r.family).toBe(c.family);
    const own = CREDS[c.family];
    expect(lines(r, own.header)).toEqual([credentialValue(own)]);
    for (const h of CREDENTIAL_HEADERS.filter((x) => x !== own.header)) expect(lines(r, h), h).toEqual([]);
    const seen = `${r.url}\n${JSON.stringify(r.rawHeaders)}\n${JSON.stringify(r.trailers)}`;
    for (const [family, cred] of Object.entries(CREDS))
      if (family !== c.family)
        expect(seen, `${family}'s credential at upstream_${c.family}`).not.toContain(cred.secret);
    expect(seen).not.toContain('client-forged');
    expect(seen).not.toContain(BOB);
  });

  it('sent a request to every upstream, each through its own recording server', () => {
    const families = new Set(gw.received.map((r) => r.family));
    expect([...families].sort()).toEqual(['alt', 'chat', 'generative', 'messages']);
    const ports = new Set(Object.values(gw.upstreams).map((u) => u.port));
    expect(ports.size).toBe(4);
  });
});

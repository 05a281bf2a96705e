/**
 * Key material never reaches an upstream through what modelgate is never shown, through a real Envoy
 * on the rendered bundle: credential headers no route reads (`api-key`, `cookie`, `x_api_key`, ...)
 * are removed on every upstream route (the upstream credential modelgate sets still arrives),
 * underscore headers are dropped rather than read, and HTTP/2 request trailers never reach an HTTP/2
 * upstream. The service side of key hygiene: test/check/key-in-url.test.ts, test/check/key-as-model.test.ts.
 */
import * as http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway, type Received } from '../support/gateway';
import { withUpstreamCredentials } from '../support/upstream-credentials';

const ALICE = DEMO_KEYS.alice;
const BOB = DEMO_KEYS.bob;
const CHAT = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
const JSON_TYPE: [string, string] = ['content-type', 'application/json'];

/** Every header name and value, trailers and the request line an upstream received, as one text. */
function everything(r: Received): string {
  return [r.method, r.url, ...r.rawHeaders, ...Object.entries(r.trailers).flat()].join('\n');
}

describeE2E('headers and trailers nobody reads never reach an upstream', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({
      config: (demo) =>
        withUpstreamCredentials(demo, {
          chat: {
            header: 'authorization',
            prefix: 'Bearer ',
            env: 'UPSTREAM_OPENAI_KEY',
            secret: 'sk-upstream-secret',
          },
        }),
      env: { UPSTREAM_OPENAI_KEY: 'sk-upstream-secret' },
    });
  });
  afterAll(async () => gw?.close());

  const unread: Array<[string, string]> = [
    ['api-key', BOB],
    ['proxy-authorization', `Bearer ${BOB}`],
    ['cookie', `session=${BOB}`],
    ['x_api_key', BOB],
    ['X-Api_Key', BOB],
    ['anthropic-api-key', BOB],
    ['x-goog-api-key', BOB],
    ['x-vendor-api-key', BOB],
    ['x-amz-security-token', BOB],
  ];

  it.each([false, true])(
    'strips every credential header of an allowed request (HTTP/2: %s), and the upstream credential modelgate sets arrives',
    async (h2) => {
      const before = gw.received.length;
      const r = await gw.send('POST', '/v1/chat/completions', {
        headers: [['authorization', `Bearer ${ALICE}`], JSON_TYPE, ...unread],
        body: CHAT,
        http2: h2,
      });
      expect(r.status).toBe(200);
      const got = gw.received.slice(before);
      expect(got).toHaveLength(1);
      for (const [name] of unread) expect(got[0].headers[name.toLowerCase()], name).toBeUndefined();
      expect(got[0].rawHeaders.some((h) => h.includes('_'))).toBe(false);
      expect(everything(got[0])).not.toContain(BOB.slice(6));
      expect(everything(got[0])).not.toContain(ALICE.slice(6));
      expect(got[0].headers.authorization).toBe('Bearer sk-upstream-secret');
      expect(got[0].headers['x-modelgate-key-id']).toBe('alice');
    },
  );

  it('answers a key sent only in x_api_key with key_missing: the underscore header is dropped, not read', async () => {
    const r = await gw.send('POST', '/v1/messages', {
      headers: [['x_api_key', ALICE], JSON_TYPE],
      body: JSON.stringify({ model: 'claude-3-5-haiku-latest', max_tokens: 5, messages: [] }),
    });
    expect(r.status).toBe(401);
    expect(r.headers['x-modelgate-reason']).toBe('key_missing');
  });
});

describeE2E('HTTP/2 request trailers never reach an HTTP/2 upstream', () => {
  let gw: Gateway;
  let upstream: http2.Http2Server;
  const got: Array<{
    headers: http2.IncomingHttpHeaders;
    trailers: http2.IncomingHttpHeaders | undefined;
    body: string;
  }> = [];
  beforeAll(async () => {
    // A provider behind TLS negotiates h2; plain HTTP/1.1 upstreams (the demo) never get trailers.
    upstream = http2.createServer();
    upstream.on('stream', (stream, headers) => {
      let trailers: http2.IncomingHttpHeaders | undefined;
      let body = '';
      stream.on('trailers', (t) => (trailers = t));
      stream.on('data', (c: Buffer) => (body += c.toString()));
      stream.on('end', () => {
        got.push({ headers, trailers, body });
        stream.respond({ ':status': 200, 'content-type': 'application/json' });
        stream.end('{}');
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    const port = (upstream.address() as AddressInfo).port;
    gw = await startGateway({
      editEnvoy: (b) => {
        const chat = b.static_resources.clusters.find((c: { name: string }) => c.name === 'upstream_chat');
        chat.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = port;
        chat.typed_extension_protocol_options[
          'envoy.extensions.upstreams.http.v3.HttpProtocolOptions'
        ].explicit_http_config = { http2_protocol_options: {} };
      },
    });
  });
  afterAll(async () => {
    await gw?.close();
    await new Promise((r) => upstream?.close(r));
  });

  it('drops every trailer of an allowed request, whatever its name', async () => {
    const session = http2.connect(gw.baseUrl);
    const status = await new Promise<number>((resolve, reject) => {
      const req = session.request(
        {
          ':method': 'POST',
          ':path': '/v1/chat/completions',
          authorization: `Bearer ${ALICE}`,
          'content-type': 'application/json',
        },
        { waitForTrailers: true },
      );
      req.on('wantTrailers', () =>
        req.sendTrailers({ authorization: `Bearer ${BOB}`, 'x-api-key': BOB, 'x-anything': BOB }),
      );
      let code = 0;
      req.on('response', (h) => (code = Number(h[':status'])));
      req.on('data', () => {});
      req.on('end', () => resolve(code));
      req.on('error', reject);
      req.end(CHAT);
    });
    session.close();
    expect(status).toBe(200);
    expect(got).toHaveLength(1);
    expect(got[0].body).toBe(CHAT);
    expect(got[0].headers['x-modelgate-key-id']).toBe('alice');
    expect(Object.keys(got[0].trailers ?? {}).filter((k) => !k.startsWith(':'))).toEqual([]);
    expect(JSON.stringify(got[0])).not.toContain(BOB.slice(6));
  });
});

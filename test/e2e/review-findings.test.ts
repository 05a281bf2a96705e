/**
 * Regression table for the security review of issue 14 (§0), Envoy side, through a real Envoy on
 * the rendered bundle: key material in headers modelgate is never shown (`api-key`, `cookie`,
 * `x_api_key`, ...) and in HTTP/2 request trailers never reaches an upstream; escaped slashes and
 * Envoy's other refusals get a reasoned JSON answer; the query reaches the upstream as sent unless
 * a key parameter must go; the upstream credential modelgate sets still arrives.
 */
import * as http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import * as net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

/** One HTTP/1.1 request written byte for byte (node's client refuses some of what attackers send). */
function rawRequest(baseUrl: string, text: string): Promise<string> {
  const u = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname, () => socket.write(text));
    let out = '';
    socket.on('data', (c: Buffer) => {
      out += c.toString('latin1');
      if (/\r\n\r\n/.test(out) && /content-length: (\d+)/i.test(out)) {
        const len = Number(/content-length: (\d+)/i.exec(out)![1]);
        if (out.length - out.indexOf('\r\n\r\n') - 4 >= len) socket.end();
      }
    });
    socket.on('close', () => resolve(out));
    socket.on('error', reject);
  });
}

describeE2E('headers and trailers nobody reads never reach an upstream', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({ config: (demo) => withUpstreamCredentials(demo, { chat: { header: 'authorization', prefix: 'Bearer ', env: 'UPSTREAM_OPENAI_KEY', secret: 'sk-upstream-secret' } }), env: { UPSTREAM_OPENAI_KEY: 'sk-upstream-secret' } });
  });
  afterAll(async () => gw?.close());

  const unread: Array<[string, string]> = [
    ['api-key', BOB], ['proxy-authorization', `Bearer ${BOB}`], ['cookie', `session=${BOB}`], ['x_api_key', BOB], ['X-Api_Key', BOB],
    ['anthropic-api-key', BOB], ['x-goog-api-key', BOB], ['x-vendor-api-key', BOB], ['x-amz-security-token', BOB],
  ];

  it.each([false, true])('strips every credential header of an allowed request (HTTP/2: %s), and the upstream credential modelgate sets arrives', async (h2) => {
    const before = gw.received.length;
    const r = await gw.send('POST', '/v1/chat/completions', { headers: [['authorization', `Bearer ${ALICE}`], JSON_TYPE, ...unread], body: CHAT, http2: h2 });
    expect(r.status).toBe(200);
    const got = gw.received.slice(before);
    expect(got).toHaveLength(1);
    for (const [name] of unread) expect(got[0].headers[name.toLowerCase()], name).toBeUndefined();
    expect(got[0].rawHeaders.some((h) => h.includes('_'))).toBe(false);
    expect(everything(got[0])).not.toContain(BOB.slice(6));
    expect(everything(got[0])).not.toContain(ALICE.slice(6));
    expect(got[0].headers.authorization).toBe('Bearer sk-upstream-secret');
    expect(got[0].headers['x-modelgate-key-id']).toBe('alice');
  });

  it('answers a key sent only in x_api_key with key_missing: the underscore header is dropped, not read', async () => {
    const r = await gw.send('POST', '/v1/messages', { headers: [['x_api_key', ALICE], JSON_TYPE], body: JSON.stringify({ model: 'claude-3-5-haiku-latest', max_tokens: 5, messages: [] }) });
    expect(r.status).toBe(401);
    expect(r.headers['x-modelgate-reason']).toBe('key_missing');
  });

  it('keeps the query as sent when nothing must be removed, and removes only an empty key parameter', async () => {
    let before = gw.received.length;
    expect((await gw.send('POST', '/v1/chat/completions?flag&b=2&a=1', { headers: [['authorization', `Bearer ${ALICE}`], JSON_TYPE], body: CHAT })).status).toBe(200);
    expect(gw.received[before].url).toBe('/v1/chat/completions?flag&b=2&a=1');
    before = gw.received.length;
    expect((await gw.send('POST', '/v1/chat/completions?b=2&key=&a=1', { headers: [['authorization', `Bearer ${ALICE}`], JSON_TYPE], body: CHAT })).status).toBe(200);
    expect(gw.received[before].url).not.toMatch(/key/);
  });

  it.each([
    ['/v1beta/models/gemini-2.5-pro%2F..%2Fgemini-2.5-flash:generateContent', 'gemini'],
    ['/v1beta/models/a%2fb:generateContent', 'gemini'],
    ['/v1beta/models/a%5Cb:generateContent', 'gemini'],
    ['/v1/chat%2Fcompletions', 'openai'],
    ['/v1/messages%2F', 'anthropic'],
  ])('refuses the escaped slash in %s with 400 request_invalid in the client\'s error shape', async (path, family) => {
    const before = gw.received.length;
    const r = await gw.send('POST', path, { headers: [['authorization', `Bearer ${ALICE}`], ['x-goog-api-key', ALICE], JSON_TYPE], body: CHAT });
    expect(r.status).toBe(400);
    expect(r.headers['x-modelgate-reason']).toBe('request_invalid');
    expect(r.headers['x-modelgate-hint']).toMatch(/%2F/);
    const body = r.json();
    if (family === 'gemini') expect(body.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
    else if (family === 'anthropic') expect(body).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    else expect(body.error).toMatchObject({ code: 'request_invalid', type: 'invalid_request_error' });
    expect(gw.received.length).toBe(before);
  });

  it('answers a request without Host, a NUL in the path, an unknown transfer coding or method with 400 request_invalid too', async () => {
    const noHost = await rawRequest(gw.baseUrl, 'GET /v1/models HTTP/1.1\r\n\r\n');
    expect(noHost).toMatch(/^HTTP\/1.1 400/);
    expect(noHost).toMatch(/x-modelgate-reason: request_invalid/i);
    const nul = await gw.send('POST', '/v1beta/models/a%00b:generateContent', { headers: [['x-goog-api-key', ALICE]], body: '{}' });
    expect(nul.status).toBe(400);
    expect(nul.headers['x-modelgate-reason']).toBe('request_invalid');
    // Envoy's own 501 for a transfer coding it does not know, and its 400 for an unknown method (the fuzzer found both bare).
    const te = await rawRequest(gw.baseUrl, `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${ALICE}\r\ntransfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n`);
    expect(te).toMatch(/^HTTP\/1.1 400/);
    expect(te).toMatch(/x-modelgate-reason: request_invalid/i);
    const method = await rawRequest(gw.baseUrl, `CONNECTX /v1/chat/completions HTTP/1.1\r\nhost: x\r\n\r\n`);
    expect(method).toMatch(/^HTTP\/1.1 400/);
    expect(method).toMatch(/x-modelgate-reason: request_invalid/i);
  });
});

describeE2E('HTTP/2 request trailers never reach an HTTP/2 upstream', () => {
  let gw: Gateway;
  let upstream: http2.Http2Server;
  const got: Array<{ headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders | undefined; body: string }> = [];
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
        chat.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'].explicit_http_config = { http2_protocol_options: {} };
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
      const req = session.request({ ':method': 'POST', ':path': '/v1/chat/completions', authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' }, { waitForTrailers: true });
      req.on('wantTrailers', () => req.sendTrailers({ authorization: `Bearer ${BOB}`, 'x-api-key': BOB, 'x-anything': BOB }));
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

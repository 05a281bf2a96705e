/**
 * The request line through a real Envoy on the rendered bundle: an escaped slash (`%2F`, `%5C`), a
 * NUL in the path, a missing Host, an unknown transfer coding or method get 400 request_invalid in
 * the client's error shape (with a reason and a hint, nothing upstream), and the query reaches the
 * upstream as sent unless a key parameter must go.
 */
import * as net from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

const ALICE = DEMO_KEYS.alice;
const CHAT = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
const JSON_TYPE: [string, string] = ['content-type', 'application/json'];

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

describeE2E('the request line: what Envoy refuses, and the query as sent', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway();
  });
  afterAll(async () => gw?.close());

  it('keeps the query as sent when nothing must be removed, and removes only an empty key parameter', async () => {
    let before = gw.received.length;
    expect(
      (
        await gw.send('POST', '/v1/chat/completions?flag&b=2&a=1', {
          headers: [['authorization', `Bearer ${ALICE}`], JSON_TYPE],
          body: CHAT,
        })
      ).status,
    ).toBe(200);
    expect(gw.received[before].url).toBe('/v1/chat/completions?flag&b=2&a=1');
    before = gw.received.length;
    expect(
      (
        await gw.send('POST', '/v1/chat/completions?b=2&key=&a=1', {
          headers: [['authorization', `Bearer ${ALICE}`], JSON_TYPE],
          body: CHAT,
        })
      ).status,
    ).toBe(200);
    expect(gw.received[before].url).not.toMatch(/key/);
  });

  it.each([
    ['/v1beta/models/gemini-2.5-pro%2F..%2Fgemini-2.5-flash:generateContent', 'gemini'],
    ['/v1beta/models/a%2fb:generateContent', 'gemini'],
    ['/v1beta/models/a%5Cb:generateContent', 'gemini'],
    ['/v1/chat%2Fcompletions', 'openai'],
    ['/v1/messages%2F', 'anthropic'],
  ])("refuses the escaped slash in %s with 400 request_invalid in the client's error shape", async (path, family) => {
    const before = gw.received.length;
    const r = await gw.send('POST', path, {
      headers: [['authorization', `Bearer ${ALICE}`], ['x-goog-api-key', ALICE], JSON_TYPE],
      body: CHAT,
    });
    expect(r.status).toBe(400);
    expect(r.headers['x-modelgate-reason']).toBe('request_invalid');
    expect(r.headers['x-modelgate-hint']).toMatch(/%2F/);
    const body = r.json();
    if (family === 'gemini') expect(body.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
    else if (family === 'anthropic')
      expect(body).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    else expect(body.error).toMatchObject({ code: 'request_invalid', type: 'invalid_request_error' });
    expect(gw.received.length).toBe(before);
  });

  it('answers a request without Host, a NUL in the path, an unknown transfer coding or method with 400 request_invalid too', async () => {
    const noHost = await rawRequest(gw.baseUrl, 'GET /v1/models HTTP/1.1\r\n\r\n');
    expect(noHost).toMatch(/^HTTP\/1.1 400/);
    expect(noHost).toMatch(/x-modelgate-reason: request_invalid/i);
    const nul = await gw.send('POST', '/v1beta/models/a%00b:generateContent', {
      headers: [['x-goog-api-key', ALICE]],
      body: '{}',
    });
    expect(nul.status).toBe(400);
    expect(nul.headers['x-modelgate-reason']).toBe('request_invalid');
    // Envoy's own 501 for a transfer coding it does not know, and its 400 for an unknown method (the fuzzer found both
    // bare).
    const te = await rawRequest(
      gw.baseUrl,
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${ALICE}\r\ntransfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n`,
    );
    expect(te).toMatch(/^HTTP\/1.1 400/);
    expect(te).toMatch(/x-modelgate-reason: request_invalid/i);
    const method = await rawRequest(gw.baseUrl, `CONNECTX /v1/chat/completions HTTP/1.1\r\nhost: x\r\n\r\n`);
    expect(method).toMatch(/^HTTP\/1.1 400/);
    expect(method).toMatch(/x-modelgate-reason: request_invalid/i);
  });
});

/**
 * Streaming through the real Envoy: an SSE answer reaches the client event by event, not buffered.
 * The proof is causal, not a stopwatch: the upstream holds back its last event until the client has
 * received the first one through Envoy, so a gateway that buffered the answer would never finish.
 * Every streaming endpoint, under the root and the alternate prefix, over HTTP/1.1 and h2c. Then the
 * demo upstream's own streams, whole and in order.
 */
import * as http from 'node:http';
import * as http2 from 'node:http2';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ReceivedRequest } from '../../src/demo/upstream';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

const { alice } = DEMO_KEYS;

/** Releases of held-back streams, by x-test-id. */
const gates = new Map<string, () => void>();

/** The test upstream for x-test-gate requests: the first event at once, the last only once released. */
function gatedStream(r: ReceivedRequest, res: ServerResponse): boolean {
  const id = r.headers['x-test-gate'];
  if (typeof id !== 'string') return false;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write('data: {"n":1,"text":"first"}\n\n');
  new Promise<void>((release) => gates.set(id, release)).then(
    () => {
      res.write('data: {"n":2,"text":"last"}\n\n');
      res.end('data: [DONE]\n\n');
    },
    () => {},
  );
  return true;
}

interface Streamed {
  readonly status: number;
  readonly contentType: string;
  /** The body pieces in the order the client received them. */
  readonly pieces: string[];
}

/** A streaming request over HTTP/1.1 or h2c; onData sees every piece as it arrives. */
function stream(
  base: string,
  path: string,
  headers: Record<string, string>,
  body: string,
  h2: boolean,
  onData: (piece: string) => void,
): Promise<Streamed> {
  const pieces: string[] = [];
  const take = (c: Buffer): void => {
    const s = c.toString('utf8');
    pieces.push(s);
    onData(s);
  };
  if (h2) {
    return new Promise((resolve, reject) => {
      const session = http2.connect(base);
      session.once('error', reject);
      const req = session.request({ ':method': 'POST', ':path': path, ...headers });
      let status = 0;
      let contentType = '';
      req.on('response', (h) => {
        status = Number(h[':status']);
        contentType = String(h['content-type']);
      });
      req.on('data', take);
      req.on('end', () => {
        session.close();
        resolve({ status, contentType, pieces });
      });
      req.on('error', reject);
      req.end(body);
    });
  }
  return new Promise((resolve, reject) => {
    const url = new URL(base);
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path,
        headers: { ...headers, 'content-length': Buffer.byteLength(body) },
        agent: false,
      },
      (res) => {
        res.on('data', take);
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type']), pieces }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const chat = (stream: boolean): string =>
  JSON.stringify({ model: 'gpt-4o-mini', stream, messages: [{ role: 'user', content: 'tell me' }] });
const responses = JSON.stringify({ model: 'gpt-4o-mini', stream: true, input: 'tell me' });
const messages = JSON.stringify({
  model: 'claude-3-5-haiku-latest',
  stream: true,
  max_tokens: 64,
  messages: [{ role: 'user', content: 'tell me' }],
});
const gen = JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'tell me' }] }] });

/** [name, path, key header, body] per streaming endpoint, under a prefix. */
function endpoints(p: '' | '/alt'): Array<[string, string, Record<string, string>, string]> {
  return [
    ['chat completions', `${p}/v1/chat/completions`, { authorization: `Bearer ${alice}` }, chat(true)],
    ['responses', `${p}/v1/responses`, { authorization: `Bearer ${alice}` }, responses],
    ['messages', `${p}/v1/messages`, { 'x-api-key': alice, 'anthropic-version': '2023-06-01' }, messages],
    [
      'streamGenerateContent',
      `${p}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`,
      p ? { authorization: `Bearer ${alice}` } : { 'x-goog-api-key': alice },
      gen,
    ],
  ];
}

describeE2E('streaming through a real Envoy', () => {
  let gw: Gateway;
  let seq = 0;
  beforeAll(async () => {
    gw = await startGateway({ upstream: { override: gatedStream, chunkDelayMs: 20 } });
  });
  afterAll(async () => {
    for (const release of gates.values()) release();
    await gw?.close();
  });

  const gated = (['', '/alt'] as const).flatMap((p) =>
    endpoints(p).flatMap(([name, path, key, body]) =>
      [false, true].map((h2) => ({
        title: `${p || 'root'} ${name} over ${h2 ? 'h2c' : 'HTTP/1.1'}: the first event reaches the client while the upstream still holds the last`,
        path,
        key,
        body,
        h2,
      })),
    ),
  );

  it.each(gated)('$title', async ({ path, key, body, h2 }) => {
    const id = `s${++seq}`;
    let firstBeforeRelease = false;
    const res = await stream(
      gw.baseUrl,
      path,
      { 'content-type': 'application/json', 'x-test-gate': id, ...key },
      body,
      h2,
      (piece) => {
        const release = gates.get(id);
        if (piece.includes('"first"') && release && !firstBeforeRelease) {
          // Only now may the upstream send its last event: the first one is already here.
          firstBeforeRelease = true;
          release();
        }
      },
    );
    expect(res.status).toBe(200);
    expect(res.contentType).toBe('text/event-stream');
    expect(firstBeforeRelease).toBe(true);
    const text = res.pieces.join('');
    expect(text).toBe('data: {"n":1,"text":"first"}\n\ndata: {"n":2,"text":"last"}\n\ndata: [DONE]\n\n');
    expect(res.pieces.length).toBeGreaterThanOrEqual(2);
  });

  it("streams the demo upstream's chat completion in many pieces that add up to its whole answer", async () => {
    const res = await stream(
      gw.baseUrl,
      '/v1/chat/completions',
      { 'content-type': 'application/json', authorization: `Bearer ${alice}` },
      chat(true),
      false,
      () => {},
    );
    expect(res.status).toBe(200);
    const events = res.pieces.join('').split('\n\n').filter(Boolean);
    expect(events.at(-1)).toBe('data: [DONE]');
    const text = events
      .slice(0, -1)
      .map((e) => JSON.parse(e.slice('data: '.length)).choices[0]?.delta?.content ?? '')
      .join('');
    expect(text).toBe(
      'Hello from the demo upstream. You asked gpt-4o-mini as key alice; no client key header reached me.',
    );
    // Events were written 20 ms apart; Envoy passed them on as they came, not as one buffer.
    expect(res.pieces.length).toBeGreaterThan(3);
  });

  it("streams Gemini's JSON array (no alt=sse) piece by piece, as one valid array", async () => {
    const res = await stream(
      gw.baseUrl,
      '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
      { 'content-type': 'application/json', 'x-goog-api-key': alice },
      gen,
      true,
      () => {},
    );
    expect(res.status).toBe(200);
    const chunks = JSON.parse(res.pieces.join('')) as Array<{
      candidates: Array<{ content: { parts: Array<{ text: string }> } }>;
    }>;
    expect(chunks.map((c) => c.candidates[0].content.parts[0].text).join('')).toContain('as key alice');
    expect(res.pieces.length).toBeGreaterThan(3);
  });
});

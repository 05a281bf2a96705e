/**
 * The end-to-end benchmark's stand-in model provider: a plain HTTP/1.1 server on `node:net` that
 * reads each request (Content-Length or chunked body, keep-alive, pipelined requests in order) and
 * answers at once with a fixed, valid response of the request's protocol family, usage included
 * (the meter reads it). No JSON parsing, no per-request objects beyond the parser's few: the
 * upstream must cost as little CPU as possible, because it shares a core with the load generator
 * (bench/README-e2e.md, "Placement"). The demo upstream (src/demo/upstream.ts) parses every body as
 * JSON to count tokens, which costs about 3 ms of CPU per 256 KiB body; this one only skips bytes.
 *
 * A small body (under 16 KiB) containing `"stream":true` gets an SSE stream of three chunks with a
 * final usage chunk (OpenAI's `stream_options.include_usage` shape) when it asks for one, written at once.
 *
 *   node dist/bench/e2e/upstream.js [PORT]     prints `upstream listening 127.0.0.1:PORT`
 */
import * as net from 'node:net';

const ok = (contentType: string, body: string): Buffer =>
  Buffer.from(
    `HTTP/1.1 200 OK\r\ncontent-type: ${contentType}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );

const CHAT = ok(
  'application/json',
  JSON.stringify({
    id: 'chatcmpl-standin',
    object: 'chat.completion',
    created: 1767225600,
    model: 'gpt-4o-mini',
    choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 9, completion_tokens: 1, total_tokens: 10 },
  }),
);

const chunk = (delta: object, extra: object = {}): string =>
  `data: ${JSON.stringify({ id: 'chatcmpl-standin', object: 'chat.completion.chunk', created: 1767225600, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`;
const CHAT_STREAM = ok(
  'text/event-stream',
  [
    chunk({ role: 'assistant', content: '' }),
    chunk({ content: 'ok' }),
    `data: ${JSON.stringify({ id: 'chatcmpl-standin', object: 'chat.completion.chunk', created: 1767225600, model: 'gpt-4o-mini', choices: [], usage: { prompt_tokens: 9, completion_tokens: 1, total_tokens: 10 } })}\n\n`,
    'data: [DONE]\n\n',
  ].join(''),
);
/**
 * A stream of a request without `stream_options.include_usage`: no usage chunk, as OpenAI sends it (the meter
 * estimates).
 */
const CHAT_STREAM_NO_USAGE = ok(
  'text/event-stream',
  [chunk({ role: 'assistant', content: '' }), chunk({ content: 'ok' }), 'data: [DONE]\n\n'].join(''),
);

const GEMINI = ok(
  'application/json',
  JSON.stringify({
    candidates: [{ content: { parts: [{ text: 'ok' }], role: 'model' }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { promptTokenCount: 9, candidatesTokenCount: 1, totalTokenCount: 10 },
    modelVersion: 'gemini-2.5-flash',
  }),
);

const MESSAGES = ok(
  'application/json',
  JSON.stringify({
    id: 'msg_standin',
    type: 'message',
    role: 'assistant',
    model: 'claude-3-5-haiku-latest',
    content: [{ type: 'text', text: 'ok' }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 9, output_tokens: 1 },
  }),
);

const EMBEDDINGS = ok(
  'application/json',
  JSON.stringify({
    object: 'list',
    model: 'text-embedding-3-small',
    data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2, 0.3] }],
    usage: { prompt_tokens: 2, total_tokens: 2 },
  }),
);

const BAD_REQUEST = Buffer.from('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');

/** What marks an allowed answer in a response body (the load generator checks every one). */
export const UPSTREAM_MARKERS = { chat: 'chatcmpl-standin', generative: '"modelVersion":"gemini-2.5-flash"' } as const;

function answerFor(path: string, streamed: boolean, withUsage: boolean): Buffer {
  if (path.includes(':generateContent') || path.includes(':streamGenerateContent')) return GEMINI;
  if (path.startsWith('/v1/messages')) return MESSAGES;
  if (path.startsWith('/v1/embeddings')) return EMBEDDINGS;
  return streamed ? (withUsage ? CHAT_STREAM : CHAT_STREAM_NO_USAGE) : CHAT;
}

const STREAM_FLAG = Buffer.from('"stream":true');
const INCLUDE_USAGE = Buffer.from('"include_usage":true');
const SMALL_BODY = 16 * 1024;

/** One connection's parser state: headers, then a body of known length, or chunks. */
class HttpConnection {
  private buf: Buffer = Buffer.alloc(0);
  private state: 'head' | 'body' | 'chunk-size' | 'chunk-data' | 'chunk-end' | 'chunk-trailer' = 'head';
  private remaining = 0;
  private path = '';
  private small: Buffer[] | null = null;
  private smallBytes = 0;

  constructor(private readonly socket: net.Socket) {
    socket.setNoDelay(true);
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('error', () => socket.destroy());
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    this.socket.cork();
    try {
      while (this.step()) {
        /* parse as far as the bytes go */
      }
    } finally {
      this.socket.uncork();
    }
  }

  /** Advances the parser; false when it needs more bytes. */
  private step(): boolean {
    const b = this.buf;
    switch (this.state) {
      case 'head': {
        const end = b.indexOf('\r\n\r\n');
        if (end < 0) {
          if (b.length > 64 * 1024) this.fail();
          return false;
        }
        const head = b.toString('latin1', 0, end);
        this.buf = b.subarray(end + 4);
        const sp1 = head.indexOf(' ');
        const sp2 = head.indexOf(' ', sp1 + 1);
        this.path = head.slice(sp1 + 1, sp2);
        const lower = head.toLowerCase();
        const cl = /\r\ncontent-length:\s*(\d+)/.exec(lower);
        const chunked = /\r\ntransfer-encoding:[^\r]*chunked/.test(lower);
        this.small = [];
        this.smallBytes = 0;
        if (chunked) {
          this.state = 'chunk-size';
        } else {
          this.remaining = cl ? Number(cl[1]) : 0;
          this.state = 'body';
        }
        return true;
      }
      case 'body': {
        if (this.remaining > 0) {
          if (b.length === 0) return false;
          const n = Math.min(this.remaining, b.length);
          this.keep(b.subarray(0, n));
          this.remaining -= n;
          this.buf = b.subarray(n);
          if (this.remaining > 0) return false;
        }
        this.answer();
        return true;
      }
      case 'chunk-size': {
        const eol = b.indexOf('\r\n');
        if (eol < 0) return false;
        const size = parseInt(b.toString('latin1', 0, eol), 16);
        if (!Number.isFinite(size)) {
          this.fail();
          return false;
        }
        this.buf = b.subarray(eol + 2);
        if (size === 0) {
          this.state = 'chunk-trailer';
        } else {
          this.remaining = size;
          this.state = 'chunk-data';
        }
        return true;
      }
      case 'chunk-data': {
        if (b.length === 0) return false;
        const n = Math.min(this.remaining, b.length);
        this.keep(b.subarray(0, n));
        this.remaining -= n;
        this.buf = b.subarray(n);
        if (this.remaining > 0) return false;
        this.state = 'chunk-end';
        return true;
      }
      case 'chunk-end': {
        if (b.length < 2) return false;
        this.buf = b.subarray(2); // the CRLF after the chunk's data
        this.state = 'chunk-size';
        return true;
      }
      case 'chunk-trailer': {
        const eol = b.indexOf('\r\n');
        if (eol < 0) return false;
        this.buf = b.subarray(eol + 2);
        if (eol === 0) this.answer(); // the empty line ends the trailers
        return true;
      }
    }
  }

  /** Keeps the first SMALL_BODY bytes of a body (enough to see `"stream":true` in a small request). */
  private keep(part: Buffer): void {
    if (!this.small) return;
    this.smallBytes += part.length;
    if (this.smallBytes > SMALL_BODY) this.small = null;
    else this.small.push(part);
  }

  private answer(): void {
    const small = this.small !== null && this.small.length > 0 ? Buffer.concat(this.small) : undefined;
    const streamed = small !== undefined && small.includes(STREAM_FLAG);
    this.socket.write(answerFor(this.path, streamed, streamed && small.includes(INCLUDE_USAGE)));
    this.small = null;
    this.state = 'head';
  }

  private fail(): void {
    this.socket.end(BAD_REQUEST);
    this.buf = Buffer.alloc(0);
  }
}

export interface LeanUpstream {
  readonly port: number;
  close(): Promise<void>;
}

export function startLeanUpstream(port = 0, host = '127.0.0.1'): Promise<LeanUpstream> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    new HttpConnection(s);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      resolve({
        port: (server.address() as net.AddressInfo).port,
        close: () =>
          new Promise<void>((r) => {
            for (const s of sockets) s.destroy();
            server.close(() => r());
          }),
      });
    });
  });
}

if (require.main === module) {
  void startLeanUpstream(Number(process.argv[2] ?? 0)).then((u) => {
    process.stdout.write(`upstream listening 127.0.0.1:${u.port}\n`);
    process.on('SIGTERM', () => void u.close().then(() => process.exit(0)));
  });
}

/**
 * The node:http2 transport: gRPC calls on Node's own HTTP/2 server (nghttp2). The alternative to
 * h2/connection.ts (`grpc.transport: node`), for a peer that modelgate's own HTTP/2 code would not
 * get along with; it costs about three times the CPU per Check (bench/README-e2e.md).
 */
import * as http2 from 'node:http2';
import type * as tls from 'node:tls';
import { frameMessage } from './message-reader';
import { OK_TRAILERS, statusTrailers, type RequestEvents, type ResponseStream } from './call';
import type { OpenStream } from './h2/connection';
import type { GrpcStatusCode } from './status';

const OK_HEADERS = { ':status': 200, 'content-type': 'application/grpc' };
const ignore = (): void => {};

class NodeResponse implements ResponseStream {
  #ended = false;
  #trailers: Record<string, string> = OK_TRAILERS;

  constructor(readonly stream: http2.ServerHttp2Stream) {}

  /**
   * Not ended by us, nor reset by the client: a stream reset with NO_ERROR while it was still being
   * read is `closed` but not yet `destroyed`, and `respond()` throws on it.
   */
  get writable(): boolean {
    return !this.#ended && !this.stream.destroyed && !this.stream.closed;
  }

  #respond(): void {
    if (this.stream.headersSent) return;
    this.stream.respond(OK_HEADERS, { waitForTrailers: true });
    this.stream.once('wantTrailers', () => this.#safely(() => this.stream.sendTrailers(this.#trailers)));
  }

  send(message: Buffer): void {
    if (!this.writable) return;
    this.#safely(() => {
      this.#respond();
      this.stream.write(frameMessage(message));
    });
  }

  sendUnary(message: Buffer): void {
    if (!this.writable) return;
    this.#ended = true;
    this.#safely(() => {
      this.#respond();
      this.stream.end(frameMessage(message));
    });
  }

  end(code: GrpcStatusCode, message: string): void {
    if (!this.writable) return;
    this.#ended = true;
    this.#safely(() => {
      if (this.stream.headersSent) {
        this.#trailers = statusTrailers(code, message);
        this.stream.end();
      } else {
        this.stream.respond({ ...OK_HEADERS, ...statusTrailers(code, message) }, { endStream: true });
      }
    });
  }

  refuse(httpStatus: number, text: string): void {
    if (!this.writable) return;
    this.#ended = true;
    this.#safely(() => {
      this.stream.respond({ ':status': httpStatus, 'content-type': 'text/plain' });
      this.stream.end(text);
    });
  }

  /** node:http2 throws on a stream that closed between the check and the call: then nobody is listening. */
  #safely(write: () => void): void {
    try {
      write();
    } catch {
      this.stream.destroy();
    }
  }
}

/**
 * An http2 server whose streams open calls through `open`; with `tls` (server.ts TlsSettings), over
 * TLS (ALPN h2) with a client certificate required.
 */
export function nodeHttp2Server(open: OpenStream, tls?: tls.TlsOptions): http2.Http2Server | http2.Http2SecureServer {
  // Node refuses new streams once a session buffers more than maxSessionMemory (10 MB by default):
  // 100 Checks of 256 KiB bodies in flight are more than that. grpc-js lifts the limit the same way.
  const options = { maxSessionMemory: Number.MAX_SAFE_INTEGER };
  const server: http2.Http2Server | http2.Http2SecureServer = tls ? http2.createSecureServer({ ...options, ...tls }) : http2.createServer(options);
  server.on('stream', (stream, headers) => {
    // A client's reset is an error event on the stream: routine, and seen by the call as 'close'.
    stream.on('error', ignore);
    // HEADERS and a reset in one read: the stream is gone before this event ('stream' comes on a
    // later tick); nothing to open.
    if (stream.destroyed || stream.closed) return;
    const contentType = headers['content-type'];
    const authorization = headers.authorization;
    const events: RequestEvents = open(headers[':path'] ?? '', typeof contentType === 'string' ? contentType : undefined, new NodeResponse(stream), typeof authorization === 'string' ? authorization : undefined);
    stream.on('data', (chunk: Buffer) => events.data(chunk));
    stream.on('end', () => events.end());
    stream.on('close', () => events.closed());
  });
  (server as http2.Http2Server).on('connection', (socket: import('node:net').Socket) => socket.setNoDelay(true));
  return server;
}

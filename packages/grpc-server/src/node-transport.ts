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
 * The limits node:http2 is given (docs/grpc-port.md). Its memory limit stays on (maxSessionMemory,
 * in MB: header tables, data queued either way, unacknowledged PINGs and SETTINGS; past it new
 * streams are refused with ENHANCE_YOUR_CALM), raised from node's 10 because Envoy's large
 * flow-control windows let it push whole request bodies at once and node counts them until the
 * call has read them: through Envoy, 100 concurrent Checks of 256 KiB bodies were all refused
 * (503 authz_unavailable) at 10, and at 64 fared as on the builtin transport; 256 holds eight
 * bodies of the bundle's largest (32 MiB). Streams are capped as on the builtin transport (which
 * also bounds the answers queued for a client that does not read), header lists to the same 64 KiB.
 * nghttp2's own guards stay as they are (rapid reset: 1,000 then 33 a second; 1,000 queued ACKs).
 */
const NODE_OPTIONS: http2.ServerOptions = {
  maxSessionMemory: 256,
  settings: { maxConcurrentStreams: 2_048, maxHeaderListSize: 64 * 1024 },
};

/** What the idle sweep knows of a session: streams open, streams opened ever, and at the last sweep. */
interface SessionState {
  open: number;
  opened: number;
  openedAtSweep: number;
  idleSweeps: number;
}

const sessionStates = new WeakMap<http2.Http2Session, SessionState>();

/**
 * Called by the server SWEEPS_PER_IDLE_TIMEOUT times per idle timeout (as for the builtin
 * transport's connections): a session that had no stream open through a whole timeout is closed
 * gracefully (GOAWAY), whatever PINGs it sent. Node's own session timeout (`server.setTimeout`)
 * would count any frame as activity and refresh a timer on every read and write.
 */
export function sweepSession(session: http2.Http2Session, sweepsPerTimeout: number): void {
  const st = sessionStates.get(session);
  if (st === undefined || session.closed || session.destroyed) return;
  if (st.open === 0 && st.opened === st.openedAtSweep) {
    if (++st.idleSweeps > sweepsPerTimeout) session.close();
  } else {
    st.idleSweeps = 0;
  }
  st.openedAtSweep = st.opened;
}

/**
 * An http2 server whose streams open calls through `open`; with `tls` (server.ts TlsSettings), over
 * TLS (ALPN h2) with a client certificate required. The same limits either way.
 */
export function nodeHttp2Server(open: OpenStream, tls?: tls.TlsOptions): http2.Http2Server | http2.Http2SecureServer {
  const server: http2.Http2Server | http2.Http2SecureServer = tls
    ? http2.createSecureServer({ ...NODE_OPTIONS, ...tls })
    : http2.createServer(NODE_OPTIONS);
  server.on('session', (session) =>
    sessionStates.set(session, { open: 0, opened: 0, openedAtSweep: 0, idleSweeps: 0 }),
  );
  server.on('stream', (stream, headers) => {
    // A client's reset is an error event on the stream: routine, and seen by the call as 'close'.
    stream.on('error', ignore);
    const st = stream.session && sessionStates.get(stream.session);
    if (st) {
      st.open++;
      st.opened++;
    }
    // HEADERS and a reset in one read: the stream is gone before this event ('stream' comes on a
    // later tick); nothing to open.
    if (stream.destroyed || stream.closed) {
      if (st) st.open--;
      return;
    }
    const contentType = headers['content-type'];
    const authorization = headers.authorization;
    const events: RequestEvents = open(
      headers[':path'] ?? '',
      typeof contentType === 'string' ? contentType : undefined,
      new NodeResponse(stream),
      typeof authorization === 'string' ? authorization : undefined,
    );
    stream.on('data', (chunk: Buffer) => events.data(chunk));
    stream.on('end', () => events.end());
    stream.on('close', () => {
      if (st) st.open--;
      events.closed();
    });
  });
  (server as http2.Http2Server).on('connection', (socket: import('node:net').Socket) => socket.setNoDelay(true));
  return server;
}

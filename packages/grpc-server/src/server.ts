/**
 * The gRPC server: methods by path, on one of two HTTP/2 transports, with a graceful drain.
 * - `builtin` (the default): modelgate's own HTTP/2 (h2/connection.ts), a unary answer in one
 *   write; through Envoy a no-op Check costs a third of node:http2's CPU and far less garbage.
 * - `node`: node:http2 (node-transport.ts), Node's nghttp2 binding.
 * Neither is grpc-js's server: through Envoy, a no-op Check cost 214 µs of CPU on grpc-js's server
 * and 90 µs on node:http2 (bench/README-e2e.md, "The gRPC server"); grpc-js's per-call machinery
 * (metadata objects, deadline timers, interceptor and filter stacks) was most of it.
 *
 * What they implement of gRPC (grpc/grpc PROTOCOL-HTTP2.md), and what they leave out:
 * - requests: `content-type: application/grpc*` (else HTTP 415), uncompressed Length-Prefixed
 *   Messages of at most `maxReceiveMessageBytes` (a compressed one is a framing problem: this
 *   server announces no grpc-encoding);
 * - responses: headers, messages, then `grpc-status` trailers; a call that fails before any
 *   message gets a Trailers-Only answer; unknown methods: UNIMPLEMENTED;
 * - deadlines (`grpc-timeout`) are the client's to keep: Envoy resets a Check's stream at its own
 *   timeout, and an answer to a reset stream is dropped;
 * - no compression, no keepalive pings of its own (grpc-js's server sends none by default either).
 */
import * as net from 'node:net';
import * as tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { BufferPool } from './buffer-pool';
import { CallTracker, openCall, type Method, type RequestEvents, type ResponseStream } from './call';
import { Connection, SWEEPS_PER_IDLE_TIMEOUT } from './h2/connection';
import { nodeHttp2Server, sweepSession } from './node-transport';
import { GrpcStatus } from './status';

export type { Method, RequestProblem, StreamCall, StreamMethod, UnaryMethod } from './call';

export type GrpcTransport = 'builtin' | 'node';

/**
 * TLS for the port (PEM): the server's certificate chain and key, and the CA a client's certificate must be signed by.
 */
export interface TlsSettings {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly clientCa: Buffer;
}

export interface GrpcServerOptions {
  /** The largest request message accepted (Envoy's CheckRequest carries the whole body). */
  readonly maxReceiveMessageBytes: number;
  readonly transport?: GrpcTransport;
  /** Connection-level problems (a peer breaking HTTP/2, socket errors, failed TLS handshakes), for the log. */
  readonly onError?: (err: unknown) => void;
  /**
   * Connections open at once, TLS handshakes in progress included; past it a new one is closed at once (default 1,024).
   */
  readonly maxConnections?: number;
  /** A connection with no stream open for this long is drained and closed (default 60 s). */
  readonly idleTimeoutMs?: number;
  /** TLS with a client certificate required (mTLS): a connection without one is refused in the handshake. */
  readonly tls?: TlsSettings;
  /**
   * Whether a call's `authorization` metadata lets it in (the port's shared secret); absent: every
   * call does. A call that does not get in is answered at once, before any of its request is read
   * (an unauthenticated caller costs a header block, never a buffered message): with
   * `unauthenticated`'s message for its path (the Check's: a normal denial), else UNAUTHENTICATED.
   */
  readonly authorize?: (authorization: string | undefined) => boolean;
  readonly unauthenticated?: ReadonlyMap<string, () => Buffer>;
}

/**
 * Envoy opens one connection per worker thread to each cluster (a few more when one fills up, and
 * the meter's each 900 streams); a thousand is many Envoys. Past it a connection costs a file
 * descriptor and some memory each, so a flood of them is refused instead.
 */
const MAX_CONNECTIONS = 1_024;
/** Envoy keeps an idle upstream connection an hour by default, and opens another when it needs one. */
const IDLE_TIMEOUT_MS = 60_000;
/** Refused connections are logged at most this often. */
const REFUSAL_LOG_MS = 10_000;

/** How long a TLS client may take over its handshake (the builtin transport's preface timeout is the same). */
const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

export interface GrpcH2Server {
  /** host:port as bound (the port filled in when 0 was asked). */
  readonly address: string;
  /**
   * Stops accepting connections and tells every client to open no new calls (GOAWAY); unary calls
   * in flight are answered. When none is left (and streams had 250 ms to see their last
   * messages), open streaming calls are finished UNAVAILABLE. With `streamsDone`, the port goes on
   * accepting connections and calls until it resolves (the meter's streams stay open until it has
   * heard of every request), and only then closes. Resolves when every connection is closed, or
   * after `graceMs`, when the rest are cut.
   */
  drain(graceMs: number, streamsDone?: Promise<void>): Promise<void>;
}

const NO_EVENTS: RequestEvents = { data() {}, end() {}, closed() {} };
const ignore = (): void => {};

export async function startH2GrpcServer(
  address: string,
  methods: ReadonlyMap<string, Method>,
  opts: GrpcServerOptions,
): Promise<GrpcH2Server> {
  const onError = opts.onError ?? ignore;
  const tracker = new CallTracker();
  // Requests of borrowing methods cut across reads (a Check with a large body) are assembled in reused buffers.
  const ctx = { limit: opts.maxReceiveMessageBytes, tracker, onError, pool: new BufferPool() };
  const authorize = opts.authorize;
  const open = (
    path: string,
    contentType: string | undefined,
    res: ResponseStream,
    authorization: string | undefined,
  ): RequestEvents => {
    if (contentType === undefined || !contentType.startsWith('application/grpc')) {
      res.refuse(415, 'gRPC requests need content-type: application/grpc\n');
      return NO_EVENTS;
    }
    if (authorize !== undefined && !authorize(authorization)) {
      const answer = opts.unauthenticated?.get(path);
      if (answer === undefined)
        res.end(GrpcStatus.UNAUTHENTICATED, "this port needs the gateway's gRPC secret (authorization metadata)");
      else res.sendUnary(answer());
      return NO_EVENTS;
    }
    const method = methods.get(path);
    if (method === undefined) {
      res.end(GrpcStatus.UNIMPLEMENTED, `unknown method ${path}`);
      return NO_EVENTS;
    }
    return openCall(method, res, ctx);
  };

  // What drain() and the idle sweep need of either transport: stop listening, GOAWAY, cut, sweep.
  let server: net.Server;
  let goAwayAll: () => void;
  let destroyAll: () => void;
  let sweepAll: () => void;
  const maxConnections = opts.maxConnections ?? MAX_CONNECTIONS;
  const idleTimeoutMs = opts.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
  const tlsOptions: tls.TlsOptions | undefined = opts.tls && {
    cert: opts.tls.cert,
    key: opts.tls.key,
    ca: opts.tls.clientCa,
    requestCert: true,
    rejectUnauthorized: true,
    ALPNProtocols: ['h2'],
    handshakeTimeout: TLS_HANDSHAKE_TIMEOUT_MS,
  };
  if (opts.transport === 'node') {
    const h2 = nodeHttp2Server(open, tlsOptions);
    const sessions = new Set<import('node:http2').ServerHttp2Session>();
    h2.on('session', (session) => {
      sessions.add(session);
      session.on('close', () => sessions.delete(session));
    });
    h2.on('sessionError', onError);
    server = h2;
    sweepAll = () => sessions.forEach((s) => sweepSession(s, SWEEPS_PER_IDLE_TIMEOUT));
    goAwayAll = () => sessions.forEach((s) => s.close());
    destroyAll = () => sessions.forEach((s) => s.destroy());
  } else {
    const connections = new Set<Connection>();
    const accept = (socket: net.Socket): void => {
      const c = new Connection(socket, { open, onError, onClose: () => connections.delete(c) });
      connections.add(c);
    };
    // With TLS, the connection starts once the handshake (client certificate checked) is done.
    server = tlsOptions ? tls.createServer(tlsOptions, accept) : net.createServer(accept);
    sweepAll = () => connections.forEach((c) => c.sweep());
    goAwayAll = () => connections.forEach((c) => c.goAway());
    destroyAll = () => connections.forEach((c) => c.destroy());
  }
  // The cap is the listener's (node's maxConnections: a socket past it is closed as it is accepted,
  // and 'drop' emitted), so it counts every socket, TLS handshakes in progress included, on either transport.
  server.maxConnections = maxConnections;
  let refusalLoggedAt = -Infinity;
  server.on('drop', () => {
    const now = Date.now();
    if (now - refusalLoggedAt < REFUSAL_LOG_MS) return;
    refusalLoggedAt = now;
    onError(
      new Error(
        `a connection refused: ${maxConnections} are open, the most this server accepts (further refusals are not logged for ${REFUSAL_LOG_MS / 1000} s)`,
      ),
    );
  });

  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(address.slice(colon + 1)), host.replace(/^\[|\]$/g, ''), () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', onError);
  const sweeper = setInterval(sweepAll, idleTimeoutMs / SWEEPS_PER_IDLE_TIMEOUT);
  sweeper.unref();
  if (tlsOptions)
    server.on('tlsClientError', (err: Error) => onError(new Error(`TLS handshake refused: ${err.message}`)));
  const port = (server.address() as AddressInfo).port;

  return {
    address: `${host}:${port}`,
    drain(graceMs, streamsDone) {
      return new Promise<void>((resolve) => {
        let done = false;
        const finish = (): void => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          clearInterval(sweeper);
          destroyAll();
          resolve();
        };
        const timer = setTimeout(finish, graceMs);
        timer.unref();
        // Every client opens its next calls on a new connection. With streamsDone, the port keeps
        // listening until it resolves: a client whose stream on an old connection ended (or that
        // had none yet) can still open one (the meter's reports), and new Checks get the
        // service's draining answer.
        goAwayAll();
        const closing = streamsDone ?? Promise.resolve();
        void closing.then(() => {
          server.close(finish);
          goAwayAll();
          tracker.onUnaryIdle = () => {
            setTimeout(
              () => {
                if (tracker.unaryInFlight > 0) return;
                for (const call of [...tracker.streams])
                  call.finish(GrpcStatus.UNAVAILABLE, 'the server is shutting down');
              },
              streamsDone ? 0 : 250,
            ).unref();
          };
          if (tracker.unaryInFlight === 0) tracker.onUnaryIdle();
        });
      });
    },
  };
}

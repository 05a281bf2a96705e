/**
 * The gRPC side: `envoy.service.auth.v3.Authorization/Check` and `grpc.health.v1.Health` on one
 * port. Thin glue: every Check is answered with a normal CheckResponse (a denial is data, never a
 * failed RPC, which a fail-open Envoy would let through).
 */
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { authorizationService } from '../envoy/protos';

export const AUTHZ_SERVICE_NAME = 'envoy.service.auth.v3.Authorization';

export interface GrpcServer {
  readonly address: string;
  setServing(serving: boolean): void;
  /** Stops accepting calls, answers those in flight, then resolves (force-closes after `graceMs`). */
  drain(graceMs: number): Promise<void>;
}

/**
 * The Authorization service definition with the request left as bytes: the handler reads them
 * (check/read-request.ts), so nothing can fail before it. grpc-js would answer a deserializer
 * that throws with a failed RPC (INTERNAL), which Envoy treats as an error and a fail-open
 * deployment lets through; here undecodable bytes are denied like any bad input. Responses are
 * already encoded (check/response-encoder.ts) and sent as they are.
 */
function bytesInService(): grpc.ServiceDefinition {
  const def = authorizationService();
  const checkDef = def.Check as grpc.MethodDefinition<unknown, unknown>;
  return {
    ...def,
    Check: {
      ...checkDef,
      requestDeserialize: (bytes: Buffer) => bytes,
      responseSerialize: (bytes: Buffer) => bytes,
    },
  };
}

/** A serialised CheckResponse (check/response-encoder.ts). */
export type CheckAnswer = Buffer;

/**
 * Turns Nagle's algorithm off on every accepted connection. grpc-js never does, and a gRPC answer
 * is several small writes (headers, message, trailers): with Nagle and the peer's delayed ACKs one
 * of them can wait tens of milliseconds, which shows up as p99 latency on Envoy's side. grpc-js has
 * no option for it, so this reaches its http2 servers; if a future grpc-js hides them, it does
 * nothing (returns false) rather than fail.
 */
export function disableNagle(server: grpc.Server): boolean {
  const servers = (server as unknown as { http2Servers?: Map<import('node:net').Server, unknown> }).http2Servers;
  if (!(servers instanceof Map)) return false;
  for (const s of servers.keys()) s.on('connection', (socket: import('node:net').Socket) => socket.setNoDelay(true));
  return servers.size > 0;
}

export interface CheckHandlers {
  /**
   * Answers the bytes of one CheckRequest (undecodable ones too: a denial): the answer itself when
   * it is ready at once (a cached key), else a promise.
   */
  check(request: Buffer): CheckAnswer | Promise<CheckAnswer>;
  /** An unexpected failure of `check` (it should never throw or reject): deny. */
  failClosed(err: unknown): CheckAnswer;
}

/**
 * @param addServices registers more services on the same server and port (the meter's
 *   ExternalProcessor, server/ext-proc.ts)
 */
export async function startGrpcServer(address: string, handlers: CheckHandlers, maxReceiveMessageBytes: number, addServices?: (server: grpc.Server) => void): Promise<GrpcServer> {
  const server = new grpc.Server({
    // Envoy sends bodies up to with_request_body.max_request_bytes inside the CheckRequest; grpc-js's
    // 4 MiB default would reject bigger ones as RESOURCE_EXHAUSTED, an Envoy *error* (notes §6).
    'grpc.max_receive_message_length': maxReceiveMessageBytes,
    'grpc.max_send_message_length': -1,
    // channelz (grpc-js's introspection service, which modelgate never serves) costs every call a
    // tracker object, five closures and Date.now() calls: off, a fifth less garbage per Check
    // (bench/README-e2e.md, "Tail latency").
    'grpc.enable_channelz': 0,
  });
  const health = new HealthImplementation({ '': 'NOT_SERVING', [AUTHZ_SERVICE_NAME]: 'NOT_SERVING' });
  health.addToServer(server);
  let inflight = 0;
  let onIdle: (() => void) | undefined;
  const done = (): void => {
    if (--inflight === 0) onIdle?.();
  };
  server.addService(bytesInService(), {
    Check(call: grpc.ServerUnaryCall<Buffer, CheckAnswer>, callback: grpc.sendUnaryData<CheckAnswer>) {
      let answer: CheckAnswer | Promise<CheckAnswer>;
      try {
        answer = handlers.check(call.request);
      } catch (err) {
        return callback(null, handlers.failClosed(err));
      }
      if (!(answer instanceof Promise)) return callback(null, answer);
      inflight++;
      answer.then(
        (response) => (callback(null, response), done()),
        (err: unknown) => (callback(null, handlers.failClosed(err)), done()),
      );
    },
  });
  addServices?.(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  disableNagle(server);
  const host = address.slice(0, address.lastIndexOf(':'));
  return {
    address: `${host}:${port}`,
    setServing(serving) {
      const status = serving ? 'SERVING' : 'NOT_SERVING';
      health.setStatus('', status);
      health.setStatus(AUTHZ_SERVICE_NAME, status);
    },
    drain(graceMs) {
      // tryShutdown refuses new calls and waits for the open ones. Health Watch streams never end by
      // themselves, so once every in-flight Check is answered (and watchers had a moment to see
      // NOT_SERVING), the rest is closed; graceMs bounds the whole wait.
      return new Promise<void>((resolve) => {
        const finish = (): void => {
          clearTimeout(timer);
          server.forceShutdown();
          resolve();
        };
        const timer = setTimeout(finish, graceMs);
        timer.unref();
        server.tryShutdown(finish);
        // A call still being received is dispatched later and counts then: finish only when idle at fire time.
        onIdle = () => setTimeout(() => inflight === 0 && finish(), 250).unref();
        if (inflight === 0) onIdle();
      });
    },
  };
}

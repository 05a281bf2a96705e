/**
 * The gRPC side: `envoy.service.auth.v3.Authorization/Check`, `grpc.health.v1.Health` and the
 * meter's ExternalProcessor on one port, served by src/grpc (modelgate's own HTTP/2, or node:http2
 * with `grpc.transport: node`; not grpc-js's server: src/grpc/server.ts says why). Thin glue: every Check is answered with a normal
 * CheckResponse, whatever its bytes (a denial is data, never a failed RPC, which a fail-open Envoy
 * would let through).
 */
import { startH2GrpcServer, type GrpcTransport, type Method, type RequestProblem } from '../grpc/server';
import { Health } from './health';

export const AUTHZ_SERVICE_NAME = 'envoy.service.auth.v3.Authorization';
export const CHECK_PATH = `/${AUTHZ_SERVICE_NAME}/Check`;

export interface GrpcServer {
  readonly address: string;
  setServing(serving: boolean): void;
  /** Stops accepting calls, answers those in flight, then resolves (force-closes after `graceMs`). */
  drain(graceMs: number, streamsDone?: Promise<void>): Promise<void>;
}

/** A serialised CheckResponse (check/response-encoder.ts). */
export type CheckAnswer = Buffer;

export interface CheckHandlers {
  /**
   * Answers the bytes of one CheckRequest (undecodable ones too: a denial): the answer itself when
   * it is ready at once (a cached key), else a promise.
   */
  check(request: Buffer): CheckAnswer | Promise<CheckAnswer>;
  /** An unexpected failure of `check` (it should never throw or reject): deny. */
  failClosed(err: unknown): CheckAnswer;
  /** A call whose bytes are not one CheckRequest message (cut, compressed, too large): deny. */
  unreadable(problem: RequestProblem): CheckAnswer;
}

/** The Check method: bytes in, bytes out, and never a failed call. */
export function checkMethod(handlers: CheckHandlers): Method {
  return {
    kind: 'unary',
    handle(request) {
      let answer: CheckAnswer | Promise<CheckAnswer>;
      try {
        answer = handlers.check(request);
      } catch (err) {
        return handlers.failClosed(err);
      }
      return answer instanceof Promise ? answer.catch((err: unknown) => handlers.failClosed(err)) : answer;
    },
    unreadable: (problem) => handlers.unreadable(problem),
  };
}

/**
 * @param moreMethods further methods on the same port (the meter's access-log service, server/meter-service.ts)
 */
export interface GrpcServerSettings {
  readonly maxReceiveMessageBytes: number;
  readonly transport: GrpcTransport;
}

export async function startGrpcServer(address: string, handlers: CheckHandlers, settings: GrpcServerSettings, moreMethods: Iterable<[string, Method]> = [], onError?: (err: unknown) => void): Promise<GrpcServer> {
  const health = new Health({ '': 'NOT_SERVING', [AUTHZ_SERVICE_NAME]: 'NOT_SERVING' });
  const methods = new Map<string, Method>([[CHECK_PATH, checkMethod(handlers)], ...health.methods(), ...moreMethods]);
  const server = await startH2GrpcServer(address, methods, { ...settings, onError });
  return {
    address: server.address,
    setServing(serving) {
      const status = serving ? 'SERVING' : 'NOT_SERVING';
      health.setStatus('', status);
      health.setStatus(AUTHZ_SERVICE_NAME, status);
    },
    drain: (graceMs, streamsDone) => server.drain(graceMs, streamsDone),
  };
}

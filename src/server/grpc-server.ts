/**
 * The gRPC side: `envoy.service.auth.v3.Authorization/Check`, `grpc.health.v1.Health` and the
 * meter's access-log streams on one port, served by @modelgate/grpc-server (packages/grpc-server: modelgate's own
 * HTTP/2, or node:http2
 * with `grpc.transport: node`; not grpc-js's server: its README says why). Thin glue: every Check is answered with a
 * normal
 * CheckResponse, whatever its bytes (a denial is data, never a failed RPC, which a fail-open Envoy
 * would let through).
 */
import { timingSafeEqual } from 'node:crypto';
import type { UnreadableRequest } from '../check/pipeline';
import {
  startH2GrpcServer,
  type GrpcTransport,
  type Method,
  type RequestProblem,
  type TlsSettings,
} from '@modelgate/grpc-server';
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
   * it is ready at once (a cached key), else a promise. Keeps no view of `request` once its answer
   * is ready: its bytes are reused for later calls (checkMethod).
   */
  check(request: Buffer): CheckAnswer | Promise<CheckAnswer>;
  /** An unexpected failure of `check` (it should never throw or reject): deny. */
  failClosed(err: unknown): CheckAnswer;
  /** A call whose bytes are not one CheckRequest message (cut, compressed, too large): deny. */
  unreadable(problem: RequestProblem): CheckAnswer;
  /**
   * A Check without the port's secret: a normal denial (503 authz_unauthenticated), never a failed
   * RPC, which an Envoy set to fail open (failure_mode_allow) would let through. Sent before any of
   * the request is read: no key is looked up, nothing of the caller's is parsed or buffered.
   */
  unauthenticated(): CheckAnswer;
}

/**
 * The framing problems @modelgate/grpc-server names are exactly those the Check pipeline has a hint for (a compile-time
 * check).
 */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const problemsMatch: Same<RequestProblem, UnreadableRequest> = true;
void problemsMatch;

/**
 * The Check method: bytes in, bytes out, and never a failed call. It borrows its request: nothing
 * of the Check (decision, log line, caches, the meter's hold) keeps a view of the request's bytes
 * once its answer is ready (check/README.md, "The request's bytes"), so a large one is assembled
 * in a reused buffer.
 */
export function checkMethod(handlers: CheckHandlers): Method {
  return {
    kind: 'unary',
    borrowsRequest: true,
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
  /** mTLS (grpc.tls, read): only a client with a certificate `clientCa` signed gets a connection. */
  readonly tls?: TlsSettings;
  /**
   * The shared secret (grpc.secret, read): every call on the port, whatever its service (Check,
   * the meter's streams, the embedded rate limit service, health), must carry `authorization: Bearer <secret>`.
   */
  readonly secret?: string;
}

/** A constant-time check of a call's `authorization` against `Bearer <secret>`. */
export function secretCheck(secret: string): (authorization: string | undefined) => boolean {
  const expected = Buffer.from(`Bearer ${secret}`, 'utf8');
  return (authorization) => {
    if (authorization === undefined || authorization.length !== expected.length) return false;
    const given = Buffer.from(authorization, 'utf8');
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
}

export async function startGrpcServer(
  address: string,
  handlers: CheckHandlers,
  settings: GrpcServerSettings,
  moreMethods: Iterable<[string, Method]> = [],
  onError?: (err: unknown) => void,
): Promise<GrpcServer> {
  const health = new Health({ '': 'NOT_SERVING', [AUTHZ_SERVICE_NAME]: 'NOT_SERVING' });
  const methods = new Map<string, Method>([[CHECK_PATH, checkMethod(handlers)], ...health.methods(), ...moreMethods]);
  // Without the secret, a Check still gets a CheckResponse (a denial); every other call fails UNAUTHENTICATED.
  const unauthenticated = new Map([[CHECK_PATH, () => handlers.unauthenticated()]]);
  const server = await startH2GrpcServer(address, methods, {
    maxReceiveMessageBytes: settings.maxReceiveMessageBytes,
    transport: settings.transport,
    onError,
    tls: settings.tls,
    ...(settings.secret !== undefined ? { authorize: secretCheck(settings.secret), unauthenticated } : {}),
  });
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

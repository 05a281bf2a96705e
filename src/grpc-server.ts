/**
 * The gRPC side: `envoy.service.auth.v3.Authorization/Check` and `grpc.health.v1.Health` on one
 * port. Thin glue: every Check is answered with a normal CheckResponse (a denial is data, never a
 * failed RPC, which a fail-open Envoy would let through).
 */
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import type { CheckRequest__Output } from '../proto/types/envoy/service/auth/v3/CheckRequest';
import type { CheckResponse } from '../proto/types/envoy/service/auth/v3/CheckResponse';
import { authorizationService } from './envoy-protos';

export const AUTHZ_SERVICE_NAME = 'envoy.service.auth.v3.Authorization';

export interface GrpcServer {
  readonly address: string;
  setServing(serving: boolean): void;
  /** Stops accepting calls, answers those in flight, then resolves (force-closes after `graceMs`). */
  drain(graceMs: number): Promise<void>;
}

export async function startGrpcServer(
  address: string,
  check: (req: CheckRequest__Output) => Promise<CheckResponse>,
  failClosed: (err: unknown) => CheckResponse,
  maxReceiveMessageBytes: number,
): Promise<GrpcServer> {
  const server = new grpc.Server({
    // Envoy sends bodies up to with_request_body.max_request_bytes inside the CheckRequest; grpc-js's
    // 4 MiB default would reject bigger ones as RESOURCE_EXHAUSTED, an Envoy *error* (notes §6).
    'grpc.max_receive_message_length': maxReceiveMessageBytes,
    'grpc.max_send_message_length': -1,
  });
  const health = new HealthImplementation({ '': 'NOT_SERVING', [AUTHZ_SERVICE_NAME]: 'NOT_SERVING' });
  health.addToServer(server);
  server.addService(authorizationService(), {
    Check(call: grpc.ServerUnaryCall<CheckRequest__Output, CheckResponse>, callback: grpc.sendUnaryData<CheckResponse>) {
      check(call.request).then(
        (response) => callback(null, response),
        (err: unknown) => callback(null, failClosed(err)),
      );
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const host = address.slice(0, address.lastIndexOf(':'));
  return {
    address: `${host}:${port}`,
    setServing(serving) {
      const status = serving ? 'SERVING' : 'NOT_SERVING';
      health.setStatus('', status);
      health.setStatus(AUTHZ_SERVICE_NAME, status);
    },
    drain(graceMs) {
      return new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}

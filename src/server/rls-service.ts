/**
 * The embedded rate limit engine's gRPC side (`rateLimits.engine: embedded`):
 * `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` on modelgate's gRPC port, where
 * Envoy's rate limit filters call it. Thin glue: bytes to a RateLimitRequest (ratelimit/rls-codec.ts),
 * the engine's answer back to bytes. A message that cannot be read fails the call (INVALID_ARGUMENT):
 * Envoy then applies rateLimits.failureMode, as with any rate limit service error.
 */
import type { UnaryMethod } from '@modelgate/grpc-server';
import { GrpcError, GrpcStatus } from '@modelgate/grpc-server/status';
import type { EmbeddedEngine } from '../ratelimit/embedded-engine';
import { decodeRequest, encodeResponse, prepareRlsCodec } from '../ratelimit/rls-codec';
import { errorMessage } from '../errors/internal-error';

export const RLS_SERVICE_NAME = 'envoy.service.ratelimit.v3.RateLimitService';
export const RLS_PATH = `/${RLS_SERVICE_NAME}/ShouldRateLimit`;

export function rateLimitServiceMethod(engine: EmbeddedEngine): [string, UnaryMethod] {
  prepareRlsCodec();
  return [
    RLS_PATH,
    {
      kind: 'unary',
      handle(request) {
        let req;
        try {
          req = decodeRequest(request);
        } catch (err) {
          throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, errorMessage(err));
        }
        return encodeResponse(engine.decide(req));
      },
    },
  ];
}

/**
 * How Envoy authenticates to modelgate's gRPC port (docs/security.md), for every gRPC call it makes there:
 * the ext_authz Check, the meter's streams, the rate limit filters' calls to the embedded engine
 * (RateLimitService/ShouldRateLimit) and the gRPC health check.
 * - The shared secret (grpc.secret): `authorization: Bearer <secret>` in each call's metadata
 *   (GrpcService.initial_metadata; the health check's own initial_metadata). The value is written
 *   into the bundle, which is therefore written 0600 (`modelgate envoy-config --out`).
 * - mTLS (gateway.authzTls): the clusters to modelgate speak TLS (ALPN h2) with Envoy's client
 *   certificate and check modelgate's against its CA (and its name, when serverName is set).
 */
import type { AuthzTls } from '../config/load';
import { GRPC_SECRET_HEADER } from '../config/grpc-auth';

type Obj = Record<string, unknown>;

/** grpc_service.initial_metadata (HeaderValue), or nothing without a secret. */
export function grpcServiceMetadata(secret: string | undefined): Obj {
  return secret === undefined ? {} : { initial_metadata: [{ key: GRPC_SECRET_HEADER, value: `Bearer ${secret}` }] };
}

/** The gRPC health check's initial_metadata (HeaderValueOption), or nothing without a secret. */
export function healthCheckMetadata(secret: string | undefined): Obj {
  return secret === undefined
    ? {}
    : {
        initial_metadata: [
          {
            header: { key: GRPC_SECRET_HEADER, value: `Bearer ${secret}` },
            append_action: 'OVERWRITE_IF_EXISTS_OR_ADD',
          },
        ],
      };
}

/** The transport socket of a cluster to modelgate's gRPC port, or nothing when it is plaintext. */
export function authzTransportSocket(tls: AuthzTls | null): Obj {
  if (tls === null) return {};
  const validation: Obj = { trusted_ca: { filename: tls.caFile } };
  if (tls.serverName !== null)
    validation.match_typed_subject_alt_names = [{ san_type: 'DNS', matcher: { exact: tls.serverName } }];
  return {
    transport_socket: {
      name: 'envoy.transport_sockets.tls',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
        ...(tls.serverName !== null ? { sni: tls.serverName } : {}),
        common_tls_context: {
          alpn_protocols: ['h2'],
          tls_certificates: [{ certificate_chain: { filename: tls.certFile }, private_key: { filename: tls.keyFile } }],
          validation_context: validation,
        },
      },
    },
  };
}

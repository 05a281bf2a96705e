/**
 * What a rendered bundle exposes that an operator should know at once (docs/security.md): printed by
 * `modelgate envoy-config` and `modelgate up` on stderr. Pure: settings in, sentences out.
 */
import { isLoopback, type Config } from '../config/load';

export function bundleWarnings(config: Pick<Config, 'gateway' | 'grpc'>): string[] {
  const out: string[] = [];
  const { admin, authz } = config.gateway;
  if (!isLoopback(admin.host)) {
    out.push(
      `gateway.admin ${admin.host}:${admin.port} is beyond loopback: Envoy's admin interface has no authentication and can stop the gateway, drain its listeners and print its whole config (the gRPC secret included); keep it on 127.0.0.1`,
    );
  }
  if (!isLoopback(authz.host) && !config.grpc.secret && !config.grpc.tls) {
    out.push(
      `Envoy reaches modelgate's gRPC port at ${authz.host}:${authz.port}, beyond loopback, without grpc.secret or grpc.tls: anything that reaches that port can run Checks and send meter streams that debit any key (docs/security.md, "The gRPC port")`,
    );
  }
  return out;
}

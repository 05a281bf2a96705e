/**
 * What stage 1 of the pipeline produces: the few parts of a CheckRequest modelgate decides on, as a
 * small plain object (check-request-decoder.ts reads it from the wire bytes). Absent parts are
 * empty values, which later stages deny with a reason.
 */
import type { Config } from './config';
import { headerFilter, type HeaderFilter } from './check-request-decoder';

export interface RequestView {
  readonly method: string;
  /** The path without its query string (Envoy's `:path` includes the query; notes §2). */
  readonly path: string;
  /** The raw query string after `?`, or ''. */
  readonly query: string;
  /**
   * The headers the decision reads (`decisionHeaders`), by lowercase name; repeated headers arrive
   * joined with ','. Other headers are not kept.
   */
  readonly headers: Readonly<Record<string, string>>;
  /** The body bytes (`raw_body` with pack_as_bytes; else the UTF-8 `body`), or undefined. */
  readonly body: Uint8Array | undefined;
  /** Envoy's `x-envoy-auth-partial-body: true`: the body was cut at max_request_bytes. */
  readonly partialBody: boolean;
  /** The client's x-request-id (Envoy generates one), for logs. Not Envoy's internal stream id. */
  readonly requestId: string;
}

/**
 * Every header a decision reads: the pseudo-headers, the request id, Envoy's partial-body flag,
 * the ones that choose the route or refuse the body, and the configured key headers (both kinds:
 * a key in the other kind's header is reported). Envoy's `allowed_headers` (envoy/envoy.yaml)
 * lists all of them but the partial-body flag, which Envoy adds itself (test/envoy-config.test.ts
 * checks this); test/unit-decision-headers.test.ts checks that decisions read no other header.
 */
export function decisionHeaders(routes: Config['routes']): string[] {
  return [':path', ':method', 'x-request-id', 'x-envoy-auth-partial-body', 'anthropic-version', 'content-encoding', ...routes.bearerHeaders, ...routes.vendorHeaders];
}

/** The decoder's filter for a config's routes (built once per config). */
export function requestHeaderFilter(routes: Config['routes']): HeaderFilter {
  return headerFilter(decisionHeaders(routes));
}

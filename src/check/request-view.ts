/**
 * What stage 1 of the pipeline produces: the few parts of a CheckRequest modelgate decides on, as a
 * small plain object (read-request.ts reads it from the wire bytes). Absent parts are
 * empty values, which later stages deny with a reason.
 */
export interface RequestView {
  readonly method: string;
  /** The path without its query string (Envoy's `:path` includes the query; notes §2). */
  readonly path: string;
  /** The raw query string after `?`, or ''. */
  readonly query: string;
  /**
   * The headers the decision reads (contract/headers.ts `decisionHeaders`), by lowercase name; repeated headers arrive
   * joined with ','. Other headers are not kept.
   */
  readonly headers: Readonly<Record<string, string>>;
  /** The body bytes (`raw_body` with pack_as_bytes; else the UTF-8 `body`), or undefined. */
  readonly body: Uint8Array | undefined;
  /** Envoy's `x-envoy-auth-partial-body: true`: the body was cut at max_request_bytes. */
  readonly partialBody: boolean;
  /**
   * The request's identity: the `x-modelgate-request` Envoy minted on modelgate's route (no client
   * can set it: envoy/request-mark.ts), else the x-request-id (a Check sent to the gRPC port itself).
   * The meter reserves and settles by it; logs print it.
   */
  readonly requestId: string;
  /**
   * The client's address as Envoy determined it (the CheckRequest's source address: the peer, or the
   * x-forwarded-for entry its xff_num_trusted_hops names), for logs; undefined when not sent.
   */
  readonly client?: string;
}

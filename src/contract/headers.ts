/**
 * The `x-modelgate-*` header names: the one place they are spelled. The writer sets them
 * (write-response.ts), Envoy's rendered direct responses and local replies carry the same ones
 * (envoy/render*.ts), the meter reads what ext_authz set (meter/meter.ts, and the headers Envoy
 * forwards to it), the model lists answer with them (server/catalog.ts), the console reads a key
 * and the client's address from them (console/http-handler.ts; its browser script,
 * console/assets/app.js, cannot import and is checked against this list by
 * test/console/api.test.ts), and a credential header may not be one of them (config/schema.ts).
 */
export const HEADER = {
  /** A denial's reason code (reasons.ts). Also on Envoy's own 404/405 and local replies. */
  reason: 'x-modelgate-reason',
  /** A denial's hint: one printable line, never a key. */
  hint: 'x-modelgate-hint',
  /** Set upstream on an allowed request: the key's id (never the key). */
  keyId: 'x-modelgate-key-id',
  /** Set upstream on an allowed request: the key's group. */
  group: 'x-modelgate-group',
  /** Set upstream on an allowed request whose model is one of the group's. */
  model: 'x-modelgate-model',
  /** The console's API: the key, percent-encoded, in this request header only. */
  consoleKey: 'x-modelgate-console-key',
  /**
   * The client's address as Envoy determined it (the connection's peer, or with
   * gateway.trustedProxyHops the x-forwarded-for hop that many from the right), set by Envoy on the
   * console's route (envoy/render-routes.ts) over any copy a client sent; the console's per-address
   * limit counts it.
   */
  clientAddress: 'x-modelgate-client-address',
  /**
   * The request's identity for the meter, minted by Envoy (`%UNIQUE_ID%`) on modelgate's routes
   * after every client-sent `x-modelgate-*` header is removed (envoy/request-mark.ts): the Check
   * reserves and the meter settles by it, so no client-chosen `x-request-id` can fool either.
   */
  request: 'x-modelgate-request',
} as const;

/**
 * Budget alerts by webhook (server/budget-webhook.ts): headers of modelgate's own POSTs, never of a request it checks.
 */
export const WEBHOOK_HEADER = {
  /** `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
  signature: 'x-modelgate-signature',
  /** The event's id: the same crossing sent twice carries the same id. */
  eventId: 'x-modelgate-event-id',
} as const;

/** What every modelgate header name starts with (config/schema.ts: no credential header may). */
export const HEADER_PREFIX = 'x-modelgate-';

/**
 * modelgate's own headers that no upstream gets, removed from every request an upstream route
 * forwards (envoy/render.ts upstreamHeadersToRemove): the console's key header, which modelgate
 * reads as a credential, the client address Envoy passes to the
 * console, the reason and hint of answers, and the request's identity for the meter. The identity headers (key id,
 * group, model) are
 * each Check's to set or remove (write-response.ts).
 */
export const HEADERS_NEVER_UPSTREAM = [
  HEADER.consoleKey,
  HEADER.clientAddress,
  HEADER.reason,
  HEADER.hint,
  HEADER.request,
] as const;

/**
 * Every header a Check reads: the pseudo-headers, the request ids, the client's agent and address
 * (for logs and hints), Envoy's partial-body flag, the ones that choose the route, refuse the body or
 * raise the meter's maximum, and the configured key headers. Envoy's ext_authz `allowed_headers`
 * lists them all but the partial-body flag, which Envoy adds itself (test/envoy/render.test.ts).
 */
export function decisionHeaders(routes: {
  readonly bearerHeaders: readonly string[];
  readonly vendorHeaders: readonly string[];
}): string[] {
  return [
    ':path',
    ':method',
    'x-request-id',
    HEADER.request,
    'user-agent',
    'x-forwarded-for',
    'x-envoy-auth-partial-body',
    'anthropic-version',
    'anthropic-beta',
    'x-goog-fieldmask',
    'content-encoding',
    'content-type',
    ...routes.bearerHeaders,
    ...routes.vendorHeaders,
  ];
}

/**
 * Requests in flight per key (the `inFlight` limit). Counting windows cannot express a concurrency
 * cap, so it is a per-replica table: the meter's (meter/in-flight.ts), where a request is from its
 * Check to its settlement, plus the Checks between the cap and the meter's admission
 * (server/service.ts). With R replicas behind Envoy a key can have up to R x inFlight requests in
 * flight (docs/rate-limits.md).
 */

/** What the Check's concurrency admission needs. */
export interface InFlightTable {
  /** Requests of the key in flight on this replica now. */
  inFlight(keyId: string): number;
  /** A request of the key passed the cap (once per request id). */
  acquire(keyId: string, requestId: string): void;
  /** Its admission is over (allowed: the meter's table holds it now); unknown ids are ignored. */
  release(requestId: string): void;
}

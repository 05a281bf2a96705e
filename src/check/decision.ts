/** The plain result of deciding one request: what the write stage and the log line are built from. */
import type { RateLimitMetadata } from '../ratelimit/metadata';
import type { Reason } from './reasons';
import type { Route } from './routes';

export interface Decision {
  readonly allowed: boolean;
  readonly reason: Reason;
  readonly status: number;
  /** One line of printable ASCII for the client; never contains a key. '' when allowed. */
  readonly hint: string;
  readonly route: Route;
  readonly keyId?: string;
  readonly group?: string;
  /** The model as requested (client-supplied: sanitise before echoing anywhere). */
  readonly model?: string;
  /** true when the model is one of the key's group (safe to log as is). */
  readonly modelKnown?: boolean;
  /** true when the requested model string is itself a known key (never echoed or logged). */
  readonly modelIsKey?: boolean;
  /** true when a stale cached answer was used because the store could not answer. */
  readonly stale?: boolean;
  /** On an allowed protocol request: the key's balance (`null`: unlimited), for strict metering. */
  readonly balance?: number | null;
  /** Allowed protocol requests with counted limits: what Envoy's rate limit filters read (ratelimit/metadata.ts). */
  readonly rateLimit?: RateLimitMetadata;
  /** Allowed protocol requests: the key's cap on requests in flight (ratelimit/in-flight.ts), if any. */
  readonly inFlightLimit?: number;
  /** A 429 of modelgate's own (concurrency_limited): seconds the client should wait (retry-after). */
  readonly retryAfter?: number;
  /** Allowed only: query parameters named like a key (with empty values) for Envoy to remove, as sent. */
  readonly removeQuery?: readonly string[];
}

/**
 * The plain result of deciding one request: what the write stage and the log line are built from.
 * It has no status of its own: the status is the reason's (reasons.ts statusOf).
 */
import type { RateLimitMetadata } from '../ratelimit/metadata';
import type { Budget } from '../store/budget-window';
import type { Reason } from '../contract/reasons';
import type { Route } from './routes';
import type { TopLevelFields } from './extract-model';

export interface Decision {
  readonly allowed: boolean;
  readonly reason: Reason;
  /** One line of printable ASCII for the client; never contains a key. '' when allowed. */
  readonly hint: string;
  readonly route: Route;
  readonly keyId?: string;
  /** Allowed only: the key's SHA-256 (its cache entry), for the meter to update its balance there. */
  readonly keySha256?: string;
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
  /** On an allowed protocol request: the key's budget per window (meter/budgets.ts), if it has one. */
  readonly budget?: Budget | null;
  /**
   * Allowed only: where the body's top-level fields the meter reads (request-fields.ts) sit, found
   * in the same pass as the model. Not part of the answer Envoy gets (the response cache ignores it).
   */
  readonly bodyFields?: TopLevelFields;
  /** Allowed protocol requests with counted limits: what Envoy's rate limit filters read (ratelimit/metadata.ts). */
  readonly rateLimit?: RateLimitMetadata;
  /** Allowed protocol requests: the key's cap on requests in flight (ratelimit/in-flight.ts), if any. */
  readonly inFlightLimit?: number;
  /** A 429 of modelgate's own (concurrency_limited): seconds the client should wait (retry-after). */
  readonly retryAfter?: number;
  /**
   * What an allowed metered request's estimate needs beyond the report (meter/admission.ts):
   * `maxInput` and `maxOutput`, the tokens it may cost at most (an estimate never exceeds them);
   * `hiddenOutput`, the output to debit when it is estimated (a reasoning model or request, a Gemini
   * field mask); `referencedInput`, input the provider adds from elsewhere; `inputExtra` and
   * `inputFactor`, Anthropic's own prompts and what a cache write costs (an input estimate counts them
   * as the hold does; a factor of 2 names a 1-hour write); `price`, the model's price it
   * was admitted at (meter/price-mark.ts; absent: no price). Carried in Envoy's
   * metadata, so a report that finds no entry (a late one, another replica's) settles the same.
   */
  readonly meterMarks?: {
    readonly maxInput?: number; readonly maxOutput?: number; readonly hiddenOutput?: number; readonly referencedInput?: true; readonly inputExtra?: number; readonly inputFactor?: number;
    /** The price it was admitted at, as meter/price-mark.ts writes it (absent: no price). */
    readonly price?: string;
    /** The priced hosted tools it declares and its most calls of them, as meter/price-mark.ts writes them (`web_search,file_search:10`). */
    readonly tools?: string;
  };
  /** Allowed only: query parameters named like a key (with empty values) for Envoy to remove, as sent. */
  readonly removeQuery?: readonly string[];
}

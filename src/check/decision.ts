/**
 * The plain result of deciding one request: what the write stage and the log line are built from.
 * An allowed decision names its key, group and balance; a denied one its reason and hint. Each
 * declares the other's fields as absent, so a field read on `Decision` is typed on both sides. It
 * has no status of its own: the status is the reason's (contract/reasons.ts statusOf).
 */
import type { RateLimitMetadata } from '../ratelimit/metadata';
import type { Budget } from '../store/budget-window';
import type { DenyReason } from '../contract/reasons';
import type { MeterMarks } from '../contract/meter-marks';
import type { Route } from './routes';
import type { TopLevelFields } from '../contract/body-fields';

/** A request that goes upstream. */
export interface AllowedDecision {
  readonly allowed: true;
  readonly reason: 'allowed';
  readonly hint: '';
  readonly route: Route;
  readonly keyId: string;
  /** The key's SHA-256 (its cache entry), for the meter to update its balance there. */
  readonly keySha256: string;
  readonly group: string;
  /** The model, one of the group's; absent on the model list. */
  readonly model?: string;
  readonly modelKnown?: true;
  readonly modelIsKey?: undefined;
  /** true when a stale cached answer was used because the store could not answer. */
  readonly stale: boolean;
  /** The key's balance (`null`: unlimited), for strict metering. */
  readonly balance: number | null;
  /** The key's budget per window (meter/budgets.ts), if it has one. */
  readonly budget?: Budget;
  /** The key's budget per window on the requested model (meter/budgets.ts), if it has one. */
  readonly modelBudget?: Budget;
  /** Where the body's top-level fields the meter reads sit (request-fields.ts), found with the model. */
  readonly bodyFields?: TopLevelFields;
  /** Protocol requests with counted limits: what Envoy's rate limit filters read (ratelimit/metadata.ts). */
  readonly rateLimit?: RateLimitMetadata;
  /** Protocol requests: the key's cap on requests in flight (ratelimit/in-flight.ts), if any. */
  readonly inFlightLimit?: number;
  /** A metered request's maxima and price, set by the meter's admission (meter/admission.ts). */
  readonly meterMarks?: MeterMarks;
  /** Query parameters named like a key (with empty values) for Envoy to remove, as sent. */
  readonly removeQuery?: readonly string[];
  readonly retryAfter?: undefined;
}

/** A request refused with a reason and a hint; who asked, when the denial came after the key was known. */
export interface DeniedDecision {
  readonly allowed: false;
  readonly reason: DenyReason;
  /** One line of printable ASCII for the client; never contains a key. */
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
  readonly stale?: boolean;
  /** A 429 of modelgate's own (concurrency_limited): seconds the client should wait (retry-after). */
  readonly retryAfter?: number;
  readonly keySha256?: undefined;
  readonly balance?: undefined;
  readonly budget?: undefined;
  readonly modelBudget?: undefined;
  readonly bodyFields?: undefined;
  readonly rateLimit?: undefined;
  readonly inFlightLimit?: undefined;
  readonly meterMarks?: undefined;
  readonly removeQuery?: undefined;
}

export type Decision = AllowedDecision | DeniedDecision;

/** An allowed decision turned down by a later stage: who asked stays, what only an allow carries goes. */
export function denyAllowed(d: AllowedDecision, reason: DenyReason, hint: string): DeniedDecision {
  return {
    allowed: false,
    reason,
    hint,
    route: d.route,
    keyId: d.keyId,
    group: d.group,
    model: d.model,
    modelKnown: d.modelKnown,
    stale: d.stale,
  };
}

/** An allowed request that names its model: every protocol request decide.ts allows does. */
export type AllowedWithModel = AllowedDecision & { readonly model: string };

/** Whether an allowed decision names its model (false only on the model list). */
export function namesModel(d: AllowedDecision): d is AllowedWithModel {
  return d.model !== undefined;
}

/**
 * The concurrency cap at Check time (docs/rate-limits.md): an allowed protocol request of a key with an
 * `inFlight` limit takes a slot of the replica's in-flight table, or is refused 429
 * concurrency_limited when the key already holds them all. Run by the Check pipeline on allowed
 * decisions (check/pipeline.ts `admit`). Requests and tokens per minute and day are not decided
 * here: Envoy's rate limit filters count them (render-ratelimit.ts).
 */
import type { Decision } from './decision';
import { isTokenCount } from '../providers/endpoints';
import { HINTS } from '../contract/reasons';
import type { RequestView } from './request-view';
import type { InFlightTable } from '../ratelimit/in-flight';

/** Seconds a client refused for concurrency is told to wait: a slot frees when any response of the key ends. */
export const CONCURRENCY_RETRY_AFTER = 1;

/** The decision after the cap, and whether a slot was taken (to give back if a later stage refuses). */
export function admitInFlight(
  table: InFlightTable,
  d: Decision,
  view: RequestView,
): { decision: Decision; acquired: boolean } {
  const limit = d.inFlightLimit;
  if (!d.allowed || limit === undefined || d.keyId === undefined || view.requestId === '' || isTokenCount(view.path))
    return { decision: d, acquired: false };
  const now = table.inFlight(d.keyId);
  if (now >= limit) {
    return {
      acquired: false,
      decision: {
        allowed: false,
        reason: 'concurrency_limited',
        route: d.route,
        hint: HINTS.concurrency_limited.inFlight(d.keyId, now, limit),
        keyId: d.keyId,
        group: d.group,
        model: d.model,
        modelKnown: d.modelKnown,
        stale: d.stale,
        retryAfter: CONCURRENCY_RETRY_AFTER,
      },
    };
  }
  table.acquire(d.keyId, view.requestId);
  return { decision: d, acquired: true };
}

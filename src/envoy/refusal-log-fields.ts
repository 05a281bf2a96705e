/**
 * The access-log fields that put the answers Envoy gives itself in modelgate's vocabulary: its
 * local replies (503 authz_unavailable when modelgate cannot be reached, the 404/405 routes, 413,
 * the global rate limit engine's 429 and 503) carry the x-modelgate-reason header the renderer's
 * reply mappers set, and `reply_reason` logs it, beside `request_id`. modelgate's own denials carry
 * the same header (the same value as `reason`). docs/operations.md shows the query that joins the
 * two logs on the request id.
 */
import { HEADER } from '../contract/headers';

export function refusalLogFields(): Record<string, string> {
  return { reply_reason: `%RESP(${HEADER.reason.toUpperCase()})%` };
}

/**
 * "A fast wrong answer counts for nothing": every benchmark checks the answers it got. A Check is
 * allowed iff `status.code == 0` (an unset status is 0, which Envoy also treats as OK: notes §3);
 * a denial must carry the expected `x-modelgate-reason` in `denied_response.headers`.
 */
import type { CheckResponse__Output } from '../src/envoy/protos';
import type { Expectation } from './check-requests';
import { HEADER } from '../src/contract/headers';

/** The `x-modelgate-reason` of a denied response, if any. */
export function reasonOf(resp: CheckResponse__Output): string | undefined {
  for (const h of resp.denied_response?.headers ?? []) {
    if (h.header?.key?.toLowerCase() === HEADER.reason) return h.header.value;
  }
  return undefined;
}

/** null when `resp` is the expected decision, otherwise what is wrong with it. */
export function decisionProblem(resp: CheckResponse__Output, expect: Expectation): string | null {
  const code = resp.status?.code ?? 0;
  const reason = reasonOf(resp);
  if (expect.allowed) {
    return code === 0 ? null : `expected allow, got status ${code} reason ${reason ?? '(none)'}`;
  }
  if (code === 0) return `expected deny ${expect.reason}, got status 0 (allow)`;
  if (reason !== expect.reason) return `expected reason ${expect.reason}, got ${reason ?? '(none)'} (status ${code})`;
  return null;
}

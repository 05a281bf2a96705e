/**
 * Whether a client should retry a denial, as the `x-should-retry` header the OpenAI and Anthropic
 * SDKs read before their own rules (openai-python and anthropic-python `_should_retry`, the
 * TypeScript SDKs `shouldRetry`; Claude Code and litellm use those SDKs), with `retry-after` where a
 * retry helps. Derived from the status alone, so every denial (modelgate's own, Envoy's direct
 * answers and local replies, the rate limits' 429s) follows one rule:
 *
 * - 429, 503, 504: the same request can succeed later: `x-should-retry: true` and `retry-after`
 *   (a rate limit's 429 names the real reset of the limit it reached, docs/rate-limits.md; other
 *   answers say one second);
 * - everything else (400, 401, 403, 404, 405, 413, 415): retrying sends the same wrong request
 *   again: `x-should-retry: false`. Without it the Anthropic SDKs retry a 401 (Claude Code did for
 *   three minutes before printing anything); with it every SDK shows the hint at once.
 *
 * What each client does with each status is in docs/clients.md.
 */

/** The header both SDK families read (`x-should-retry: true|false`). */
export const SHOULD_RETRY_HEADER = 'x-should-retry';

/** Seconds a client waits before retrying a retryable denial, unless the denial names its own. */
export const DEFAULT_RETRY_AFTER_SECONDS = 1;

/** Whether the same request can succeed later: 429 (a limit resets), 503 and 504 (something recovers). */
export function retryable(status: number): boolean {
  return status === 429 || status === 503 || status === 504;
}

/**
 * The retry headers of a denial with this status, as [name, value] pairs. `retryAfter` is the wait
 * in seconds (rounded up), or an Envoy formatter that Envoy evaluates when it answers (the rate
 * limit filters' `%RESP(X-RATELIMIT-RESET)%`: the refused window's own reset); ignored when the
 * status is not retryable.
 */
export function retryHeaders(
  status: number,
  retryAfter: number | EnvoyFormatter = DEFAULT_RETRY_AFTER_SECONDS,
): Array<[string, string]> {
  if (!retryable(status)) return [[SHOULD_RETRY_HEADER, 'false']];
  const wait = typeof retryAfter === 'number' ? String(Math.max(0, Math.ceil(retryAfter))) : retryAfter;
  return [
    [SHOULD_RETRY_HEADER, 'true'],
    ['retry-after', wait],
  ];
}

/** An Envoy substitution format string (`%RESP(...)%`, `%DYNAMIC_METADATA(...)%`). */
export type EnvoyFormatter = `%${string}%`;

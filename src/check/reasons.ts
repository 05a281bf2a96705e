/**
 * The one catalogue of decision reasons: every reason code modelgate can answer with, its HTTP
 * status, and when it applies. docs/reasons-and-headers.md's reason table is checked against this list by
 * test/check/reasons-doc.test.ts, so the code, the docs and the tests cannot drift apart.
 *
 * Order follows the spec's order of checks (seed §4.1 rule 4, §7): path (404/405) first, then the
 * key (401), then group, body, model and balance (403/400), then store failures (503).
 */
export const REASONS = {
  allowed: { status: 200, when: 'every check passed; the request goes upstream' },
  path_repeated: { status: 404, when: 'an endpoint path or prefix is repeated (Envoy route, ext_authz off)' },
  prefix_wrong: { status: 404, when: 'a known endpoint under a wrong or missing prefix (Envoy route, ext_authz off)' },
  path_unknown: { status: 404, when: 'no endpoint of the spec has this path' },
  method_not_allowed: { status: 405, when: 'a known path with the wrong HTTP method' },
  key_in_url: { status: 401, when: 'a key in the query string or path: the spec says never in the URL (seed §5.4)' },
  key_missing: { status: 401, when: 'no key in the headers this route expects' },
  key_conflict: { status: 401, when: 'two different keys in two accepted headers' },
  key_malformed: { status: 401, when: 'quotes, a pasted `Bearer `, spaces, control or extra characters, a wrong scheme' },
  key_incomplete: { status: 401, when: 'the modelgate key prefix with a wrong length or checksum' },
  key_unknown: { status: 401, when: 'no key with this hash exists' },
  key_disabled: { status: 401, when: 'the key is disabled' },
  key_expired: { status: 401, when: 'the key is past its expiresAt' },
  group_unavailable: { status: 403, when: "the key's group is marked unavailable" },
  body_too_large: { status: 413, when: 'the body is over gateway.maxRequestBytes: Envoy answers before any Check, or (over HTTP/2, a little over the limit) checks it cut, flagged x-envoy-auth-partial-body: true, and modelgate refuses it' },
  body_invalid: { status: 400, when: 'the body is not a JSON object (empty, invalid JSON or UTF-8, compressed, nested too deep, duplicate model, "MODEL" beside "model")' },
  content_type_unsupported: { status: 415, when: 'a body read for its model is sent with a content type other than application/json (UTF-8)' },
  model_missing: { status: 400, when: 'the body has no non-empty string `model`' },
  model_not_in_group: { status: 403, when: "the key's group lacks the model" },
  model_wrong_protocol: { status: 403, when: 'the model is in the group but declared for other protocol styles' },
  model_unavailable: { status: 403, when: 'the model is marked available: false (its channel is down)' },
  balance_insufficient: { status: 403, when: "the key's balance is not a number > 0 (not checked for model lists); in strict metering, also when the balance minus requests in flight cannot cover the request's maximum cost" },
  stream_usage_required: { status: 400, when: 'meter.unmeteredStreams is deny and a streamed chat completion does not set stream_options.include_usage (it could not be metered)' },
  rate_limited: { status: 429, when: "the key's requests per minute or per day (its own, its group's, or per model) are used up: Envoy's rate limit filter answers, with retry-after and each protocol's rate-limit headers (docs/rate-limits.md)" },
  tokens_rate_limited: { status: 429, when: "the tokens the key used in this minute or day (charged after each response) reached its tokens per minute or per day: Envoy's rate limit filter answers, with retry-after" },
  concurrency_limited: { status: 429, when: "the key already has as many requests in flight on this replica as its inFlight limit allows" },
  store_unavailable: { status: 503, when: 'the store cannot answer and nothing usable is cached' },
  check_request_malformed: { status: 503, when: 'the CheckRequest bytes could not be decoded (not Envoy ext_authz v3?); denied, never a failed RPC' },
  authz_unauthenticated: { status: 503, when: "the Check came without the gRPC port's secret (grpc.secret): Envoy's bundle was rendered without it, or the caller is not the gateway's Envoy; denied, never a failed RPC, and no key is looked up" },
  internal_error: { status: 503, when: 'an unexpected failure while deciding; the request is denied (fail closed)' },
  rate_limit_unavailable: { status: 503, when: 'rateLimits.failureMode is deny and the rate limit service could not answer (down, Redis down, or past rateLimits.timeoutMs) (Envoy local reply)' },
  authz_unavailable: { status: 503, when: 'Envoy got no answer from modelgate (down, hung, or past gateway.authzTimeoutMs); the gateway fails closed (Envoy local reply)' },
  upstream_unavailable: { status: 503, when: 'allowed, but Envoy could not reach the upstream provider (Envoy local reply)' },
  request_invalid: { status: 400, when: 'Envoy refused the request before any check: an encoded slash or an invalid character in the path, broken HTTP framing (Envoy local reply)' },
  upstream_timeout: { status: 504, when: 'allowed, but the upstream provider went silent for longer than the idle timeout (Envoy local reply)' },
  console_rate_limited: { status: 429, when: 'the console API was asked too often from one client address or with one key (per minute limits, `console.rateLimit`)' },
} as const;

export type Reason = keyof typeof REASONS;
export type DenyReason = Exclude<Reason, 'allowed'>;

/** HTTP status for a reason. */
export function statusOf(reason: Reason): number {
  return REASONS[reason].status;
}

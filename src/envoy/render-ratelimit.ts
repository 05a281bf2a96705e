/**
 * Envoy's global rate limiting in the rendered bundle (docs/rate-limits.md): two HTTP
 * rate limit filters after ext_authz and the meter, each calling the rate limit service (the
 * embedded engine on modelgate's gRPC port, or envoyproxy/ratelimit) with the descriptors
 * modelgate's Check put in ext_authz's dynamic metadata (ratelimit/metadata.ts):
 *
 * - `modelgate.ratelimit_tokens` first: tokens per minute and day, checked only (hits_addend 0:
 *   the meter charges each response's real tokens when it ends, ratelimit/charges.ts). A request it
 *   refuses never reaches the requests filter, so it costs no request of the key's windows.
 * - `modelgate.ratelimit_requests`: requests per minute and day, each request counted once.
 *
 * Each descriptor carries its limit (Envoy's per-descriptor override from the metadata), so a
 * limit changed in the store applies with the next Check, and the rate limit service needs no
 * rule of its own (its config only declares the domain). A route action that finds no metadata
 * adds no descriptor: a key without limits costs no call. The actions sit once in each filter's
 * own `rate_limits` (Envoy 1.39 and later: 1.38.3 refuses the `limit` override there and in
 * RateLimitPerRoute), not in a route's own `rate_limits` (whose `hits_addend` Envoy 1.40 ignored
 * when tried); each upstream route turns the filters on with a RateLimitPerRoute of its own.
 *
 * A refusal is Envoy's local reply: 429 with x-modelgate-reason/-hint, x-should-retry, retry-after and the
 * rate-limit headers OpenAI and Anthropic clients read (set by the filter, from the metadata and,
 * for requests, Envoy's own X-RateLimit-Reset), the body in the client's error shape (a
 * local-reply mapper, renderRateLimitReplies). Only the requests filter sends Envoy's
 * X-RateLimit-* headers (on every answer): two filters would write them twice.
 */
import type { Config } from '../config/load';
import { KINDS, METADATA_FIELD, SLOTS, ENTRY, WINDOWED, slotName, type LimitKind } from '../ratelimit/limits';
import { CLUSTER, EXT_AUTHZ_FILTER, header } from './render-routes';
import { grpcServiceMetadata } from './render-grpc-auth';
import { retryHeaders, type EnvoyFormatter } from '../contract/retry-advice';
import { errorBody } from '../contract/error-body';
import { HEADER } from '../contract/headers';
import { HINTS, statusOf } from '../contract/reasons';

type Obj = Record<string, unknown>;

/** The filter names (and per-route config keys), one per kind, in the order they run. */
export const RATE_LIMIT_FILTER: Readonly<Record<LimitKind, string>> = {
  tokens: 'modelgate.ratelimit_tokens',
  requests: 'modelgate.ratelimit_requests',
};

/** What the rate limit parts depend on. */
export type RateLimitRenderInput = Pick<Config, 'rateLimits'> & {
  /**
   * The secret of modelgate's gRPC port, read, when the filters call it (the embedded engine): each
   * call carries it like ext_authz's and the meter's (render-grpc-auth.ts).
   */
  readonly grpcSecret?: string;
};

const md = (field: string): EnvoyFormatter => `%DYNAMIC_METADATA(${EXT_AUTHZ_FILTER}:${METADATA_FIELD}:${field})%`;

/** What a 429 of each kind carries (HeaderValueOption formatters, evaluated when the filter refuses). */
function refusalHeaders(kind: LimitKind): Obj[] {
  // Requests: Envoy's X-RateLimit-Reset is the reset of the window that refused (exact); tokens:
  // the Check's reset of the key's shortest token window (that filter sends no X-RateLimit-*).
  const reset: EnvoyFormatter = kind === 'requests' ? '%RESP(X-RATELIMIT-RESET)%' : md('tokens_reset');
  const what = kind === 'requests' ? 'request' : 'token';
  const reason = kind === 'requests' ? 'rate_limited' : 'tokens_rate_limited';
  const hint = HINTS[reason].reached(md(`${kind}_hint`), reset);
  const plural = `${what}s`;
  return [
    header(HEADER.reason, reason),
    header(HEADER.hint, hint),
    // x-should-retry: true and retry-after: the limit's own reset (src/contract/retry-advice.ts).
    ...retryHeaders(429, reset).map(([key, value]) => header(key, value)),
    // OpenAI's names (x-ratelimit-{limit,remaining,reset}-{requests,tokens}; reset as a duration).
    header(`x-ratelimit-limit-${plural}`, md(`${kind}_limit`)),
    header(`x-ratelimit-remaining-${plural}`, '0'),
    header(`x-ratelimit-reset-${plural}`, `${reset}s`),
    // Anthropic's (anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}; reset as RFC 3339).
    header(`anthropic-ratelimit-${plural}-limit`, md(`${kind}_limit`)),
    header(`anthropic-ratelimit-${plural}-remaining`, '0'),
    header(`anthropic-ratelimit-${plural}-reset`, md(`${kind}_reset_at`)),
  ];
}

/** The two rate limit filters, tokens first. */
export function rateLimitFilters(input: RateLimitRenderInput): Obj[] {
  const r = input.rateLimits;
  // Off by default: the upstream routes' RateLimitPerRoute turns them on (request-mark.ts).
  return KINDS.map((kind) => ({
    name: RATE_LIMIT_FILTER[kind],
    disabled: true,
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit',
      domain: r.domain,
      timeout: `${r.timeoutMs / 1000}s`,
      failure_mode_deny: r.failureMode === 'deny',
      status_on_error: { code: 'ServiceUnavailable' },
      rate_limit_service: {
        transport_api_version: 'V3',
        grpc_service: { envoy_grpc: { cluster_name: CLUSTER.ratelimit }, ...grpcServiceMetadata(input.grpcSecret) },
      },
      ...(kind === 'requests' ? { enable_x_ratelimit_headers: 'DRAFT_VERSION_03' } : {}),
      disable_x_envoy_ratelimited_header: true,
      rate_limited_as_resource_exhausted: true,
      stat_prefix: `modelgate_${kind}`,
      response_headers_to_add: refusalHeaders(kind),
      // The descriptors, once for every route that turns the filter on (rateLimitPerRoute).
      rate_limits: SLOTS[kind].map(slotPolicy),
    },
  }));
}

/** One RateLimit entry per slot: its descriptor when the Check put the slot in the metadata. */
function slotPolicy(slot: (typeof SLOTS)[LimitKind][number]): Obj {
  const path = (...keys: string[]): Obj[] => [METADATA_FIELD, slot, ...keys].map((key) => ({ key }));
  const fromMetadata = (entry: string): Obj => ({
    metadata: { descriptor_key: entry, metadata_key: { key: EXT_AUTHZ_FILTER, path: path(entry) } },
  });
  return {
    actions: [
      { generic_key: { descriptor_key: ENTRY.limit, descriptor_value: slot } },
      fromMetadata(ENTRY.key),
      ...(slot.endsWith('_m') ? [fromMetadata(ENTRY.model)] : []),
    ],
    limit: { dynamic_metadata: { metadata_key: { key: EXT_AUTHZ_FILTER, path: path() } } },
    // Token windows are only looked at here; the meter adds each response's tokens.
    ...(WINDOWED[slotName(slot)].what === 'tokens' ? { hits_addend: { number: 0 } } : {}),
  };
}

/**
 * The per-route config of the rate limit filters on every upstream route: it turns the filter on
 * (off by default, request-mark.ts); the descriptors are the filter's own (rate_limits), the same
 * for every route.
 */
export function rateLimitPerRoute(): Obj {
  const out: Obj = {};
  for (const kind of KINDS)
    out[RATE_LIMIT_FILTER[kind]] = {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute',
      vh_rate_limits: 'OVERRIDE',
    };
  return out;
}

/**
 * Local-reply mappers for the filters' answers (before renderLocalReplies' own), on modelgate's
 * requests only (`ours`: request-mark.ts OURS): a refusal (429,
 * response flag RL) gets its body in the client's shape from the headers the filter set (JSON
 * formatted, so a model name in the hint is escaped); the service failing with failureMode deny
 * (flag RLSE) is 503 rate_limit_unavailable.
 */
export function rateLimitReplyMappers(
  families: ReadonlyArray<readonly ['openai' | 'anthropic' | 'gemini', Obj | undefined]>,
  ours: Obj,
): Obj[] {
  const status = (code: number): Obj => ({
    status_code_filter: {
      comparison: { op: 'EQ', value: { default_value: code, runtime_key: `modelgate.local_reply.${code}` } },
    },
  });
  const sent = (name: string): EnvoyFormatter => `%RESP(${name.toUpperCase()})%`;
  // A refusal's body as every denial's (contract/error-body.ts), its reason, hint and retry delay the headers the
  // filter set.
  const refusalBody = (family: 'openai' | 'anthropic' | 'gemini'): Obj =>
    JSON.parse(errorBody(family, 429, sent(HEADER.reason), sent(HEADER.hint), '%RESP(RETRY-AFTER)%')) as Obj;
  // The service failing: an answer like every other denial (contract/error-body.ts), no '%' in it.
  const unavailableReason = 'rate_limit_unavailable';
  const unavailableHint = HINTS[unavailableReason].deny;
  const unavailableStatus = statusOf(unavailableReason);
  const out: Obj[] = [];
  for (const [family, filter] of families) {
    out.push({
      filter: {
        and_filter: {
          filters: [ours, status(429), { response_flag_filter: { flags: ['RL'] } }, ...(filter ? [filter] : [])],
        },
      },
      body_format_override: { json_format: refusalBody(family), content_type: 'application/json' },
    });
  }
  for (const [family, filter] of families) {
    out.push({
      filter: {
        and_filter: {
          filters: [
            ours,
            status(unavailableStatus),
            { response_flag_filter: { flags: ['RLSE'] } },
            ...(filter ? [filter] : []),
          ],
        },
      },
      headers_to_add: [
        header(HEADER.reason, unavailableReason),
        header(HEADER.hint, unavailableHint),
        ...retryHeaders(unavailableStatus).map(([key, value]) => header(key, value)),
      ],
      body_format_override: {
        json_format: JSON.parse(errorBody(family, unavailableStatus, unavailableReason, unavailableHint)) as Obj,
        content_type: 'application/json',
      },
    });
  }
  return out;
}

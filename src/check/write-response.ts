/**
 * Stage 3 of the pipeline: a Decision becomes Envoy's CheckResponse. The only place that knows
 * Envoy's response shapes (notes §3):
 * - deny with a non-zero `status.code` plus `denied_response`, never by failing the RPC (a failed
 *   RPC is an Envoy *error*, which a fail-open deployment lets through);
 * - every header carries `append_action: OVERWRITE_IF_EXISTS_OR_ADD` (≤1.37 reads `append`, unset =
 *   overwrite; later versions read `append_action`, whose default would append);
 * - `content-type: application/json` is set explicitly, or Envoy sends text/plain;
 * - Struct values are camelCase (`stringValue`) even with keepCase.
 */
import type { CheckResponse } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import type { HeaderValueOption } from '../../proto/types/envoy/config/core/v3/HeaderValueOption';
import { UPSTREAM_FAMILIES, upstreamOf, type Config, type UpstreamFamily } from '../config/load';
import type { Decision } from './decision';
import { isTokenCount } from '../providers/endpoints';
import { errorBody } from '../contract/error-body';
import { HEADER } from '../contract/headers';
import { keyHeaders } from './extract-key';
import { statusOf } from '../contract/reasons';
import { retryHeaders } from '../contract/retry-advice';
import { METADATA_FIELD as RATE_LIMIT_FIELD } from '../ratelimit/limits';

/** google.rpc.Code for each HTTP status we deny with (any non-zero code means Denied). */
const GRPC_CODE: Readonly<Record<number, number>> = {
  400: 3,
  401: 16,
  403: 7,
  404: 5,
  405: 12,
  413: 8,
  415: 3,
  429: 8,
  503: 14,
  504: 4,
};

function header(key: string, value: string): HeaderValueOption {
  return { header: { key, value }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' };
}

/**
 * Envoy's dynamic metadata for its access log (envoy/README.md): never a key. `path` is the path as
 * modelgate logs it (decision-log.ts logPath), which Envoy's log shows instead of the raw one.
 */
function metadata(
  d: Decision,
  model: string | undefined,
  path: string | undefined,
  metered = false,
  replica?: string,
): CheckResponse['dynamic_metadata'] {
  const fields: Record<string, { stringValue: string } | { boolValue: boolean } | { numberValue: number }> = {
    decision: { stringValue: d.allowed ? 'allow' : 'deny' },
    reason: { stringValue: d.reason },
    style: { stringValue: d.route.style },
  };
  if (path !== undefined) fields.path = { stringValue: path };
  if (d.keyId) fields.keyId = { stringValue: d.keyId };
  if (d.group) fields.group = { stringValue: d.group };
  if (model !== undefined) fields.model = { stringValue: model };
  // The meter's access log reports the requests marked true (envoy/meter-filters.ts meterAccessLog),
  // and those with no Check metadata at all: the mark is always written, so its absence means no
  // answer of a Check reached the request.
  fields.metered = { boolValue: metered };
  // Strict mode's leases: the replica whose lease a settlement debits (meter/leases.ts).
  if (metered && replica !== undefined) fields.replica = { stringValue: replica };
  // What an estimate of its cost needs beyond the report (meter/meter.ts, when no entry is found).
  if (metered) Object.assign(fields, meterMarkFields(d));
  // Rate limits (docs/rate-limits.md): what Envoy's rate limit filters read (ratelimit/metadata.ts).
  if (d.allowed && d.rateLimit)
    (fields as Record<string, unknown>)[RATE_LIMIT_FIELD] = { structValue: { fields: d.rateLimit.fields } };
  return { fields };
}

/**
 * The metadata fields of a metered request's marks (Decision.meterMarks): each request's own (its
 * maxima), so the response cache appends them to the bytes it keeps (response-encoder.ts).
 */
export function meterMarkFields(
  d: Decision,
): Record<string, { boolValue: boolean } | { numberValue: number } | { stringValue: string }> {
  const fields: Record<string, { boolValue: boolean } | { numberValue: number } | { stringValue: string }> = {};
  const m = d.meterMarks;
  if (!m) return fields;
  if (m.maxInput !== undefined) fields.maxInput = { numberValue: m.maxInput };
  if (m.maxOutput !== undefined) fields.maxOutput = { numberValue: m.maxOutput };
  if (m.hiddenOutput !== undefined) fields.hiddenOutput = { numberValue: m.hiddenOutput };
  if (m.referencedInput) fields.referencedInput = { boolValue: true };
  if (m.inputExtra !== undefined) fields.inputExtra = { numberValue: m.inputExtra };
  if (m.inputFactor !== undefined) fields.inputFactor = { numberValue: m.inputFactor };
  if (m.price !== undefined) fields.price = { stringValue: m.price };
  if (m.tools !== undefined) fields.tools = { stringValue: m.tools };
  return fields;
}

/**
 * An allowed protocol request the meter settles: every one but token counting (free at every
 * provider). Marked even with `meter.enabled: false` reloaded while the bundle still reports: the
 * meter then counts what it did not debit (released, meter_disabled).
 */
export function meteredRequest(d: Decision, path: string | undefined): boolean {
  return d.allowed && d.route.kind === 'protocol' && path !== undefined && !isTokenCount(path);
}

/** RFC 6750 §3: no error code when the request had no credentials; quoted-string safe description. */
function challenge(d: Decision): string {
  if (d.reason === 'key_missing') return 'Bearer realm="modelgate"';
  return `Bearer realm="modelgate", error="invalid_token", error_description="${d.hint.replace(/["\\]/g, "'")}"`;
}

/**
 * The upstream header plan of an allowed request, computed once per config. Every header that can
 * carry a client key is removed, whichever the route reads; the one exception per upstream is the
 * header that upstream's own credential sets (Envoy applies removals after sets, so removing it
 * would drop the credential; the set overwrites the client's value instead). Credentials belong to
 * an upstream, not to a protocol style: a request under the alternate prefix goes to the alt
 * upstream and gets the alt upstream's credential only (docs/security.md).
 */
export interface AllowPlan {
  /** Every key header (`routes.bearerHeaders` + `routes.vendorHeaders`). */
  readonly removeHeaders: readonly string[];
  /** What an allowed request to each upstream removes. */
  readonly removeFor: Readonly<Record<UpstreamFamily, readonly string[]>>;
}

export function allowPlan(config: Config): AllowPlan {
  const removeHeaders = [...new Set(keyHeaders(config.routes, 'both'))];
  const removeFor = {} as Record<UpstreamFamily, readonly string[]>;
  for (const family of UPSTREAM_FAMILIES) {
    const own = config.upstream.credentials[family]?.header;
    removeFor[family] = removeHeaders.filter((h) => h !== own);
  }
  return { removeHeaders, removeFor };
}

/** Headers only modelgate may set; a client's copies never reach the upstream. */
const SPOOFABLE = [HEADER.reason, HEADER.hint];

/**
 * Writes the CheckResponse for a decision. `modelForMetadata` is the log-safe model name, if any;
 * `pathForMetadata` the log-safe path.
 */
export function writeCheckResponse(
  d: Decision,
  config: Config,
  plan: AllowPlan,
  modelForMetadata: string | undefined,
  pathForMetadata?: string,
  replica?: string,
): CheckResponse {
  if (d.allowed) {
    const headers = [header(HEADER.keyId, d.keyId ?? ''), header(HEADER.group, d.group ?? '')];
    const remove: string[] = [...SPOOFABLE];
    if (d.model !== undefined && d.modelKnown) headers.push(header(HEADER.model, d.model));
    else remove.push(HEADER.model);
    if (d.route.kind === 'protocol') {
      const family = upstreamOf(d.route.style, d.route.alt);
      const cred = config.upstream.credentials[family];
      if (cred) headers.push(header(cred.header, cred.value));
      remove.push(...plan.removeFor[family]);
    }
    // Model lists keep the key headers: the catalog authenticates the request itself (it trusts no
    // identity header a client could send to its port directly).
    // Query parameters are removed only when there are some: any removal makes Envoy re-serialise
    // the whole query (sorted, `?flag` -> `?flag=`).
    return {
      status: { code: 0 },
      ok_response: {
        headers,
        headers_to_remove: remove,
        ...(d.removeQuery ? { query_parameters_to_remove: [...d.removeQuery] } : {}),
      },
      dynamic_metadata: metadata(
        d,
        modelForMetadata,
        pathForMetadata,
        meteredRequest(d, pathForMetadata),
        config.meter.mode === 'strict' && config.meter.leases ? replica : undefined,
      ),
    };
  }
  const denial = denialParts(d);
  return {
    status: { code: GRPC_CODE[denial.status] ?? 7, message: d.reason },
    denied_response: {
      status: { code: denial.status as never },
      headers: denial.headers.map(([k, v]) => header(k, v)),
      body: denial.body,
    },
    dynamic_metadata: metadata(d, modelForMetadata, pathForMetadata),
  };
}

/** Status, headers and body of a denial: the same for Envoy's local reply and the catalog's own HTTP answer. */
export function denialParts(d: Decision): { status: number; headers: [string, string][]; body: string } {
  const status = statusOf(d.reason);
  const headers: [string, string][] = [
    ['content-type', 'application/json'],
    [HEADER.reason, d.reason],
    [HEADER.hint, d.hint],
  ];
  if (status === 401) headers.push(['www-authenticate', challenge(d)]);
  if (d.route.kind === 'wrong_method') headers.push(['allow', d.route.allow]);
  headers.push(...retryHeaders(status, d.retryAfter));
  return { status, headers, body: errorBody(d.route.family, status, d.reason, d.hint, d.retryAfter) };
}

/**
 * Stage 1 of the pipeline: a CheckRequest, as Envoy builds it, becomes a small plain RequestView.
 * Pure. Tolerates every malformed or missing field (a CheckRequest is untrusted input): absent
 * parts become empty values, which later stages deny with a reason.
 */
import type { CheckRequest__Output } from '../proto/types/envoy/service/auth/v3/CheckRequest';

export interface RequestView {
  readonly method: string;
  /** The path without its query string (Envoy's `:path` includes the query; notes §2). */
  readonly path: string;
  /** The raw query string after `?`, or ''. */
  readonly query: string;
  /** Lowercase names; repeated headers arrive joined with ','. */
  readonly headers: Readonly<Record<string, string>>;
  /** The body bytes (`raw_body` with pack_as_bytes; else the UTF-8 `body`), or undefined. */
  readonly body: Uint8Array | undefined;
  /** Envoy's `x-envoy-auth-partial-body: true`: the body was cut at max_request_bytes. */
  readonly partialBody: boolean;
  /** The client's x-request-id (Envoy generates one), for logs. Not Envoy's internal stream id. */
  readonly requestId: string;
}

const EMPTY: Readonly<Record<string, string>> = Object.freeze({});

/** Reads the parts of a CheckRequest that modelgate decides on. */
export function readCheckRequest(req: CheckRequest__Output | null | undefined): RequestView {
  const http = req?.attributes?.request?.http;
  const headers = http?.headers && typeof http.headers === 'object' ? http.headers : fromHeaderMap(http?.header_map?.headers);
  const fullPath = str(headers[':path']) || str(http?.path);
  const q = fullPath.indexOf('?');
  const rawBody = http?.raw_body;
  const body = rawBody && rawBody.length > 0 ? rawBody : http?.body ? Buffer.from(String(http.body), 'utf8') : undefined;
  return {
    method: str(headers[':method']) || str(http?.method),
    path: q === -1 ? fullPath : fullPath.slice(0, q),
    query: q === -1 ? '' : fullPath.slice(q + 1),
    headers,
    body,
    partialBody: headers['x-envoy-auth-partial-body'] === 'true',
    requestId: str(headers['x-request-id']),
  };
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** `encode_raw_headers: true` sends `header_map` instead of `headers` (Envoy 1.30+): join repeats like Envoy does. */
function fromHeaderMap(list: readonly { key?: string; value?: string; raw_value?: Buffer }[] | undefined): Readonly<Record<string, string>> {
  if (!Array.isArray(list) || list.length === 0) return EMPTY;
  const out: Record<string, string> = Object.create(null);
  for (const h of list) {
    const key = str(h?.key).toLowerCase();
    if (!key) continue;
    const value = h.raw_value && h.raw_value.length > 0 ? h.raw_value.toString('utf8') : str(h.value);
    out[key] = key in out ? `${out[key]},${value}` : value;
  }
  return out;
}

/**
 * The reference reader of the decoder's differential tests: a CheckRequest decoded by protobufjs
 * (grpc-js's proto-loader, generic and complete) read into a RequestView the plain way, keeping
 * the same headers. src/check/read-request.ts must agree with it on every well-formed request
 * whose singular embedded messages each appear once (as every encoder, Envoy's included, writes
 * them; on a repeated one the decoder merges as the protobuf spec says, protobufjs keeps the last).
 */
import type { CheckRequest__Output } from '../../proto/types/envoy/service/auth/v3/CheckRequest';
import type { RequestView } from '../../src/check/request-view';

const EMPTY: Readonly<Record<string, string>> = Object.freeze({});

/** Reads the parts of a decoded CheckRequest that modelgate decides on; `keep` filters the headers. */
export function readCheckRequest(
  req: CheckRequest__Output | null | undefined,
  keep: (name: string) => boolean = () => true,
): RequestView {
  const http = req?.attributes?.request?.http;
  const all =
    http?.headers && typeof http.headers === 'object' ? http.headers : fromHeaderMap(http?.header_map?.headers);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(all)) if (keep(name)) headers[name] = value;
  const fullPath = str(headers[':path']) || str(http?.path);
  const q = fullPath.indexOf('?');
  const rawBody = http?.raw_body;
  const body =
    rawBody && rawBody.length > 0 ? rawBody : http?.body ? Buffer.from(String(http.body), 'utf8') : undefined;
  return {
    method: str(headers[':method']) || str(http?.method),
    path: q === -1 ? fullPath : fullPath.slice(0, q),
    query: q === -1 ? '' : fullPath.slice(q + 1),
    headers,
    body,
    partialBody: headers['x-envoy-auth-partial-body'] === 'true',
    // Envoy's minted identity on modelgate's routes (envoy/request-mark.ts), else the x-request-id.
    requestId:
      typeof headers['x-modelgate-request'] === 'string'
        ? headers['x-modelgate-request']
        : str(headers['x-request-id']),
    client: str(req?.attributes?.source?.address?.socket_address?.address) || undefined,
  };
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** `encode_raw_headers: true` sends `header_map` instead of `headers` (Envoy 1.30+): join repeats like Envoy does. */
function fromHeaderMap(
  list: readonly { key?: string; value?: string; raw_value?: Buffer }[] | undefined,
): Readonly<Record<string, string>> {
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

/**
 * Builds a CheckRequest exactly as Envoy's ext_authz filter builds one for an HTTP request
 * (notes §2, check_request_utils.cc): lowercase header names, the pseudo-headers `:method`,
 * `:path` (with the query string), `:authority` and `:scheme`, repeated headers joined with ','
 * (no space), `x-request-id` added by the connection manager, the body as `raw_body` with
 * `x-envoy-auth-partial-body` (pack_as_bytes). Used by `modelgate explain`, the tests and the bench.
 */
import { randomUUID } from 'node:crypto';
import type { CheckRequest } from '../../proto/types/envoy/service/auth/v3/CheckRequest';

export interface HttpRequestLine {
  readonly method: string;
  /** Path with the query string, as the client sent it. */
  readonly path: string;
  /** Header lines in order; names in any case; repeats allowed. */
  readonly headers?: readonly (readonly [string, string])[];
  readonly body?: Uint8Array | string;
  /** Envoy's max_request_bytes: a longer body is cut and flagged partial (as with allow_partial_message). */
  readonly maxRequestBytes?: number;
  /** The client's address as Envoy determined it (the source address; default 127.0.0.1). */
  readonly client?: string;
}

export function buildCheckRequest(r: HttpRequestLine): CheckRequest {
  const headers: Record<string, string> = Object.create(null);
  for (const [name, value] of r.headers ?? []) {
    const key = name.toLowerCase() === 'host' ? ':authority' : name.toLowerCase();
    headers[key] = key in headers ? `${headers[key]},${value}` : value;
  }
  headers[':method'] = r.method;
  headers[':path'] = r.path;
  headers[':authority'] ??= 'localhost:10000';
  headers[':scheme'] ??= 'http';
  headers['x-forwarded-proto'] ??= 'http';
  headers['x-request-id'] ??= randomUUID();
  let raw: Buffer | undefined;
  if (r.body !== undefined && r.body.length > 0) {
    raw =
      typeof r.body === 'string'
        ? Buffer.from(r.body, 'utf8')
        : Buffer.from(r.body.buffer, r.body.byteOffset, r.body.byteLength);
    headers['content-length'] ??= String(raw.length);
    const partial = r.maxRequestBytes !== undefined && raw.length > r.maxRequestBytes;
    if (partial) raw = raw.subarray(0, r.maxRequestBytes);
    headers['x-envoy-auth-partial-body'] = partial ? 'true' : 'false';
  }
  return {
    attributes: {
      source: { address: { socket_address: { address: r.client ?? '127.0.0.1', port_value: 50000 } } },
      destination: { address: { socket_address: { address: '127.0.0.1', port_value: 10000 } } },
      request: {
        time: { seconds: String(Math.floor(Date.now() / 1000)), nanos: 0 },
        http: {
          id: String(Math.floor(Math.random() * 2 ** 52)),
          method: r.method,
          headers,
          path: r.path,
          host: headers[':authority'],
          scheme: headers[':scheme'],
          size: String(raw?.length ?? 0),
          protocol: 'HTTP/1.1',
          ...(raw ? { raw_body: raw } : {}),
        },
      },
    },
  };
}

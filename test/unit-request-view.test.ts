/**
 * readCheckRequest: a CheckRequest as Envoy sends it (the `headers` map, or `header_map` with
 * encode_raw_headers) becomes a RequestView; any missing or malformed part becomes an empty value.
 */
import { describe, expect, test } from 'vitest';
import type { CheckRequest__Output } from '../proto/types/envoy/service/auth/v3/CheckRequest';
import { buildCheckRequest } from '../src/envoy-check-request';
import { authorizationService } from '../src/envoy-protos';
import { readCheckRequest } from '../src/request-view';

/** Through the real proto codec, so absent fields look exactly as grpc-js delivers them. */
function roundTrip(req: unknown): CheckRequest__Output {
  const def = authorizationService().Check;
  return def.requestDeserialize(def.requestSerialize(req) as Buffer) as CheckRequest__Output;
}

describe('readCheckRequest', () => {
  test('reads method, path, query, headers, body and request id from the headers map', () => {
    const req = roundTrip(buildCheckRequest({
      method: 'POST',
      path: '/v1/chat/completions?alt=sse&key=',
      headers: [['Authorization', 'Bearer k'], ['X-Request-Id', 'req-1'], ['X-Api-Key', 'a'], ['x-api-key', 'b']],
      body: '{"model":"m"}',
    }));
    const v = readCheckRequest(req);
    expect(v.method).toBe('POST');
    expect(v.path).toBe('/v1/chat/completions');
    expect(v.query).toBe('alt=sse&key=');
    expect(v.headers.authorization).toBe('Bearer k');
    expect(v.headers['x-api-key']).toBe('a,b');
    expect(v.requestId).toBe('req-1');
    expect(Buffer.from(v.body!).toString('utf8')).toBe('{"model":"m"}');
    expect(v.partialBody).toBe(false);
  });

  test('flags a body Envoy cut at max_request_bytes', () => {
    const v = readCheckRequest(roundTrip(buildCheckRequest({ method: 'POST', path: '/v1/messages', body: 'x'.repeat(100), maxRequestBytes: 10 })));
    expect(v.partialBody).toBe(true);
    expect(v.body!.length).toBe(10);
  });

  test('reads header_map (encode_raw_headers), joining repeated headers with "," as Envoy does', () => {
    const v = readCheckRequest(roundTrip({
      attributes: { request: { http: { header_map: { headers: [
        { key: ':method', raw_value: Buffer.from('POST') },
        { key: ':path', raw_value: Buffer.from('/v1beta/models/m:generateContent?alt=sse') },
        { key: 'X-Goog-Api-Key', raw_value: Buffer.from('k1') },
        { key: 'x-goog-api-key', value: 'k2' },
        { key: '', value: 'ignored' },
      ] } } } },
    }));
    expect(v.method).toBe('POST');
    expect(v.path).toBe('/v1beta/models/m:generateContent');
    expect(v.query).toBe('alt=sse');
    expect(v.headers['x-goog-api-key']).toBe('k1,k2');
    expect(Object.keys(v.headers)).not.toContain('');
  });

  test('takes the body field as UTF-8 when raw_body is absent', () => {
    const v = readCheckRequest(roundTrip({ attributes: { request: { http: { method: 'POST', path: '/v1/embeddings', body: '{"model":"\u00e9"}' } } } }));
    expect(Buffer.from(v.body!).toString('utf8')).toBe('{"model":"\u00e9"}');
  });

  test('falls back to the http path and method fields when pseudo-headers are absent', () => {
    const v = readCheckRequest(roundTrip({ attributes: { request: { http: { method: 'GET', path: '/v1/models?x=1', headers: { authorization: 'Bearer k' } } } } }));
    expect(v).toMatchObject({ method: 'GET', path: '/v1/models', query: 'x=1' });
  });

  test.each<[string, unknown]>([
    ['null', null],
    ['undefined', undefined],
    ['an empty request', {}],
    ['no http attributes', { attributes: { request: {} } }],
  ])('reads %s as an empty view', (_name, req) => {
    expect(readCheckRequest(req as CheckRequest__Output)).toEqual({ method: '', path: '', query: '', headers: {}, body: undefined, partialBody: false, requestId: '' });
  });
});

/**
 * grpc-js clients of modelgate's gRPC port, as a caller that is not Envoy would use it (the
 * attacker): a Check, a health check, a forged meter report (a key id and a large usage, as the
 * finding sent it) and a rate limit call to the embedded engine (hits on a key's window), each with
 * or without the `authorization` metadata of the port's secret.
 */
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import type { CheckResponse__Output } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import { buildCheckRequest, type HttpRequestLine } from '../../src/envoy/check-request';
import { LOADER_OPTIONS } from '../../proto/include-dirs.js';
import { authorizationClient } from '../../src/envoy/protos';
import {
  decodeResponse,
  encodeRequest,
  type RateLimitRequest,
  type RateLimitResponse,
} from '../../src/ratelimit/rls-codec';
import { RLS_PATH } from '../../src/server/rls-service';

export const healthPkg = (): any =>
  grpc.loadPackageDefinition(
    loadSync(require.resolve('grpc-health-check/proto/health/v1/health.proto'), { enums: String }),
  ) as any; // eslint-disable-line @typescript-eslint/no-explicit-any

export function metadata(value?: string): grpc.Metadata {
  const m = new grpc.Metadata();
  if (value !== undefined) m.set('authorization', value);
  return m;
}

export function check(
  address: string,
  creds: grpc.ChannelCredentials,
  line: HttpRequestLine,
  md = metadata(),
  options: grpc.ChannelOptions = {},
): Promise<CheckResponse__Output> {
  const client = new (authorizationClient())(address, creds, options);
  return new Promise((resolve, reject) =>
    client.Check(buildCheckRequest(line), md, { deadline: Date.now() + 10_000 }, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve(res!);
    }),
  );
}

export function health(address: string, creds: grpc.ChannelCredentials, md = metadata()): Promise<string> {
  const client = new (healthPkg().grpc.health.v1.Health)(address, creds);
  return new Promise((resolve, reject) =>
    client.Check(
      { service: '' },
      md,
      { deadline: Date.now() + 10_000 },
      (err: grpc.ServiceError | null, res: { status: string }) => {
        client.close();
        if (err) reject(err);
        else resolve(res.status);
      },
    ),
  );
}

/**
 * One forged meter report, as the finding sent it: an access-log entry (the meter's input, on
 * AccessLogService/StreamAccessLogs) for a key id with a big usage; resolves with how the call ended.
 */
export function forgedMeterStream(
  address: string,
  md = metadata(),
  requestId = 'forged-1',
  keyId = 'alice',
): Promise<grpc.StatusObject> {
  const Client = accessLogPkg().envoy.service.accesslog.v3.AccessLogService;
  const client = new Client(address, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    const call = client.StreamAccessLogs(md, () => {});
    call.on('error', () => {});
    call.on('status', (s: grpc.StatusObject) => {
      client.close();
      resolve(s);
    });
    const str = (v: string) => ({ stringValue: v });
    const body = '{"usage":{"prompt_tokens":100000,"completion_tokens":100000}}';
    call.write({
      identifier: { log_name: 'modelgate_meter', node: { id: 'forger' } },
      http_logs: {
        log_entry: [
          {
            common_properties: {
              metadata: {
                filter_metadata: {
                  'envoy.filters.http.ext_authz': {
                    fields: {
                      keyId: str(keyId),
                      group: str('basic'),
                      model: str('gpt-4o-mini'),
                      style: str('chat'),
                      metered: { boolValue: true },
                    },
                  },
                  'modelgate.meter': { fields: { final: str(body) } },
                },
              },
            },
            request: { request_id: requestId, path: '/v1/chat/completions' },
            response: {
              response_code: { value: 200 },
              response_body_bytes: body.length,
              response_headers: { 'content-type': 'application/json' },
            },
          },
        ],
      },
    });
    call.end();
  });
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const accessLogPkg = (): any =>
  grpc.loadPackageDefinition(loadSync('envoy/service/accesslog/v3/als.proto', LOADER_OPTIONS)) as any;

/** One RateLimitService/ShouldRateLimit call (the embedded engine's method on the port). */
export function shouldRateLimit(address: string, req: RateLimitRequest, md = metadata()): Promise<RateLimitResponse> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) =>
    client.makeUnaryRequest(
      RLS_PATH,
      encodeRequest,
      decodeResponse,
      req,
      md,
      { deadline: Date.now() + 10_000 },
      (err, res) => {
        client.close();
        if (err || !res) reject(err ?? new Error('no answer'));
        else resolve(res);
      },
    ),
  );
}

/**
 * grpc-js clients of modelgate's gRPC port, as a caller that is not Envoy would use it (issue 21's
 * attacker): a Check, a health check, a forged meter stream (a key id and a large usage, as the
 * finding sent it) and a rate limit call to the embedded engine (hits on a key's window), each with
 * or without the `authorization` metadata of the port's secret.
 */
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import type { CheckResponse__Output } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import { buildCheckRequest, type HttpRequestLine } from '../../src/envoy/check-request';
import { authorizationClient, extProcProto } from '../../src/envoy/protos';
import { decodeResponse, encodeRequest, type RateLimitRequest, type RateLimitResponse } from '../../src/ratelimit/rls-codec';
import { RLS_PATH } from '../../src/server/rls-service';

export const healthPkg = (): any => grpc.loadPackageDefinition(loadSync(require.resolve('grpc-health-check/proto/health/v1/health.proto'), { enums: String })) as any; // eslint-disable-line @typescript-eslint/no-explicit-any

export function metadata(value?: string): grpc.Metadata {
  const m = new grpc.Metadata();
  if (value !== undefined) m.set('authorization', value);
  return m;
}

export function check(address: string, creds: grpc.ChannelCredentials, line: HttpRequestLine, md = metadata(), options: grpc.ChannelOptions = {}): Promise<CheckResponse__Output> {
  const client = new (authorizationClient())(address, creds, options);
  return new Promise((resolve, reject) => client.Check(buildCheckRequest(line), md, { deadline: Date.now() + 10_000 }, (err, res) => {
    client.close();
    if (err) reject(err);
    else resolve(res!);
  }));
}

export function health(address: string, creds: grpc.ChannelCredentials, md = metadata()): Promise<string> {
  const client = new (healthPkg().grpc.health.v1.Health)(address, creds);
  return new Promise((resolve, reject) => client.Check({ service: '' }, md, { deadline: Date.now() + 10_000 }, (err: grpc.ServiceError | null, res: { status: string }) => {
    client.close();
    if (err) reject(err);
    else resolve(res.status);
  }));
}

/** One forged meter stream, as the finding sent it: a key id and a big usage; resolves with how the call ended. */
export function forgedMeterStream(address: string, md = metadata(), requestId = 'forged-1', keyId = 'alice'): Promise<grpc.StatusObject> {
  const Client = extProcProto().envoy.service.ext_proc.v3.ExternalProcessor;
  const client = new Client(address, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    const call = client.Process(md);
    call.on('data', () => {});
    call.on('error', () => {});
    call.on('status', (s) => {
      client.close();
      resolve(s);
    });
    const h = (k: string, v: string) => ({ key: k, raw_value: Buffer.from(v) });
    call.write({ request_headers: { headers: { headers: [h(':path', '/v1/chat/completions'), h('x-request-id', requestId), h('x-modelgate-key-id', keyId), h('x-modelgate-group', 'basic'), h('x-modelgate-model', 'gpt-4o-mini')] } } });
    call.write({ response_headers: { headers: { headers: [h(':status', '200'), h('content-type', 'application/json')] } } });
    call.write({ response_body: { body: Buffer.from('{"usage":{"prompt_tokens":100000,"completion_tokens":100000}}'), end_of_stream: true } });
    call.end();
  });
}

/** One RateLimitService/ShouldRateLimit call (the embedded engine's method on the port). */
export function shouldRateLimit(address: string, req: RateLimitRequest, md = metadata()): Promise<RateLimitResponse> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => client.makeUnaryRequest(RLS_PATH, encodeRequest, decodeResponse, req, md, { deadline: Date.now() + 10_000 }, (err, res) => {
    client.close();
    if (err || !res) reject(err ?? new Error('no answer'));
    else resolve(res);
  }));
}

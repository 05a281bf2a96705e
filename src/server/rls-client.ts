/**
 * The global engine as modelgate uses it: a gRPC client of envoyproxy/ratelimit
 * (`rateLimits.service`), for the meter's token charges (ratelimit/charges.ts). Envoy's rate limit
 * filters call the service themselves. Every call is bounded by `timeoutMs`; a failure rejects
 * (the charge is counted as failed and logged, never retried into a pile-up).
 */
import * as grpc from '@grpc/grpc-js';
import type { HostPort } from '../config/load';
import type { RateLimitEngine } from '../ratelimit/embedded-engine';
import {
  decodeResponse,
  encodeRequest,
  prepareRlsCodec,
  type RateLimitRequest,
  type RateLimitResponse,
} from '../ratelimit/rls-codec';
import { RLS_PATH } from './rls-service';

export class RemoteEngine implements RateLimitEngine {
  readonly #client: grpc.Client;

  constructor(
    at: HostPort,
    readonly timeoutMs: number,
  ) {
    prepareRlsCodec();
    const host = at.host.includes(':') ? `[${at.host}]` : at.host;
    this.#client = new grpc.Client(`${host}:${at.port}`, grpc.credentials.createInsecure());
  }

  shouldRateLimit(req: RateLimitRequest): Promise<RateLimitResponse> {
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(
        RLS_PATH,
        encodeRequest,
        decodeResponse,
        req,
        { deadline: Date.now() + this.timeoutMs },
        (err, res) => {
          if (err || !res) reject(err ?? new Error('no answer'));
          else resolve(res);
        },
      );
    });
  }

  close(): void {
    this.#client.close();
  }
}

/**
 * The wire format of Envoy's rate limit service (envoy.service.ratelimit.v3.RateLimitService,
 * rls.proto, vendored in proto/envoy-api/ from the pinned Envoy), read and written with protobufjs
 * and mapped to the few fields modelgate uses:
 *
 *   RateLimitRequest: domain(1), descriptors(2) RateLimitDescriptor, hits_addend(3)
 *   RateLimitDescriptor: entries(1) {key, value}, limit(2) {requests_per_unit, unit},
 *     hits_addend(3) UInt64Value (the per-descriptor token charge Envoy 1.40 sends)
 *   RateLimitResponse: overall_code(1), statuses(2) DescriptorStatus
 *   DescriptorStatus: code(1), current_limit(2) {requests_per_unit, unit}, limit_remaining(3),
 *     duration_until_reset(4) Duration {seconds}
 *
 * The protos are loaded by prepareRlsCodec() where a server or client of the service starts (a
 * gateway without rate limits never pays for it; a first call must not, under Envoy's timeout). A message
 * that cannot be read throws an InternalError (code wire_malformed): the caller answers the call
 * with an error, and Envoy then applies its failure mode.
 */
import * as path from 'node:path';
import { existsSync } from 'node:fs';
import * as protobuf from 'protobufjs';
import { includeDirs } from '../../proto/include-dirs.js';
import { InternalError } from '../errors/internal-error';

/** envoy.type.v3.RateLimitUnit / RateLimitResponse.RateLimit.Unit. */
export const UNIT = { SECOND: 1, MINUTE: 2, HOUR: 3, DAY: 4 } as const;

export const CODE = { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 } as const;

export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

export interface Descriptor {
  readonly entries: readonly DescriptorEntry[];
  /** The limit carried by the descriptor (Envoy's per-descriptor override). */
  readonly limit?: { readonly requestsPerUnit: number; readonly unit: number };
  /** Per-descriptor hits; absent: the request's hits_addend (0 there means 1). */
  readonly hitsAddend?: number;
}

export interface RateLimitRequest {
  readonly domain: string;
  readonly descriptors: readonly Descriptor[];
  readonly hitsAddend: number;
}

export interface DescriptorStatus {
  readonly code: number;
  readonly limit?: { readonly requestsPerUnit: number; readonly unit: number };
  readonly remaining: number;
  /** Seconds until the window resets. */
  readonly resetSeconds: number;
}

export interface RateLimitResponse {
  readonly overallCode: number;
  readonly statuses: readonly DescriptorStatus[];
}

interface Types {
  readonly request: protobuf.Type;
  readonly response: protobuf.Type;
}

let types: Types | undefined;

/** Loads rls.proto now (tens of milliseconds), so that no call waits for it. */
export function prepareRlsCodec(): void {
  load();
}

function load(): Types {
  if (types !== undefined) return types;
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) =>
    includeDirs.map((d) => path.join(d, target)).find((p) => existsSync(p)) ?? target;
  root.loadSync('envoy/service/ratelimit/v3/rls.proto', { keepCase: true });
  types = {
    request: root.lookupType('envoy.service.ratelimit.v3.RateLimitRequest'),
    response: root.lookupType('envoy.service.ratelimit.v3.RateLimitResponse'),
  };
  return types;
}

/** A uint64 as protobufjs decodes it (a Long, or a number without the long package), as a number. */
const uint64 = (v: unknown): number =>
  typeof v === 'number' ? v : protobuf.util.LongBits.from(v as protobuf.Long).toNumber(true);

interface WireLimit {
  requests_per_unit?: number;
  unit?: number;
}
interface WireDescriptor {
  entries?: { key?: string; value?: string }[];
  limit?: WireLimit | null;
  hits_addend?: { value?: unknown } | null;
}
interface WireRequest {
  domain?: string;
  descriptors?: WireDescriptor[];
  hits_addend?: number;
}
interface WireStatus {
  code?: number;
  current_limit?: WireLimit | null;
  limit_remaining?: number;
  duration_until_reset?: { seconds?: unknown } | null;
}
interface WireResponse {
  overall_code?: number;
  statuses?: WireStatus[];
}

function decode<T>(type: protobuf.Type, buf: Uint8Array): T {
  try {
    return type.decode(buf) as unknown as T;
  } catch (err) {
    throw new InternalError(
      'wire_malformed',
      `not a ${type.name}: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  }
}

const limitOf = (l: WireLimit): { requestsPerUnit: number; unit: number } => ({
  requestsPerUnit: l.requests_per_unit ?? 0,
  unit: l.unit ?? 0,
});

/** Decodes a RateLimitRequest. Throws an InternalError (wire_malformed) on a malformed message. */
export function decodeRequest(buf: Uint8Array): RateLimitRequest {
  const m = decode<WireRequest>(load().request, buf);
  return {
    domain: m.domain ?? '',
    descriptors: (m.descriptors ?? []).map((d) => ({
      entries: (d.entries ?? []).map((e) => ({ key: e.key ?? '', value: e.value ?? '' })),
      ...(d.limit ? { limit: limitOf(d.limit) } : {}),
      // UInt64Value: present (even empty) means "this many", 0 included.
      ...(d.hits_addend ? { hitsAddend: d.hits_addend.value == null ? 0 : uint64(d.hits_addend.value) } : {}),
    })),
    hitsAddend: m.hits_addend ?? 0,
  };
}

/** Decodes a RateLimitResponse (what a rate limit service answers). */
export function decodeResponse(buf: Uint8Array): RateLimitResponse {
  const m = decode<WireResponse>(load().response, buf);
  return {
    overallCode: m.overall_code ?? 0,
    statuses: (m.statuses ?? []).map((s) => ({
      code: s.code ?? 0,
      ...(s.current_limit ? { limit: limitOf(s.current_limit) } : {}),
      remaining: s.limit_remaining ?? 0,
      resetSeconds: s.duration_until_reset?.seconds == null ? 0 : uint64(s.duration_until_reset.seconds),
    })),
  };
}

/** protobufjs's writer gives a Buffer under Node; a copy only otherwise. */
const toBuffer = (b: Uint8Array): Buffer => (Buffer.isBuffer(b) ? b : Buffer.from(b));

const wireLimit = (l: { readonly requestsPerUnit: number; readonly unit: number }): WireLimit => ({
  requests_per_unit: l.requestsPerUnit,
  unit: l.unit,
});

/** Encodes a RateLimitRequest (modelgate's token charges to a rate limit service). */
export function encodeRequest(req: RateLimitRequest): Buffer {
  const { request } = load();
  const m: WireRequest = {
    domain: req.domain,
    descriptors: req.descriptors.map((d) => ({
      entries: d.entries.map((e) => ({ key: e.key, value: e.value })),
      ...(d.limit ? { limit: wireLimit(d.limit) } : {}),
      ...(d.hitsAddend !== undefined ? { hits_addend: { value: d.hitsAddend } } : {}),
    })),
    hits_addend: req.hitsAddend,
  };
  return toBuffer(request.encode(m).finish());
}

/** Encodes a RateLimitResponse (the embedded engine's answers to Envoy). */
export function encodeResponse(res: RateLimitResponse): Buffer {
  const { response } = load();
  const m: WireResponse = {
    overall_code: res.overallCode,
    statuses: res.statuses.map((s) => ({
      code: s.code,
      ...(s.limit ? { current_limit: wireLimit(s.limit) } : {}),
      limit_remaining: s.remaining,
      duration_until_reset: { seconds: s.resetSeconds },
    })),
  };
  return toBuffer(response.encode(m).finish());
}

/**
 * Micro-benchmark: the whole read-decide-write path of one Check, in process (no network), for a
 * cached key and a small chat body, with decision logging ON (to a file, as in production). It
 * times what the gRPC handler awaits: `service.checkBytes(req)` (read, decide, write the serialised
 * CheckResponse, log) where the service has it, else `service.check(req)`. `check()` additionally
 * decodes the bytes back into an object for tests and tools, which the gRPC path never does.
 *
 * The request object is what grpc-js hands the handler: our encoded bytes decoded by the same
 * proto-loader deserializer.
 */
import { authPackageDefinition } from '../src/envoy-protos';
import type { CheckRequest__Output } from '../src/envoy-protos';
import { startService } from '../src/service';
import { fixedMixes } from './check-requests';
import { encodeCheckRequest } from './grpc-frame';
import { decisionProblem } from './decisions';
import { decodeCheckResponse } from './grpc-frame';
import { median } from './latency';

export interface CheckPathBench {
  readonly calls: number;
  /** The Service method timed. */
  readonly method: 'checkBytes' | 'check';
  /** Median of per-call times (hrtime around each awaited call). */
  readonly medianUs: number;
  readonly p99Us: number;
  /** Total time / calls over back-to-back batches (includes no timer overhead per call). */
  readonly meanUs: number;
}

const nowNs = (): bigint => process.hrtime.bigint();

export async function benchCheckPath(configPath: string, logFile: string, calls = 300_000): Promise<CheckPathBench> {
  const service = await startService({ configPath, grpcAddress: '127.0.0.1:0', httpAddress: '127.0.0.1:0', logDestination: logFile, watch: false });
  try {
    const mix = fixedMixes().find((m) => m.id === 'small_chat')!;
    const part = mix.parts[0];
    const def = authPackageDefinition()['envoy.service.auth.v3.Authorization'] as unknown as Record<string, { requestDeserialize(b: Buffer): unknown }>;
    const req = def.Check.requestDeserialize(encodeCheckRequest(part.request)) as CheckRequest__Output;
    const withBytes = service as unknown as { checkBytes?: (r: CheckRequest__Output) => Promise<Buffer> };
    const method = typeof withBytes.checkBytes === 'function' ? 'checkBytes' : 'check';
    const run: (r: CheckRequest__Output) => Promise<unknown> =
      method === 'checkBytes' ? (r) => withBytes.checkBytes!.call(service, r) : (r) => service.check(r);
    const first = await run(req);
    const problem = decisionProblem((Buffer.isBuffer(first) ? decodeCheckResponse(first) : first) as never, part.expect);
    if (problem) throw new Error(`in-process check: ${problem}`);
    for (let i = 0; i < 50_000; i++) await run(req); // warm: JIT and the key cache
    const per = new Float64Array(calls);
    for (let i = 0; i < calls; i++) {
      const t = nowNs();
      await run(req);
      per[i] = Number(nowNs() - t) / 1000;
    }
    const batchMeans: number[] = [];
    for (let b = 0; b < 10; b++) {
      const n = 20_000;
      const t = nowNs();
      for (let i = 0; i < n; i++) await run(req);
      batchMeans.push(Number(nowNs() - t) / 1000 / n);
    }
    per.sort();
    return { calls, method, medianUs: per[Math.floor(calls / 2)], p99Us: per[Math.floor(calls * 0.99)], meanUs: median(batchMeans) };
  } finally {
    await service.close(1000);
  }
}

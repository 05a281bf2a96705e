/**
 * Micro-benchmark: the whole read-decide-write path of one Check, in process (no network), for a
 * cached key and a small chat body, with decision logging ON (to a file, as in production). It
 * times what the gRPC handler runs: `service.checkBytes(bytes)`, from the serialised CheckRequest
 * (what grpc-js hands the handler) to the serialised CheckResponse: read (decode), decide, write,
 * log, count.
 */
import { startService } from '../src/server/service';
import { fixedMixes } from './check-requests';
import { encodeCheckRequest } from './grpc-frame';
import { decisionProblem } from './decisions';
import { decodeCheckResponse } from './grpc-frame';
import { median } from './latency';

export interface CheckPathBench {
  readonly calls: number;
  /** The Service method timed. */
  readonly method: 'checkBytes';
  /** Median of per-call times (hrtime around each awaited call). */
  readonly medianUs: number;
  readonly p99Us: number;
  /** Total time / calls over back-to-back batches (includes no timer overhead per call). */
  readonly meanUs: number;
}

const nowNs = (): bigint => process.hrtime.bigint();
const YIELD_EVERY = 100;

export async function benchCheckPath(configPath: string, logFile: string, calls = 300_000): Promise<CheckPathBench> {
  const service = await startService({
    configPath,
    grpcAddress: '127.0.0.1:0',
    httpAddress: '127.0.0.1:0',
    logDestination: logFile,
    watch: false,
  });
  try {
    const mix = fixedMixes().find((m) => m.id === 'small_chat')!;
    const part = mix.parts[0];
    const bytes = encodeCheckRequest(part.request);
    const run = (b: Buffer): Buffer | Promise<Buffer> => service.checkBytes(b);
    const problem = decisionProblem(decodeCheckResponse(await run(bytes)) as never, part.expect);
    if (problem) throw new Error(`in-process check: ${problem}`);
    // As the gRPC handler does, a call is awaited only when its answer is a promise (a store round
    // trip); and as a server does between socket reads, the loop yields to the event loop every
    // YIELD_EVERY calls, so log writes complete (their cost is in the batch means below).
    const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
    for (let i = 0; i < 50_000; i++) {
      const r = run(bytes); // warm: JIT and the key cache
      if (r instanceof Promise) await r;
      if (i % YIELD_EVERY === 0) await yieldToLoop();
    }
    const per = new Float64Array(calls);
    for (let i = 0; i < calls; i++) {
      const t = nowNs();
      const r = run(bytes);
      if (r instanceof Promise) await r;
      per[i] = Number(nowNs() - t) / 1000;
      if (i % YIELD_EVERY === 0) await yieldToLoop();
    }
    const batchMeans: number[] = [];
    for (let b = 0; b < 10; b++) {
      const n = 20_000;
      const t = nowNs();
      for (let i = 0; i < n; i++) {
        const r = run(bytes);
        if (r instanceof Promise) await r;
        if (i % YIELD_EVERY === 0) await yieldToLoop();
      }
      batchMeans.push(Number(nowNs() - t) / 1000 / n);
    }
    per.sort();
    return {
      calls,
      method: 'checkBytes',
      medianUs: per[Math.floor(calls / 2)],
      p99Us: per[Math.floor(calls * 0.99)],
      meanUs: median(batchMeans),
    };
  } finally {
    // No Envoy reports these Checks: nothing to wait for.
    await service.close(1000, 0);
  }
}

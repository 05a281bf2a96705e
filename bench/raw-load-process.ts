/**
 * Process entry for the raw HTTP/2 load generator (raw-h2-client.ts), so it can be pinned to its
 * own core with taskset like h2load.
 *
 * Usage: node dist/bench/raw-load-process.js SPEC.json RESULT.json
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { runRawClient, type ClientOptions, type ClientResult, type RequestKind } from './raw-h2-client';
import { decodeCheckResponse } from './grpc-frame';
import { decisionProblem } from './decisions';
import { summarize, type LatencySummary } from './latency';
import type { Expectation } from './check-requests';
import { rssBytes } from './proc-stats';

/** The client's options as plain data (sent to the load process as JSON), plus what to send. */
export interface RawLoadSpec extends Pick<
  ClientOptions,
  | 'host'
  | 'port'
  | 'path'
  | 'connections'
  | 'maxInFlight'
  | 'rate'
  | 'warmupMs'
  | 'durationMs'
  | 'totalRequests'
  | 'verifyEvery'
  | 'windowRequests'
> {
  /** Sample this process's RSS at every window boundary. */
  readonly serverPid?: number;
  readonly kinds: readonly {
    readonly name: string;
    readonly frameFile: string;
    readonly expect: Expectation | null;
    readonly keyPatch?: { readonly keysFile: string; readonly offset: number; readonly keyLength: number };
  }[];
  /** Kind names in sending order, repeated. */
  readonly sequence: readonly string[];
}

/** The client's result as plain data (written as JSON): latencies summarised, windows with RSS. */
export interface RawLoadResult extends Omit<ClientResult, 'latenciesUs' | 'ttfbUs' | 'windows' | 'completed'> {
  readonly latency: LatencySummary;
  /** This client's own CPU use over the run, % of one core (a closed-loop client near 100% would be the bottleneck). */
  readonly clientCpuPct: number;
  readonly windows: { index: number; completed: number; seconds: number; rps: number; rssBytes?: number }[];
}

async function main(): Promise<void> {
  const spec = JSON.parse(readFileSync(process.argv[2], 'utf8')) as RawLoadSpec;
  const kinds = new Map<string, RequestKind>();
  for (const k of spec.kinds) {
    const expect = k.expect;
    kinds.set(k.name, {
      name: k.name,
      grpcFrame: readFileSync(k.frameFile),
      verify: expect ? (message) => decisionProblem(decodeCheckResponse(message), expect) : undefined,
      keyPatch: k.keyPatch
        ? { keys: readFileSync(k.keyPatch.keysFile), offset: k.keyPatch.offset, keyLength: k.keyPatch.keyLength }
        : undefined,
    });
  }
  const rss: number[] = [];
  const cpu0 = process.cpuUsage();
  const wall0 = process.hrtime.bigint();
  const result = await runRawClient({
    ...spec,
    sequence: spec.sequence.map((n) => kinds.get(n)!),
    onWindow: spec.serverPid ? () => void rss.push(rssBytes(spec.serverPid!)) : undefined,
  });
  const cpu = process.cpuUsage(cpu0);
  const wallUs = Number(process.hrtime.bigint() - wall0) / 1000;
  const out: RawLoadResult = {
    clientCpuPct: (100 * (cpu.user + cpu.system)) / wallUs,
    sent: result.sent,
    measured: result.measured,
    seconds: result.seconds,
    rps: result.rps,
    latency: summarize(result.latenciesUs),
    rpcErrors: result.rpcErrors,
    streamResets: result.streamResets,
    wrongDecisions: result.wrongDecisions,
    firstWrong: result.firstWrong,
    verified: result.verified,
    countsByKind: result.countsByKind,
    lateSends: result.lateSends,
    sendLagP99Us: result.sendLagP99Us,
    windows: result.windows.map((w, i) => ({ ...w, rssBytes: rss[i] })),
  };
  writeFileSync(process.argv[3], JSON.stringify(out, null, 2));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

/**
 * Process entry of the end-to-end load generator: the raw HTTP/2 client (../raw-h2-client.ts)
 * sending HTTP requests to Envoy's listener (h2c, prior knowledge), closed loop or evenly paced
 * open loop, checking every response body. Runs in its own process so it can be pinned to the
 * load core with taskset.
 *
 *   node dist/bench/e2e/load-process.js SPEC.json RESULT.json
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { httpHeaderBlock, runRawClient, type RequestKind } from '../raw-h2-client';
import { summarize, type LatencySummary } from '../latency';

export interface HttpLoadSpec {
  readonly host: string;
  readonly port: number;
  readonly connections: number;
  readonly maxInFlight: number;
  /** req/s over all connections; 0 = closed loop. */
  readonly rate: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  /** Check every Nth response body (1 = all). */
  readonly verifyEvery: number;
  readonly kinds: readonly {
    readonly name: string;
    readonly path: string;
    readonly headers: Readonly<Record<string, string>>;
    readonly bodyFile: string;
    /** The body of a right answer contains every one of these. */
    readonly mustContain: readonly string[];
  }[];
  readonly sequence: readonly string[];
}

export interface HttpLoadResult {
  readonly sent: number;
  readonly measured: number;
  readonly seconds: number;
  readonly rps: number;
  readonly latency: LatencySummary;
  readonly ttfb: LatencySummary;
  /** Responses without a body (none expected: every answer through the bundle has one). */
  readonly emptyResponses: number;
  readonly streamResets: number;
  readonly wrong: number;
  readonly firstWrong: string | null;
  readonly verified: number;
  readonly countsByKind: Record<string, number>;
  readonly lateSends: number;
  readonly sendLagP99Us: number;
  /** This client's own CPU use, % of one core over the run. */
  readonly clientCpuPct: number;
}

async function main(): Promise<void> {
  const spec = JSON.parse(readFileSync(process.argv[2], 'utf8')) as HttpLoadSpec;
  const authority = `${spec.host}:${spec.port}`;
  const kinds = new Map<string, RequestKind>();
  for (const k of spec.kinds) {
    const needles = k.mustContain.map((s) => Buffer.from(s));
    kinds.set(k.name, {
      name: k.name,
      grpcFrame: readFileSync(k.bodyFile),
      headerBlock: httpHeaderBlock(k.path, authority, k.headers),
      verify: (body) => {
        for (const n of needles) {
          if (!body.includes(n))
            return `body lacks ${JSON.stringify(n.toString())}: ${JSON.stringify(body.subarray(0, 300).toString())}`;
        }
        return null;
      },
    });
  }
  const cpu0 = process.cpuUsage();
  const wall0 = process.hrtime.bigint();
  const r = await runRawClient({
    host: spec.host,
    port: spec.port,
    path: '/',
    connections: spec.connections,
    maxInFlight: spec.maxInFlight,
    rate: spec.rate,
    warmupMs: spec.warmupMs,
    durationMs: spec.durationMs,
    sequence: spec.sequence.map((n) => kinds.get(n)!),
    verifyEvery: spec.verifyEvery,
  });
  const cpu = process.cpuUsage(cpu0);
  const wallUs = Number(process.hrtime.bigint() - wall0) / 1000;
  const out: HttpLoadResult = {
    sent: r.sent,
    measured: r.measured,
    seconds: r.seconds,
    rps: r.rps,
    latency: summarize(r.latenciesUs),
    ttfb: summarize(r.ttfbUs),
    emptyResponses: r.rpcErrors,
    streamResets: r.streamResets,
    wrong: r.wrongDecisions,
    firstWrong: r.firstWrong,
    verified: r.verified,
    countsByKind: r.countsByKind,
    lateSends: r.lateSends,
    sendLagP99Us: r.sendLagP99Us,
    clientCpuPct: (100 * (cpu.user + cpu.system)) / wallUs,
  };
  writeFileSync(process.argv[3], JSON.stringify(out));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

/**
 * `npm run bench:packages [-- --before=DIR]`: the workspace packages' benchmarks in one run, each
 * against another build when one is given: DIR is the compiled `dist/src` of a modelgate from before
 * the packages (its `grpc/server.js` and `check/extract-model.js`). Rounds alternate between the
 * builds, so both see the same machine. Figures: bench/README.md, "The packages".
 *
 *   - @modelgate/grpc-server: unary calls on one connection, each transport (packages/grpc-server/bench);
 *     and 256 KiB calls to a method that borrows its request and to one that does not (this build);
 *   - @modelgate/json-scan: scanJson on a 1 MiB chat body beside JSON.parse (packages/json-scan/bench),
 *     and modelgate's extractModel (the scanner with the model policy) on the same body.
 */
import { join } from 'node:path';
import { benchLarge, benchUnary, type StartServer } from '../packages/grpc-server/bench/unary.bench';
import { startH2GrpcServer } from '@modelgate/grpc-server';
import { benchScan, chatBody, type Scan } from '../packages/json-scan/bench/scan.bench';
import { scanJson } from '@modelgate/json-scan';
import { extractModel } from '../src/check/extract-model';

async function main(): Promise<void> {
  const before = process.argv.find((a) => a.startsWith('--before='))?.slice(9);
  const quick = process.argv.includes('--quick');
  const servers = new Map<string, StartServer>([['this build', startH2GrpcServer]]);
  const extracts = new Map<string, Scan>([['extractModel (this build)', (b) => extractModel(b)]]);
  if (before) {
    servers.set(
      'before',
      (require(join(before, 'grpc', 'server.js')) as { startH2GrpcServer: StartServer }).startH2GrpcServer,
    );
    extracts.set(
      'extractModel (before)',
      (require(join(before, 'check', 'extract-model.js')) as { extractModel: Scan }).extractModel,
    );
  }
  for (const transport of ['builtin', 'node'] as const) {
    for (const [name, r] of await benchUnary(servers, transport, quick ? 3 : 15)) {
      console.log(
        `grpc-server, ${transport} transport, unary calls on one connection (${name}): ${r.medianCpuUsPerCall.toFixed(2)} µs CPU (${r.medianUsPerCall.toFixed(2)} µs wall) per call, median of ${r.rounds} rounds of ${r.callsPerRound}`,
      );
    }
    for (const [name, r] of await benchLarge(transport, quick ? 3 : 15)) {
      console.log(
        `grpc-server, ${transport} transport, 256 KiB unary calls (${name}): ${r.medianCpuUsPerCall.toFixed(1)} µs CPU (${r.medianUsPerCall.toFixed(1)} µs wall) per call, median of ${r.rounds} rounds of ${r.callsPerRound}`,
      );
    }
  }
  const body = chatBody(1024 * 1024);
  const mib = (body.length / 1048576).toFixed(2);
  // extractModel first and alone: modelgate's process runs only its subclass of the scanner, so the
  // scanner's hooks are measured monomorphic, as they run there; then the bare scanner.
  for (const [name, us] of benchScan(extracts, body, quick ? 30 : 200))
    console.log(`json-scan, ${mib} MiB chat body, model last (${name}): ${us.toFixed(0)} µs CPU per call`);
  const bare = new Map<string, Scan>([
    ['scanJson', (b) => scanJson(b)],
    ['JSON.parse(buf.toString())', (b) => JSON.parse(b.toString()) as unknown],
  ]);
  for (const [name, us] of benchScan(bare, body, quick ? 30 : 200))
    console.log(`json-scan, ${mib} MiB chat body, model last (${name}): ${us.toFixed(0)} µs CPU per call`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});

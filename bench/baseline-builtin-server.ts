/**
 * The no-op on modelgate's own gRPC server (packages/grpc-server): every Check answered `{status: {code: 0}}`
 * at once, on the transport modelgate serves with (`builtin`, modelgate's HTTP/2; `node`,
 * node:http2), with modelgate's receive limit. Beside bench/baseline-server.ts (the same no-op on
 * grpc-js's server), it is the limit of modelgate's own stack: the difference between it and
 * modelgate is modelgate's decision, logging and metrics, and what Envoy does with modelgate's
 * answer (header changes, metadata its access log prints): bench/README.md, "The Check's answer".
 *
 * Usage: node dist/bench/baseline-builtin-server.js 127.0.0.1:PORT [builtin|node] [ANSWER_FILE]
 * Prints `baseline listening <address>` when bound. ANSWER_FILE: a serialised CheckResponse to answer
 * with instead (e2e/answer-bytes.ts writes modelgate's: what its answer costs Envoy).
 */
import { readFileSync } from 'node:fs';
import { startH2GrpcServer, type GrpcTransport } from '@modelgate/grpc-server';
import { CHECK_PATH } from '../src/server/grpc-server';
import { demoGrpcSettings } from './servers';

/** envoy/modelgate.yaml grpc.maxReceiveMessageBytes (the demo config modelgate runs on here). */
const MAX_RECEIVE_BYTES = demoGrpcSettings().maxReceiveMessageBytes;
/** CheckResponse {status: {}}: field 1 (status), an empty message (code 0 is the default). */
const OK = Buffer.from([0x0a, 0x00]);

async function main(): Promise<void> {
  const transport = (process.argv[3] ?? 'builtin') as GrpcTransport;
  const answer = process.argv[4] ? readFileSync(process.argv[4]) : OK;
  const server = await startH2GrpcServer(
    process.argv[2] ?? '127.0.0.1:0',
    new Map([[CHECK_PATH, { kind: 'unary', handle: () => answer }]]),
    { maxReceiveMessageBytes: MAX_RECEIVE_BYTES, transport },
  );
  console.log(`baseline listening ${server.address}`);
  const stop = (): void => void server.drain(1000).then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

void main();

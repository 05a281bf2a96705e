/**
 * The no-op baseline: a grpc-js Authorization server that answers every Check with
 * `{status: {code: 0}}` at once. Same grpc-js, same proto loading (`authorizationService()`) and
 * the same server options (receive limit, channelz off) and socket settings (TCP_NODELAY,
 * `disableNagle`) as modelgate, so the
 * difference between the two is modelgate's own work.
 *
 * Usage: node dist/bench/baseline-server.js 127.0.0.1:PORT
 * Prints `baseline listening <address>` when bound.
 */
import * as grpc from '@grpc/grpc-js';
import { authorizationService } from '../src/envoy/protos';
import { disableNagle } from '../src/server/grpc-server';

/** envoy/modelgate.yaml grpc.maxReceiveMessageBytes: 1 MiB bodies must be accepted by both. */
const MAX_RECEIVE_BYTES = 41943040;

function main(): void {
  const address = process.argv[2] ?? '127.0.0.1:0';
  // modelgate's server options (src/server/grpc-server.ts): the same receive limit, channelz off.
  const server = new grpc.Server({ 'grpc.max_receive_message_length': MAX_RECEIVE_BYTES, 'grpc.max_send_message_length': -1, 'grpc.enable_channelz': 0 });
  server.addService(authorizationService(), {
    Check: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback(null, { status: { code: 0 } }),
  });
  server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, port) => {
    if (err) {
      console.error(err);
      process.exit(1);
    }
    disableNagle(server);
    console.log(`baseline listening ${address.replace(/:\d+$/, `:${port}`)}`);
  });
  const stop = () => server.tryShutdown(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();

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
import { demoGrpcSettings } from './servers';

/**
 * envoy/modelgate.yaml grpc.maxReceiveMessageBytes (the demo config modelgate runs on here): 1 MiB bodies must be
 * accepted by both.
 */
const MAX_RECEIVE_BYTES = demoGrpcSettings().maxReceiveMessageBytes;

/**
 * Turns Nagle's algorithm off on every accepted connection, as modelgate's server does (a gRPC
 * answer is several small writes). grpc-js has no option for it, so this reaches its http2 servers.
 */
function disableNagle(server: grpc.Server): void {
  const servers = (server as unknown as { http2Servers?: Map<import('node:net').Server, unknown> }).http2Servers;
  if (!(servers instanceof Map) || servers.size === 0)
    throw new Error('grpc-js no longer exposes its http2 servers: the baseline cannot match modelgate');
  for (const s of servers.keys()) s.on('connection', (socket: import('node:net').Socket) => socket.setNoDelay(true));
}

function main(): void {
  const address = process.argv[2] ?? '127.0.0.1:0';
  // modelgate's server options (src/server/grpc-server.ts): the same receive limit, channelz off.
  const server = new grpc.Server({
    'grpc.max_receive_message_length': MAX_RECEIVE_BYTES,
    'grpc.max_send_message_length': -1,
    'grpc.enable_channelz': 0,
  });
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

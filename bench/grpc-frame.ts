/**
 * Encodes CheckRequests exactly as a gRPC client puts them on the wire: the proto-loader
 * serializer the service itself uses (so no second proto definition can drift), then the 5-byte
 * gRPC length prefix (flag 0 = uncompressed, 4-byte big-endian length; gRPC over HTTP/2 spec).
 */
import { authPackageDefinition } from '../src/envoy/protos';
import type { CheckRequest, CheckResponse__Output } from '../src/envoy/protos';

const CHECK_METHOD = 'envoy.service.auth.v3.Authorization';

function checkMethod() {
  const service = authPackageDefinition()[CHECK_METHOD] as unknown as Record<
    string,
    { requestSerialize(v: unknown): Buffer; responseDeserialize(b: Buffer): unknown }
  >;
  return service.Check;
}

/** Protobuf bytes of a CheckRequest (no prefix). */
export function encodeCheckRequest(req: CheckRequest): Buffer {
  return checkMethod().requestSerialize(req);
}

/** A CheckResponse decoded with the service's own loader options (keepCase, longs as strings). */
export function decodeCheckResponse(bytes: Buffer): CheckResponse__Output {
  return checkMethod().responseDeserialize(bytes) as CheckResponse__Output;
}

/** `message` behind the 5-byte gRPC message prefix. */
export function grpcFrame(message: Buffer): Buffer {
  const frame = Buffer.allocUnsafe(5 + message.length);
  frame[0] = 0;
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  return frame;
}

/**
 * gRPC status codes this server answers with (grpc/grpc doc/statuscodes.md) and the trailers that
 * carry them (PROTOCOL-HTTP2.md: `grpc-status`, and `grpc-message` percent-encoded).
 */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

export type GrpcStatusCode = (typeof GrpcStatus)[keyof typeof GrpcStatus];

/** A handler's way to end a call with a status other than OK. */
export class GrpcError extends Error {
  constructor(
    readonly code: GrpcStatusCode,
    message: string,
  ) {
    super(message);
  }
}

/**
 * `grpc-message` is percent-encoded UTF-8: every byte outside %x20-%x7E, and '%' itself, becomes
 * %XX (PROTOCOL-HTTP2.md, "Status-Message").
 */
export function encodeGrpcMessage(message: string): string {
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

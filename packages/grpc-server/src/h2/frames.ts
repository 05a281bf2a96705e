/**
 * HTTP/2 frame types, flags, settings and error codes (RFC 9113 §6, §7, §11), and the 9-octet frame
 * header.
 */
export const FRAME = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

export const FLAG = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20,
} as const;

export const SETTING = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

export const ERROR = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  ENHANCE_YOUR_CALM: 0xb,
} as const;

export const HEADER_BYTES = 9;
/** The client connection preface (§3.4). */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
/** SETTINGS_MAX_FRAME_SIZE's initial value, and the least a peer may set (§6.5.2). */
export const DEFAULT_MAX_FRAME = 16_384;
/** The initial flow-control window of every stream and of the connection (§6.9.2). */
export const DEFAULT_WINDOW = 65_535;
export const MAX_WINDOW = 2 ** 31 - 1;

/** Writes a frame header at `at`; returns the offset after it. */
export function writeFrameHeader(
  out: Buffer,
  at: number,
  length: number,
  type: number,
  flags: number,
  streamId: number,
): number {
  out[at] = length >>> 16;
  out[at + 1] = (length >>> 8) & 0xff;
  out[at + 2] = length & 0xff;
  out[at + 3] = type;
  out[at + 4] = flags;
  out.writeUInt32BE(streamId, at + 5);
  return at + HEADER_BYTES;
}

/** A whole frame. */
export function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES + payload.length);
  writeFrameHeader(out, 0, payload.length, type, flags, streamId);
  payload.copy(out, HEADER_BYTES);
  return out;
}

/** A payload of 32-bit big-endian words (WINDOW_UPDATE, RST_STREAM, GOAWAY). */
export function words(...values: number[]): Buffer {
  const out = Buffer.allocUnsafe(4 * values.length);
  values.forEach((v, i) => out.writeUInt32BE(v >>> 0, 4 * i));
  return out;
}

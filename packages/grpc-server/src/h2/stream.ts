/**
 * One HTTP/2 stream of a connection (connection.ts), seen from the gRPC call that answers it: its
 * flow-control and end state, which the connection reads and updates, and the answer written as
 * frames (a unary answer in one buffer, Trailers-Only for a status alone, a plain HTTP refusal).
 */
import type { RequestEvents, ResponseStream } from '../call';
import { encodeGrpcMessage, GrpcStatus, type GrpcStatusCode } from '../status';
import { FLAG, frame, FRAME, HEADER_BYTES, writeFrameHeader } from './frames';
import { literalField, STATIC_INDEX } from './hpack';

/** What a stream needs of its connection to write its answer. */
export interface StreamOwner {
  readonly peerInitialWindow: number;
  readonly peerMaxFrame: number;
  /** The connection's send window (flow control), taken from as DATA is written. */
  sendWindow: number;
  /** Queues bytes for the socket (one write per event-loop turn). */
  write(bytes: Buffer): void;
  /** A header block with any owed HPACK table size update in front. */
  headerBlock(block: Buffer): Buffer;
  /** Queues a DATA payload on the stream and writes what flow control allows of it. */
  enqueue(s: Stream, data: Buffer): void;
  /** Writes what flow control allows of the stream's queued DATA, then its trailers. */
  flushStream(s: Stream): void;
  /** The stream's END_STREAM is written: its answer is complete. */
  localEnd(s: Stream): void;
}

/** grpc-message is cut to this many characters (a header frame stays far below 16 KiB). */
const MAX_STATUS_MESSAGE = 1024;

const RESPONSE_HEADERS = Buffer.concat([
  Buffer.from([0x80 | STATIC_INDEX.status200]),
  literalField(STATIC_INDEX.contentType, 'application/grpc'),
]);
const OK_TRAILERS = literalField('grpc-status', '0');
const EMPTY = Buffer.alloc(0);
const NO_EVENTS: RequestEvents = { data() {}, end() {}, closed() {} };

export class Stream implements ResponseStream {
  events: RequestEvents = NO_EVENTS;
  sendWindow: number;
  recvUnacked = 0;
  remoteEnded = false;
  /** The call is done writing (its END_STREAM may still wait for flow control). */
  localEnded = false;
  /** Our END_STREAM is written: the answer is complete. */
  endSent = false;
  headersSent = false;
  gone = false;
  /** DATA waiting for flow-control window, and the trailers' header block to follow it. */
  queued: Buffer[] = [];
  queuedTrailers: Buffer | undefined;
  /**
   * A plain HTTP answer (a refusal): it ends with its last DATA frame, not with trailers, and the
   * rest of the request is then read (and dropped) to its END_STREAM rather than reset (RFC 9113
   * §8.1 lets either be done).
   */
  plainHttp = false;
  /** The request's content-length, or -1; and the DATA octets received (RFC 9113 §8.1.1). */
  contentLength = -1;
  received = 0;

  constructor(
    readonly id: number,
    readonly conn: StreamOwner,
  ) {
    this.sendWindow = conn.peerInitialWindow;
  }

  get writable(): boolean {
    return !this.localEnded && !this.gone;
  }

  sendUnary(message: Buffer): void {
    if (!this.writable) return;
    const conn = this.conn;
    const dataLength = 5 + message.length;
    if (
      this.headersSent ||
      dataLength > conn.peerMaxFrame ||
      dataLength > this.sendWindow ||
      dataLength > conn.sendWindow
    ) {
      this.send(message);
      return this.end(GrpcStatus.OK, '');
    }
    // The whole answer in one buffer: HEADERS, DATA (gRPC prefix + message), HEADERS (trailers).
    const head = conn.headerBlock(RESPONSE_HEADERS);
    const out = Buffer.allocUnsafe(3 * HEADER_BYTES + head.length + dataLength + OK_TRAILERS.length);
    let at = writeFrameHeader(out, 0, head.length, FRAME.HEADERS, FLAG.END_HEADERS, this.id);
    at += head.copy(out, at);
    at = writeFrameHeader(out, at, dataLength, FRAME.DATA, 0, this.id);
    out[at] = 0;
    out.writeUInt32BE(message.length, at + 1);
    at += 5 + message.copy(out, at + 5);
    at = writeFrameHeader(out, at, OK_TRAILERS.length, FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, this.id);
    OK_TRAILERS.copy(out, at);
    this.sendWindow -= dataLength;
    conn.sendWindow -= dataLength;
    this.headersSent = true;
    conn.write(out);
    conn.localEnd(this);
  }

  send(message: Buffer): void {
    if (!this.writable) return;
    this.#headers();
    const data = Buffer.allocUnsafe(5 + message.length);
    data[0] = 0;
    data.writeUInt32BE(message.length, 1);
    message.copy(data, 5);
    this.conn.enqueue(this, data);
  }

  end(code: GrpcStatusCode, message: string): void {
    if (!this.writable) return;
    const conn = this.conn;
    const status = literalField('grpc-status', String(code));
    const text =
      message === '' ? EMPTY : literalField('grpc-message', encodeGrpcMessage(message.slice(0, MAX_STATUS_MESSAGE)));
    if (!this.headersSent) {
      // Trailers-Only: one HEADERS frame with the status (PROTOCOL-HTTP2.md).
      this.headersSent = true;
      conn.write(
        frame(
          FRAME.HEADERS,
          FLAG.END_HEADERS | FLAG.END_STREAM,
          this.id,
          conn.headerBlock(Buffer.concat([RESPONSE_HEADERS, status, text])),
        ),
      );
      return conn.localEnd(this);
    }
    // Framed when it is written (flushStream): an owed table size update must go in the first block written.
    this.queuedTrailers = code === GrpcStatus.OK && text === EMPTY ? OK_TRAILERS : Buffer.concat([status, text]);
    this.localEnded = true;
    conn.flushStream(this);
  }

  /**
   * A plain HTTP answer (not gRPC at all: a wrong content-type): its text as flow control allows,
   * the END_STREAM on the last DATA frame; the rest of the request is then read to its end.
   */
  refuse(httpStatus: number, text: string): void {
    if (!this.writable) return;
    const conn = this.conn;
    this.headersSent = true;
    this.localEnded = true;
    this.plainHttp = true;
    conn.write(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS,
        this.id,
        conn.headerBlock(
          Buffer.concat([
            literalField(STATIC_INDEX.status, String(httpStatus)),
            literalField(STATIC_INDEX.contentType, 'text/plain'),
          ]),
        ),
      ),
    );
    conn.enqueue(this, Buffer.from(text, 'latin1'));
  }

  #headers(): void {
    if (this.headersSent) return;
    this.headersSent = true;
    this.conn.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, this.id, this.conn.headerBlock(RESPONSE_HEADERS)));
  }
}

/**
 * gRPC's Length-Prefixed-Messages read from the DATA of one HTTP/2 stream, however its frames cut
 * them (grpc/grpc PROTOCOL-HTTP2.md: a Compressed-Flag byte, a 4-byte big-endian Message-Length,
 * the Message). A message that arrives within one chunk is handed on as a view of that chunk (no
 * copy: the common case, a CheckRequest in one DATA frame); one cut across chunks is copied into a
 * buffer as it comes. Its announced size is checked against the limit first, and the buffer is
 * reserved for at most INITIAL_BYTES of it, then grows (doubling) with the bytes that arrive: a
 * 5-byte prefix that announces 40 MiB does not reserve 40 MiB. With a BufferPool that buffer is
 * taken from the pool, and the message handed on with it as its loan, for the caller to give back
 * once nothing reads the message.
 */
import type { BufferPool } from './buffer-pool';

/** A message up to this size (a 1 MiB body and its CheckRequest) is copied once, into a buffer of its size. */
const INITIAL_BYTES = 1024 * 1024 + 64 * 1024;

/** Why a stream's bytes are not a sequence of acceptable messages. */
export type FramingProblem =
  /** a message announced longer than the receive limit */
  | 'too_large'
  /** the Compressed-Flag is set: this server announces no compression (grpc-accept-encoding: identity) */
  | 'compressed'
  /** the stream ended inside a message */
  | 'truncated';

const PREFIX = 5;

export class MessageReader {
  readonly #maxBytes: number;
  readonly #onMessage: (message: Buffer, loan?: Buffer) => void;
  readonly #pool: BufferPool | undefined;
  /** The prefix being read, when a chunk ended inside it. */
  #prefix: Buffer | undefined;
  #prefixFill = 0;
  /** The message being read, when a chunk ended inside it: its announced length, and the bytes so far. */
  #bodyLength = 0;
  #body: Buffer | undefined;
  #bodyFill = 0;
  #problem: FramingProblem | undefined;

  /**
   * @param maxBytes the largest Message-Length accepted
   * @param onMessage called with each whole message, in order; `loan` is the pool's buffer it is
   *   in (the caller gives it back when nothing reads the message any more), absent for a view of a chunk
   * @param pool where a message cut across chunks is assembled (default: a new buffer each)
   */
  constructor(maxBytes: number, onMessage: (message: Buffer, loan?: Buffer) => void, pool?: BufferPool) {
    this.#maxBytes = maxBytes;
    this.#onMessage = onMessage;
    this.#pool = pool;
  }

  /** The first problem met; once set, further bytes are ignored. */
  get problem(): FramingProblem | undefined {
    return this.#problem;
  }

  /** Reads one chunk of DATA. */
  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length && this.#problem === undefined) {
      if (this.#body !== undefined) {
        const n = Math.min(this.#bodyLength - this.#bodyFill, chunk.length - at);
        if (this.#bodyFill + n > this.#body.length) {
          const size = Math.min(this.#bodyLength, Math.max(2 * this.#body.length, this.#bodyFill + n));
          const grown = this.#pool ? this.#pool.take(size) : Buffer.allocUnsafe(size);
          this.#body.copy(grown, 0, 0, this.#bodyFill);
          this.#pool?.give(this.#body);
          this.#body = grown;
        }
        chunk.copy(this.#body, this.#bodyFill, at, at + n);
        this.#bodyFill += n;
        at += n;
        if (this.#bodyFill === this.#bodyLength) {
          const body = this.#body;
          this.#body = undefined;
          if (this.#pool) this.#onMessage(body.subarray(0, this.#bodyLength), body);
          else this.#onMessage(body);
        }
        continue;
      }
      let flag: number;
      let length: number;
      if (this.#prefixFill === 0 && chunk.length - at >= PREFIX) {
        flag = chunk[at];
        length = chunk.readUInt32BE(at + 1);
        at += PREFIX;
      } else {
        this.#prefix ??= Buffer.allocUnsafe(PREFIX);
        const n = Math.min(PREFIX - this.#prefixFill, chunk.length - at);
        chunk.copy(this.#prefix, this.#prefixFill, at, at + n);
        this.#prefixFill += n;
        at += n;
        if (this.#prefixFill < PREFIX) return;
        this.#prefixFill = 0;
        flag = this.#prefix[0];
        length = this.#prefix.readUInt32BE(1);
      }
      if (flag !== 0) {
        this.#problem = 'compressed';
        return;
      }
      if (length > this.#maxBytes) {
        this.#problem = 'too_large';
        return;
      }
      if (chunk.length - at >= length) {
        this.#onMessage(chunk.subarray(at, at + length));
        at += length;
      } else {
        this.#bodyLength = length;
        const size = Math.min(length, INITIAL_BYTES);
        this.#body = this.#pool ? this.#pool.take(size) : Buffer.allocUnsafe(size);
        this.#bodyFill = 0;
      }
    }
  }

  /** The stream ended: a message or prefix left unfinished is a problem. */
  end(): void {
    if (this.#problem === undefined && (this.#body !== undefined || this.#prefixFill > 0)) this.#problem = 'truncated';
    this.discard();
  }

  /** Gives back the message being read, if any (the stream ended or is gone: nothing will read it). */
  discard(): void {
    if (this.#body !== undefined) this.#pool?.give(this.#body);
    this.#body = undefined;
  }
}

/** One message as gRPC sends it: the 5-byte prefix (not compressed) and the bytes. */
export function frameMessage(message: Buffer): Buffer {
  const out = Buffer.allocUnsafe(PREFIX + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  message.copy(out, PREFIX);
  return out;
}

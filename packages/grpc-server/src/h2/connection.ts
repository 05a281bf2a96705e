/**
 * One HTTP/2 connection (RFC 9113, with prior knowledge over TCP or over TLS once its handshake is
 * done (server.ts), as Envoy's gRPC client and grpc-js connect) carrying gRPC calls: frames read
 * from the socket, header blocks decoded and checked, each stream's DATA handed to its call, answers
 * written (framed by each stream: stream.ts).
 *
 * Why not node:http2: every stream there is a Duplex with its own listeners and header objects,
 * and a gRPC answer leaves in two writes (headers + message, then trailers once 'wantTrailers'
 * fires), so Envoy wakes twice per Check. Here a unary answer is one buffer (HEADERS, DATA,
 * HEADERS) written once per event-loop turn together with every other answer of that turn; a
 * stream is a small object. Through Envoy this took a no-op Check from 260 µs to 80 µs of CPU
 * (bench/README-e2e.md, "The gRPC server").
 *
 * The whole of the protocol a server must handle is here: SETTINGS (and their ACKs), PING,
 * WINDOW_UPDATE and flow control both ways, RST_STREAM, GOAWAY, PRIORITY (ignored, but for a
 * stream depending on itself), padding, CONTINUATION, HPACK with its dynamic table, request
 * validation (request-head.ts), frames on closed streams (closed-streams.ts). Any error that could
 * mix streams (stream ids, header-block boundaries, HPACK state) ends the connection with GOAWAY;
 * a malformed request resets its stream alone. It is lenient where only the peer could suffer (a
 * peer sending past its window is not cut off).
 *
 * Limits, where nghttp2 has them and they matter (docs/grpc-port.md lists them with the attacks
 * they answer): header blocks (64 KiB, 64 CONTINUATIONs), concurrent streams (2,048), streams reset
 * by the client before their answer or refused (a burst of 1,000, then 33 a second: rapid reset), control
 * frames answered while the client does not read (1,000), unread output (reads pause past 1 MiB;
 * closed past 8 MiB), answers waiting for flow-control window (new streams refused past 4 MiB), a
 * preface that never comes (10 s), a connection without streams (closed after the idle timeout),
 * output stalled as long; the number of connections is the server's (server.ts). A message's buffer
 * grows with the bytes that arrive, not with the size it announces (../message-reader.ts).
 */
import type { Socket } from 'node:net';
import type { RequestEvents, ResponseStream } from '../call';
import { CLOSED, ClosedStreams, type ClosedHow } from './closed-streams';
import {
  DEFAULT_MAX_FRAME,
  DEFAULT_WINDOW,
  ERROR,
  FLAG,
  frame,
  FRAME,
  HEADER_BYTES,
  MAX_WINDOW,
  PREFACE,
  SETTING,
  words,
} from './frames';
import { HpackDecoder, HpackError, tableSizeUpdate } from './hpack';
import { RequestHead } from './request-head';
import { ResetBudget } from './reset-budget';
import { Stream, type StreamOwner } from './stream';

/**
 * Opens the call of a new stream (its path, content-type and `authorization` metadata read: the
 * port's shared secret, server.ts), answering through `res`.
 */
export type OpenStream = (
  path: string,
  contentType: string | undefined,
  res: ResponseStream,
  authorization: string | undefined,
) => RequestEvents;

export interface ConnectionOptions {
  readonly open: OpenStream;
  /** Protocol errors of the peer and socket errors, for the log; they never throw. */
  readonly onError: (err: Error) => void;
  /** Called once when the socket is closed. */
  readonly onClose: () => void;
}

/** Our settings (sent in the server preface). */
/** Envoy's own default for an upstream connection is 1,024; a busier Envoy opens another connection. */
const MAX_CONCURRENT_STREAMS = 2_048;
/** Per-stream receive window: a 1 MiB request body arrives without waiting for a WINDOW_UPDATE. */
const STREAM_WINDOW = 4 * 1024 * 1024;
/** Connection receive window. */
const CONNECTION_WINDOW = 16 * 1024 * 1024;
/** Largest header block (compressed, CONTINUATIONs included) and header list we take. */
const MAX_HEADER_BLOCK = 64 * 1024;
/** CONTINUATION frames one header block may take (empty ones count: CVE-2024-27316's flood). */
const MAX_CONTINUATIONS = 64;
/** A connection whose client preface has not come by then is closed. */
const PREFACE_TIMEOUT_MS = 10_000;
/** Drain: how long the first GOAWAY (no stream refused yet) waits for its PING to come back. */
const DRAIN_PING_TIMEOUT_MS = 1_000;
const DRAIN_PING = Buffer.from('mg-drain');
/** A socket ended by us that the peer does not close is destroyed after this. */
const END_GRACE_MS = 2_000;
/** After ENHANCE_YOUR_CALM the streams in flight get this long before the socket is destroyed. */
const CALM_GRACE_MS = 5_000;
/**
 * Streams a client may reset before their answer, or open past the limits we announce (refused):
 * nghttp2's defaults for resets (a burst of 1,000, then 33 a second). Envoy resets a Check only at
 * its timeout or when its own client goes away, and the meter's streams only when a response is
 * cut (the meter ends its side first otherwise); it never opens more streams than announced.
 */
const RESET_BURST = 1_000;
const RESETS_PER_SECOND = 33;
/**
 * Frames written in answer to the client's (SETTINGS and PING ACKs, RST_STREAMs) while the
 * socket is backed up (64 KiB or more unsent), or in one read: nghttp2's max_outbound_ack. Past it
 * the client is flooding without reading.
 */
const MAX_REACTIVE = 1_000;
const REACTIVE_FORGIVEN_BELOW = 64 * 1024;
/** Unread output: reading pauses past this (until the socket drains); past the second, the connection is cut. */
const OUTPUT_HIGH_WATER = 1024 * 1024;
const MAX_UNREAD_OUTPUT = 8 * 1024 * 1024;
/** Answers waiting for flow-control window: past this, new streams are refused until it is sent. */
const MAX_QUEUED_OUTPUT = 4 * 1024 * 1024;
/**
 * The idle timeout is checked by sweeps this many times per timeout (server.ts calls sweep()): a
 * connection idle through more sweeps than this is closed between one and 1.25 timeouts after its
 * last stream.
 */
export const SWEEPS_PER_IDLE_TIMEOUT = 4;
const SERVER_PREFACE = Buffer.concat([
  frame(
    FRAME.SETTINGS,
    0,
    0,
    settingsPayload([
      [SETTING.MAX_CONCURRENT_STREAMS, MAX_CONCURRENT_STREAMS],
      [SETTING.INITIAL_WINDOW_SIZE, STREAM_WINDOW],
      [SETTING.MAX_HEADER_LIST_SIZE, MAX_HEADER_BLOCK],
      [SETTING.ENABLE_PUSH, 0],
    ]),
  ),
  frame(FRAME.WINDOW_UPDATE, 0, 0, words(CONNECTION_WINDOW - DEFAULT_WINDOW)),
]);

function settingsPayload(pairs: [number, number][]): Buffer {
  const out = Buffer.allocUnsafe(6 * pairs.length);
  pairs.forEach(([id, value], i) => {
    out.writeUInt16BE(id, 6 * i);
    out.writeUInt32BE(value, 6 * i + 2);
  });
  return out;
}

/** A connection error: GOAWAY with this code, then the socket is closed. */
class ConnectionError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export class Connection implements StreamOwner {
  readonly #socket: Socket;
  readonly #opts: ConnectionOptions;
  readonly #decoder = new HpackDecoder();
  readonly #head = new RequestHead();
  readonly #streams = new Map<number, Stream>();
  readonly #closedStreams = new ClosedStreams();
  readonly #resets = new ResetBudget(RESET_BURST, RESETS_PER_SECOND, Date.now());
  /** Streams with DATA waiting for window. */
  readonly #blocked = new Set<Stream>();
  #pending: Buffer | undefined;
  #prefaceSeen = false;
  #lastStreamId = 0;
  #continuation:
    { id: number; endStream: boolean; dependency: number; parts: Buffer[]; size: number; frames: number } | undefined;
  #recvUnacked = 0;
  /** The DATA frame being read: its stream (undefined: dropped), flags, length, what is left of it. */
  #dataStream: Stream | undefined;
  #dataFlags = 0;
  #dataLength = 0;
  #dataLeft = 0;
  /** Its Pad Length octet is still to come; content octets still to come (padding is the rest). */
  #dataPadByte = false;
  #dataContent = 0;
  #out: Buffer[] = [];
  #outBytes = 0;
  #flushQueued = false;
  /** DATA octets queued on streams, waiting for flow-control window. */
  #queuedBytes = 0;
  /** Frames written in answer to the client's since the socket last had under 64 KiB unsent. */
  #reactive = 0;
  /** Reading is paused until the socket drains. */
  #paused = false;
  /** Streams opened, ever (the idle sweep compares it). */
  #opened = 0;
  #openedAtSweep = 0;
  #idleSweeps = 0;
  /** Output moved since the last sweep (the socket drained, or DATA waiting for window was sent). */
  #progress = false;
  #stalledSweeps = 0;
  /** Drain: 1 after the first GOAWAY (streams still accepted), 2 after the last (new ones refused). */
  #drainPhase = 0;
  #drainCode: number = ERROR.NO_ERROR;
  #drainTimer: NodeJS.Timeout | undefined;
  /** The socket is ended (or destroyed): nothing more is written. */
  #closed = false;
  /** The first frame after the preface must be SETTINGS (RFC 9113 §3.4). */
  #settingsSeen = false;
  readonly #prefaceTimer: NodeJS.Timeout;
  /** A Dynamic Table Size Update owed to the peer's decoder (it lowered SETTINGS_HEADER_TABLE_SIZE). */
  #tableSizeUpdate: Buffer | undefined;
  #tableSizeZero = false;

  peerInitialWindow = DEFAULT_WINDOW;
  peerMaxFrame = DEFAULT_MAX_FRAME;
  sendWindow = DEFAULT_WINDOW;

  constructor(socket: Socket, opts: ConnectionOptions) {
    this.#socket = socket;
    this.#opts = opts;
    socket.setNoDelay(true);
    this.#prefaceTimer = setTimeout(() => this.#prefaceSeen || socket.destroy(), PREFACE_TIMEOUT_MS);
    this.#prefaceTimer.unref();
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', (err) => opts.onError(err));
    socket.on('close', () => this.#onClose());
  }

  /** Streams open on this connection. */
  get streamCount(): number {
    return this.#streams.size;
  }

  /**
   * Graceful close (drain), in two steps as RFC 9113 §6.8 advises: a GOAWAY with the largest stream
   * id and a PING (streams the client sent meanwhile are still served), then, once the PING is back
   * (or after a second), the GOAWAY naming the last stream served; the socket ends once those are
   * done. A connection whose preface has not come is simply closed.
   */
  goAway(code: number = ERROR.NO_ERROR): void {
    if (this.#drainPhase > 0 || this.#closed) return;
    if (!this.#prefaceSeen) return void this.#socket.destroy();
    this.#drainPhase = 1;
    this.#drainCode = code;
    this.write(frame(FRAME.GOAWAY, 0, 0, words(MAX_WINDOW, code)));
    this.write(frame(FRAME.PING, 0, 0, DRAIN_PING));
    this.#drainTimer = setTimeout(() => this.#lastGoAway(), DRAIN_PING_TIMEOUT_MS);
    this.#drainTimer.unref();
  }

  #lastGoAway(): void {
    if (this.#drainPhase !== 1 || this.#closed) return;
    clearTimeout(this.#drainTimer);
    this.#drainPhase = 2;
    this.write(frame(FRAME.GOAWAY, 0, 0, words(this.#lastStreamId, this.#drainCode)));
    if (this.#streams.size === 0) this.#endSocket();
  }

  destroy(): void {
    this.#socket.destroy();
  }

  /**
   * Called by the server SWEEPS_PER_IDLE_TIMEOUT times per idle timeout: a connection that had no
   * stream open through a whole timeout is drained (slowloris after the preface; Envoy simply opens
   * another when it needs one); one whose output has not moved as long (the client reads nothing,
   * or opens no flow-control window) is cut.
   */
  sweep(): void {
    if (this.#closed || !this.#prefaceSeen) return;
    if (this.#streams.size === 0 && this.#opened === this.#openedAtSweep) {
      if (++this.#idleSweeps > SWEEPS_PER_IDLE_TIMEOUT) this.goAway();
    } else {
      this.#idleSweeps = 0;
    }
    this.#openedAtSweep = this.#opened;
    if ((this.#paused || this.#blocked.size > 0) && !this.#progress) {
      if (++this.#stalledSweeps > SWEEPS_PER_IDLE_TIMEOUT) {
        this.#opts.onError(new Error('the peer has taken none of its answers for the idle timeout; connection closed'));
        this.#socket.destroy();
      }
    } else {
      this.#stalledSweeps = 0;
    }
    this.#progress = false;
  }

  // ---- output ----

  write(bytes: Buffer): void {
    if (this.#closed) return;
    this.#out.push(bytes);
    this.#outBytes += bytes.length;
    if (!this.#flushQueued) {
      this.#flushQueued = true;
      process.nextTick(this.#flush);
    }
  }

  /** A frame written in answer to one of the client's: bounded while the client does not read. */
  #answer(bytes: Buffer): void {
    if (++this.#reactive > MAX_REACTIVE)
      throw new ConnectionError(
        ERROR.ENHANCE_YOUR_CALM,
        `over ${MAX_REACTIVE} control frames to answer while the peer reads nothing`,
      );
    this.write(bytes);
  }

  readonly #flush = (): void => {
    this.#flushQueued = false;
    if (this.#closed || this.#out.length === 0) return;
    const out = this.#out.length === 1 ? this.#out[0] : Buffer.concat(this.#out, this.#outBytes);
    this.#out = [];
    this.#outBytes = 0;
    this.#socket.write(out);
    const backlog = this.#socket.writableLength;
    // A client keeping up (little left unsent) owes nothing; one that is not keeps its count.
    if (backlog < REACTIVE_FORGIVEN_BELOW) this.#reactive = 0;
    if (backlog > OUTPUT_HIGH_WATER) {
      if (backlog > MAX_UNREAD_OUTPUT) {
        this.#opts.onError(new Error('the peer is not reading its answers; connection closed'));
        return void this.#socket.destroy();
      }
      if (!this.#paused) {
        // Nothing more is read (and so nothing more answered) until the peer takes what it has.
        this.#paused = true;
        this.#socket.pause();
        this.#socket.once('drain', this.#resume);
      }
    }
  };

  readonly #resume = (): void => {
    this.#paused = false;
    this.#reactive = 0;
    this.#progress = true;
    if (!this.#closed) this.#socket.resume();
  };

  /** A header block we send, after the table size update we owe, if any. */
  headerBlock(block: Buffer): Buffer {
    if (this.#tableSizeUpdate === undefined) return block;
    const out = Buffer.concat([this.#tableSizeUpdate, block]);
    this.#tableSizeUpdate = undefined;
    return out;
  }

  enqueue(s: Stream, data: Buffer): void {
    s.queued.push(data);
    this.#queuedBytes += data.length;
    this.flushStream(s);
  }

  /**
   * Sends what flow control allows of a stream's queued DATA, then its trailers (or the END_STREAM on its last DATA).
   */
  flushStream(s: Stream): void {
    while (s.queued.length > 0) {
      const data = s.queued[0];
      const room = Math.min(s.sendWindow, this.sendWindow, this.peerMaxFrame);
      if (room <= 0 && data.length > 0) {
        this.#blocked.add(s);
        return;
      }
      const n = Math.min(room, data.length);
      const last = n === data.length && s.queued.length === 1 && s.plainHttp;
      this.write(frame(FRAME.DATA, last ? FLAG.END_STREAM : 0, s.id, n === data.length ? data : data.subarray(0, n)));
      s.sendWindow -= n;
      this.sendWindow -= n;
      this.#queuedBytes -= n;
      if (this.#blocked.has(s)) this.#progress = true;
      if (n === data.length) s.queued.shift();
      else s.queued[0] = data.subarray(n);
      if (last) {
        this.#blocked.delete(s);
        return this.localEnd(s);
      }
    }
    this.#blocked.delete(s);
    if (s.queuedTrailers) {
      this.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, s.id, this.headerBlock(s.queuedTrailers)));
      s.queuedTrailers = undefined;
      this.localEnd(s);
    }
  }

  /**
   * Our END_STREAM is written. The stream closes if the client's request is complete; if not, it
   * is reset (RFC 9113 §8.1: the client stops sending a request that no longer matters), or, for
   * a plain HTTP refusal, read to its end.
   */
  localEnd(s: Stream): void {
    s.localEnded = true;
    s.endSent = true;
    if (s.remoteEnded) return this.#close(s, CLOSED.ENDED);
    if (s.plainHttp || s.gone) return;
    this.write(frame(FRAME.RST_STREAM, 0, s.id, words(ERROR.NO_ERROR)));
    this.#close(s, CLOSED.WE_RESET);
  }

  #close(s: Stream, how: ClosedHow): void {
    if (s.gone) return;
    s.gone = true;
    this.#streams.delete(s.id);
    this.#closedStreams.add(s.id, how);
    if (s.queued.length > 0) {
      for (const q of s.queued) this.#queuedBytes -= q.length;
      s.queued = [];
      this.#blocked.delete(s);
    }
    s.events.closed();
    if (this.#drainPhase === 2 && this.#streams.size === 0) this.#endSocket();
  }

  /** A stream error (RFC 9113 §5.4.2): the stream is reset, the connection goes on. */
  #streamError(s: Stream, code: number): void {
    this.#answer(frame(FRAME.RST_STREAM, 0, s.id, words(code)));
    this.#close(s, CLOSED.WE_RESET);
  }

  #endSocket(): void {
    this.#flush();
    this.#closed = true;
    this.#socket.end();
    setTimeout(() => this.#socket.destroy(), END_GRACE_MS).unref();
  }

  // ---- input ----

  #onData(chunk: Buffer): void {
    if (this.#closed) return;
    try {
      let buf = chunk;
      if (!this.#prefaceSeen) {
        if (this.#pending !== undefined) buf = Buffer.concat([this.#pending, chunk]);
        this.#pending = undefined;
        const n = Math.min(buf.length, PREFACE.length);
        if (!PREFACE.subarray(0, n).equals(buf.subarray(0, n))) return this.#notHttp2(buf);
        if (buf.length < PREFACE.length) {
          this.#pending = buf;
          return;
        }
        this.#prefaceSeen = true;
        this.write(SERVER_PREFACE);
        buf = buf.subarray(PREFACE.length);
      } else if (this.#pending !== undefined) {
        // A frame header or a (non-DATA) frame was cut: completed from as much of the chunk as one
        // frame can need, so a large chunk is not copied whole.
        const pending = this.#pending;
        this.#pending = undefined;
        const head = Buffer.concat([pending, chunk.subarray(0, HEADER_BYTES + DEFAULT_MAX_FRAME)]);
        const used = this.#feed(head);
        if (this.#closed) return;
        if (used < pending.length || used === head.length) {
          // Still incomplete (the whole chunk is in `head`), or all of `head` was read.
          if (used < head.length) this.#pending = head.subarray(used);
          if (used === head.length && head.length - pending.length < chunk.length)
            buf = chunk.subarray(head.length - pending.length);
          else return this.#ackReceived();
        } else {
          buf = chunk.subarray(used - pending.length);
        }
      }
      const used = this.#feed(buf);
      if (this.#closed) return;
      if (used < buf.length) this.#pending = buf.subarray(used);
      this.#ackReceived();
    } catch (err) {
      if (err instanceof ConnectionError) return this.#fail(err.code, err.message);
      if (err instanceof HpackError) return this.#fail(ERROR.COMPRESSION_ERROR, err.message);
      this.#opts.onError(err instanceof Error ? err : new Error(String(err)));
      this.#fail(ERROR.INTERNAL_ERROR, 'internal error');
    }
  }

  /**
   * Reads the frames in `buf`; returns how many bytes it read (the rest is a cut frame header or
   * non-DATA frame). DATA payloads are handed on as they arrive, not when their frame is whole: a
   * 1 MiB body reaches its call as the socket's chunks, each copied once (into its message).
   */
  #feed(buf: Buffer): number {
    let at = 0;
    while (at < buf.length) {
      if (this.#dataLeft > 0) {
        at = this.#dataBytes(buf, at);
        if (this.#closed) return buf.length;
        continue;
      }
      if (buf.length - at < HEADER_BYTES) break;
      const length = (buf[at] << 16) | (buf[at + 1] << 8) | buf[at + 2];
      if (length > DEFAULT_MAX_FRAME) throw new ConnectionError(ERROR.FRAME_SIZE_ERROR, `a frame of ${length} octets`);
      const type = buf[at + 3];
      const flags = buf[at + 4];
      const id = buf.readUInt32BE(at + 5) & 0x7fffffff;
      if (!this.#settingsSeen) {
        if (type !== FRAME.SETTINGS) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'the first frame is not SETTINGS');
        this.#settingsSeen = true;
      }
      if (type === FRAME.DATA) {
        at += HEADER_BYTES;
        this.#dataStart(flags, id, length);
        if (this.#closed) return buf.length;
        continue;
      }
      if (buf.length - at < HEADER_BYTES + length) break;
      const payload = buf.subarray(at + HEADER_BYTES, at + HEADER_BYTES + length);
      at += HEADER_BYTES + length;
      this.#frame(type, flags, id, payload);
      if (this.#closed) return buf.length;
    }
    return at;
  }

  /** A DATA frame's header: where its payload goes (its stream, or nowhere if the stream is closed). */
  #dataStart(flags: number, id: number, length: number): void {
    if (this.#continuation !== undefined) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a header block interrupted');
    if (id === 0) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'DATA on stream 0');
    const s = this.#streams.get(id);
    if (s === undefined) {
      if (id > this.#lastStreamId) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'DATA on an idle stream');
      this.#onClosedStream(id, 'DATA');
    } else if (s.remoteEnded) {
      throw new ConnectionError(ERROR.STREAM_CLOSED, 'DATA after END_STREAM');
    }
    this.#dataStream = s;
    this.#dataFlags = flags;
    this.#dataLength = length;
    this.#dataLeft = length;
    this.#dataPadByte = (flags & FLAG.PADDED) !== 0;
    if (this.#dataPadByte && length === 0)
      throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'padding longer than the frame');
    this.#dataContent = this.#dataPadByte ? 0 : length;
    if (length === 0) this.#dataEnd();
  }

  /**
   * DATA or HEADERS on a stream that is not open, with an id the client has used or passed
   * (RFC 9113 §5.1): the client's error if it ended or reset the stream itself, or never opened it;
   * dropped if we reset it (the client may have sent before it saw our RST_STREAM) or if it closed
   * too long ago to tell.
   */
  #onClosedStream(id: number, what: string): void {
    const how = this.#closedStreams.lookup(id);
    if (how === CLOSED.ENDED)
      throw new ConnectionError(ERROR.STREAM_CLOSED, `${what} on a stream after its END_STREAM`);
    if (how === CLOSED.PEER_RESET)
      throw new ConnectionError(ERROR.STREAM_CLOSED, `${what} on a stream the client reset`);
    if (how === CLOSED.NEVER_OPENED)
      throw new ConnectionError(
        ERROR.PROTOCOL_ERROR,
        `${what} on stream ${id}, below the last stream opened and never opened`,
      );
  }

  /** Reads what `buf` holds of the current DATA payload from `at`; returns where it stopped. */
  #dataBytes(buf: Buffer, at: number): number {
    const s = this.#dataStream;
    while (at < buf.length && this.#dataLeft > 0) {
      let n: number;
      if (this.#dataPadByte) {
        const pad = buf[at];
        if (pad >= this.#dataLength) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'padding longer than the frame');
        this.#dataPadByte = false;
        this.#dataContent = this.#dataLength - 1 - pad;
        n = 1;
      } else if (this.#dataContent > 0) {
        n = Math.min(this.#dataContent, buf.length - at);
        this.#dataContent -= n;
        if (s !== undefined && !s.gone) {
          s.received += n;
          if (s.contentLength >= 0 && s.received > s.contentLength) this.#streamError(s, ERROR.PROTOCOL_ERROR);
          else s.events.data(buf.subarray(at, at + n));
        }
      } else {
        n = Math.min(this.#dataLeft, buf.length - at); // padding
      }
      at += n;
      this.#dataLeft -= n;
      // Flow control counts the whole payload, padding included.
      this.#recvUnacked += n;
      if (s !== undefined) s.recvUnacked += n;
      if (this.#closed) return at;
    }
    if (this.#dataLeft === 0) this.#dataEnd();
    return at;
  }

  #dataEnd(): void {
    const s = this.#dataStream;
    this.#dataStream = undefined;
    this.#dataLeft = 0;
    if (s === undefined || s.gone) return;
    if (this.#dataFlags & FLAG.END_STREAM) this.#remoteEnd(s);
    else if (s.recvUnacked >= STREAM_WINDOW / 2) {
      this.write(frame(FRAME.WINDOW_UPDATE, 0, s.id, words(s.recvUnacked)));
      s.recvUnacked = 0;
    }
  }

  #frame(type: number, flags: number, id: number, payload: Buffer): void {
    if (this.#continuation !== undefined && type !== FRAME.CONTINUATION)
      throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a header block interrupted');
    switch (type) {
      case FRAME.HEADERS:
        return this.#headers(flags, id, payload);
      case FRAME.CONTINUATION:
        return this.#continue(flags, id, payload);
      case FRAME.RST_STREAM:
        return this.#rstStream(id, payload);
      case FRAME.SETTINGS:
        return this.#settings(flags, id, payload);
      case FRAME.PING: {
        if (id !== 0) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'PING on a stream');
        if (payload.length !== 8) throw new ConnectionError(ERROR.FRAME_SIZE_ERROR, 'a PING not of 8 octets');
        if ((flags & FLAG.ACK) === 0) this.#answer(frame(FRAME.PING, FLAG.ACK, 0, payload));
        else if (this.#drainPhase === 1 && payload.equals(DRAIN_PING)) this.#lastGoAway();
        return;
      }
      case FRAME.WINDOW_UPDATE:
        return this.#windowUpdate(id, payload);
      case FRAME.GOAWAY: {
        if (id !== 0 || payload.length < 8) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a malformed GOAWAY');
        return; // the client stops opening streams; those open are answered
      }
      case FRAME.PRIORITY: {
        if (id === 0 || payload.length !== 5) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a malformed PRIORITY');
        // Priorities are ignored (RFC 9113 §5.3.2), but a stream cannot depend on itself (RFC 7540 §5.3.1).
        if ((payload.readUInt32BE(0) & 0x7fffffff) !== id) return;
        const s = this.#streams.get(id);
        if (s === undefined) throw new ConnectionError(ERROR.PROTOCOL_ERROR, `stream ${id} made to depend on itself`);
        return this.#streamError(s, ERROR.PROTOCOL_ERROR);
      }
      case FRAME.PUSH_PROMISE:
        throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a client sent PUSH_PROMISE');
      default:
        return; // unknown frame types are ignored (§4.1)
    }
  }

  #rstStream(id: number, payload: Buffer): void {
    if (id === 0) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
    if (payload.length !== 4) throw new ConnectionError(ERROR.FRAME_SIZE_ERROR, 'a RST_STREAM not of 4 octets');
    if (id > this.#lastStreamId) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
    const s = this.#streams.get(id);
    if (s === undefined) return;
    const early = !s.endSent;
    this.#close(s, CLOSED.PEER_RESET);
    if (early && this.#drainPhase === 0 && !this.#resets.take(Date.now())) this.#calm();
  }

  /**
   * The client resets streams before their answer (rapid reset), or opens them past our limits,
   * faster than the budget allows:
   * GOAWAY ENHANCE_YOUR_CALM, in the drain's two steps (nothing the client sent before it saw the
   * GOAWAY is refused), and the socket is cut if it is still open a few seconds later.
   */
  #calm(): void {
    this.#opts.onError(
      new Error(
        `HTTP/2 connection error (${ERROR.ENHANCE_YOUR_CALM}): over ${RESET_BURST} streams reset before their answer or refused (rapid reset); GOAWAY`,
      ),
    );
    this.goAway(ERROR.ENHANCE_YOUR_CALM);
    setTimeout(() => this.#socket.destroy(), CALM_GRACE_MS).unref();
  }

  #ackReceived(): void {
    if (this.#recvUnacked >= CONNECTION_WINDOW / 2) {
      this.write(frame(FRAME.WINDOW_UPDATE, 0, 0, words(this.#recvUnacked)));
      this.#recvUnacked = 0;
    }
  }

  #headers(flags: number, id: number, payload: Buffer): void {
    if (id === 0) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'HEADERS on stream 0');
    let block = unpad(flags, payload);
    let dependency = 0;
    if (flags & FLAG.PRIORITY) {
      if (block.length < 5) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a malformed HEADERS priority');
      dependency = block.readUInt32BE(0) & 0x7fffffff;
      block = block.subarray(5);
    }
    const endStream = (flags & FLAG.END_STREAM) !== 0;
    if (flags & FLAG.END_HEADERS) return this.#headerBlock(id, endStream, dependency, block);
    if (block.length > MAX_HEADER_BLOCK)
      throw new ConnectionError(ERROR.ENHANCE_YOUR_CALM, 'a header block over 64 KiB');
    this.#continuation = { id, endStream, dependency, parts: [block], size: block.length, frames: 0 };
  }

  #continue(flags: number, id: number, payload: Buffer): void {
    const c = this.#continuation;
    if (c === undefined || c.id !== id) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'an unexpected CONTINUATION');
    if (++c.frames > MAX_CONTINUATIONS)
      throw new ConnectionError(
        ERROR.ENHANCE_YOUR_CALM,
        `a header block in over ${MAX_CONTINUATIONS} CONTINUATION frames`,
      );
    if (payload.length > 0) c.parts.push(payload);
    c.size += payload.length;
    if (c.size > MAX_HEADER_BLOCK) throw new ConnectionError(ERROR.ENHANCE_YOUR_CALM, 'a header block over 64 KiB');
    if (flags & FLAG.END_HEADERS) {
      this.#continuation = undefined;
      this.#headerBlock(id, c.endStream, c.dependency, Buffer.concat(c.parts, c.size));
    }
  }

  #headerBlock(id: number, endStream: boolean, dependency: number, block: Buffer): void {
    if (id % 2 === 0) throw new ConnectionError(ERROR.PROTOCOL_ERROR, `stream ${id} cannot be opened by the client`);
    const existing = this.#streams.get(id);
    const opens = existing === undefined && id > this.#lastStreamId;
    const head = this.#head;
    head.start(!opens);
    // Every block is decoded, whatever becomes of its stream: HPACK's table is the connection's.
    this.#decoder.decode(block, head.field);
    if (head.listBytes > MAX_HEADER_BLOCK)
      throw new ConnectionError(ERROR.ENHANCE_YOUR_CALM, 'a header list over 64 KiB');
    if (!opens) {
      // Trailers, which end the request (RFC 9113 §8.1), or a frame on a closed stream.
      if (existing === undefined) this.#onClosedStream(id, 'HEADERS');
      else if (existing.remoteEnded) throw new ConnectionError(ERROR.STREAM_CLOSED, 'HEADERS after END_STREAM');
      if (!endStream) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a second HEADERS without END_STREAM');
      if (existing === undefined) return;
      if (head.problem !== undefined || dependency === id) return this.#streamError(existing, ERROR.PROTOCOL_ERROR);
      return this.#remoteEnd(existing);
    }
    this.#lastStreamId = id;
    head.finish();
    if (head.problem !== undefined || dependency === id || (endStream && head.contentLength > 0)) {
      // Malformed (RFC 9113 §8.1.1), or depending on itself: a stream error; the stream never opens.
      this.#answer(frame(FRAME.RST_STREAM, 0, id, words(ERROR.PROTOCOL_ERROR)));
      return this.#closedStreams.add(id, CLOSED.WE_RESET);
    }
    if (
      this.#drainPhase === 2 ||
      this.#streams.size >= MAX_CONCURRENT_STREAMS ||
      this.#queuedBytes > MAX_QUEUED_OUTPUT
    ) {
      this.#answer(frame(FRAME.RST_STREAM, 0, id, words(ERROR.REFUSED_STREAM)));
      this.#closedStreams.add(id, CLOSED.WE_RESET);
      // Past the limit we announced (or the answers it has not let us send): the same budget as
      // resets, since either way streams end before their answer. A drain's refusals are races, not abuse.
      if (this.#drainPhase === 0 && !this.#resets.take(Date.now())) this.#calm();
      return;
    }
    const s = new Stream(id, this);
    s.contentLength = head.contentLength;
    s.remoteEnded = endStream;
    this.#streams.set(id, s);
    this.#opened++;
    const events = this.#opts.open(head.path ?? '', head.contentType, s, head.authorization);
    if (s.gone) return events.closed();
    s.events = events;
    if (endStream) events.end();
  }

  #remoteEnd(s: Stream): void {
    if (s.contentLength >= 0 && s.received !== s.contentLength) return this.#streamError(s, ERROR.PROTOCOL_ERROR);
    s.remoteEnded = true;
    s.events.end();
    if (s.endSent) this.#close(s, CLOSED.ENDED);
  }

  #settings(flags: number, id: number, payload: Buffer): void {
    if (id !== 0) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if (flags & FLAG.ACK) {
      if (payload.length !== 0) throw new ConnectionError(ERROR.FRAME_SIZE_ERROR, 'a SETTINGS ACK with a payload');
      return;
    }
    if (payload.length % 6 !== 0) throw new ConnectionError(ERROR.FRAME_SIZE_ERROR, 'a malformed SETTINGS');
    for (let at = 0; at < payload.length; at += 6) {
      const key = payload.readUInt16BE(at);
      const value = payload.readUInt32BE(at + 2);
      if (key === SETTING.INITIAL_WINDOW_SIZE) {
        if (value > MAX_WINDOW)
          throw new ConnectionError(ERROR.FLOW_CONTROL_ERROR, 'SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1');
        const delta = value - this.peerInitialWindow;
        this.peerInitialWindow = value;
        for (const s of this.#streams.values()) {
          s.sendWindow += delta;
          if (s.sendWindow > MAX_WINDOW)
            throw new ConnectionError(ERROR.FLOW_CONTROL_ERROR, 'a stream window over 2^31-1');
        }
      } else if (key === SETTING.MAX_FRAME_SIZE) {
        if (value < DEFAULT_MAX_FRAME || value > 16_777_215)
          throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'SETTINGS_MAX_FRAME_SIZE out of range');
        this.peerMaxFrame = value;
      } else if (key === SETTING.HEADER_TABLE_SIZE) {
        // Our blocks never add to the peer's table; a smaller limit still has to be acknowledged
        // at the start of the next block we write (RFC 7541 §4.2), or a strict decoder (nghttp2)
        // refuses it. 0 is below any limit it may set, now or later, and is owed once.
        if (value < 4096 && !this.#tableSizeZero) {
          this.#tableSizeZero = true;
          this.#tableSizeUpdate = tableSizeUpdate(0);
        }
      } else if (key === SETTING.ENABLE_PUSH && value > 1) {
        throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'SETTINGS_ENABLE_PUSH not 0 or 1');
      }
    }
    this.#answer(frame(FRAME.SETTINGS, FLAG.ACK, 0));
    for (const s of [...this.#blocked]) this.flushStream(s);
  }

  #windowUpdate(id: number, payload: Buffer): void {
    if (payload.length !== 4) throw new ConnectionError(ERROR.FRAME_SIZE_ERROR, 'a malformed WINDOW_UPDATE');
    const increment = payload.readUInt32BE(0) & 0x7fffffff;
    if (id === 0) {
      if (increment === 0) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a WINDOW_UPDATE of 0');
      this.sendWindow += increment;
      if (this.sendWindow > MAX_WINDOW)
        throw new ConnectionError(ERROR.FLOW_CONTROL_ERROR, 'the connection window over 2^31-1');
      for (const s of [...this.#blocked]) this.flushStream(s);
      return;
    }
    const s = this.#streams.get(id);
    if (s === undefined) {
      // On a closed stream it may still come for a while (RFC 9113 §5.1): dropped.
      if (id > this.#lastStreamId) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'WINDOW_UPDATE on an idle stream');
      return;
    }
    if (increment === 0) return this.#streamError(s, ERROR.PROTOCOL_ERROR);
    s.sendWindow += increment;
    if (s.sendWindow > MAX_WINDOW) return this.#streamError(s, ERROR.FLOW_CONTROL_ERROR);
    if (this.#blocked.has(s)) this.flushStream(s);
  }

  /** The first bytes are not HTTP/2: an HTTP/1 request gets a readable answer, anything else is cut. */
  #notHttp2(buf: Buffer): void {
    this.#closed = true;
    if (/^[A-Z]{3,7} \S+ HTTP\/1\.[01]\r?\n/.test(buf.toString('latin1', 0, 64))) {
      const text =
        "This port speaks gRPC (HTTP/2 with prior knowledge): point Envoy's ext_authz grpc_service at it, not an HTTP client.\n";
      this.#socket.end(
        `HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: ${text.length}\r\nconnection: close\r\n\r\n${text}`,
      );
      setTimeout(() => this.#socket.destroy(), END_GRACE_MS).unref();
    } else {
      this.#socket.destroy();
    }
  }

  #fail(code: number, reason: string): void {
    if (this.#closed) return;
    this.#opts.onError(new Error(`HTTP/2 connection error (${code}): ${reason}`));
    this.write(
      frame(FRAME.GOAWAY, 0, 0, Buffer.concat([words(this.#lastStreamId, code), Buffer.from(reason, 'latin1')])),
    );
    this.#flush();
    this.#closed = true;
    // Nothing more is read (it would be dropped); the peer gets a second to read the GOAWAY.
    this.#socket.pause();
    this.#socket.end();
    setTimeout(() => this.#socket.destroy(), 1000).unref();
    this.#closeStreams();
  }

  #closeStreams(): void {
    for (const s of [...this.#streams.values()]) this.#close(s, CLOSED.WE_RESET);
  }

  #onClose(): void {
    this.#closed = true;
    clearTimeout(this.#prefaceTimer);
    clearTimeout(this.#drainTimer);
    this.#closeStreams();
    this.#opts.onClose();
  }
}

/** A DATA or HEADERS payload without its padding (§6.1). */
function unpad(flags: number, payload: Buffer): Buffer {
  if ((flags & FLAG.PADDED) === 0) return payload;
  if (payload.length < 1 || payload[0] >= payload.length)
    throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'padding longer than the frame');
  return payload.subarray(1, payload.length - payload[0]);
}

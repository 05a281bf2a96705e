/**
 * One HTTP/2 connection (RFC 9113, cleartext with prior knowledge, as Envoy's gRPC client and
 * grpc-js connect) carrying gRPC calls: frames read from the socket, header blocks decoded, each
 * stream's DATA handed to its call, answers written (framed by each stream: stream.ts).
 *
 * Why not node:http2: every stream there is a Duplex with its own listeners and header objects,
 * and a gRPC answer leaves in two writes (headers + message, then trailers once 'wantTrailers'
 * fires), so Envoy wakes twice per Check. Here a unary answer is one buffer (HEADERS, DATA,
 * HEADERS) written once per event-loop turn together with every other answer of that turn; a
 * stream is a small object. Through Envoy this took a no-op Check from 260 µs to 80 µs of CPU
 * (bench/README-e2e.md, "The gRPC server").
 *
 * The whole of the protocol a server must handle is here: SETTINGS (and their ACKs), PING,
 * WINDOW_UPDATE and flow control both ways, RST_STREAM, GOAWAY, PRIORITY (ignored), padding,
 * CONTINUATION, HPACK with its dynamic table. It is strict where a mistake could mix streams
 * (stream ids, header-block boundaries, HPACK state: any error there ends the connection with
 * GOAWAY) and lenient where only the peer could suffer (a peer sending past its window is not
 * cut off). Limits bound what one connection can hold: header blocks (64 KiB, 64 CONTINUATIONs),
 * concurrent streams (2,048), unread output (64 MiB), a preface that never comes (10 s); a message's
 * buffer grows with the bytes that arrive, not with the size it announces (../message-reader.ts).
 * What it does not bound: how many connections, and how fast a client opens and resets streams
 * (HTTP/2 "rapid reset"): the port is Envoy's alone (listen on loopback or a private address),
 * and Envoy does neither.
 */
import type { Socket } from 'node:net';
import type { RequestEvents, ResponseStream } from '../call';
import {
  DEFAULT_MAX_FRAME, DEFAULT_WINDOW, ERROR, FLAG, frame, FRAME, HEADER_BYTES, MAX_WINDOW, PREFACE, SETTING, words,
} from './frames';
import { HpackDecoder, HpackError, tableSizeUpdate } from './hpack';
import { Stream, type StreamOwner } from './stream';

/**
 * Opens the call of a new stream (its path, content-type and `authorization` metadata read: the
 * port's shared secret, server.ts), answering through `res`.
 */
export type OpenStream = (path: string, contentType: string | undefined, res: ResponseStream, authorization: string | undefined) => RequestEvents;

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
/** Output the peer has not read past this: it is not reading; the connection is closed. */
const MAX_UNREAD_OUTPUT = 64 * 1024 * 1024;
const SERVER_PREFACE = Buffer.concat([
  frame(FRAME.SETTINGS, 0, 0, settingsPayload([
    [SETTING.MAX_CONCURRENT_STREAMS, MAX_CONCURRENT_STREAMS],
    [SETTING.INITIAL_WINDOW_SIZE, STREAM_WINDOW],
    [SETTING.MAX_HEADER_LIST_SIZE, MAX_HEADER_BLOCK],
    [SETTING.ENABLE_PUSH, 0],
  ])),
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
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

export class Connection implements StreamOwner {
  readonly #socket: Socket;
  readonly #opts: ConnectionOptions;
  readonly #decoder = new HpackDecoder();
  readonly #streams = new Map<number, Stream>();
  /** Streams with DATA waiting for window. */
  readonly #blocked = new Set<Stream>();
  #pending: Buffer | undefined;
  #prefaceSeen = false;
  #lastStreamId = 0;
  #continuation: { id: number; endStream: boolean; parts: Buffer[]; size: number; frames: number } | undefined;
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
  /** Drain: 1 after the first GOAWAY (streams still accepted), 2 after the last (new ones refused). */
  #drainPhase = 0;
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
  goAway(): void {
    if (this.#drainPhase > 0 || this.#closed) return;
    if (!this.#prefaceSeen) return void this.#socket.destroy();
    this.#drainPhase = 1;
    this.write(frame(FRAME.GOAWAY, 0, 0, words(MAX_WINDOW, ERROR.NO_ERROR)));
    this.write(frame(FRAME.PING, 0, 0, DRAIN_PING));
    this.#drainTimer = setTimeout(() => this.#lastGoAway(), DRAIN_PING_TIMEOUT_MS);
    this.#drainTimer.unref();
  }

  #lastGoAway(): void {
    if (this.#drainPhase !== 1 || this.#closed) return;
    clearTimeout(this.#drainTimer);
    this.#drainPhase = 2;
    this.write(frame(FRAME.GOAWAY, 0, 0, words(this.#lastStreamId, ERROR.NO_ERROR)));
    if (this.#streams.size === 0) this.#endSocket();
  }

  destroy(): void {
    this.#socket.destroy();
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

  readonly #flush = (): void => {
    this.#flushQueued = false;
    if (this.#closed || this.#out.length === 0) return;
    const out = this.#out.length === 1 ? this.#out[0] : Buffer.concat(this.#out, this.#outBytes);
    this.#out = [];
    this.#outBytes = 0;
    this.#socket.write(out);
    if (this.#socket.writableLength > MAX_UNREAD_OUTPUT) {
      this.#opts.onError(new Error('the peer is not reading its answers; connection closed'));
      this.#socket.destroy();
    }
  };

  /** A header block we send, after the table size update we owe, if any. */
  headerBlock(block: Buffer): Buffer {
    if (this.#tableSizeUpdate === undefined) return block;
    const out = Buffer.concat([this.#tableSizeUpdate, block]);
    this.#tableSizeUpdate = undefined;
    return out;
  }

  /** Sends what flow control allows of a stream's queued DATA, then its trailers. */
  flushStream(s: Stream): void {
    while (s.queued.length > 0) {
      const data = s.queued[0];
      const room = Math.min(s.sendWindow, this.sendWindow, this.peerMaxFrame);
      if (room <= 0) {
        this.#blocked.add(s);
        return;
      }
      const n = Math.min(room, data.length);
      this.write(frame(FRAME.DATA, 0, s.id, n === data.length ? data : data.subarray(0, n)));
      s.sendWindow -= n;
      this.sendWindow -= n;
      if (n === data.length) s.queued.shift();
      else s.queued[0] = data.subarray(n);
    }
    this.#blocked.delete(s);
    if (s.queuedTrailers) {
      this.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, s.id, this.headerBlock(s.queuedTrailers)));
      s.queuedTrailers = undefined;
      this.localEnd(s);
    }
  }

  /** Our side of a stream is done: closed, or reset if the client is still sending (§8.1). */
  localEnd(s: Stream): void {
    s.localEnded = true;
    if (!s.remoteEnded && !s.gone) this.write(frame(FRAME.RST_STREAM, 0, s.id, words(ERROR.NO_ERROR)));
    this.#close(s);
  }

  #close(s: Stream): void {
    if (s.gone) return;
    s.gone = true;
    this.#streams.delete(s.id);
    this.#blocked.delete(s);
    s.events.closed();
    if (this.#drainPhase === 2 && this.#streams.size === 0) this.#endSocket();
  }

  #endSocket(): void {
    this.#flush();
    this.#closed = true;
    this.#socket.end();
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
          if (used === head.length && head.length - pending.length < chunk.length) buf = chunk.subarray(head.length - pending.length);
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
    if (s === undefined || s.remoteEnded) {
      if (id > this.#lastStreamId) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'DATA on an idle stream');
      if (s?.remoteEnded) throw new ConnectionError(ERROR.STREAM_CLOSED, 'DATA after END_STREAM');
    }
    this.#dataStream = s;
    this.#dataFlags = flags;
    this.#dataLength = length;
    this.#dataLeft = length;
    this.#dataPadByte = (flags & FLAG.PADDED) !== 0;
    if (this.#dataPadByte && length === 0) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'padding longer than the frame');
    this.#dataContent = this.#dataPadByte ? 0 : length;
    if (length === 0) this.#dataEnd();
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
        if (s !== undefined && !s.gone) s.events.data(buf.subarray(at, at + n));
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
    if (this.#continuation !== undefined && type !== FRAME.CONTINUATION) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a header block interrupted');
    switch (type) {
      case FRAME.HEADERS: return this.#headers(flags, id, payload);
      case FRAME.CONTINUATION: return this.#continue(flags, id, payload);
      case FRAME.RST_STREAM: {
        if (id === 0) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
        if (payload.length !== 4) throw new ConnectionError(ERROR.FRAME_SIZE_ERROR, 'a RST_STREAM not of 4 octets');
        if (id > this.#lastStreamId) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
        const s = this.#streams.get(id);
        if (s) this.#close(s);
        return;
      }
      case FRAME.SETTINGS: return this.#settings(flags, id, payload);
      case FRAME.PING: {
        if (id !== 0) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'PING on a stream');
        if (payload.length !== 8) throw new ConnectionError(ERROR.FRAME_SIZE_ERROR, 'a PING not of 8 octets');
        if ((flags & FLAG.ACK) === 0) this.write(frame(FRAME.PING, FLAG.ACK, 0, payload));
        else if (this.#drainPhase === 1 && payload.equals(DRAIN_PING)) this.#lastGoAway();
        return;
      }
      case FRAME.WINDOW_UPDATE: return this.#windowUpdate(id, payload);
      case FRAME.GOAWAY: {
        if (id !== 0 || payload.length < 8) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a malformed GOAWAY');
        return; // the client stops opening streams; those open are answered
      }
      case FRAME.PRIORITY: {
        if (id === 0 || payload.length !== 5) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a malformed PRIORITY');
        return;
      }
      case FRAME.PUSH_PROMISE: throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a client sent PUSH_PROMISE');
      default: return; // unknown frame types are ignored (§4.1)
    }
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
    if (flags & FLAG.PRIORITY) {
      if (block.length < 5) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a malformed HEADERS priority');
      block = block.subarray(5);
    }
    const endStream = (flags & FLAG.END_STREAM) !== 0;
    if (flags & FLAG.END_HEADERS) return this.#headerBlock(id, endStream, block);
    if (block.length > MAX_HEADER_BLOCK) throw new ConnectionError(ERROR.ENHANCE_YOUR_CALM, 'a header block over 64 KiB');
    this.#continuation = { id, endStream, parts: [block], size: block.length, frames: 0 };
  }

  #continue(flags: number, id: number, payload: Buffer): void {
    const c = this.#continuation;
    if (c === undefined || c.id !== id) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'an unexpected CONTINUATION');
    if (++c.frames > MAX_CONTINUATIONS) throw new ConnectionError(ERROR.ENHANCE_YOUR_CALM, `a header block in over ${MAX_CONTINUATIONS} CONTINUATION frames`);
    if (payload.length > 0) c.parts.push(payload);
    c.size += payload.length;
    if (c.size > MAX_HEADER_BLOCK) throw new ConnectionError(ERROR.ENHANCE_YOUR_CALM, 'a header block over 64 KiB');
    if (flags & FLAG.END_HEADERS) {
      this.#continuation = undefined;
      this.#headerBlock(id, c.endStream, Buffer.concat(c.parts, c.size));
    }
  }

  #headerBlock(id: number, endStream: boolean, block: Buffer): void {
    let path: string | undefined;
    let contentType: string | undefined;
    let authorization: string | undefined;
    let listBytes = 0;
    // Every block is decoded, whatever becomes of its stream: HPACK's table is the connection's.
    this.#decoder.decode(block, (name, value) => {
      listBytes += name.length + value.length + 32;
      if (name === ':path') path = value;
      else if (name === 'content-type') contentType = value;
      else if (name === 'authorization') authorization = value;
    });
    if (listBytes > MAX_HEADER_BLOCK) throw new ConnectionError(ERROR.ENHANCE_YOUR_CALM, 'a header list over 64 KiB');
    const existing = this.#streams.get(id);
    if (existing !== undefined) {
      // Trailers: they end the request.
      if (!endStream || existing.remoteEnded) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'HEADERS on an open stream without END_STREAM');
      return this.#remoteEnd(existing);
    }
    // Trailers of a stream already closed or refused (the client had not seen it yet): dropped.
    if (id <= this.#lastStreamId) return;
    if (id % 2 === 0) throw new ConnectionError(ERROR.PROTOCOL_ERROR, `stream ${id} cannot be opened by the client`);
    this.#lastStreamId = id;
    if (this.#drainPhase === 2 || this.#streams.size >= MAX_CONCURRENT_STREAMS) {
      this.write(frame(FRAME.RST_STREAM, 0, id, words(ERROR.REFUSED_STREAM)));
      return;
    }
    if (path === undefined) {
      this.write(frame(FRAME.RST_STREAM, 0, id, words(ERROR.PROTOCOL_ERROR)));
      return;
    }
    const s = new Stream(id, this);
    this.#streams.set(id, s);
    s.remoteEnded = endStream;
    const events = this.#opts.open(path, contentType, s, authorization);
    if (s.gone) return events.closed();
    s.events = events;
    if (endStream) events.end();
  }

  #remoteEnd(s: Stream): void {
    s.remoteEnded = true;
    s.events.end();
    if (s.localEnded && s.queuedTrailers === undefined) this.#close(s);
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
        if (value > MAX_WINDOW) throw new ConnectionError(ERROR.FLOW_CONTROL_ERROR, 'SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1');
        const delta = value - this.peerInitialWindow;
        this.peerInitialWindow = value;
        for (const s of this.#streams.values()) {
          s.sendWindow += delta;
          if (s.sendWindow > MAX_WINDOW) throw new ConnectionError(ERROR.FLOW_CONTROL_ERROR, 'a stream window over 2^31-1');
        }
      } else if (key === SETTING.MAX_FRAME_SIZE) {
        if (value < DEFAULT_MAX_FRAME || value > 16_777_215) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'SETTINGS_MAX_FRAME_SIZE out of range');
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
    this.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
    for (const s of [...this.#blocked]) this.flushStream(s);
  }

  #windowUpdate(id: number, payload: Buffer): void {
    if (payload.length !== 4) throw new ConnectionError(ERROR.FRAME_SIZE_ERROR, 'a malformed WINDOW_UPDATE');
    const increment = payload.readUInt32BE(0) & 0x7fffffff;
    if (id === 0) {
      if (increment === 0) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'a WINDOW_UPDATE of 0');
      this.sendWindow += increment;
      if (this.sendWindow > MAX_WINDOW) throw new ConnectionError(ERROR.FLOW_CONTROL_ERROR, 'the connection window over 2^31-1');
      for (const s of [...this.#blocked]) this.flushStream(s);
      return;
    }
    const s = this.#streams.get(id);
    if (s === undefined) {
      if (id > this.#lastStreamId) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'WINDOW_UPDATE on an idle stream');
      return;
    }
    if (increment === 0) {
      this.write(frame(FRAME.RST_STREAM, 0, id, words(ERROR.PROTOCOL_ERROR)));
      return this.#close(s);
    }
    s.sendWindow += increment;
    if (s.sendWindow > MAX_WINDOW) {
      this.write(frame(FRAME.RST_STREAM, 0, id, words(ERROR.FLOW_CONTROL_ERROR)));
      return this.#close(s);
    }
    if (this.#blocked.has(s)) this.flushStream(s);
  }

  /** The first bytes are not HTTP/2: an HTTP/1 request gets a readable answer, anything else is cut. */
  #notHttp2(buf: Buffer): void {
    this.#closed = true;
    if (/^[A-Z]{3,7} \S+ HTTP\/1\.[01]\r?\n/.test(buf.toString('latin1', 0, 64))) {
      const text = 'This port speaks gRPC (HTTP/2 with prior knowledge): point Envoy\'s ext_authz grpc_service at it, not an HTTP client.\n';
      this.#socket.end(`HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: ${text.length}\r\nconnection: close\r\n\r\n${text}`);
    } else {
      this.#socket.destroy();
    }
  }

  #fail(code: number, reason: string): void {
    if (this.#closed) return;
    this.#opts.onError(new Error(`HTTP/2 connection error (${code}): ${reason}`));
    this.write(frame(FRAME.GOAWAY, 0, 0, Buffer.concat([words(this.#lastStreamId, code), Buffer.from(reason, 'latin1')])));
    this.#flush();
    this.#closed = true;
    this.#socket.end();
    setTimeout(() => this.#socket.destroy(), 1000).unref();
    this.#closeStreams();
  }

  #closeStreams(): void {
    for (const s of [...this.#streams.values()]) this.#close(s);
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
  if (payload.length < 1 || payload[0] >= payload.length) throw new ConnectionError(ERROR.PROTOCOL_ERROR, 'padding longer than the frame');
  return payload.subarray(1, payload.length - payload[0]);
}

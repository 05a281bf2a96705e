/**
 * A minimal HTTP/2 client for unary gRPC calls with pre-encoded frames, used where h2load cannot
 * do the job:
 *
 * - a smooth fixed rate: h2load's `--rps` releases each client's requests on a timer of at least
 *   10 ms (`rps_watcher.repeat = max(0.01, 1/rps)` in h2load.cc), so "12,000 req/s" arrives as
 *   bursts of 120 every 10 ms. Here requests are scheduled every 1/rate s (open loop, spinning on
 *   setImmediate on a core of its own) and latency is measured from the *scheduled* send time,
 *   so a late send is charged to the server side instead of hidden (no coordinated omission);
 * - a stream of distinct requests (the memory run: one new unknown key per Check): h2load sends
 *   one body for a whole run.
 *
 * Why it is not the bottleneck: request bytes (HEADERS + DATA) are built once and only the stream
 * id (and the key) is patched; responses are not HPACK-decoded (a unary gRPC success carries a
 * DATA message, a failed RPC is trailers-only, which is all we need to tell them apart); only the
 * response message is decoded to check the decision. run.ts measures this client against the
 * no-op baseline in closed loop and prints its ceiling next to the results.
 *
 * Frame layout: RFC 9113 §4.1 (9-byte header), §6 (frame types), HPACK RFC 7541 §6.1/6.2.2
 * (indexed and literal-without-indexing header fields).
 */
import * as net from 'node:net';
import {
  DEFAULT_WINDOW,
  FLAG,
  FRAME,
  HEADER_BYTES,
  MAX_WINDOW,
  PREFACE,
  SETTING,
  writeFrameHeader,
} from '@modelgate/grpc-server/h2/frames';
import { encodeInteger, literalField } from '@modelgate/grpc-server/h2/hpack';

/** The frame types, flags and HPACK coding are modelgate's own (@modelgate/grpc-server's h2/): one spelling of each. */
function frameHeader(length: number, type: number, flags: number, streamId: number): Buffer {
  const b = Buffer.allocUnsafe(HEADER_BYTES);
  writeFrameHeader(b, 0, length, type, flags, streamId);
  return b;
}

/** Static-table entries 3 (`:method: POST`) and 6 (`:scheme: http`) as indexed fields (RFC 7541 §6.1). */
const POST_HTTP = Buffer.from([...encodeInteger(3, 7, 0x80), ...encodeInteger(6, 7, 0x80)]);

/**
 * The HPACK block of an HTTP request (the end-to-end benchmark through Envoy): `:method POST` and
 * `:scheme http` indexed, the rest literal without indexing, so every request carries the same bytes.
 */
export function httpHeaderBlock(path: string, authority: string, headers: Readonly<Record<string, string>>): Buffer {
  return Buffer.concat([
    POST_HTTP,
    literalField(':path', path),
    literalField(':authority', authority),
    ...Object.entries(headers).map(([k, v]) => literalField(k.toLowerCase(), v)),
  ]);
}

/** The HPACK block of a gRPC unary call: `:method POST` and `:scheme http` indexed, the rest literal. */
function headerBlock(authority: string, path: string): Buffer {
  return Buffer.concat([
    POST_HTTP,
    literalField(':path', path),
    literalField(':authority', authority),
    literalField('content-type', 'application/grpc'),
    literalField('te', 'trailers'),
  ]);
}

/** One request kind: its gRPC message frame (prefix + protobuf), and how to check the answer. */
export interface RequestKind {
  readonly name: string;
  readonly grpcFrame: Buffer;
  /** Returns null when the decoded response is right, or what was wrong. */
  readonly verify?: (message: Buffer) => string | null;
  /** For distinct-key runs: where a 46-byte key sits inside grpcFrame, and the keys to put there in turn. */
  readonly keyPatch?: { readonly offset: number; readonly keys: Buffer; readonly keyLength: number };
  /**
   * An HTTP request instead of a gRPC call: its own HPACK header block (httpHeaderBlock); grpcFrame
   * is then the request body as it is, and `verify` gets the whole response body.
   */
  readonly headerBlock?: Buffer;
}

export interface ClientOptions {
  readonly host: string;
  readonly port: number;
  readonly path: string;
  readonly connections: number;
  /** Per connection. */
  readonly maxInFlight: number;
  /** Total requests per second across connections; 0 = closed loop (as fast as answers come back). */
  readonly rate: number;
  readonly warmupMs: number;
  /** Measured phase; ignored when totalRequests is set. */
  readonly durationMs: number;
  /** Stop after exactly this many measured requests (memory run). */
  readonly totalRequests?: number;
  /** Kinds are sent in this repeating order (e.g. 9 × valid, 1 × denied). */
  readonly sequence: readonly RequestKind[];
  /** Decode and verify every Nth response (1 = all). */
  readonly verifyEvery: number;
  /** Throughput is also reported per window of this many completed requests. */
  readonly windowRequests?: number;
  /** Called at each window boundary (e.g. to sample the server's RSS). */
  readonly onWindow?: (w: WindowStat) => void | Promise<void>;
}

export interface WindowStat {
  readonly index: number;
  readonly completed: number;
  readonly seconds: number;
  readonly rps: number;
}

export interface ClientResult {
  readonly sent: number;
  readonly completed: number;
  readonly measured: number;
  readonly seconds: number;
  readonly rps: number;
  /** Latency of each measured request (µs), from scheduled (open loop) or actual (closed loop) send. */
  readonly latenciesUs: Float64Array;
  /** Time to the response's first frame (its HEADERS) of each measured request, µs, same origin. */
  readonly ttfbUs: Float64Array;
  readonly rpcErrors: number;
  readonly streamResets: number;
  readonly wrongDecisions: number;
  readonly firstWrong: string | null;
  readonly verified: number;
  readonly countsByKind: Record<string, number>;
  /** Open loop: sends that went out more than 1 ms after their scheduled time (in-flight cap or client lag). */
  readonly lateSends: number;
  /** Open loop: 99th percentile of (actual − scheduled) send time of measured requests, µs. */
  readonly sendLagP99Us: number;
  readonly windows: WindowStat[];
}

interface Stream {
  kind: RequestKind;
  scheduledUs: number;
  firstUs: number;
  measured: boolean;
  gotMessage: boolean;
  body: Buffer[] | null;
}

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);

class Connection {
  private readonly socket: net.Socket;
  private readonly streams = new Map<number, Stream>();
  private nextStreamId = 1;
  private recv: Buffer = Buffer.alloc(0);
  private sendWindow = DEFAULT_WINDOW;
  private initialStreamWindow = DEFAULT_WINDOW;
  private maxFrameSize = 16384;
  private readonly streamWindows = new Map<number, number>();
  private readonly blocked: { id: number; data: Buffer; last: boolean }[] = [];
  private consumed = 0;
  readonly headerFrameBody: Buffer;
  inFlight = 0;
  closed = false;

  constructor(
    host: string,
    port: number,
    path: string,
    private readonly onDone: (
      c: Connection,
      s: Stream,
      ok: 'ok' | 'rpc_error' | 'reset',
      message: Buffer | null,
    ) => void,
    private readonly onFatal: (err: Error) => void,
  ) {
    this.headerFrameBody = headerBlock(`${host}:${port}`, path);
    this.socket = net.connect({ host, port, noDelay: true });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('error', (err) => this.onFatal(err));
    this.socket.on('close', () => {
      this.closed = true;
    });
    const settings = Buffer.alloc(12);
    settings.writeUInt16BE(SETTING.ENABLE_PUSH, 0);
    settings.writeUInt32BE(0, 2);
    settings.writeUInt16BE(SETTING.INITIAL_WINDOW_SIZE, 6);
    settings.writeUInt32BE(MAX_WINDOW, 8);
    const wu = Buffer.alloc(4);
    wu.writeUInt32BE(MAX_WINDOW - DEFAULT_WINDOW, 0);
    this.socket.write(
      Buffer.concat([
        PREFACE,
        frameHeader(12, FRAME.SETTINGS, 0, 0),
        settings,
        frameHeader(4, FRAME.WINDOW_UPDATE, 0, 0),
        wu,
      ]),
    );
  }

  ready(): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.socket.readyState === 'open') resolve();
      else {
        this.socket.once('connect', () => resolve());
        this.socket.once('error', reject);
      }
    });
  }

  cork(): void {
    this.socket.cork();
  }

  uncork(): void {
    this.socket.uncork();
  }

  /** Sends one request; `grpcFrame` may be a per-request copy (distinct keys). */
  send(kind: RequestKind, grpcFrame: Buffer, scheduledUs: number, measured: boolean, keepBody: boolean): void {
    const id = this.nextStreamId;
    this.nextStreamId += 2;
    this.streams.set(id, { kind, scheduledUs, firstUs: 0, measured, gotMessage: false, body: keepBody ? [] : null });
    this.inFlight++;
    const block = kind.headerBlock ?? this.headerFrameBody;
    this.socket.write(frameHeader(block.length, FRAME.HEADERS, FLAG.END_HEADERS, id));
    this.socket.write(block);
    this.streamWindows.set(id, this.initialStreamWindow);
    for (let off = 0; off < grpcFrame.length || off === 0; off += this.maxFrameSize) {
      const chunk = grpcFrame.subarray(off, Math.min(grpcFrame.length, off + this.maxFrameSize));
      const last = off + this.maxFrameSize >= grpcFrame.length;
      this.sendData(id, chunk, last);
      if (grpcFrame.length === 0) break;
    }
  }

  private sendData(id: number, data: Buffer, last: boolean): void {
    const sw = this.streamWindows.get(id) ?? 0;
    if (this.blocked.length > 0 || data.length > this.sendWindow || data.length > sw) {
      this.blocked.push({ id, data, last });
      return;
    }
    this.sendWindow -= data.length;
    if (last) this.streamWindows.delete(id);
    else this.streamWindows.set(id, sw - data.length);
    this.socket.write(frameHeader(data.length, FRAME.DATA, last ? FLAG.END_STREAM : 0, id));
    this.socket.write(data);
  }

  private flushBlocked(): void {
    this.socket.cork();
    while (this.blocked.length > 0) {
      const b = this.blocked[0];
      const sw = this.streamWindows.get(b.id) ?? 0;
      if (b.data.length > this.sendWindow || b.data.length > sw) break;
      this.blocked.shift();
      this.sendWindow -= b.data.length;
      if (b.last) this.streamWindows.delete(b.id);
      else this.streamWindows.set(b.id, sw - b.data.length);
      this.socket.write(frameHeader(b.data.length, FRAME.DATA, b.last ? FLAG.END_STREAM : 0, b.id));
      this.socket.write(b.data);
    }
    this.socket.uncork();
  }

  close(): void {
    this.closed = true;
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    // Everything written while handling this chunk (acks, next requests) leaves in one syscall.
    this.socket.cork();
    try {
      this.parse(chunk);
    } finally {
      this.socket.uncork();
    }
  }

  private parse(chunk: Buffer): void {
    this.recv = this.recv.length === 0 ? chunk : Buffer.concat([this.recv, chunk]);
    let off = 0;
    const buf = this.recv;
    while (buf.length - off >= 9) {
      const len = buf.readUIntBE(off, 3);
      if (buf.length - off < 9 + len) break;
      const type = buf[off + 3];
      const flags = buf[off + 4];
      const id = buf.readUInt32BE(off + 5) & 0x7fffffff;
      this.onFrame(type, flags, id, buf.subarray(off + 9, off + 9 + len));
      off += 9 + len;
    }
    this.recv = off === buf.length ? Buffer.alloc(0) : buf.subarray(off);
  }

  private onFrame(type: number, flags: number, id: number, payload: Buffer): void {
    switch (type) {
      case FRAME.DATA: {
        this.consumed += payload.length;
        if (this.consumed > 1 << 24) {
          const wu = Buffer.alloc(4);
          wu.writeUInt32BE(this.consumed, 0);
          this.socket.write(Buffer.concat([frameHeader(4, FRAME.WINDOW_UPDATE, 0, 0), wu]));
          this.consumed = 0;
        }
        const s = this.streams.get(id);
        if (s) {
          let data = payload;
          if (flags & FLAG.PADDED) data = payload.subarray(1, payload.length - payload[0]);
          if (data.length > 0) s.gotMessage = true;
          if (s.body) s.body.push(Buffer.from(data));
          if (flags & FLAG.END_STREAM) this.finish(id, s);
        }
        break;
      }
      case FRAME.HEADERS: {
        const s = this.streams.get(id);
        if (s && s.firstUs === 0) s.firstUs = nowUs();
        if (s && flags & FLAG.END_STREAM) this.finish(id, s);
        break;
      }
      case FRAME.RST_STREAM: {
        const s = this.streams.get(id);
        if (s) {
          this.streams.delete(id);
          this.streamWindows.delete(id);
          this.inFlight--;
          this.onDone(this, s, 'reset', null);
        }
        break;
      }
      case FRAME.SETTINGS: {
        if (flags & FLAG.ACK) break;
        for (let i = 0; i + 6 <= payload.length; i += 6) {
          const key = payload.readUInt16BE(i);
          const value = payload.readUInt32BE(i + 2);
          if (key === 4) {
            const delta = value - this.initialStreamWindow;
            this.initialStreamWindow = value;
            for (const [sid, w] of this.streamWindows) this.streamWindows.set(sid, w + delta);
          } else if (key === 5) this.maxFrameSize = value;
        }
        this.socket.write(frameHeader(0, FRAME.SETTINGS, FLAG.ACK, 0));
        this.flushBlocked();
        break;
      }
      case FRAME.PING:
        if (!(flags & FLAG.ACK)) this.socket.write(Buffer.concat([frameHeader(8, FRAME.PING, FLAG.ACK, 0), payload]));
        break;
      case FRAME.GOAWAY:
        this.onFatal(new Error(`GOAWAY error code ${payload.readUInt32BE(4)}: ${payload.subarray(8).toString()}`));
        break;
      case FRAME.WINDOW_UPDATE: {
        const inc = payload.readUInt32BE(0) & 0x7fffffff;
        if (id === 0) this.sendWindow += inc;
        else if (this.streamWindows.has(id)) this.streamWindows.set(id, this.streamWindows.get(id)! + inc);
        if (this.blocked.length > 0) this.flushBlocked();
        break;
      }
      default:
        break; // CONTINUATION (END_STREAM is on the HEADERS frame), PRIORITY, PUSH_PROMISE (disabled)
    }
  }

  private finish(id: number, s: Stream): void {
    this.streams.delete(id);
    this.streamWindows.delete(id);
    this.inFlight--;
    const message = s.body ? Buffer.concat(s.body) : null;
    this.onDone(this, s, s.gotMessage ? 'ok' : 'rpc_error', message);
  }
}

/** Runs one load phase and resolves with its measurements. */
export async function runRawClient(opts: ClientOptions): Promise<ClientResult> {
  let fatal: Error | null = null;
  const sequence = opts.sequence;
  const countsByKind: Record<string, number> = {};
  const target = opts.totalRequests;
  const capacity = target ?? Math.ceil(((opts.rate || 200_000) * opts.durationMs) / 1000) + 1_000_000;
  let latencies = new Float64Array(Math.min(capacity, 20_000_000));
  let ttfbs = new Float64Array(latencies.length);
  let measured = 0;
  let completed = 0;
  let sent = 0;
  let rpcErrors = 0;
  let resets = 0;
  let wrong = 0;
  let firstWrong: string | null = null;
  let verified = 0;
  let lateSends = 0;
  const lags: number[] = [];
  let seq = 0;
  let measuredSent = 0;
  const windows: WindowStat[] = [];
  let windowStart = 0;
  let windowCount = 0;
  const keyCursor = new Map<RequestKind, number>();

  const start = nowUs();
  const warmupEnd = start + opts.warmupMs * 1000;
  let measureStart = warmupEnd;
  let measureEnd = target ? Number.POSITIVE_INFINITY : warmupEnd + opts.durationMs * 1000;
  let lastMeasuredDone = warmupEnd;
  let stopSending = false;
  const pendingWindowHooks: Promise<void>[] = [];

  const onDone = (conn: Connection, s: Stream, outcome: 'ok' | 'rpc_error' | 'reset', message: Buffer | null): void => {
    const t = nowUs();
    completed++;
    if (outcome === 'rpc_error') rpcErrors++;
    if (outcome === 'reset') resets++;
    if (message && s.kind.verify) {
      verified++;
      const problem =
        outcome === 'ok'
          ? s.kind.verify(s.kind.headerBlock ? message : message.subarray(5))
          : `${s.kind.headerBlock ? 'response' : 'RPC'} ${outcome === 'rpc_error' ? 'without a body' : outcome}`;
      if (problem) {
        wrong++;
        firstWrong ??= `${s.kind.name}: ${problem}`;
      }
    }
    if (s.measured) {
      if (measured < latencies.length) {
        latencies[measured] = t - s.scheduledUs;
        ttfbs[measured] = (s.firstUs || t) - s.scheduledUs;
      }
      measured++;
      lastMeasuredDone = t;
      countsByKind[s.kind.name] = (countsByKind[s.kind.name] ?? 0) + 1;
      if (opts.windowRequests) {
        if (windowCount === 0 && windowStart === 0) windowStart = measureStart;
        windowCount++;
        if (windowCount === opts.windowRequests) {
          const seconds = (t - windowStart) / 1e6;
          const w = { index: windows.length, completed: measured, seconds, rps: windowCount / seconds };
          windows.push(w);
          if (opts.onWindow) pendingWindowHooks.push(Promise.resolve(opts.onWindow(w)));
          windowStart = t;
          windowCount = 0;
        }
      }
    }
    if (opts.rate === 0 && !stopSending) refill(conn);
  };

  const conns: Connection[] = [];
  for (let i = 0; i < opts.connections; i++) {
    conns.push(new Connection(opts.host, opts.port, opts.path, onDone, (err) => (fatal ??= err)));
  }
  await Promise.all(conns.map((c) => c.ready()));

  const frameFor = (kind: RequestKind): Buffer => {
    const p = kind.keyPatch;
    if (!p) return kind.grpcFrame;
    const i = keyCursor.get(kind) ?? 0;
    keyCursor.set(kind, i + 1);
    const copy = Buffer.from(kind.grpcFrame);
    const keyIndex = i % (p.keys.length / p.keyLength);
    p.keys.copy(copy, p.offset, keyIndex * p.keyLength, (keyIndex + 1) * p.keyLength);
    return copy;
  };

  const sendOne = (c: Connection, scheduledUs: number): void => {
    const kind = sequence[seq % sequence.length];
    seq++;
    const isMeasured = scheduledUs >= measureStart && (!target || measuredSent < target);
    if (isMeasured) measuredSent++;
    c.send(kind, frameFor(kind), scheduledUs, isMeasured, sent % opts.verifyEvery === 0);
    sent++;
    if (target && measuredSent >= target) stopSending = true;
  };

  // Closed loop: each completion immediately sends the next request on the same connection.
  function refill(c: Connection): void {
    if (c.inFlight >= opts.maxInFlight || c.closed) return;
    const t = nowUs();
    if (!target && t >= measureEnd) {
      stopSending = true;
      return;
    }
    sendOne(c, t);
  }

  await new Promise<void>((resolve) => {
    const finishIfDone = (): boolean => {
      const t = nowUs();
      if (fatal) return true;
      if (stopSending && conns.every((c) => c.inFlight === 0)) return true;
      if (!target && t >= measureEnd + 5_000_000) return true; // 5 s grace for stragglers
      return false;
    };
    if (opts.rate === 0) {
      for (const c of conns) {
        c.cork();
        for (let i = 0; i < opts.maxInFlight; i++) sendOne(c, nowUs());
        c.uncork();
      }
      const poll = (): void => {
        if (!target && nowUs() >= measureEnd) stopSending = true;
        if (finishIfDone()) resolve();
        else setTimeout(poll, 5);
      };
      poll();
    } else {
      const intervalUs = 1e6 / opts.rate;
      let next = start;
      let ci = 0;
      const pump = (): void => {
        const t = nowUs();
        if (!stopSending) {
          if (!target && next >= measureEnd) stopSending = true;
          for (const c of conns) c.cork();
          while (!stopSending && next <= t) {
            const c = conns[ci++ % conns.length];
            if (c.inFlight >= opts.maxInFlight) break; // counted as late when it finally goes
            if (t - next > 1000) lateSends++;
            if (next >= measureStart) lags.push(t - next);
            sendOne(c, next);
            next += intervalUs;
          }
          for (const c of conns) c.uncork();
        }
        if (finishIfDone()) resolve();
        else setImmediate(pump);
      };
      pump();
    }
  });
  await Promise.all(pendingWindowHooks);
  for (const c of conns) c.close();
  if (fatal) throw fatal;
  if (measured > latencies.length) {
    latencies = latencies.slice(0, latencies.length);
    ttfbs = ttfbs.slice(0, ttfbs.length);
  }
  const seconds = (lastMeasuredDone - measureStart) / 1e6;
  return {
    sent,
    completed,
    measured,
    seconds,
    rps: measured / seconds,
    latenciesUs: latencies.subarray(0, Math.min(measured, latencies.length)),
    ttfbUs: ttfbs.subarray(0, Math.min(measured, ttfbs.length)),
    rpcErrors,
    streamResets: resets,
    wrongDecisions: wrong,
    firstWrong,
    verified,
    countsByKind,
    lateSends,
    sendLagP99Us: lags.length ? lags.sort((a, b) => a - b)[Math.floor(lags.length * 0.99)] : 0,
    windows,
  };
}

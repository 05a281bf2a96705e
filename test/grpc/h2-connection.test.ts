/**
 * The builtin HTTP/2 transport (src/grpc/h2/connection.ts) spoken to frame by frame: what no
 * well-behaved client sends (protocol violations, floods, garbage) ends that connection with the
 * right GOAWAY and never the server; what a client may legally do (padding, priority, interleaved
 * streams, a request cut into single bytes, tiny windows) is answered right.
 */
import * as net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ERROR, FLAG, frame, FRAME, PREFACE, words } from '../../src/grpc/h2/frames';
import { HpackDecoder, literalField } from '../../src/grpc/h2/hpack';
import { frameMessage } from '../../src/grpc/message-reader';
import { startH2GrpcServer, type GrpcH2Server, type Method } from '../../src/grpc/server';

interface Frame { type: number; flags: number; id: number; payload: Buffer }

/** A hand-driven HTTP/2 client: sends what it is told, parses every frame it gets. */
class RawClient {
  readonly frames: Frame[] = [];
  closed = false;
  text = '';
  #buf = Buffer.alloc(0);
  readonly #decoder = new HpackDecoder();
  private constructor(readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => {
      this.text += d.toString('latin1');
      this.#buf = Buffer.concat([this.#buf, d]);
      while (this.#buf.length >= 9) {
        const len = this.#buf.readUIntBE(0, 3);
        if (this.#buf.length < 9 + len) break;
        this.frames.push({ type: this.#buf[3], flags: this.#buf[4], id: this.#buf.readUInt32BE(5) & 0x7fffffff, payload: this.#buf.subarray(9, 9 + len) });
        this.#buf = this.#buf.subarray(9 + len);
      }
    });
    socket.on('close', () => (this.closed = true));
    socket.on('error', () => {});
  }

  static async connect(address: string, preface = true): Promise<RawClient> {
    const [host, port] = [address.slice(0, address.lastIndexOf(':')), Number(address.slice(address.lastIndexOf(':') + 1))];
    const socket = net.connect(port, host);
    await new Promise((r) => socket.once('connect', r));
    const c = new RawClient(socket);
    if (preface) c.send(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0)]));
    return c;
  }

  send(bytes: Buffer): void {
    this.socket.write(bytes);
  }

  async until(what: () => boolean, ms = 3000): Promise<void> {
    const end = Date.now() + ms;
    while (!what()) {
      if (Date.now() > end) throw new Error('timed out waiting');
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  goAway(): { lastStreamId: number; code: number } | undefined {
    const g = this.frames.find((f) => f.type === FRAME.GOAWAY);
    return g && { lastStreamId: g.payload.readUInt32BE(0), code: g.payload.readUInt32BE(4) };
  }

  /** The answer on a stream: its header fields (headers then trailers) and its DATA. */
  answer(id: number): { fields: Record<string, string>; data: Buffer; ended: boolean } {
    const fields: Record<string, string> = {};
    const data: Buffer[] = [];
    let ended = false;
    for (const f of this.frames.filter((x) => x.id === id)) {
      if (f.type === FRAME.HEADERS) this.#decoder.decode(f.payload, (n, v) => (fields[n] = v));
      if (f.type === FRAME.DATA) data.push(f.payload);
      if ((f.type === FRAME.HEADERS || f.type === FRAME.DATA) && f.flags & FLAG.END_STREAM) ended = true;
    }
    return { fields, data: Buffer.concat(data), ended };
  }

  close(): void {
    this.socket.destroy();
  }
}

function requestHeaders(path = '/test.Echo/Unary'): Buffer {
  return Buffer.concat([literalField(2, 'POST'), literalField(6, 'http'), literalField(4, path), literalField(1, 'x'), literalField(31, 'application/grpc'), literalField('te', 'trailers')]);
}

const echo: Method = { kind: 'unary', handle: (req) => Buffer.concat([Buffer.from('echo:'), req]) };
const errors: Error[] = [];
let server: GrpcH2Server;

beforeAll(async () => {
  // Slow never answers: its stream stays half-closed (remote) for as long as a test needs.
  const slow: Method = { kind: 'unary', handle: () => new Promise<Buffer>(() => {}) };
  server = await startH2GrpcServer('127.0.0.1:0', new Map([['/test.Echo/Unary', echo], ['/test.Echo/Slow', slow]]), { maxReceiveMessageBytes: 1 << 20, onError: (e) => errors.push(e as Error) });
});
afterAll(() => server.drain(500));

describe('answers what a client may legally send', () => {
  test('a request written one byte at a time', async () => {
    const c = await RawClient.connect(server.address);
    const bytes = Buffer.concat([frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders()), frame(FRAME.DATA, FLAG.END_STREAM, 1, frameMessage(Buffer.from('one byte at a time')))]);
    for (const b of bytes) {
      c.send(Buffer.from([b]));
      await new Promise((r) => setImmediate(r));
    }
    await c.until(() => c.answer(1).ended);
    const a = c.answer(1);
    expect(a.fields).toMatchObject({ ':status': '200', 'content-type': 'application/grpc', 'grpc-status': '0' });
    expect(a.data.subarray(5).toString()).toBe('echo:one byte at a time');
    c.close();
  });

  test('padded and prioritised HEADERS, padded DATA, and the DATA of three streams interleaved', async () => {
    const c = await RawClient.connect(server.address);
    const padded = (payload: Buffer, pad: number): Buffer => Buffer.concat([Buffer.from([pad]), payload, Buffer.alloc(pad)]);
    const withPriority = (block: Buffer): Buffer => Buffer.concat([words(0), Buffer.from([15]), block]);
    const parts = (s: string): Buffer[] => {
      const m = frameMessage(Buffer.from(s));
      return [m.subarray(0, 3), m.subarray(3, 9), m.subarray(9)];
    };
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.PADDED | FLAG.PRIORITY, 1, padded(withPriority(requestHeaders()), 7)));
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 3, requestHeaders()));
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.PADDED, 5, padded(requestHeaders(), 0)));
    const [a, b, d] = [parts('stream one'), parts('stream three'), parts('stream five')];
    for (let i = 0; i < 3; i++) {
      const end = i === 2 ? FLAG.END_STREAM : 0;
      c.send(frame(FRAME.DATA, FLAG.PADDED | end, 5, padded(d[i], 3)));
      c.send(frame(FRAME.DATA, end, 1, a[i]));
      c.send(frame(FRAME.PRIORITY, 0, 3, Buffer.concat([words(1), Buffer.from([1])])));
      c.send(frame(FRAME.DATA, end, 3, b[i]));
    }
    await c.until(() => [1, 3, 5].every((id) => c.answer(id).ended));
    expect(c.answer(1).data.subarray(5).toString()).toBe('echo:stream one');
    expect(c.answer(3).data.subarray(5).toString()).toBe('echo:stream three');
    expect(c.answer(5).data.subarray(5).toString()).toBe('echo:stream five');
    c.close();
  });

  test('a 300 KiB message in padded DATA frames of every size, written in random-sized pieces, arrives whole', async () => {
    let seed = 5;
    const rnd = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const message = Buffer.from(Array.from({ length: 300 * 1024 }, () => rnd(256)));
    const framed = frameMessage(message);
    const c = await RawClient.connect(server.address);
    // Room for the 300 KiB echo (this client sends no WINDOW_UPDATE as it reads).
    c.send(Buffer.concat([frame(FRAME.SETTINGS, 0, 0, Buffer.from([0, 4, 0x7f, 0xff, 0xff, 0xff])), frame(FRAME.WINDOW_UPDATE, 0, 0, words(2 ** 31 - 1 - 65_535))]));
    const frames: Buffer[] = [frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders())];
    for (let at = 0; at < framed.length;) {
      const n = Math.min(framed.length - at, 1 + rnd(16_000));
      const end = at + n === framed.length ? FLAG.END_STREAM : 0;
      const pad = rnd(3) === 0 ? rnd(200) : -1;
      frames.push(pad < 0
        ? frame(FRAME.DATA, end, 1, framed.subarray(at, at + n))
        : frame(FRAME.DATA, end | FLAG.PADDED, 1, Buffer.concat([Buffer.from([pad]), framed.subarray(at, at + n), Buffer.alloc(pad)])));
      if (rnd(10) === 0) frames.push(frame(FRAME.PING, 0, 0, Buffer.alloc(8)), frame(FRAME.DATA, 0, 1, Buffer.alloc(0)));
      at += n;
    }
    const all = Buffer.concat(frames);
    for (let at = 0; at < all.length;) {
      const n = 1 + rnd(rnd(2) ? 20 : 70_000);
      c.send(all.subarray(at, at + n));
      at += n;
      if (rnd(4) === 0) await new Promise((r) => setImmediate(r));
    }
    await c.until(() => c.answer(1).ended, 10_000);
    expect(c.answer(1).data.subarray(5).equals(Buffer.concat([Buffer.from('echo:'), message]))).toBe(true);
    c.close();
  });

  test('a header block cut into CONTINUATION frames', async () => {
    const c = await RawClient.connect(server.address);
    const block = Buffer.concat([requestHeaders(), literalField('x-pad', 'p'.repeat(3000))]);
    c.send(frame(FRAME.HEADERS, 0, 1, block.subarray(0, 10)));
    c.send(frame(FRAME.CONTINUATION, 0, 1, block.subarray(10, 2000)));
    c.send(frame(FRAME.CONTINUATION, FLAG.END_HEADERS, 1, block.subarray(2000)));
    c.send(frame(FRAME.DATA, FLAG.END_STREAM, 1, frameMessage(Buffer.from('continued'))));
    await c.until(() => c.answer(1).ended);
    expect(c.answer(1).data.subarray(5).toString()).toBe('echo:continued');
    c.close();
  });

  test('a window of 10 octets: the answer waits for WINDOW_UPDATE, then ends with its trailers', async () => {
    const c = await RawClient.connect(server.address, false);
    c.send(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0, Buffer.from([0, 4, 0, 0, 0, 10]))]));
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders()));
    c.send(frame(FRAME.DATA, FLAG.END_STREAM, 1, frameMessage(Buffer.from('a longer answer than ten octets'))));
    await c.until(() => c.answer(1).data.length === 10);
    await new Promise((r) => setTimeout(r, 50));
    expect(c.answer(1)).toMatchObject({ ended: false });
    c.send(frame(FRAME.WINDOW_UPDATE, 0, 1, words(1000)));
    await c.until(() => c.answer(1).ended);
    expect(c.answer(1).data.subarray(5).toString()).toBe('echo:a longer answer than ten octets');
    expect(c.answer(1).fields['grpc-status']).toBe('0');
    c.close();
  });

  test('PING is answered with the same eight octets; SETTINGS is acknowledged', async () => {
    const c = await RawClient.connect(server.address);
    c.send(frame(FRAME.PING, 0, 0, Buffer.from('8 octets')));
    await c.until(() => c.frames.some((f) => f.type === FRAME.PING));
    expect(c.frames.find((f) => f.type === FRAME.PING)).toMatchObject({ flags: FLAG.ACK, payload: Buffer.from('8 octets') });
    expect(c.frames.some((f) => f.type === FRAME.SETTINGS && f.flags === FLAG.ACK)).toBe(true);
    c.close();
  });

  test("late DATA of a stream the server already closed is dropped, and the connection's window credited", async () => {
    const c = await RawClient.connect(server.address);
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders()));
    c.send(frame(FRAME.DATA, 0, 1, Buffer.from([1, 0, 0, 0, 1]))); // compressed flag: refused at once
    await c.until(() => c.answer(1).ended);
    expect(c.answer(1).fields['grpc-status']).toBe('13');
    expect(c.frames.some((f) => f.type === FRAME.RST_STREAM && f.id === 1 && f.payload.readUInt32BE(0) === ERROR.NO_ERROR)).toBe(true);
    c.send(frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.alloc(100)));
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 3, requestHeaders()));
    c.send(frame(FRAME.DATA, FLAG.END_STREAM, 3, frameMessage(Buffer.from('still here'))));
    await c.until(() => c.answer(3).ended);
    expect(c.answer(3).data.subarray(5).toString()).toBe('echo:still here');
    expect(c.goAway()).toBeUndefined();
    c.close();
  });
});

describe('ends a connection that breaks the protocol with the right GOAWAY, and only that connection', () => {
  test.each<[string, () => Buffer, number]>([
    ['DATA on stream 0', () => frame(FRAME.DATA, 0, 0, Buffer.from('x')), ERROR.PROTOCOL_ERROR],
    ['HEADERS on an even stream', () => frame(FRAME.HEADERS, FLAG.END_HEADERS, 2, requestHeaders()), ERROR.PROTOCOL_ERROR],
    ['DATA on a stream never opened', () => frame(FRAME.DATA, 0, 9, Buffer.from('x')), ERROR.PROTOCOL_ERROR],
    ['a frame over 16 KiB', () => frame(FRAME.DATA, 0, 1, Buffer.alloc(16_385)), ERROR.FRAME_SIZE_ERROR],
    ['a header block interrupted by another frame', () => Buffer.concat([frame(FRAME.HEADERS, 0, 1, requestHeaders()), frame(FRAME.PING, 0, 0, Buffer.alloc(8))]), ERROR.PROTOCOL_ERROR],
    ['a CONTINUATION flood past 64 KiB', () => Buffer.concat([frame(FRAME.HEADERS, 0, 1, requestHeaders()), ...Array.from({ length: 5 }, () => frame(FRAME.CONTINUATION, 0, 1, Buffer.alloc(16_000, 0x82)))]), ERROR.ENHANCE_YOUR_CALM],
    ['a broken HPACK block', () => frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, Buffer.from([0x80])), ERROR.COMPRESSION_ERROR],
    ['PUSH_PROMISE from a client', () => frame(FRAME.PUSH_PROMISE, FLAG.END_HEADERS, 1, words(2)), ERROR.PROTOCOL_ERROR],
    ['a PING of 7 octets', () => frame(FRAME.PING, 0, 0, Buffer.alloc(7)), ERROR.PROTOCOL_ERROR],
    ['SETTINGS with a window over 2^31-1', () => frame(FRAME.SETTINGS, 0, 0, Buffer.from([0, 4, 0x80, 0, 0, 0])), ERROR.FLOW_CONTROL_ERROR],
    ['a connection WINDOW_UPDATE of 0', () => frame(FRAME.WINDOW_UPDATE, 0, 0, words(0)), ERROR.PROTOCOL_ERROR],
    ['DATA after END_STREAM', () => Buffer.concat([frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Slow')), frame(FRAME.DATA, FLAG.END_STREAM, 1, frameMessage(Buffer.from('x'))), frame(FRAME.DATA, 0, 1, Buffer.from('x'))]), ERROR.STREAM_CLOSED],
  ])('%s', async (_what, bytes, code) => {
    const bystander = await RawClient.connect(server.address);
    const c = await RawClient.connect(server.address);
    c.send(bytes());
    await c.until(() => c.goAway() !== undefined && c.closed);
    expect(c.goAway()!.code).toBe(code);
    // The server and its other connections go on.
    bystander.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders()));
    bystander.send(frame(FRAME.DATA, FLAG.END_STREAM, 1, frameMessage(Buffer.from('unaffected'))));
    await bystander.until(() => bystander.answer(1).ended);
    expect(bystander.answer(1).data.subarray(5).toString()).toBe('echo:unaffected');
    bystander.close();
  });

  test('an HTTP/1.1 request gets a plain answer saying what the port speaks', async () => {
    const c = await RawClient.connect(server.address, false);
    c.send(Buffer.from('GET / HTTP/1.1\r\nhost: x\r\n\r\n'));
    await c.until(() => c.closed);
    expect(c.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(c.text).toContain('This port speaks gRPC');
  });

  test('bytes that are no protocol at all close the connection', async () => {
    const c = await RawClient.connect(server.address, false);
    c.send(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00])); // a TLS ClientHello's start
    await c.until(() => c.closed);
    expect(c.frames).toEqual([]);
  });

  test('50 connections of 100 random frames each: connections end or go on, the server always answers the next client', async () => {
    let seed = 3;
    const rnd = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const types = [0, 1, 2, 3, 4, 6, 7, 8, 9, 0x10];
    for (let round = 0; round < 50; round++) {
      const c = await RawClient.connect(server.address);
      const frames: Buffer[] = [];
      for (let i = 0; i < 100; i++) {
        const type = types[rnd(types.length)];
        const id = rnd(3) === 0 ? 0 : 1 + 2 * rnd(4);
        const payload = type === FRAME.HEADERS && rnd(2) ? requestHeaders() : Buffer.from(Array.from({ length: rnd(40) }, () => rnd(256)));
        frames.push(frame(type, rnd(256), id, payload));
      }
      c.send(Buffer.concat(frames));
      await new Promise((r) => setTimeout(r, 5));
      c.close();
    }
    const grpcClient = new grpc.Client(server.address, grpc.credentials.createInsecure());
    const answer = await new Promise<Buffer>((resolve, reject) => {
      grpcClient.makeUnaryRequest('/test.Echo/Unary', (b: Buffer) => b, (b: Buffer) => b, Buffer.from('after the noise'), (err, res) => (err ? reject(err) : resolve(res!)));
    });
    expect(answer.toString()).toBe('echo:after the noise');
    grpcClient.close();
    expect(errors.every((e) => /HTTP\/2 connection error|ECONNRESET|EPIPE/.test(e.message))).toBe(true);
  });
});

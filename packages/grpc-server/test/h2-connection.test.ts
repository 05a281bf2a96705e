/**
 * The builtin HTTP/2 transport (src/h2/connection.ts) spoken to frame by frame: what no
 * well-behaved client sends (protocol violations, floods, garbage) ends that connection with the
 * right GOAWAY and never the server; what a client may legally do (padding, priority, interleaved
 * streams, a request cut into single bytes, tiny windows) is answered right.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ERROR, FLAG, frame, FRAME, PREFACE, words } from '../src/h2/frames';
import { literalField } from '../src/h2/hpack';
import { frameMessage } from '../src/message-reader';
import { startH2GrpcServer, type GrpcH2Server, type Method } from '../src/server';
import { RawClient, requestHeaders } from './support/raw-h2';

const echo: Method = { kind: 'unary', handle: (req) => Buffer.concat([Buffer.from('echo:'), req]) };
const release: (() => void)[] = [];
const held: Method = {
  kind: 'unary',
  handle: (req) => new Promise<Buffer>((resolve) => release.push(() => resolve(req))),
};
const errors: Error[] = [];
let server: GrpcH2Server;

beforeAll(async () => {
  // Slow never answers: its stream stays half-closed (remote) for as long as a test needs.
  // Held answers when the test releases it.
  const slow: Method = { kind: 'unary', handle: () => new Promise<Buffer>(() => {}) };
  server = await startH2GrpcServer(
    '127.0.0.1:0',
    new Map([
      ['/test.Echo/Unary', echo],
      ['/test.Echo/Slow', slow],
      ['/test.Echo/Held', held],
    ]),
    { maxReceiveMessageBytes: 1 << 20, onError: (e) => errors.push(e as Error) },
  );
});
afterAll(() => server.drain(500));

describe('answers what a client may legally send', () => {
  test('a request written one byte at a time', async () => {
    const c = await RawClient.connect(server.address);
    const bytes = Buffer.concat([
      frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders()),
      frame(FRAME.DATA, FLAG.END_STREAM, 1, frameMessage(Buffer.from('one byte at a time'))),
    ]);
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
    const padded = (payload: Buffer, pad: number): Buffer =>
      Buffer.concat([Buffer.from([pad]), payload, Buffer.alloc(pad)]);
    const withPriority = (block: Buffer): Buffer => Buffer.concat([words(0), Buffer.from([15]), block]);
    const parts = (s: string): Buffer[] => {
      const m = frameMessage(Buffer.from(s));
      return [m.subarray(0, 3), m.subarray(3, 9), m.subarray(9)];
    };
    c.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS | FLAG.PADDED | FLAG.PRIORITY,
        1,
        padded(withPriority(requestHeaders()), 7),
      ),
    );
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
    c.send(
      Buffer.concat([
        frame(FRAME.SETTINGS, 0, 0, Buffer.from([0, 4, 0x7f, 0xff, 0xff, 0xff])),
        frame(FRAME.WINDOW_UPDATE, 0, 0, words(2 ** 31 - 1 - 65_535)),
      ]),
    );
    const frames: Buffer[] = [frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders())];
    for (let at = 0; at < framed.length;) {
      const n = Math.min(framed.length - at, 1 + rnd(16_000));
      const end = at + n === framed.length ? FLAG.END_STREAM : 0;
      const pad = rnd(3) === 0 ? rnd(200) : -1;
      frames.push(
        pad < 0
          ? frame(FRAME.DATA, end, 1, framed.subarray(at, at + n))
          : frame(
              FRAME.DATA,
              end | FLAG.PADDED,
              1,
              Buffer.concat([Buffer.from([pad]), framed.subarray(at, at + n), Buffer.alloc(pad)]),
            ),
      );
      if (rnd(10) === 0)
        frames.push(frame(FRAME.PING, 0, 0, Buffer.alloc(8)), frame(FRAME.DATA, 0, 1, Buffer.alloc(0)));
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
    expect(
      c
        .answer(1)
        .data.subarray(5)
        .equals(Buffer.concat([Buffer.from('echo:'), message])),
    ).toBe(true);
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
    expect(c.frames.find((f) => f.type === FRAME.PING)).toMatchObject({
      flags: FLAG.ACK,
      payload: Buffer.from('8 octets'),
    });
    expect(c.frames.some((f) => f.type === FRAME.SETTINGS && f.flags === FLAG.ACK)).toBe(true);
    c.close();
  });

  test("late DATA of a stream the server already closed is dropped, and the connection's window credited", async () => {
    const c = await RawClient.connect(server.address);
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders()));
    c.send(frame(FRAME.DATA, 0, 1, Buffer.from([1, 0, 0, 0, 1]))); // compressed flag: refused at once
    await c.until(() => c.answer(1).ended);
    expect(c.answer(1).fields['grpc-status']).toBe('13');
    expect(
      c.frames.some((f) => f.type === FRAME.RST_STREAM && f.id === 1 && f.payload.readUInt32BE(0) === ERROR.NO_ERROR),
    ).toBe(true);
    c.send(frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.alloc(100)));
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 3, requestHeaders()));
    c.send(frame(FRAME.DATA, FLAG.END_STREAM, 3, frameMessage(Buffer.from('still here'))));
    await c.until(() => c.answer(3).ended);
    expect(c.answer(3).data.subarray(5).toString()).toBe('echo:still here');
    expect(c.goAway()).toBeUndefined();
    c.close();
  });
});

describe('HPACK table size: a peer that lowers SETTINGS_HEADER_TABLE_SIZE', () => {
  test('gets a Dynamic Table Size Update to 0 at the start of the first block written after it, and once only', async () => {
    const c = await RawClient.connect(server.address, false);
    c.send(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0, Buffer.from([0, 1, 0, 0, 0, 0]))]));
    for (const id of [1, 3]) {
      c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, id, requestHeaders()));
      c.send(frame(FRAME.DATA, FLAG.END_STREAM, id, frameMessage(Buffer.from(`s${id}`))));
      await c.until(() => c.answer(id).ended);
    }
    const blocks = c.frames.filter((f) => f.type === FRAME.HEADERS);
    expect(blocks[0].payload[0]).toBe(0x20);
    expect(blocks.slice(1).every((b) => b.payload[0] !== 0x20)).toBe(true);
    expect(c.answer(3).data.subarray(5).toString()).toBe('echo:s3');
    c.close();
  });
});

describe('ends a connection that breaks the protocol with the right GOAWAY, and only that connection', () => {
  test.each<[string, () => Buffer, number]>([
    ['DATA on stream 0', () => frame(FRAME.DATA, 0, 0, Buffer.from('x')), ERROR.PROTOCOL_ERROR],
    [
      'HEADERS on an even stream',
      () => frame(FRAME.HEADERS, FLAG.END_HEADERS, 2, requestHeaders()),
      ERROR.PROTOCOL_ERROR,
    ],
    ['DATA on a stream never opened', () => frame(FRAME.DATA, 0, 9, Buffer.from('x')), ERROR.PROTOCOL_ERROR],
    ['a frame over 16 KiB', () => frame(FRAME.DATA, 0, 1, Buffer.alloc(16_385)), ERROR.FRAME_SIZE_ERROR],
    [
      'a header block interrupted by another frame',
      () => Buffer.concat([frame(FRAME.HEADERS, 0, 1, requestHeaders()), frame(FRAME.PING, 0, 0, Buffer.alloc(8))]),
      ERROR.PROTOCOL_ERROR,
    ],
    [
      'a CONTINUATION flood past 64 KiB',
      () =>
        Buffer.concat([
          frame(FRAME.HEADERS, 0, 1, requestHeaders()),
          ...Array.from({ length: 5 }, () => frame(FRAME.CONTINUATION, 0, 1, Buffer.alloc(16_000, 0x82))),
        ]),
      ERROR.ENHANCE_YOUR_CALM,
    ],
    [
      'a broken HPACK block',
      () => frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, Buffer.from([0x80])),
      ERROR.COMPRESSION_ERROR,
    ],
    [
      'PUSH_PROMISE from a client',
      () => frame(FRAME.PUSH_PROMISE, FLAG.END_HEADERS, 1, words(2)),
      ERROR.PROTOCOL_ERROR,
    ],
    ['a PING of 7 octets', () => frame(FRAME.PING, 0, 0, Buffer.alloc(7)), ERROR.FRAME_SIZE_ERROR],
    [
      'a RST_STREAM of 3 octets',
      () =>
        Buffer.concat([
          frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Slow')),
          frame(FRAME.RST_STREAM, 0, 1, Buffer.alloc(3)),
        ]),
      ERROR.FRAME_SIZE_ERROR,
    ],
    [
      '65 empty CONTINUATION frames (a flood that adds no bytes)',
      () =>
        Buffer.concat([
          frame(FRAME.HEADERS, 0, 1, requestHeaders()),
          ...Array.from({ length: 65 }, () => frame(FRAME.CONTINUATION, 0, 1)),
        ]),
      ERROR.ENHANCE_YOUR_CALM,
    ],
    [
      'SETTINGS with a window over 2^31-1',
      () => frame(FRAME.SETTINGS, 0, 0, Buffer.from([0, 4, 0x80, 0, 0, 0])),
      ERROR.FLOW_CONTROL_ERROR,
    ],
    ['a connection WINDOW_UPDATE of 0', () => frame(FRAME.WINDOW_UPDATE, 0, 0, words(0)), ERROR.PROTOCOL_ERROR],
    [
      'DATA after END_STREAM',
      () =>
        Buffer.concat([
          frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Slow')),
          frame(FRAME.DATA, FLAG.END_STREAM, 1, frameMessage(Buffer.from('x'))),
          frame(FRAME.DATA, 0, 1, Buffer.from('x')),
        ]),
      ERROR.STREAM_CLOSED,
    ],
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

  test('a first frame that is not SETTINGS ends the connection (RFC 9113 §3.4)', async () => {
    const c = await RawClient.connect(server.address, false);
    c.send(Buffer.concat([PREFACE, frame(FRAME.PING, 0, 0, Buffer.alloc(8))]));
    await c.until(() => c.goAway() !== undefined && c.closed);
    expect(c.goAway()!.code).toBe(ERROR.PROTOCOL_ERROR);
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
        const payload =
          type === FRAME.HEADERS && rnd(2)
            ? requestHeaders()
            : Buffer.from(Array.from({ length: rnd(40) }, () => rnd(256)));
        frames.push(frame(type, rnd(256), id, payload));
      }
      c.send(Buffer.concat(frames));
      await new Promise((r) => setTimeout(r, 5));
      c.close();
    }
    const grpcClient = new grpc.Client(server.address, grpc.credentials.createInsecure());
    const answer = await new Promise<Buffer>((resolve, reject) => {
      grpcClient.makeUnaryRequest(
        '/test.Echo/Unary',
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from('after the noise'),
        (err, res) => (err ? reject(err) : resolve(res!)),
      );
    });
    expect(answer.toString()).toBe('echo:after the noise');
    grpcClient.close();
    expect(errors.every((e) => /HTTP\/2 connection error|ECONNRESET|EPIPE/.test(e.message))).toBe(true);
  });
});

describe('a drain (RFC 9113 §6.8, in two steps)', () => {
  test('announces GOAWAY with the largest id and a PING; serves what the client sent meanwhile; names the last stream once the PING is back; ends when the calls are answered', async () => {
    const s2 = await startH2GrpcServer(
      '127.0.0.1:0',
      new Map([
        ['/test.Echo/Unary', echo],
        ['/test.Echo/Held', held],
      ]),
      { maxReceiveMessageBytes: 1 << 20 },
    );
    const c = await RawClient.connect(s2.address);
    c.send(
      Buffer.concat([
        frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Held')),
        frame(FRAME.DATA, FLAG.END_STREAM, 1, frameMessage(Buffer.from('held'))),
      ]),
    );
    await c.until(() => release.length === 1);
    const drained = s2.drain(5000);
    await c.until(() => c.frames.some((f) => f.type === FRAME.PING));
    const first = c.goAway()!;
    expect(first).toEqual({ lastStreamId: 2 ** 31 - 1, code: ERROR.NO_ERROR });
    // A stream sent before the client saw the GOAWAY is still served.
    c.send(
      Buffer.concat([
        frame(FRAME.HEADERS, FLAG.END_HEADERS, 3, requestHeaders()),
        frame(FRAME.DATA, FLAG.END_STREAM, 3, frameMessage(Buffer.from('late'))),
      ]),
    );
    await c.until(() => c.answer(3).ended);
    expect(c.answer(3).data.subarray(5).toString()).toBe('echo:late');
    const ping = c.frames.find((f) => f.type === FRAME.PING)!;
    c.send(frame(FRAME.PING, FLAG.ACK, 0, ping.payload));
    await c.until(() => c.frames.filter((f) => f.type === FRAME.GOAWAY).length === 2);
    expect(c.frames.filter((f) => f.type === FRAME.GOAWAY)[1].payload.readUInt32BE(0)).toBe(3);
    expect(c.closed).toBe(false);
    release.shift()!();
    await c.until(() => c.answer(1).ended && c.closed);
    expect(c.answer(1).data.subarray(5).toString()).toBe('held');
    await drained;
  });

  test('closes a connection whose client preface never came, without a GOAWAY before its SETTINGS', async () => {
    const s2 = await startH2GrpcServer('127.0.0.1:0', new Map([['/test.Echo/Unary', echo]]), {
      maxReceiveMessageBytes: 1 << 20,
    });
    const c = await RawClient.connect(s2.address, false);
    await new Promise((r) => setTimeout(r, 20));
    await s2.drain(2000);
    await c.until(() => c.closed);
    expect(c.frames).toEqual([]);
  });
});

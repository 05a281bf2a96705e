/**
 * The limits that bound what one client can make the builtin transport hold or do (nghttp2's, where
 * they matter), each driven frame by frame: streams reset before their answer (rapid reset), control
 * frames to answer while the client reads nothing (PING flood), unread answers (reads pause, over TCP
 * and over TLS), answers
 * waiting for a window the client never opens, connections without streams (idle timeout), and the
 * number of connections; and what Envoy does routinely (resets of answered streams, a client that
 * reads slowly) staying within them. Then node:http2's limits as the node transport sets them.
 */
import * as http2 from 'node:http2';
import * as net from 'node:net';
import * as tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Connection } from '../src/h2/connection';
import { ERROR, FLAG, frame, FRAME, PREFACE, SETTING, words } from '../src/h2/frames';
import { frameMessage } from '../src/message-reader';
import { startH2GrpcServer, type GrpcH2Server, type Method } from '../src/server';
import { pingPong, RawClient, requestHeaders } from './support/raw-h2';
import { makeTestCerts, tlsOptions } from '../../../test/support/test-certs';

const echo: Method = { kind: 'unary', handle: (req) => Buffer.concat([Buffer.from('echo:'), req]) };
const slow: Method = { kind: 'unary', handle: () => new Promise<Buffer>(() => {}) };
const methods = new Map([
  ['/test.Echo/Unary', echo],
  ['/test.Echo/Slow', slow],
]);
const errors: Error[] = [];
let server: GrpcH2Server;

beforeAll(async () => {
  server = await startH2GrpcServer('127.0.0.1:0', methods, {
    maxReceiveMessageBytes: 1 << 20,
    onError: (e) => errors.push(e as Error),
  });
});
afterAll(() => server.drain(500));

/** SETTINGS_INITIAL_WINDOW_SIZE = `size`, and the connection window opened as far as it goes. */
function windows(size: number): Buffer {
  const s = Buffer.alloc(6);
  s.writeUInt16BE(SETTING.INITIAL_WINDOW_SIZE, 0);
  s.writeUInt32BE(size, 2);
  return Buffer.concat([frame(FRAME.SETTINGS, 0, 0, s), frame(FRAME.WINDOW_UPDATE, 0, 0, words(2 ** 31 - 1 - 65_535))]);
}

/** `n` calls on streams first, first+2, ...: HEADERS and DATA, then what `after` adds per stream. */
function calls(
  first: number,
  n: number,
  path: string,
  message: Buffer,
  after: (id: number) => Buffer[] = () => [],
): Buffer {
  const body = frameMessage(message);
  const out: Buffer[] = [];
  for (let i = 0, id = first; i < n; i++, id += 2) {
    out.push(
      frame(FRAME.HEADERS, FLAG.END_HEADERS, id, requestHeaders(path)),
      frame(FRAME.DATA, FLAG.END_STREAM, id, body),
      ...after(id),
    );
  }
  return Buffer.concat(out);
}

describe('rapid reset (CVE-2023-44487): streams reset before their answer, or refused', () => {
  test('990 of them are within the budget; 1,100 in a row get GOAWAY ENHANCE_YOUR_CALM, the drain in two steps, and the socket closed', async () => {
    const ok = await RawClient.connect(server.address);
    ok.send(
      calls(1, 990, '/test.Echo/Slow', Buffer.from('x'), (id) => [frame(FRAME.RST_STREAM, 0, id, words(ERROR.CANCEL))]),
    );
    await pingPong(ok);
    expect(ok.goAway()).toBeUndefined();
    ok.close();

    const c = await RawClient.connect(server.address);
    c.send(
      calls(1, 1100, '/test.Echo/Slow', Buffer.from('x'), (id) => [
        frame(FRAME.RST_STREAM, 0, id, words(ERROR.CANCEL)),
      ]),
    );
    await c.until(() => c.goAway() !== undefined, 20_000);
    expect(c.goAway()).toEqual({ lastStreamId: 2 ** 31 - 1, code: ERROR.ENHANCE_YOUR_CALM });
    const ping = c.frames.find((f) => f.type === FRAME.PING && f.flags === 0)!;
    c.send(frame(FRAME.PING, FLAG.ACK, 0, ping.payload));
    await c.until(() => c.closed, 20_000);
    const last = c.frames.filter((f) => f.type === FRAME.GOAWAY).at(-1)!;
    expect(last.payload.readUInt32BE(4)).toBe(ERROR.ENHANCE_YOUR_CALM);
    expect(errors.some((e) => /rapid reset/.test(e.message))).toBe(true);
  });

  test('streams opened past the 2,048 announced take from the same budget: 1,100 refused, then GOAWAY ENHANCE_YOUR_CALM', async () => {
    const c = await RawClient.connect(server.address);
    const opens: Buffer[] = [];
    for (let i = 0, id = 1; i < 2048 + 1100; i++, id += 2)
      opens.push(frame(FRAME.HEADERS, FLAG.END_HEADERS, id, requestHeaders('/test.Echo/Slow')));
    c.send(Buffer.concat(opens));
    await c.until(() => c.goAway() !== undefined, 20_000);
    expect(c.goAway()!.code).toBe(ERROR.ENHANCE_YOUR_CALM);
    const refused = c.frames.filter((f) => f.type === FRAME.RST_STREAM);
    expect(refused[0]).toMatchObject({ id: 1 + 2 * 2048 });
    expect(refused.every((f) => f.payload.readUInt32BE(0) === ERROR.REFUSED_STREAM)).toBe(true);
    expect(refused.length).toBeGreaterThan(1000);
    c.close();
  });

  test('streams reset after their answer (Envoy cancelling a Check that was just answered) do not count: 3,000 of them', async () => {
    const c = await RawClient.connect(server.address);
    c.send(
      calls(1, 3000, '/test.Echo/Unary', Buffer.from('x'), (id) => [
        frame(FRAME.RST_STREAM, 0, id, words(ERROR.CANCEL)),
      ]),
    );
    await c.until(() => c.answer(5999).ended, 20_000);
    await pingPong(c);
    expect(c.goAway()).toBeUndefined();
    c.close();
  });

  test('streams the server reset first (a refused request, a finished meter stream) do not count when the client resets them too: 1,500 of them', async () => {
    const c = await RawClient.connect(server.address);
    // A compressed message is refused at once and the stream reset with NO_ERROR; the client's reset crosses it.
    const frames: Buffer[] = [];
    for (let i = 0, id = 1; i < 1500; i++, id += 2) {
      frames.push(
        frame(FRAME.HEADERS, FLAG.END_HEADERS, id, requestHeaders()),
        frame(FRAME.DATA, 0, id, Buffer.from([1, 0, 0, 0, 1, 0])),
        frame(FRAME.RST_STREAM, 0, id, words(ERROR.CANCEL)),
      );
    }
    c.send(Buffer.concat(frames));
    await c.until(() => c.answer(2999).ended, 20_000);
    await pingPong(c);
    expect(c.goAway()).toBeUndefined();
    c.close();
  });
});

describe('a client that does not read', () => {
  test('a PING flood: reading stops once its answers back up, and past 1,000 unanswered control frames GOAWAY ENHANCE_YOUR_CALM', async () => {
    const c = await RawClient.connect(server.address);
    await pingPong(c);
    c.socket.pause();
    // 2 million PINGs (34 MB): far more ACKs than the kernel's socket buffers hold.
    const chunk = Buffer.concat(Array.from({ length: 10_000 }, () => frame(FRAME.PING, 0, 0, Buffer.alloc(8))));
    for (let i = 0; i < 200; i++) c.send(chunk);
    await c.until(() => c.socket.writableLength > 0, 20_000);
    c.socket.resume();
    await c.until(() => c.closed, 30_000);
    const acks = c.frames.filter((f) => f.type === FRAME.PING).length;
    expect(c.goAway()?.code).toBe(ERROR.ENHANCE_YOUR_CALM);
    expect(acks).toBeLessThan(2_000_000);
  });

  test.each([
    ['TCP', false],
    ['TLS', true],
  ])(
    'Checks whose answers it does not read, over %s: the server stops reading once 1 MiB is unread, and reads again when it drains',
    async (_over, secure) => {
      // A bare connection on a socket this test can see; every stream is answered 2 KiB at once.
      // Over TLS, the TLS socket's backlog is what the connection sees: the same limits must hold.
      let answered = 0;
      const sockets: net.Socket[] = [];
      const certs = secure ? tlsOptions(makeTestCerts()) : undefined;
      const accept = (socket: net.Socket): void => {
        sockets.push(socket);
        new Connection(socket, {
          open: (_path, _type, res) => {
            answered++;
            res.sendUnary(Buffer.alloc(2048, 0x61));
            return { data() {}, end() {}, closed() {} };
          },
          onError: () => {},
          onClose: () => {},
        });
      };
      const bare = certs ? tls.createServer(certs.server, accept) : net.createServer(accept);
      await new Promise<void>((r) => bare.listen(0, '127.0.0.1', r));
      const c = await RawClient.connect(`127.0.0.1:${(bare.address() as net.AddressInfo).port}`, true, certs?.client);
      c.send(windows(2 ** 31 - 1));
      await pingPong(c);
      c.socket.pause();
      const n = 20_000; // 40 MB of answers: far more than the kernel holds
      for (let i = 0; i < n; i += 1000) c.send(calls(1 + 2 * i, 1000, '/test.Echo/Unary', Buffer.from('x')));
      await c.until(() => sockets[0].isPaused(), 20_000);
      expect(answered).toBeLessThan(n);
      c.socket.resume();
      await c.until(() => c.answer(1 + 2 * (n - 1)).ended, 60_000);
      expect(answered).toBe(n);
      expect(sockets[0].isPaused()).toBe(false);
      expect(c.goAway()).toBeUndefined();
      c.close();
      bare.close();
    },
  );

  test('SETTINGS_INITIAL_WINDOW_SIZE=0: answers wait for window up to 4 MiB, then new streams are refused; all are sent once the window opens', async () => {
    const c = await RawClient.connect(server.address);
    c.send(windows(0));
    await pingPong(c);
    // Answers of 15 KiB (a request frame holds at most 16 KiB): about 270 of them fill 4 MiB.
    const message = Buffer.alloc(15 * 1024, 0x62);
    c.send(calls(1, 400, '/test.Echo/Unary', message));
    // Each stream gets its response headers (its answer then waits for window) or is refused.
    const ids = Array.from({ length: 400 }, (_, i) => 1 + 2 * i);
    const seen = (id: number): boolean =>
      c.frames.some((f) => f.id === id && (f.type === FRAME.HEADERS || f.type === FRAME.RST_STREAM));
    await c.until(() => ids.every(seen), 20_000);
    const refused = c.frames.filter((f) => f.type === FRAME.RST_STREAM);
    expect(refused.every((f) => f.payload.readUInt32BE(0) === ERROR.REFUSED_STREAM)).toBe(true);
    expect(refused.length).toBeGreaterThanOrEqual(100);
    expect(refused.length).toBeLessThan(400 - 250);
    expect(c.frames.some((f) => f.type === FRAME.DATA)).toBe(false);
    // Every stream not refused is answered once the window opens.
    c.send(frame(FRAME.SETTINGS, 0, 0, Buffer.from([0, 4, 0x7f, 0xff, 0xff, 0xff])));
    const refusedIds = new Set(refused.map((f) => f.id));
    const held = ids.filter((id) => !refusedIds.has(id));
    await c.until(() => held.every((id) => c.answer(id).ended), 20_000);
    expect(held.every((id) => c.answer(id).data.length === 5 + 5 + message.length)).toBe(true);
    // And once they are sent, new streams are taken again.
    c.send(calls(1001, 1, '/test.Echo/Unary', Buffer.from('again')));
    await c.until(() => c.answer(1001).ended);
    expect(c.answer(1001).data.subarray(5).toString()).toBe('echo:again');
    c.close();
  });
});

describe('connections: a cap, an idle timeout, a stall timeout', () => {
  let small: GrpcH2Server;
  let timed: GrpcH2Server;
  beforeAll(async () => {
    small = await startH2GrpcServer('127.0.0.1:0', methods, { maxReceiveMessageBytes: 1 << 20, maxConnections: 3 });
    timed = await startH2GrpcServer('127.0.0.1:0', methods, { maxReceiveMessageBytes: 1 << 20, idleTimeoutMs: 400 });
  });
  afterAll(() => Promise.all([small.drain(500), timed.drain(500)]));

  test('a connection past the cap is closed at once; those within it are served', async () => {
    const held = await Promise.all([1, 2, 3].map(() => RawClient.connect(small.address)));
    await Promise.all(
      held.map(async (c) => {
        // An open stream keeps each from the idle timeout.
        c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Slow')));
        await pingPong(c);
      }),
    );
    const extra = await RawClient.connect(small.address);
    await extra.until(() => extra.closed);
    expect(extra.frames).toEqual([]);
    held[0].send(calls(3, 1, '/test.Echo/Unary', Buffer.from('within')));
    await held[0].until(() => held[0].answer(3).ended);
    held.forEach((c) => c.close());
  });

  test('a connection with no stream for the idle timeout is drained (GOAWAY NO_ERROR, PING, GOAWAY) and closed; one with a stream open is kept', async () => {
    const idle = await RawClient.connect(timed.address);
    const busy = await RawClient.connect(timed.address);
    busy.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Slow')));
    await idle.until(() => idle.closed, 20_000);
    const goAways = idle.frames
      .filter((f) => f.type === FRAME.GOAWAY)
      .map((f) => [f.payload.readUInt32BE(0), f.payload.readUInt32BE(4)]);
    expect(goAways).toEqual([
      [2 ** 31 - 1, ERROR.NO_ERROR],
      [0, ERROR.NO_ERROR],
    ]);
    expect(busy.goAway()).toBeUndefined();
    await pingPong(busy);
    busy.close();
  });

  test('a connection whose answer waits for a window the client never opens is cut after the idle timeout', async () => {
    const c = await RawClient.connect(timed.address, false);
    c.send(Buffer.concat([PREFACE, windows(0)]));
    c.send(calls(1, 1, '/test.Echo/Unary', Buffer.from('never sent')));
    await c.until(() => c.closed, 20_000);
    expect(c.answer(1).ended).toBe(false);
  });
});

describe('the node transport', () => {
  let nodeServer: GrpcH2Server;
  let capped: GrpcH2Server;
  beforeAll(async () => {
    nodeServer = await startH2GrpcServer('127.0.0.1:0', methods, {
      maxReceiveMessageBytes: 1 << 20,
      transport: 'node',
      idleTimeoutMs: 400,
    });
    capped = await startH2GrpcServer('127.0.0.1:0', methods, {
      maxReceiveMessageBytes: 1 << 20,
      transport: 'node',
      maxConnections: 2,
    });
  });
  afterAll(() => Promise.all([nodeServer.drain(500), capped.drain(500)]));

  test('announces 2,048 concurrent streams and a 64 KiB header list, and refuses the stream past the limit', async () => {
    const c = await RawClient.connect(nodeServer.address);
    await c.until(() => c.frames.some((f) => f.type === FRAME.SETTINGS && f.flags === 0));
    const settings = c.frames.find((f) => f.type === FRAME.SETTINGS && f.flags === 0)!.payload;
    const values = new Map<number, number>();
    for (let at = 0; at < settings.length; at += 6)
      values.set(settings.readUInt16BE(at), settings.readUInt32BE(at + 2));
    expect(values.get(SETTING.MAX_CONCURRENT_STREAMS)).toBe(2048);
    expect(values.get(SETTING.MAX_HEADER_LIST_SIZE)).toBe(65_536);
    const opens: Buffer[] = [];
    for (let i = 0, id = 1; i <= 2048; i++, id += 2)
      opens.push(frame(FRAME.HEADERS, FLAG.END_HEADERS, id, requestHeaders('/test.Echo/Slow')));
    c.send(Buffer.concat(opens));
    await c.until(() => c.frames.some((f) => f.type === FRAME.RST_STREAM || f.type === FRAME.GOAWAY), 20_000);
    const rst = c.frames.find((f) => f.type === FRAME.RST_STREAM);
    expect(rst?.id).toBe(1 + 2 * 2048);
    expect([ERROR.REFUSED_STREAM, ERROR.PROTOCOL_ERROR]).toContain(rst!.payload.readUInt32BE(0));
    c.close();
  });

  test('closes a session idle for the timeout, and a connection past the cap', async () => {
    const client = http2.connect(`http://${nodeServer.address}`);
    client.on('error', () => {});
    const goaway = new Promise<number>((resolve) => client.on('goaway', (code) => resolve(code)));
    expect(await goaway).toBe(ERROR.NO_ERROR);
    client.close();
    const held = await Promise.all([1, 2].map(() => RawClient.connect(capped.address)));
    held.forEach((c) => c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Slow'))));
    await Promise.all(held.map((c) => c.until(() => c.frames.length > 0)));
    const [host, port] = [
      capped.address.slice(0, capped.address.lastIndexOf(':')),
      Number(capped.address.slice(capped.address.lastIndexOf(':') + 1)),
    ];
    const extra = net.connect(port, host);
    extra.on('error', () => {});
    await new Promise((r) => extra.once('close', r));
    held.forEach((c) => c.close());
  });
});

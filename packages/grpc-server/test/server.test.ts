/**
 * The gRPC server on both transports, called by real clients: grpc-js (its own HTTP/2
 * use of node:http2) and node:http2's client directly. Each call's answer must be its own: many
 * concurrent calls of random sizes on one connection, answers checked byte for byte.
 */
import * as http2 from 'node:http2';
import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startH2GrpcServer, type GrpcH2Server, type GrpcTransport, type Method } from '../src/server';
import { GrpcError, GrpcStatus } from '../src/status';
import { ERROR, FLAG, frame, FRAME, words } from '../src/h2/frames';
import { literalField } from '../src/h2/hpack';
import { frameMessage } from '../src/message-reader';
import { RawClient, requestHeaders } from './support/raw-h2';

const identity = { serialize: (b: Buffer) => b, deserialize: (b: Buffer) => b };
const def = (path: string, requestStream = false, responseStream = false) => ({
  path,
  requestStream,
  responseStream,
  requestSerialize: identity.serialize,
  requestDeserialize: identity.deserialize,
  responseSerialize: identity.serialize,
  responseDeserialize: identity.deserialize,
});
const Client = grpc.makeGenericClientConstructor(
  {
    Unary: def('/test.Echo/Unary'),
    Slow: def('/test.Echo/Slow'),
    Fail: def('/test.Echo/Fail'),
    Big: def('/test.Echo/Big'),
    Unreadable: def('/test.Echo/Unreadable'),
    Missing: def('/test.Echo/Missing'),
    Bidi: def('/test.Echo/Bidi', true, true),
    Watch: def('/test.Echo/Watch', false, true),
  },
  'Echo',
) as unknown as new (
  address: string,
  creds: grpc.ChannelCredentials,
  opts?: object,
) => Record<string, (...args: unknown[]) => unknown> & grpc.Client;

const LIMIT = 512 * 1024;
const BIG = randomBytes(1024 * 1024 + 17);

function methods(slowCalls: Set<() => void>): Map<string, Method> {
  return new Map<string, Method>([
    ['/test.Echo/Unary', { kind: 'unary', handle: (req) => Buffer.concat([Buffer.from('echo:'), req]) }],
    [
      '/test.Echo/Slow',
      { kind: 'unary', handle: (req) => new Promise<Buffer>((resolve) => slowCalls.add(() => resolve(req))) },
    ],
    [
      '/test.Echo/Fail',
      {
        kind: 'unary',
        handle: () => {
          throw new GrpcError(GrpcStatus.NOT_FOUND, 'nothing here, 100%');
        },
      },
    ],
    ['/test.Echo/Big', { kind: 'unary', handle: () => BIG }],
    [
      '/test.Echo/Unreadable',
      { kind: 'unary', handle: (req) => req, unreadable: (problem) => Buffer.from(`unreadable:${problem}`) },
    ],
    [
      '/test.Echo/Bidi',
      { kind: 'stream', open: (call) => ({ message: (m) => call.send(m), end: () => call.finish(), close: () => {} }) },
    ],
    [
      '/test.Echo/Watch',
      {
        kind: 'stream',
        open: (call) => ({ message: () => call.send(Buffer.from('hello')), end: () => {}, close: () => {} }),
      },
    ],
  ]);
}

function unary(
  client: InstanceType<typeof Client>,
  method: string,
  req: Buffer,
  opts: grpc.CallOptions = {},
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    (
      client[method] as (
        r: Buffer,
        m: grpc.Metadata,
        o: grpc.CallOptions,
        cb: (e: grpc.ServiceError | null, r?: Buffer) => void,
      ) => void
    )(req, new grpc.Metadata(), opts, (err, res) => (err ? reject(err) : resolve(res!)));
  });
}

describe.each<GrpcTransport>(['builtin', 'node'])('the %s transport', (transport) => {
  let server: GrpcH2Server;
  let client: InstanceType<typeof Client>;
  const slow = new Set<() => void>();
  const errors: unknown[] = [];

  beforeAll(async () => {
    server = await startH2GrpcServer('127.0.0.1:0', methods(slow), {
      maxReceiveMessageBytes: LIMIT,
      transport,
      onError: (e) => errors.push(e),
    });
    client = new Client(server.address, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': -1 });
  });
  afterAll(async () => {
    client.close();
    await server.drain(500);
  });

  test('answers 500 concurrent calls of random sizes on one connection, each with its own bytes', async () => {
    const requests = Array.from({ length: 500 }, (_, i) =>
      randomBytes(i % 5 === 0 ? (i * 977) % (LIMIT - 10) : i % 300),
    );
    const answers = await Promise.all(requests.map((r) => unary(client, 'Unary', r)));
    answers.forEach((a, i) =>
      expect(a.equals(Buffer.concat([Buffer.from('echo:'), requests[i]])), `call ${i}`).toBe(true),
    );
  });

  test('answers an unknown method UNIMPLEMENTED', async () => {
    await expect(unary(client, 'Missing', Buffer.from('x'))).rejects.toMatchObject({ code: grpc.status.UNIMPLEMENTED });
  });

  test("ends a call with a handler's GrpcError, its message intact", async () => {
    await expect(unary(client, 'Fail', Buffer.from('x'))).rejects.toMatchObject({
      code: grpc.status.NOT_FOUND,
      details: 'nothing here, 100%',
    });
  });

  test("sends a 1 MiB answer through the client's 64 KiB flow-control window", async () => {
    expect((await unary(client, 'Big', Buffer.alloc(0))).equals(BIG)).toBe(true);
  });

  test("refuses a message over the limit RESOURCE_EXHAUSTED, or with the method's own answer", async () => {
    const big = Buffer.alloc(LIMIT + 1);
    await expect(unary(client, 'Unary', big)).rejects.toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED });
    expect((await unary(client, 'Unreadable', big)).toString()).toBe('unreadable:too_large');
    // The connection goes on serving.
    expect((await unary(client, 'Unary', Buffer.from('after'))).toString()).toBe('echo:after');
  });

  test('echoes 200 messages on a bidirectional stream, then ends it OK when the client half-closes', async () => {
    const call = (client.Bidi as () => grpc.ClientDuplexStream<Buffer, Buffer>)();
    const got: string[] = [];
    const done = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.on('data', (m: Buffer) => got.push(m.toString()));
    for (let i = 0; i < 200; i++) call.write(Buffer.from(`m${i}`));
    call.end();
    expect((await done).code).toBe(grpc.status.OK);
    expect(got).toEqual(Array.from({ length: 200 }, (_, i) => `m${i}`));
  });

  test('a call the client cancels is dropped: its late answer goes nowhere and the server goes on', async () => {
    const pending = unary(client, 'Slow', Buffer.from('late'), { deadline: Date.now() + 100 });
    await expect(pending).rejects.toMatchObject({ code: grpc.status.DEADLINE_EXCEEDED });
    for (const answer of slow) answer();
    slow.clear();
    expect((await unary(client, 'Unary', Buffer.from('next'))).toString()).toBe('echo:next');
  });

  test('answers a request that is not gRPC with HTTP 415, and PINGs with their ACK', async () => {
    const session = http2.connect(`http://${server.address}`);
    const status = await new Promise<number>((resolve, reject) => {
      const req = session.request({ ':method': 'POST', ':path': '/test.Echo/Unary', 'content-type': 'text/plain' });
      req.on('response', (h) => resolve(Number(h[':status'])));
      req.on('error', reject);
      req.end('hello');
    });
    expect(status).toBe(415);
    const rtt = await new Promise<number>((resolve, reject) =>
      session.ping((err, ms) => (err ? reject(err) : resolve(ms))),
    );
    expect(rtt).toBeGreaterThanOrEqual(0);
    session.close();
  });

  test('answers a client whose HPACK table size is 0 and whose window is 100 octets', async () => {
    const session = http2.connect(`http://${server.address}`, {
      settings: { headerTableSize: 0, initialWindowSize: 100 },
    });
    const body = await new Promise<Buffer>((resolve, reject) => {
      const req = session.request({
        ':method': 'POST',
        ':path': '/test.Echo/Big',
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('trailers', (t) =>
        t['grpc-status'] === '0' ? resolve(Buffer.concat(chunks)) : reject(new Error(String(t['grpc-status']))),
      );
      req.on('error', reject);
      req.end(Buffer.from([0, 0, 0, 0, 0]));
    });
    expect(body.subarray(5).equals(BIG)).toBe(true);
    session.close();
  });

  test('a drain answers calls in flight, ends streams UNAVAILABLE and refuses new connections', async () => {
    const s2 = await startH2GrpcServer('127.0.0.1:0', methods(slow), { maxReceiveMessageBytes: LIMIT, transport });
    const c2 = new Client(s2.address, grpc.credentials.createInsecure());
    const watch = (c2.Watch as (r: Buffer) => grpc.ClientReadableStream<Buffer>)(Buffer.from('w'));
    const watchStatus = new Promise<grpc.StatusObject>((resolve) => watch.on('status', resolve));
    watch.on('error', () => {}); // the status above is what is checked
    await new Promise((r) => watch.once('data', r));
    const inFlight = unary(c2, 'Slow', Buffer.from('in flight'));
    while (slow.size === 0) await new Promise((r) => setTimeout(r, 5));
    const drained = s2.drain(5000);
    await new Promise((r) => setTimeout(r, 50));
    for (const answer of slow) answer();
    slow.clear();
    expect((await inFlight).toString()).toBe('in flight');
    expect((await watchStatus).code).toBe(grpc.status.UNAVAILABLE);
    const started = Date.now();
    await drained;
    expect(Date.now() - started).toBeLessThan(4000);
    await expect(unary(c2, 'Unary', Buffer.from('x'), { deadline: Date.now() + 500 })).rejects.toBeTruthy();
    c2.close();
  });

  test('a request and its reset in one read (Envoy timing out, a client going away) is dropped, and the server goes on', async () => {
    const c = await RawClient.connect(server.address);
    const text = Buffer.concat([
      literalField(2, 'POST'),
      literalField(6, 'http'),
      literalField(4, '/test.Echo/Unary'),
      literalField(1, 'x'),
      literalField(31, 'text/plain'),
    ]);
    c.send(
      Buffer.concat([
        frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Unary')),
        frame(FRAME.DATA, FLAG.END_STREAM, 1, frameMessage(Buffer.from('x'))),
        frame(FRAME.RST_STREAM, 0, 1, words(ERROR.NO_ERROR)),
        frame(FRAME.HEADERS, FLAG.END_HEADERS, 3, requestHeaders('/test.Echo/Missing')),
        frame(FRAME.RST_STREAM, 0, 3, words(ERROR.CANCEL)),
        frame(FRAME.HEADERS, FLAG.END_HEADERS, 5, requestHeaders('/test.Echo/Slow')),
        frame(FRAME.DATA, FLAG.END_STREAM, 5, frameMessage(Buffer.from('y'))),
        frame(FRAME.RST_STREAM, 0, 5, words(ERROR.NO_ERROR)),
        frame(FRAME.HEADERS, FLAG.END_HEADERS, 7, text),
        frame(FRAME.RST_STREAM, 0, 7, words(ERROR.NO_ERROR)),
        frame(FRAME.HEADERS, FLAG.END_HEADERS, 9, requestHeaders('/test.Echo/Unary')),
        frame(FRAME.DATA, 0, 9, frameMessage(Buffer.from('z')).subarray(0, 3)),
        frame(FRAME.RST_STREAM, 0, 9, words(ERROR.CANCEL)),
      ]),
    );
    await new Promise((r) => setTimeout(r, 100));
    for (const answer of slow) answer();
    slow.clear();
    await new Promise((r) => setTimeout(r, 50));
    expect((await unary(client, 'Unary', Buffer.from('after'))).toString()).toBe('echo:after');
    c.close();
  });

  test('no connection-level error was reported while well-behaved clients talked to it', () => {
    expect(errors).toEqual([]);
  });
});

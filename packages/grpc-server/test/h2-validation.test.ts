/**
 * The builtin transport's request validation (RFC 9113 §8.2-8.3), its answers to frames on closed
 * or reused streams (§5.1, §5.1.1), priority self-dependency, and the flow-controlled answer to a
 * request that is not gRPC, frame by frame. A malformed request resets its own stream only
 * (PROTOCOL_ERROR) and the next request on the connection is answered; a frame the client could
 * only send by breaking the protocol ends the connection with the right GOAWAY.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ERROR, FLAG, frame, FRAME, PREFACE, words } from '../src/h2/frames';
import { literalField } from '../src/h2/hpack';
import { frameMessage } from '../src/message-reader';
import { startH2GrpcServer, type GrpcH2Server, type Method } from '../src/server';
import { RawClient, requestHeaders } from './support/raw-h2';

const echo: Method = { kind: 'unary', handle: (req) => Buffer.concat([Buffer.from('echo:'), req]) };
const slow: Method = { kind: 'unary', handle: () => new Promise<Buffer>(() => {}) };
let server: GrpcH2Server;

beforeAll(async () => {
  server = await startH2GrpcServer(
    '127.0.0.1:0',
    new Map([
      ['/test.Echo/Unary', echo],
      ['/test.Echo/Slow', slow],
    ]),
    { maxReceiveMessageBytes: 1 << 20 },
  );
});
afterAll(() => server.drain(500));

/** A header block of literal fields, in this order (a name that is a number is a static-table index). */
function block(...fields: [string | number, string][]): Buffer {
  return Buffer.concat(fields.map(([n, v]) => literalField(n, v)));
}

const METHOD = 2; // static table indexes of the names
const SCHEME = 6;
const PATH = 4;
const AUTHORITY = 1;
const CONTENT_TYPE = 31;
const grpcRequest = (...extra: [string | number, string][]): [string | number, string][] => [
  [METHOD, 'POST'],
  [SCHEME, 'http'],
  [PATH, '/test.Echo/Unary'],
  [AUTHORITY, 'x'],
  [CONTENT_TYPE, 'application/grpc'],
  ...extra,
];

function rstCode(c: RawClient, id: number): number | undefined {
  const f = c.frames.find((x) => x.type === FRAME.RST_STREAM && x.id === id);
  return f?.payload.readUInt32BE(0);
}

/** The connection still answers: a valid call on stream `id`. */
async function stillAnswers(c: RawClient, id: number): Promise<void> {
  c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, id, requestHeaders()));
  c.send(frame(FRAME.DATA, FLAG.END_STREAM, id, frameMessage(Buffer.from('after'))));
  await c.until(() => c.answer(id).ended);
  expect(c.answer(id).data.subarray(5).toString()).toBe('echo:after');
  expect(c.goAway()).toBeUndefined();
}

describe('a malformed request (RFC 9113 §8.1.1) resets its stream with PROTOCOL_ERROR; the connection goes on', () => {
  test.each<[string, [string | number, string][]]>([
    ['an upper-case field name', grpcRequest(['X-Upper', '1'])],
    ['a field name with a space', grpcRequest(['x bad', '1'])],
    ['a colon inside a regular field name', grpcRequest(['x:y', '1'])],
    ['a value with CR LF', grpcRequest(['x-v', 'a\r\nb: c'])],
    ['a value with NUL', grpcRequest(['x-v', 'a\0b'])],
    ['a value with a leading space', grpcRequest(['x-v', ' a'])],
    ['an unknown pseudo-header field', grpcRequest([':foo', 'bar'])],
    ['a response pseudo-header field (:status)', [[':status', '200'], ...grpcRequest()]],
    [
      'a pseudo-header field after a regular one',
      [
        [METHOD, 'POST'],
        [SCHEME, 'http'],
        [CONTENT_TYPE, 'application/grpc'],
        [PATH, '/test.Echo/Unary'],
      ],
    ],
    ['connection: keep-alive', grpcRequest(['connection', 'keep-alive'])],
    ['keep-alive', grpcRequest(['keep-alive', '5'])],
    ['proxy-connection', grpcRequest(['proxy-connection', 'close'])],
    ['transfer-encoding: chunked', grpcRequest(['transfer-encoding', 'chunked'])],
    ['upgrade', grpcRequest(['upgrade', 'h2c'])],
    ['te: gzip', grpcRequest(['te', 'gzip'])],
    [
      'an empty :path',
      [
        [METHOD, 'POST'],
        [SCHEME, 'http'],
        [PATH, ''],
        [CONTENT_TYPE, 'application/grpc'],
      ],
    ],
    [
      'no :method',
      [
        [SCHEME, 'http'],
        [PATH, '/test.Echo/Unary'],
        [CONTENT_TYPE, 'application/grpc'],
      ],
    ],
    [
      'no :scheme',
      [
        [METHOD, 'POST'],
        [PATH, '/test.Echo/Unary'],
        [CONTENT_TYPE, 'application/grpc'],
      ],
    ],
    [
      'no :path',
      [
        [METHOD, 'POST'],
        [SCHEME, 'http'],
        [CONTENT_TYPE, 'application/grpc'],
      ],
    ],
    [
      'two :path fields',
      [
        [METHOD, 'POST'],
        [SCHEME, 'http'],
        [PATH, '/test.Echo/Slow'],
        [PATH, '/test.Echo/Unary'],
        [CONTENT_TYPE, 'application/grpc'],
      ],
    ],
    [
      'two :method fields',
      [
        [METHOD, 'POST'],
        [METHOD, 'GET'],
        [SCHEME, 'http'],
        [PATH, '/test.Echo/Unary'],
        [CONTENT_TYPE, 'application/grpc'],
      ],
    ],
    [
      'two :scheme fields',
      [
        [METHOD, 'POST'],
        [SCHEME, 'http'],
        [SCHEME, 'https'],
        [PATH, '/test.Echo/Unary'],
        [CONTENT_TYPE, 'application/grpc'],
      ],
    ],
    [
      'a CONNECT with :path',
      [
        [METHOD, 'CONNECT'],
        [AUTHORITY, 'x:1'],
        [PATH, '/'],
      ],
    ],
    ['a content-length that is not a number', grpcRequest(['content-length', '1e3'])],
  ])('%s', async (_what, fields) => {
    const c = await RawClient.connect(server.address);
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, block(...fields)));
    c.send(frame(FRAME.DATA, FLAG.END_STREAM, 1, frameMessage(Buffer.from('x'))));
    await c.until(() => rstCode(c, 1) !== undefined);
    expect(rstCode(c, 1)).toBe(ERROR.PROTOCOL_ERROR);
    expect(c.frames.some((f) => f.type === FRAME.HEADERS && f.id === 1)).toBe(false);
    await stillAnswers(c, 3);
    c.close();
  });

  test('a field checked once is remembered only as it was: the same place with another value is checked again', async () => {
    const c = await RawClient.connect(server.address);
    for (const [id, value, ok] of [
      [1, 'fine', true],
      [3, 'fine', true],
      [5, 'not\r\nfine', false],
      [7, 'fine', true],
      [9, ' fine', false],
    ] as const) {
      c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, id, block(...grpcRequest(['x-v', value]))));
      c.send(frame(FRAME.DATA, FLAG.END_STREAM, id, frameMessage(Buffer.from(`s${id}`))));
      await c.until(() => c.answer(id).ended || rstCode(c, id) !== undefined);
      if (ok) expect(c.answer(id).data.subarray(5).toString()).toBe(`echo:s${id}`);
      else expect(rstCode(c, id)).toBe(ERROR.PROTOCOL_ERROR);
    }
    c.close();
  });

  test('a well-formed request with te: trailers and a matching content-length is answered', async () => {
    const c = await RawClient.connect(server.address);
    const body = frameMessage(Buffer.from('counted'));
    c.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS,
        1,
        block(...grpcRequest(['te', 'trailers'], ['content-length', String(body.length)])),
      ),
    );
    c.send(frame(FRAME.DATA, 0, 1, body.subarray(0, 4)));
    c.send(frame(FRAME.DATA, FLAG.END_STREAM, 1, body.subarray(4)));
    await c.until(() => c.answer(1).ended);
    expect(c.answer(1).data.subarray(5).toString()).toBe('echo:counted');
    c.close();
  });

  test.each<[string, (body: Buffer) => Buffer[]]>([
    [
      'DATA beyond the content-length',
      (body) => [frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.concat([body, Buffer.from('more')]))],
    ],
    ['DATA short of the content-length', (body) => [frame(FRAME.DATA, FLAG.END_STREAM, 1, body.subarray(1))]],
    [
      'DATA over the content-length in its second frame',
      (body) => [frame(FRAME.DATA, 0, 1, body), frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from('x'))],
    ],
  ])('%s', async (_what, data) => {
    const c = await RawClient.connect(server.address);
    const body = frameMessage(Buffer.from('counted'));
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, block(...grpcRequest(['content-length', String(body.length)]))));
    for (const f of data(body)) c.send(f);
    await c.until(() => rstCode(c, 1) !== undefined);
    expect(rstCode(c, 1)).toBe(ERROR.PROTOCOL_ERROR);
    await stillAnswers(c, 3);
    c.close();
  });

  test('trailers with a pseudo-header field', async () => {
    const c = await RawClient.connect(server.address);
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, block(...grpcRequest())));
    c.send(frame(FRAME.DATA, 0, 1, frameMessage(Buffer.from('x'))));
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, block([PATH, '/again'])));
    await c.until(() => rstCode(c, 1) !== undefined);
    expect(rstCode(c, 1)).toBe(ERROR.PROTOCOL_ERROR);
    await stillAnswers(c, 3);
    c.close();
  });

  test('HEADERS whose priority makes the stream depend on itself (RFC 7540 §5.3.1)', async () => {
    const c = await RawClient.connect(server.address);
    c.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS | FLAG.END_STREAM | FLAG.PRIORITY,
        1,
        Buffer.concat([words(1), Buffer.from([15]), requestHeaders()]),
      ),
    );
    await c.until(() => rstCode(c, 1) !== undefined);
    expect(rstCode(c, 1)).toBe(ERROR.PROTOCOL_ERROR);
    await stillAnswers(c, 3);
    c.close();
  });

  test('PRIORITY making an open stream depend on itself resets that stream', async () => {
    const c = await RawClient.connect(server.address);
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Slow')));
    c.send(frame(FRAME.PRIORITY, 0, 1, Buffer.concat([words(1), Buffer.from([15])])));
    await c.until(() => rstCode(c, 1) !== undefined);
    expect(rstCode(c, 1)).toBe(ERROR.PROTOCOL_ERROR);
    await stillAnswers(c, 3);
    c.close();
  });
});

describe('frames on closed or reused streams (RFC 9113 §5.1)', () => {
  /** A stream 1 answered and closed at both ends. */
  async function closedStream(): Promise<RawClient> {
    const c = await RawClient.connect(server.address);
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders()));
    c.send(frame(FRAME.DATA, FLAG.END_STREAM, 1, frameMessage(Buffer.from('one'))));
    await c.until(() => c.answer(1).ended);
    return c;
  }

  test.each<[string, () => Promise<RawClient>, () => Buffer, number]>([
    [
      'DATA on a stream both ends closed: STREAM_CLOSED',
      closedStream,
      () => frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from('late')),
      ERROR.STREAM_CLOSED,
    ],
    [
      'HEADERS on a stream both ends closed: STREAM_CLOSED',
      closedStream,
      () => frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, requestHeaders()),
      ERROR.STREAM_CLOSED,
    ],
    [
      'DATA on a stream the client reset: STREAM_CLOSED',
      async () => {
        const c = await RawClient.connect(server.address);
        c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Slow')));
        c.send(frame(FRAME.RST_STREAM, 0, 1, words(ERROR.CANCEL)));
        return c;
      },
      () => frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from('late')),
      ERROR.STREAM_CLOSED,
    ],
    [
      'HEADERS on a lower stream id never opened: PROTOCOL_ERROR (§5.1.1)',
      async () => {
        const c = await RawClient.connect(server.address);
        c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 5, requestHeaders('/test.Echo/Slow')));
        return c;
      },
      () => frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 3, requestHeaders()),
      ERROR.PROTOCOL_ERROR,
    ],
    [
      'a second HEADERS without END_STREAM (§8.1): PROTOCOL_ERROR',
      async () => {
        const c = await RawClient.connect(server.address);
        c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Slow')));
        return c;
      },
      () => frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders()),
      ERROR.PROTOCOL_ERROR,
    ],
  ])('%s', async (_what, setUp, bytes, code) => {
    const c = await setUp();
    c.send(bytes());
    await c.until(() => c.goAway() !== undefined && c.closed);
    expect(c.goAway()!.code).toBe(code);
  });

  test('WINDOW_UPDATE, RST_STREAM and PRIORITY on a closed stream are ignored', async () => {
    const c = await closedStream();
    c.send(frame(FRAME.WINDOW_UPDATE, 0, 1, words(100)));
    c.send(frame(FRAME.RST_STREAM, 0, 1, words(ERROR.CANCEL)));
    c.send(frame(FRAME.PRIORITY, 0, 1, Buffer.concat([words(0), Buffer.from([15])])));
    await stillAnswers(c, 3);
    c.close();
  });

  test('DATA and trailers of a stream the server reset (the client had not seen it yet) are dropped', async () => {
    const c = await RawClient.connect(server.address);
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders()));
    c.send(frame(FRAME.DATA, 0, 1, Buffer.from([1, 0, 0, 0, 1]))); // compressed: answered at once, then reset
    await c.until(() => rstCode(c, 1) !== undefined);
    expect(rstCode(c, 1)).toBe(ERROR.NO_ERROR);
    c.send(frame(FRAME.DATA, 0, 1, Buffer.alloc(10)));
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, block(['x-trailer', '1'])));
    await stillAnswers(c, 3);
    c.close();
  });
});

describe('a request that is not gRPC', () => {
  test('gets its 415 body as flow control allows, END_STREAM on the last DATA, and the rest of the request is read to its end', async () => {
    const c = await RawClient.connect(server.address, false);
    c.send(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0, Buffer.from([0, 4, 0, 0, 0, 10]))]));
    c.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS,
        1,
        block([METHOD, 'POST'], [SCHEME, 'http'], [PATH, '/'], ['content-type', 'text/plain']),
      ),
    );
    await c.until(() => c.answer(1).data.length === 10);
    expect(c.answer(1)).toMatchObject({ ended: false, fields: { ':status': '415' } });
    let got = 10;
    while (!c.answer(1).ended) {
      c.send(frame(FRAME.WINDOW_UPDATE, 0, 1, words(10)));
      got += 10;
      await c.until(() => c.answer(1).ended || c.answer(1).data.length >= Math.min(got, 50));
    }
    expect(c.answer(1).data.toString()).toBe('gRPC requests need content-type: application/grpc\n');
    expect(c.frames.filter((f) => f.id === 1 && f.type === FRAME.DATA).every((f) => f.payload.length <= 10)).toBe(true);
    // The answer did not depend on the body: the stream stays open (not reset) until the request ends.
    c.send(frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from('the body nobody reads')));
    c.send(frame(FRAME.WINDOW_UPDATE, 0, 0, words(1 << 20)));
    c.send(frame(FRAME.SETTINGS, 0, 0, Buffer.from([0, 4, 0, 1, 0, 0])));
    await stillAnswers(c, 3);
    expect(rstCode(c, 1)).toBeUndefined();
    c.close();
  });
});

/**
 * The gRPC port's connection limits over TLS, and its shared secret read through the builtin
 * transport's request validation (the port's TLS and authentication, docs/security.md, with the h2 hardening):
 * - the connection cap counts TLS handshakes in progress (a flood of sockets that never finish one
 *   holds no more than the cap), on both transports; the idle timeout closes a TLS connection as
 *   it does a TCP one (a TLS client that does not read: h2-limits.test.ts);
 * - `authorization` is one of the fields request-head.ts keeps: a call with the secret is served,
 *   the same header block again (remembered, not re-checked) too, the same place with another
 *   value is refused; a call without it is answered at once, before any of its body comes; a
 *   malformed block is a malformed request whatever its authorization; of two `authorization`
 *   fields the first counts, on either transport (node:http2 keeps the first).
 */
import { readFileSync } from 'node:fs';
import * as net from 'node:net';
import type * as tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ERROR, FLAG, frame, FRAME } from '../src/h2/frames';
import { literalField } from '../src/h2/hpack';
import { frameMessage } from '../src/message-reader';
import {
  startH2GrpcServer,
  type GrpcH2Server,
  type GrpcServerOptions,
  type Method,
  type TlsSettings,
} from '../src/server';
import { pingPong, RawClient, requestHeaders } from './support/raw-h2';
import { makeTestCerts, tlsOptions } from '../../../test/support/test-certs';

const echo: Method = { kind: 'unary', handle: (req) => Buffer.concat([Buffer.from('echo:'), req]) };
const slow: Method = { kind: 'unary', handle: () => new Promise<Buffer>(() => {}) };
const methods = new Map([
  ['/test.Echo/Unary', echo],
  ['/test.Echo/Slow', slow],
  ['/test.Echo/Check', echo],
]);
const SECRET = 'Bearer h2-tls-auth-secret-0123456789abcdef';

let serverTls: TlsSettings;
/** What a client with a certificate of the client CA connects with. */
let client: tls.ConnectionOptions;
const servers: GrpcH2Server[] = [];

beforeAll(() => {
  const certs = makeTestCerts();
  serverTls = {
    cert: readFileSync(certs.serverCert),
    key: readFileSync(certs.serverKey),
    clientCa: readFileSync(certs.clientCa),
  };
  client = tlsOptions(certs).client;
});
afterAll(() => Promise.all(servers.map((s) => s.drain(500))));

async function start(opts: Omit<GrpcServerOptions, 'maxReceiveMessageBytes'>): Promise<GrpcH2Server> {
  const s = await startH2GrpcServer('127.0.0.1:0', methods, { maxReceiveMessageBytes: 1 << 20, ...opts });
  servers.push(s);
  return s;
}

const hostPort = (address: string): [string, number] => [
  address.slice(0, address.lastIndexOf(':')),
  Number(address.slice(address.lastIndexOf(':') + 1)),
];

/** A TCP connection that never starts its TLS handshake (the handshake timeout is 10 s). */
async function silent(address: string): Promise<net.Socket> {
  const [host, port] = hostPort(address);
  const socket = net.connect(port, host);
  socket.on('error', () => {});
  await new Promise((r) => socket.once('connect', r));
  return socket;
}

/** A call on stream `id`: its header block (`authorization` fields after the usual ones), then its message. */
function call(id: number, authorizations: string[], path = '/test.Echo/Unary', message = 'hi'): Buffer {
  const block = Buffer.concat([requestHeaders(path), ...authorizations.map((a) => literalField('authorization', a))]);
  return Buffer.concat([
    frame(FRAME.HEADERS, FLAG.END_HEADERS, id, block),
    frame(FRAME.DATA, FLAG.END_STREAM, id, frameMessage(Buffer.from(message))),
  ]);
}

async function answered(c: RawClient, id: number): Promise<{ status: string | undefined; text: string }> {
  await c.until(() => c.answer(id).ended || c.frames.some((f) => f.type === FRAME.RST_STREAM && f.id === id), 20_000);
  const a = c.answer(id);
  return { status: a.fields['grpc-status'], text: a.data.subarray(5).toString() };
}

for (const transport of ['builtin', 'node'] as const) {
  describe(`over TLS on the ${transport} transport`, () => {
    test('the connection cap counts handshakes in progress: past it a TLS client gets no connection, and one is served once they go', async () => {
      const errors: Error[] = [];
      const server = await start({
        transport,
        tls: serverTls,
        maxConnections: 2,
        onError: (e) => errors.push(e as Error),
      });
      const held = await Promise.all([silent(server.address), silent(server.address)]);
      await expect(RawClient.connect(server.address, true, client)).rejects.toThrow();
      expect(errors.map((e) => e.message)).toContainEqual(expect.stringMatching(/^a connection refused: 2 are open/));
      held.forEach((s) => s.destroy());
      // The server sees them close in its own time: a client is served once it has.
      let c: RawClient | undefined;
      const end = Date.now() + 20_000;
      while (c === undefined && Date.now() < end)
        c = await RawClient.connect(server.address, true, client).catch(() => undefined);
      expect(c).toBeDefined();
      c!.send(call(1, []));
      expect(await answered(c!, 1)).toEqual({ status: '0', text: 'echo:hi' });
      c!.close();
    });

    test('a TLS connection with no stream for the idle timeout is closed with GOAWAY NO_ERROR; one with a stream open is kept', async () => {
      const server = await start({ transport, tls: serverTls, idleTimeoutMs: 400 });
      const idle = await RawClient.connect(server.address, true, client);
      const busy = await RawClient.connect(server.address, true, client);
      busy.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Slow')));
      await idle.until(() => idle.closed, 20_000);
      expect(idle.goAway()?.code).toBe(ERROR.NO_ERROR);
      expect(busy.goAway()).toBeUndefined();
      await pingPong(busy);
      busy.close();
    });

    test('of two authorization fields the first counts', async () => {
      const server = await start({ transport, tls: serverTls, authorize: (a) => a === SECRET });
      const c = await RawClient.connect(server.address, true, client);
      c.send(call(1, [SECRET, 'Bearer wrong']));
      expect(await answered(c, 1)).toEqual({ status: '0', text: 'echo:hi' });
      c.send(call(3, ['Bearer wrong', SECRET]));
      expect((await answered(c, 3)).status).toBe('16');
      c.close();
    });
  });
}

describe("the port's secret through the builtin transport's request validation", () => {
  let server: GrpcH2Server;
  beforeAll(async () => {
    server = await start({
      tls: serverTls,
      authorize: (a) => a === SECRET,
      unauthenticated: new Map([['/test.Echo/Check', () => Buffer.from('denied')]]),
    });
  });

  test('a call with the secret is served, the same header block again too; the same place with another value is refused', async () => {
    const c = await RawClient.connect(server.address, true, client);
    c.send(call(1, [SECRET]));
    expect(await answered(c, 1)).toEqual({ status: '0', text: 'echo:hi' });
    c.send(call(3, [SECRET]));
    expect(await answered(c, 3)).toEqual({ status: '0', text: 'echo:hi' });
    c.send(call(5, [`${SECRET}x`]));
    expect((await answered(c, 5)).status).toBe('16');
    c.send(call(7, [SECRET]));
    expect((await answered(c, 7)).status).toBe('0');
    c.close();
  });

  test("a call without it is answered before any of its body is sent: UNAUTHENTICATED, or the path's own denial", async () => {
    const c = await RawClient.connect(server.address, true, client);
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestHeaders('/test.Echo/Unary')));
    c.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS,
        3,
        Buffer.concat([requestHeaders('/test.Echo/Check'), literalField('authorization', 'Bearer wrong')]),
      ),
    );
    const refused = await answered(c, 1);
    expect(refused.status).toBe('16');
    expect(c.answer(1).fields['grpc-message']).toMatch(/gRPC secret/);
    expect(await answered(c, 3)).toEqual({ status: '0', text: 'denied' });
    c.close();
  });

  test('a malformed header block is a malformed request whatever its authorization: its stream reset, never a call', async () => {
    const c = await RawClient.connect(server.address, true, client);
    // Upper case in the name; a trailing space in the value (the secret with one appended).
    c.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS | FLAG.END_STREAM,
        1,
        Buffer.concat([requestHeaders(), literalField('Authorization', SECRET)]),
      ),
    );
    c.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS | FLAG.END_STREAM,
        3,
        Buffer.concat([requestHeaders(), literalField('authorization', `${SECRET} `)]),
      ),
    );
    await c.until(() => c.frames.filter((f) => f.type === FRAME.RST_STREAM).length === 2, 20_000);
    for (const id of [1, 3])
      expect(c.frames.find((f) => f.type === FRAME.RST_STREAM && f.id === id)?.payload.readUInt32BE(0)).toBe(
        ERROR.PROTOCOL_ERROR,
      );
    expect(c.frames.some((f) => f.type === FRAME.HEADERS)).toBe(false);
    c.send(call(5, [SECRET]));
    expect(await answered(c, 5)).toEqual({ status: '0', text: 'echo:hi' });
    c.close();
  });
});

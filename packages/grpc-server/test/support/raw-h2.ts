/**
 * A hand-driven HTTP/2 client for protocol tests: it sends exactly the bytes it is told, and parses
 * every frame it receives (decoding header blocks with modelgate's own HPACK decoder, whose
 * correctness test/hpack.test.ts establishes against RFC 7541 and nghttp2).
 */
import * as net from 'node:net';
import * as tls from 'node:tls';
import { FLAG, frame, FRAME, PREFACE } from '../../src/h2/frames';
import { HpackDecoder, literalField } from '../../src/h2/hpack';

export interface Frame {
  type: number;
  flags: number;
  id: number;
  payload: Buffer;
}

/** A hand-driven HTTP/2 client: sends what it is told, parses every frame it gets. */
export class RawClient {
  readonly frames: Frame[] = [];
  closed = false;
  text = '';
  #buf = Buffer.alloc(0);
  readonly #decoder = new HpackDecoder();
  private constructor(readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => {
      if (this.text.length < 65_536) this.text += d.toString('latin1');
      this.#buf = Buffer.concat([this.#buf, d]);
      while (this.#buf.length >= 9) {
        const len = this.#buf.readUIntBE(0, 3);
        if (this.#buf.length < 9 + len) break;
        this.frames.push({
          type: this.#buf[3],
          flags: this.#buf[4],
          id: this.#buf.readUInt32BE(5) & 0x7fffffff,
          payload: this.#buf.subarray(9, 9 + len),
        });
        this.#buf = this.#buf.subarray(9 + len);
      }
    });
    socket.on('close', () => (this.closed = true));
    socket.on('error', () => {});
  }

  /** With `secure`, over TLS (ALPN h2) once the handshake is done; a refused handshake rejects. */
  static async connect(address: string, preface = true, secure?: tls.ConnectionOptions): Promise<RawClient> {
    const [host, port] = [
      address.slice(0, address.lastIndexOf(':')),
      Number(address.slice(address.lastIndexOf(':') + 1)),
    ];
    const socket = secure ? tls.connect({ ...secure, port, host, ALPNProtocols: ['h2'] }) : net.connect(port, host);
    await new Promise((resolve, reject) => {
      socket.once(secure ? 'secureConnect' : 'connect', resolve);
      socket.once('error', reject);
      socket.once('close', () => reject(new Error('closed before connecting')));
    });
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

/** A PING, and its ACK waited for: the server has read everything sent before it. */
export async function pingPong(c: RawClient): Promise<void> {
  const acks = (): number => c.frames.filter((f) => f.type === FRAME.PING && f.flags === FLAG.ACK).length;
  const before = acks();
  c.send(frame(FRAME.PING, 0, 0, Buffer.from('are-you?')));
  await c.until(() => acks() > before, 20_000);
}

export function requestHeaders(path = '/test.Echo/Unary'): Buffer {
  return Buffer.concat([
    literalField(2, 'POST'),
    literalField(6, 'http'),
    literalField(4, path),
    literalField(1, 'x'),
    literalField(31, 'application/grpc'),
    literalField('te', 'trailers'),
  ]);
}

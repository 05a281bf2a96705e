/**
 * Unary calls on one connection: a client writes pre-encoded requests (HEADERS + DATA, 64 streams at
 * a time) and counts the answers' trailers; the server echoes a 100-byte message. The client runs in
 * the same process and does the same work for every server measured, so comparing two servers (this
 * package and another build of it, `--before`) in alternating rounds shows their difference.
 *
 * Usage (after the root's `npm run build:bench`):
 *   node dist/packages/grpc-server/bench/unary.bench.js [--before=path/to/server.js] [--rounds=N]
 */
import * as net from 'node:net';
import { FLAG, frame, FRAME, HEADER_BYTES, PREFACE, SETTING, words } from '../src/h2/frames';
import { literalField } from '../src/h2/hpack';
import { frameMessage } from '../src/message-reader';
import { startH2GrpcServer, type GrpcTransport } from '../src/server';

/** What a bench needs of a server build: this package's `startH2GrpcServer` or an older one. */
export type StartServer = typeof startH2GrpcServer;

export interface UnaryBench {
  readonly transport: GrpcTransport;
  readonly callsPerRound: number;
  readonly rounds: number;
  /** Median over rounds of wall time per call, in µs (client and server in this process). */
  readonly medianUsPerCall: number;
  /**
   * Median over rounds of this process's CPU time (user + system) per call, in µs: client and
   * server; unlike wall time, not lengthened by other processes on a shared machine.
   */
  readonly medianCpuUsPerCall: number;
}

const PATH = '/bench.Echo/Call';
const BATCH = 64;
const MESSAGE = frameMessage(Buffer.alloc(100, 0x61));
const HEADERS = Buffer.concat([
  literalField(2, 'POST'),
  literalField(6, 'http'),
  literalField(4, PATH),
  literalField(1, 'bench'),
  literalField(31, 'application/grpc'),
  literalField('te', 'trailers'),
]);

/** DATA frames stay within the default SETTINGS_MAX_FRAME_SIZE. */
const MAX_FRAME = 16_384;

/** One batch of `size` requests carrying `message` on streams first, first + 2, ...: one buffer, one write. */
function batch(first: number, message = MESSAGE, size = BATCH): Buffer {
  const parts: Buffer[] = [];
  for (let k = 0; k < size; k++) {
    const id = first + 2 * k;
    parts.push(frame(FRAME.HEADERS, FLAG.END_HEADERS, id, HEADERS));
    for (let at = 0; at < message.length; at += MAX_FRAME) {
      const last = at + MAX_FRAME >= message.length;
      parts.push(frame(FRAME.DATA, last ? FLAG.END_STREAM : 0, id, message.subarray(at, at + MAX_FRAME)));
    }
  }
  return Buffer.concat(parts);
}

/** A connection that sends batches and resolves each when all its answers' trailers are in. */
class Client {
  #buf: Buffer = Buffer.alloc(0);
  #pending = 0;
  #done: (() => void) | undefined;
  #next = 1;
  private constructor(
    private readonly socket: net.Socket,
    private readonly message: Buffer,
    private readonly batchSize: number,
  ) {
    socket.setNoDelay(true);
    socket.on('data', (d: Buffer) => this.#read(d));
  }

  static async connect(address: string, message = MESSAGE, batchSize = BATCH): Promise<Client> {
    const colon = address.lastIndexOf(':');
    const socket = net.connect(Number(address.slice(colon + 1)), address.slice(0, colon));
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    // A large window for every stream and for the connection: the answers never wait for one.
    socket.write(
      Buffer.concat([
        PREFACE,
        frame(FRAME.SETTINGS, 0, 0, Buffer.concat([Buffer.from([0, SETTING.INITIAL_WINDOW_SIZE]), words(2 ** 30)])),
        frame(FRAME.WINDOW_UPDATE, 0, 0, words(2 ** 30)),
      ]),
    );
    return new Client(socket, message, batchSize);
  }

  #read(d: Buffer): void {
    this.#buf = this.#buf.length ? Buffer.concat([this.#buf, d]) : d;
    let at = 0;
    while (this.#buf.length - at >= HEADER_BYTES) {
      const length = this.#buf.readUIntBE(at, 3);
      if (this.#buf.length - at < HEADER_BYTES + length) break;
      const type = this.#buf[at + 3],
        flags = this.#buf[at + 4];
      if (type === FRAME.SETTINGS && (flags & FLAG.ACK) === 0) this.socket.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
      if (type === FRAME.HEADERS && (flags & FLAG.END_STREAM) !== 0 && --this.#pending === 0) this.#done?.();
      at += HEADER_BYTES + length;
    }
    this.#buf = this.#buf.subarray(at);
  }

  /** Sends `calls` calls (a multiple of the batch size), a batch at a time. */
  async run(calls: number): Promise<void> {
    for (let sent = 0; sent < calls; sent += this.batchSize) {
      const bytes = batch(this.#next, this.message, this.batchSize);
      this.#next += 2 * this.batchSize;
      this.#pending = this.batchSize;
      await new Promise<void>((resolve) => {
        this.#done = resolve;
        this.socket.write(bytes);
      });
    }
  }

  close(): void {
    this.socket.destroy();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/**
 * Each server build's median µs per call, measured in alternating rounds (one connection per
 * build and transport, warmed up first).
 */
export async function benchUnary(
  builds: ReadonlyMap<string, StartServer>,
  transport: GrpcTransport,
  rounds = 15,
  callsPerRound = 64 * 60,
): Promise<Map<string, UnaryBench>> {
  const running = [];
  for (const [name, start] of builds) {
    const server = await start(
      '127.0.0.1:0',
      new Map([[PATH, { kind: 'unary', handle: (request: Buffer) => request }]]),
      { maxReceiveMessageBytes: 4 << 20, transport },
    );
    const client = await Client.connect(server.address);
    await client.run(callsPerRound); // warm-up
    running.push({ name, server, client, times: [] as number[], cpu: [] as number[] });
  }
  return measureRounds(running, rounds, callsPerRound, transport);
}

interface Running {
  readonly name: string;
  readonly server: { drain(ms: number): Promise<unknown> };
  readonly client: { run(calls: number): Promise<unknown>; close(): void };
  readonly times: number[];
  readonly cpu: number[];
}

/**
 * Runs `rounds` rounds of `callsPerRound` calls on each server, each going first in every other round
 * so that none gains from its place, then closes them: the median wall and CPU time per call of each.
 */
async function measureRounds(
  running: readonly Running[],
  rounds: number,
  callsPerRound: number,
  transport: GrpcTransport,
): Promise<Map<string, UnaryBench>> {
  for (let r = 0; r < rounds; r++) {
    for (const b of r % 2 ? [...running].reverse() : running) {
      const t = process.hrtime.bigint();
      const c = process.cpuUsage();
      await b.client.run(callsPerRound);
      const used = process.cpuUsage(c);
      b.times.push(Number(process.hrtime.bigint() - t) / 1000 / callsPerRound);
      b.cpu.push((used.user + used.system) / callsPerRound);
    }
  }
  const out = new Map<string, UnaryBench>();
  for (const b of running) {
    b.client.close();
    await b.server.drain(1_000);
    out.set(b.name, {
      transport,
      callsPerRound,
      rounds,
      medianUsPerCall: median(b.times),
      medianCpuUsPerCall: median(b.cpu),
    });
  }
  return out;
}

/** A 256 KiB message (a Check with a 256 KiB body), 8 calls a batch. */
const LARGE = frameMessage(Buffer.alloc(256 * 1024, 0x61));
const LARGE_BATCH = 8;

/**
 * Unary calls of 256 KiB on one connection, with a method that borrows its request (assembled in
 * the server's BufferPool, src/buffer-pool.ts) and with one that does not (a new buffer per call),
 * in alternating rounds on this build. Neither echoes: each answers 2 bytes after reading the
 * request's last byte, as a Check reads its body to the end.
 */
export async function benchLarge(
  transport: GrpcTransport,
  rounds = 15,
  callsPerRound = LARGE_BATCH * 40,
): Promise<Map<string, UnaryBench>> {
  const answer = Buffer.from('ok');
  let wrong = 0;
  const running = [];
  for (const borrows of [true, false]) {
    const handle = (request: Buffer): Buffer => {
      if (request.length !== LARGE.length - 5 || request[request.length - 1] !== 0x61) wrong++;
      return answer;
    };
    const server = await startH2GrpcServer(
      '127.0.0.1:0',
      new Map([[PATH, { kind: 'unary', borrowsRequest: borrows, handle }]]),
      { maxReceiveMessageBytes: 4 << 20, transport },
    );
    const client = await Client.connect(server.address, LARGE, LARGE_BATCH);
    await client.run(callsPerRound); // warm-up
    running.push({
      name: borrows ? 'borrowed' : 'not borrowed',
      server,
      client,
      times: [] as number[],
      cpu: [] as number[],
    });
  }
  const out = await measureRounds(running, rounds, callsPerRound, transport);
  if (wrong > 0) throw new Error(`${wrong} requests reached the method with other bytes than were sent`);
  return out;
}

async function main(): Promise<void> {
  const before = process.argv.find((a) => a.startsWith('--before='))?.slice(9);
  const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.slice(9) ?? 15);
  const builds = new Map<string, StartServer>([['this build', startH2GrpcServer]]);
  if (before) builds.set('before', (require(before) as { startH2GrpcServer: StartServer }).startH2GrpcServer);
  for (const transport of ['builtin', 'node'] as const) {
    for (const [name, r] of await benchUnary(builds, transport, rounds)) {
      console.log(
        `grpc-server ${transport} unary (${name}): ${r.medianCpuUsPerCall.toFixed(2)} µs CPU, ${r.medianUsPerCall.toFixed(2)} µs wall per call (median of ${r.rounds} rounds of ${r.callsPerRound})`,
      );
    }
    for (const [name, r] of await benchLarge(transport, rounds)) {
      console.log(
        `grpc-server ${transport} unary, 256 KiB (${name}): ${r.medianCpuUsPerCall.toFixed(1)} µs CPU, ${r.medianUsPerCall.toFixed(1)} µs wall per call (median of ${r.rounds} rounds of ${r.callsPerRound})`,
      );
    }
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}

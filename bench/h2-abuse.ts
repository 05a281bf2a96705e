/**
 * The abuse rows of the gRPC port's trust review (docs/grpc-port.md), re-run against a real `modelgate serve` on each
 * gRPC
 * transport (a fresh server per row; docs/grpc-port.md has the results): what the server's memory
 * did (RSS before, at its peak, and 5 s after), whether and how the attacking connections were
 * told to stop (GOAWAY and its code, or closed), and how a gRPC health check on its own connection
 * fared meanwhile (p50, p99, failures; one every 100 ms).
 *
 *   node dist/bench/h2-abuse.js [--transport=builtin,node] [--only=reset,reset-headers,ping,unread,window0,slowloris]
 *                               [--seconds=20] [--server-root=DIR]
 *
 * --server-root runs another build's `dist/src/cli/main.js` (the "before" column: a checkout of an
 * older commit, built). Every row is bounded in time (about 4 minutes per transport in all). Not
 * part of `npm test`: it loads the machine on purpose.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { ERROR, FLAG, frame, FRAME, PREFACE, words } from '@modelgate/grpc-server/h2/frames';
import { literalField } from '@modelgate/grpc-server/h2/hpack';
import { smallChatRequest } from './check-requests';
import { CHECK_PATH } from '../src/server/grpc-server';
import { encodeCheckRequest, grpcFrame } from './grpc-frame';
import { scrapeDecisions } from './load-runs';
import { rssBytes } from './proc-stats';
import { freePort } from '../src/server/free-port';
import { DEMO_KEYS } from '../test/support/demo-keys';

const ROOT = path.resolve(__dirname, '..', '..');
const MiB = 1024 * 1024;
const ERROR_NAMES = Object.fromEntries(Object.entries(ERROR).map(([k, v]) => [v, k]));

type Transport = 'builtin' | 'node';

interface Server {
  readonly pid: number;
  readonly grpc: string;
  readonly http: string;
  /** The connection problems the server logged, by message (numbers stripped), with counts. */
  problems(): string;
  stop(): Promise<void>;
}

/** `modelgate serve` on the demo config with this transport (decisions counted, allows not logged). */
async function startServer(serverRoot: string, transport: Transport): Promise<Server> {
  const dir = mkdtempSync(path.join(tmpdir(), 'modelgate-abuse-'));
  const config = path.join(dir, 'modelgate.yaml');
  const demo = readFileSync(path.join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8');
  writeFileSync(
    config,
    demo.replace('transport: builtin', `transport: ${transport}`).replace(/allows: true/, 'allows: false'),
  );
  const [gp, hp] = [await freePort(), await freePort()];
  const grpc = `127.0.0.1:${gp}`;
  const http = `127.0.0.1:${hp}`;
  const child: ChildProcess = spawn(
    process.execPath,
    [path.join(serverRoot, 'dist/src/cli/main.js'), 'serve', '--config', config, '--grpc', grpc, '--http', http],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  const problems = new Map<string, number>();
  let partial = '';
  child.stdout!.on('data', (d: Buffer) => {
    const lines = (partial + d.toString('utf8')).split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      if (!line.includes('"gRPC connection problem"')) continue;
      const err = (/"err":"([^"]*)"/.exec(line)?.[1] ?? '?').replace(/\d[\d,]*/g, 'N');
      problems.set(err, (problems.get(err) ?? 0) + 1);
    }
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`modelgate exited ${child.exitCode}: ${stderr}`);
    if (Date.now() > deadline) throw new Error(`modelgate not ready: ${stderr}`);
    try {
      if ((await fetch(`http://${http}/readyz`)).status === 200) break;
    } catch {
      // not yet
    }
    await sleep(100);
  }
  return {
    pid: child.pid!,
    grpc,
    http,
    problems: () =>
      [...problems]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 3)
        .map(([k, v]) => `${v.toLocaleString('en-US')} × "${k}"`)
        .join('; ') || 'none',
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => (clearTimeout(t), resolve()));
        child.kill('SIGTERM');
      }),
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** RSS sampled every 100 ms while `run` runs: before, peak, and 5 s after. */
async function withRss<T>(
  pid: number,
  run: () => Promise<T>,
): Promise<T & { rss: { before: number; peak: number; after: number } }> {
  const before = rssBytes(pid);
  let peak = before;
  const sampler = setInterval(() => {
    try {
      peak = Math.max(peak, rssBytes(pid));
    } catch {
      // exited
    }
  }, 100);
  try {
    const result = await run();
    await sleep(5000);
    const after = rssBytes(pid);
    return { ...result, rss: { before, peak: Math.max(peak, after), after } };
  } finally {
    clearInterval(sampler);
  }
}

/** A gRPC health check every 100 ms on its own connection until stopped: latencies and failures. */
function healthProbe(address: string): { stop(): { p50: number; p99: number; ok: number; failed: number } } {
  const latencies: number[] = [];
  let failed = 0;
  let stopped = false;
  let session: http2.ClientHttp2Session | undefined;
  const connect = (): http2.ClientHttp2Session => {
    const s = http2.connect(`http://${address}`);
    s.on('error', () => {});
    s.on('close', () => session === s && (session = undefined));
    return s;
  };
  const once = (): void => {
    if (stopped) return;
    session ??= connect();
    const start = performance.now();
    let done = false;
    const finish = (ok: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (ok) latencies.push(performance.now() - start);
      else failed++;
    };
    const timer = setTimeout(() => (finish(false), req.close()), 2000);
    const req = session.request({
      ':method': 'POST',
      ':path': '/grpc.health.v1.Health/Check',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    let status: string | undefined;
    req.on('response', (h) => (status = (h['grpc-status'] as string | undefined) ?? status));
    req.on('trailers', (t) => (status = t['grpc-status'] as string | undefined));
    req.on('data', () => {});
    req.on('error', () => finish(false));
    req.on('close', () => finish(status === '0'));
    req.end(Buffer.from([0, 0, 0, 0, 0]));
  };
  const interval = setInterval(once, 100);
  return {
    stop() {
      stopped = true;
      clearInterval(interval);
      session?.destroy();
      const sorted = [...latencies].sort((a, b) => a - b);
      const q = (p: number): number =>
        sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : NaN;
      return { p50: q(0.5), p99: q(0.99), ok: sorted.length, failed };
    },
  };
}

/** A raw HTTP/2 connection that counts what the server sends: GOAWAYs, RST_STREAMs, HEADERS, DATA. */
class Conn {
  readonly goAways: number[] = [];
  readonly resets = new Map<number, number>();
  headers = 0;
  dataFrames = 0;
  closed = false;
  closedAt = 0;
  #buf: Buffer = Buffer.alloc(0);
  /** Writers waiting for the socket, woken early by a GOAWAY. */
  readonly #waiters = new Set<() => void>();
  private constructor(readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => this.#read(d));
    socket.on('error', () => {});
    socket.on('close', () => {
      this.closed = true;
      this.closedAt = Date.now();
    });
  }

  static async open(address: string, settings: Buffer = Buffer.alloc(0)): Promise<Conn> {
    const colon = address.lastIndexOf(':');
    const socket = net.connect(Number(address.slice(colon + 1)), address.slice(0, colon));
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const c = new Conn(socket);
    socket.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0, settings)]));
    return c;
  }

  #read(d: Buffer): void {
    this.#buf = this.#buf.length ? Buffer.concat([this.#buf, d]) : d;
    let at = 0;
    while (this.#buf.length - at >= 9) {
      const len = this.#buf.readUIntBE(at, 3);
      if (this.#buf.length - at < 9 + len) break;
      const type = this.#buf[at + 3];
      const flags = this.#buf[at + 4];
      if (type === FRAME.GOAWAY) {
        this.goAways.push(this.#buf.readUInt32BE(at + 13));
        for (const wake of this.#waiters) wake();
      } else if (type === FRAME.RST_STREAM) {
        const code = this.#buf.readUInt32BE(at + 9);
        this.resets.set(code, (this.resets.get(code) ?? 0) + 1);
      } else if (type === FRAME.HEADERS) this.headers++;
      else if (type === FRAME.DATA) this.dataFrames++;
      else if (type === FRAME.SETTINGS && (flags & FLAG.ACK) === 0)
        this.socket.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
      at += 9 + len;
    }
    this.#buf = this.#buf.subarray(at);
  }

  /** Writes; resolves once the socket takes more (or is closed, or `deadline` passes). */
  async write(bytes: Buffer, deadline: number): Promise<void> {
    if (this.closed) return;
    if (this.socket.write(bytes)) return;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(t);
        this.socket.off('drain', done);
        this.socket.off('close', done);
        this.#waiters.delete(done);
        resolve();
      };
      this.#waiters.add(done);
      const t = setTimeout(done, Math.max(0, deadline - Date.now()));
      this.socket.once('drain', done);
      this.socket.once('close', done);
    });
  }
}

const checkBody = grpcFrame(encodeCheckRequest(smallChatRequest(DEMO_KEYS.alice, 'gpt-4o-mini', 'abuse')));
const checkHeaders = Buffer.concat([
  literalField(2, 'POST'),
  literalField(6, 'http'),
  literalField(4, CHECK_PATH),
  literalField(1, 'modelgate'),
  literalField(31, 'application/grpc'),
  literalField('te', 'trailers'),
]);

/** `n` Check streams from `first`: HEADERS, DATA (unless `headersOnly`), RST_STREAM CANCEL if `reset`. */
function checks(first: number, n: number, o: { reset?: boolean; headersOnly?: boolean } = {}): Buffer {
  const out: Buffer[] = [];
  for (let i = 0, id = first; i < n; i++, id += 2) {
    out.push(
      frame(FRAME.HEADERS, FLAG.END_HEADERS | (o.headersOnly && !o.reset ? FLAG.END_STREAM : 0), id, checkHeaders),
    );
    if (!o.headersOnly) out.push(frame(FRAME.DATA, FLAG.END_STREAM, id, checkBody));
    if (o.reset) out.push(frame(FRAME.RST_STREAM, 0, id, words(ERROR.CANCEL)));
  }
  return Buffer.concat(out);
}

function windowSettings(size: number): Buffer {
  const b = Buffer.alloc(6);
  b.writeUInt16BE(4, 0);
  b.writeUInt32BE(size, 2);
  return b;
}

async function checksRun(server: Server): Promise<number> {
  return Object.values(await scrapeDecisions(server.http)).reduce((a, b) => a + b, 0);
}

interface Row {
  readonly attack: string;
  readonly transport: Transport;
  readonly outcome: string;
  /** What the server logged meanwhile (its connection problems). */
  readonly logged?: string;
  readonly rssMiB: string;
  readonly health: string;
}

const mib = (n: number): string => (n / MiB).toFixed(0);
const codes = (list: number[]): string => {
  const counts = new Map<string, number>();
  for (const c of list) counts.set(ERROR_NAMES[c] ?? String(c), (counts.get(ERROR_NAMES[c] ?? String(c)) ?? 0) + 1);
  return [...counts].map(([k, v]) => `${v.toLocaleString('en-US')} × ${k}`).join(', ') || 'none';
};

/**
 * Rapid reset: `conns` connections send Check streams each reset at once, as fast as the server takes them, for
 * `seconds`; a connection told to go away is replaced.
 */
async function rapidReset(
  server: Server,
  seconds: number,
  headersOnly: boolean,
): Promise<Omit<Row, 'attack' | 'transport'>> {
  const conns = 2;
  const before = await checksRun(server);
  const probe = healthProbe(server.grpc);
  const goAways: number[] = [];
  let connections = 0;
  let streams = 0;
  const { rss } = await withRss(server.pid, async () => {
    const deadline = Date.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: conns }, async () => {
        while (Date.now() < deadline) {
          const c = await Conn.open(server.grpc, windowSettings(2 ** 31 - 1));
          connections++;
          let id = 1;
          while (Date.now() < deadline && !c.closed && c.goAways.length === 0 && id < 2 ** 31 - 200) {
            await c.write(checks(id, 100, { reset: true, headersOnly }), deadline);
            id += 200;
            streams += 100;
          }
          goAways.push(...c.goAways);
          c.socket.destroy();
        }
      }),
    );
    return {};
  });
  const health = probe.stop();
  const run = (await checksRun(server)) - before;
  return {
    outcome: `${streams.toLocaleString('en-US')} streams written, ${run.toLocaleString('en-US')} Checks run; ${connections} connection(s); GOAWAY: ${codes(goAways)}`,
    rssMiB: `${mib(rss.before)} → ${mib(rss.peak)} → ${mib(rss.after)}`,
    health: fmtHealth(health),
  };
}

function fmtHealth(h: { p50: number; p99: number; ok: number; failed: number }): string {
  return `p50 ${h.p50.toFixed(1)} ms, p99 ${h.p99.toFixed(1)} ms${h.failed ? `, ${h.failed} of ${h.ok + h.failed} failed` : ''}`;
}

/** PING flood: 8 connections write PINGs for `seconds` and read nothing; then read what came. */
async function pingFlood(server: Server, seconds: number): Promise<Omit<Row, 'attack' | 'transport'>> {
  const probe = healthProbe(server.grpc);
  const pings = Buffer.concat(Array.from({ length: 1000 }, () => frame(FRAME.PING, 0, 0, Buffer.alloc(8))));
  let sent = 0;
  const conns: Conn[] = [];
  const start = Date.now();
  const { rss } = await withRss(server.pid, async () => {
    const deadline = Date.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        const c = await Conn.open(server.grpc);
        conns.push(c);
        c.socket.pause();
        while (Date.now() < deadline && !c.closed) {
          await c.write(pings, deadline);
          sent += 1000;
        }
      }),
    );
    // Now read what the server sent (its GOAWAY, if any, is behind the ACKs it wrote).
    conns.forEach((c) => c.socket.resume());
    await sleep(2000);
    return {};
  });
  const health = probe.stop();
  const closed = conns.filter((c) => c.closed);
  conns.forEach((c) => c.socket.destroy());
  return {
    outcome: `${sent.toLocaleString('en-US')} PINGs written; GOAWAY: ${codes(conns.flatMap((c) => c.goAways))}; ${closed.length} of 8 connections closed by the server${closedAfter(closed, start)}`,
    rssMiB: `${mib(rss.before)} → ${mib(rss.peak)} → ${mib(rss.after)}`,
    health: fmtHealth(health),
  };
}

/** 400,000 Checks on one connection that reads nothing (default windows), for up to `seconds`. */
async function unread(server: Server, seconds: number): Promise<Omit<Row, 'attack' | 'transport'>> {
  const n = 400_000;
  const before = await checksRun(server);
  const probe = healthProbe(server.grpc);
  let written = 0;
  let c: Conn | undefined;
  const start = Date.now();
  const { rss } = await withRss(server.pid, async () => {
    const deadline = Date.now() + seconds * 1000;
    c = await Conn.open(server.grpc);
    c.socket.pause();
    for (let id = 1; written < n && Date.now() < deadline && !c.closed; id += 2000) {
      await c.write(checks(id, 1000), deadline);
      written += 1000;
    }
    await sleep(Math.max(0, deadline - Date.now()));
    return {};
  });
  const run = (await checksRun(server)) - before;
  c!.socket.resume();
  await sleep(2000);
  const health = probe.stop();
  const refused = c!.resets.get(ERROR.REFUSED_STREAM) ?? 0;
  c!.socket.destroy();
  return {
    outcome: `${written.toLocaleString('en-US')} written of ${n.toLocaleString('en-US')}, ${run.toLocaleString('en-US')} Checks run; REFUSED_STREAM ${refused.toLocaleString('en-US')} (as read afterwards); GOAWAY: ${codes(c!.goAways)}; ${c!.closed ? `closed by the server${closedAfter([c!], start)}` : 'still open'}`,
    rssMiB: `${mib(rss.before)} → ${mib(rss.peak)} → ${mib(rss.after)}`,
    health: fmtHealth(health),
  };
}

/** SETTINGS_INITIAL_WINDOW_SIZE=0, then 100,000 Checks (read, never given a window). */
async function windowZero(server: Server, seconds: number): Promise<Omit<Row, 'attack' | 'transport'>> {
  const n = 100_000;
  const probe = healthProbe(server.grpc);
  let c: Conn | undefined;
  let written = 0;
  const { rss } = await withRss(server.pid, async () => {
    const deadline = Date.now() + seconds * 1000;
    c = await Conn.open(server.grpc, windowSettings(0));
    for (let id = 1; written < n && Date.now() < deadline && !c.closed; id += 2000) {
      await c.write(checks(id, 1000), deadline);
      written += 1000;
    }
    while (Date.now() < deadline && c.headers + sum(c.resets) < written && !c.closed) await sleep(100);
    return {};
  });
  const health = probe.stop();
  const refused = c!.resets.get(ERROR.REFUSED_STREAM) ?? 0;
  const other = sum(c!.resets) - refused;
  c!.socket.destroy();
  return {
    outcome: `${written.toLocaleString('en-US')} written; ${c!.headers.toLocaleString('en-US')} held (answer headers, no DATA: ${c!.dataFrames}), ${refused.toLocaleString('en-US')} REFUSED_STREAM${other ? `, ${other} other resets` : ''}; GOAWAY: ${codes(c!.goAways)}`,
    rssMiB: `${mib(rss.before)} → ${mib(rss.peak)} → ${mib(rss.after)}`,
    health: fmtHealth(health),
  };
}

/** " after a-b s", the span of the connections' closing times since `start`. */
function closedAfter(closed: Conn[], start: number): string {
  if (closed.length === 0) return '';
  const s = closed.map((c) => (c.closedAt - start) / 1000).sort((a, b) => a - b);
  return s[0].toFixed(1) === s[s.length - 1].toFixed(1)
    ? ` after ${s[0].toFixed(1)} s`
    : ` after ${s[0].toFixed(1)}-${s[s.length - 1].toFixed(1)} s`;
}

const sum = (m: Map<number, number>): number => [...m.values()].reduce((a, b) => a + b, 0);

/** 200 connections that send the preface and SETTINGS, then nothing; held up to 90 s. */
async function slowloris(server: Server): Promise<Omit<Row, 'attack' | 'transport'>> {
  const probe = healthProbe(server.grpc);
  const conns: Conn[] = [];
  const start = Date.now();
  const { rss } = await withRss(server.pid, async () => {
    for (let i = 0; i < 200; i++) conns.push(await Conn.open(server.grpc));
    const deadline = start + 90_000;
    while (Date.now() < deadline && conns.some((c) => !c.closed)) await sleep(250);
    return {};
  });
  const health = probe.stop();
  const closed = conns.filter((c) => c.closed);
  conns.forEach((c) => c.socket.destroy());
  return {
    outcome:
      closed.length === 0
        ? 'all 200 held for 90 s'
        : `${closed.length} of 200 closed by the server${closedAfter(closed, start)} (GOAWAY: ${codes(closed.flatMap((c) => c.goAways))})`,
    rssMiB: `${mib(rss.before)} → ${mib(rss.peak)} → ${mib(rss.after)}`,
    health: fmtHealth(health),
  };
}

const ATTACKS = {
  reset: ['rapid reset: HEADERS+DATA+RST_STREAM, 2 connections', (s: Server, sec: number) => rapidReset(s, sec, false)],
  'reset-headers': [
    'rapid reset: HEADERS+RST_STREAM (no DATA), 2 connections',
    (s: Server, sec: number) => rapidReset(s, sec, true),
  ],
  ping: ['PING flood without reading, 8 connections', (s: Server, sec: number) => pingFlood(s, sec)],
  unread: ['400k Checks without reading', (s: Server, sec: number) => unread(s, Math.max(sec, 30))],
  window0: ['INITIAL_WINDOW_SIZE=0, 100k Checks', (s: Server, sec: number) => windowZero(s, Math.max(sec, 30))],
  slowloris: ['200 slowloris connections after the preface', (s: Server) => slowloris(s)],
} as const;

async function main(argv: string[]): Promise<void> {
  const arg = (name: string): string | undefined =>
    argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const transports = (arg('transport') ?? 'builtin,node').split(',') as Transport[];
  const only = (arg('only') ?? Object.keys(ATTACKS).join(',')).split(',') as (keyof typeof ATTACKS)[];
  const seconds = Number(arg('seconds') ?? 20);
  const serverRoot = path.resolve(arg('server-root') ?? ROOT);
  const rows: Row[] = [];
  for (const key of only) {
    const [attack, run] = ATTACKS[key];
    for (const transport of transports) {
      const server = await startServer(serverRoot, transport);
      try {
        process.stderr.write(`${attack} (${transport}) ...\n`);
        const r = await run(server, seconds);
        rows.push({ attack, transport, ...r, logged: server.problems() });
        process.stderr.write(
          `  ${r.outcome}; RSS MiB ${r.rssMiB}; health ${r.health}; server log: ${server.problems()}\n`,
        );
      } finally {
        await server.stop();
      }
    }
  }
  const table = [
    '| attack | transport | outcome | RSS MiB (before → peak → 5 s after) | health check meanwhile |',
    '| --- | --- | --- | --- | --- |',
    ...rows.map((r) => `| ${r.attack} | ${r.transport} | ${r.outcome} | ${r.rssMiB} | ${r.health} |`),
  ].join('\n');
  process.stdout.write(`${table}\n`);
  const out = path.join(ROOT, 'bench', 'out');
  mkdirSync(out, { recursive: true });
  writeFileSync(path.join(out, 'h2-abuse.json'), JSON.stringify({ serverRoot, seconds, rows }, null, 2));
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);

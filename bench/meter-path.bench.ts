/**
 * The meter's whole path in process, without Envoy: for each request the Check with the meter on (soft, file store:
 * the admission's hold) as `service.checkBytes`, then Envoy's access-log message for that request (one entry per
 * message, as the bundle's `buffer_size_bytes: 0` sends them, carrying the Check's own dynamic metadata, the minted
 * request id and the stand-in upstream's small chat answer as the Lua tail's `final`) read by `readAccessLogMessage`
 * and settled by `meter.report`: usage, debit, ledger line, metrics. What `bench:e2e`'s `modelgate-meter` row
 * costs modelgate, minus the gRPC transport, in CPU time of the process (user + system, every thread: the file
 * store's writes in libuv's pool included) per request.
 *
 * With `--before=DIR` (another built checkout: its `dist/src` and its `envoy/modelgate.yaml`) each round runs this
 * build and that one in fresh processes one after the other, the order reversed every other round, so a change is
 * measured beside the code before it on the same machine in the same minutes; each process's figure is the median
 * of its batches, and the report gives every round's ratio (this / before) and their median.
 *
 *   npm run build:bench && node dist/bench/meter-path.bench.js [--before=DIR] [--rounds=6] [--requests=20000]
 *     [--batches=5] [--profile-dir=DIR]
 *
 * `--profile-dir` runs each process under `node --cpu-prof` (profiles in DIR/after, DIR/before). Pinned to core 0
 * when the machine has two or more.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as protobuf from 'protobufjs';
import { parseDocument } from 'yaml';
import { includeDirs } from '../proto/include-dirs.js';
import { smallChatRequest } from './check-requests';
import { decodeCheckResponse, encodeCheckRequest } from './grpc-frame';
import { median } from './latency';
import { DEMO_KEYS } from '../test/support/demo-keys';

const ROOT = path.resolve(__dirname, '..', '..');

/** The stand-in upstream's small chat answer (bench/e2e/upstream.ts), what the Lua tail keeps of it. */
const ANSWER = JSON.stringify({
  id: 'chatcmpl-standin',
  object: 'chat.completion',
  created: 1767225600,
  model: 'gpt-4o-mini',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, logprobs: null, finish_reason: 'stop' }],
  usage: { prompt_tokens: 9, completion_tokens: 1, total_tokens: 10 },
});

/** Request ids of one length, so a template's bytes can be patched in place. */
const ID_PLACEHOLDER = 'mp-##########';
/** Requests whose Checks run before their reports are read (bench:e2e keeps 100 in flight). */
const GROUP = 100;
const requestId = (n: number): string => `mp-${String(n).padStart(10, '0')}`;

function arg(name: string): string | undefined {
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}

function protoRoot(): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) =>
    includeDirs
      .map((d: string) => path.join(d, target))
      .find((p: string) => {
        try {
          readFileSync(p);
          return true;
        } catch {
          return false; // not in this include dir: the next one
        }
      }) ?? target;
  root.loadSync('envoy/service/accesslog/v3/als.proto', { keepCase: true });
  return root;
}

const stringStruct = (fields: Record<string, string>) => ({
  fields: Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, { stringValue: v }])),
});

/** An access-log message for the request `ID_PLACEHOLDER`, with the Check's answer's dynamic metadata. */
function accessLogTemplate(checkAnswer: Buffer): Buffer {
  const root = protoRoot();
  const Message = root.lookupType('envoy.service.accesslog.v3.StreamAccessLogsMessage');
  const Struct = root.lookupType('google.protobuf.Struct');
  // CheckResponse.dynamic_metadata(4), a Struct, as the ext_authz filter hands it to the access log.
  const reader = protobuf.Reader.create(checkAnswer);
  let authz: object | undefined;
  while (reader.pos < reader.len) {
    const t = reader.uint32();
    if (t >>> 3 === 4 && (t & 7) === 2) authz = Struct.toObject(Struct.decode(reader.bytes()));
    else reader.skipType(t & 7);
  }
  if (!authz) throw new Error('the Check answered without dynamic metadata: is the meter on?');
  const entry = {
    common_properties: {
      downstream_remote_address: { socket_address: { address: '10.0.0.7', port_value: 53122 } },
      upstream_remote_address: { socket_address: { address: '127.0.0.1', port_value: 9300 } },
      start_time: { seconds: 1767225600, nanos: 1000 },
      time_to_first_upstream_tx_byte: { seconds: 0, nanos: 200000 },
      time_to_first_upstream_rx_byte: { seconds: 0, nanos: 900000 },
      time_to_last_downstream_tx_byte: { seconds: 0, nanos: 1000000 },
      route_name: 'chat_completions',
      metadata: {
        filter_metadata: {
          'envoy.filters.http.ext_authz': authz,
          modelgate: stringStruct({ request: ID_PLACEHOLDER }),
          'modelgate.meter': stringStruct({ final: ANSWER }),
        },
      },
    },
    request: {
      request_method: 3,
      scheme: 'http',
      authority: 'gw.example',
      path: '/v1/chat/completions',
      user_agent: 'OpenAI/Python 1.54.0',
      request_id: ID_PLACEHOLDER,
      request_headers_bytes: 420,
      request_body_bytes: 180,
    },
    response: {
      response_code: { value: 200 },
      response_headers_bytes: 120,
      response_body_bytes: ANSWER.length,
      response_headers: { 'content-type': 'application/json' },
    },
  };
  return Buffer.from(
    Message.encode(
      Message.fromObject({
        identifier: { log_name: 'modelgate_meter', node: { id: 'envoy-1' } },
        http_logs: { log_entry: [entry] },
      }),
    ).finish(),
  );
}

/** Copies of `template` with every `ID_PLACEHOLDER` replaced by the ids from `first` on. */
function patched(template: Buffer, first: number, n: number): Buffer[] {
  const at: number[] = [];
  for (let i = template.indexOf(ID_PLACEHOLDER); i >= 0; i = template.indexOf(ID_PLACEHOLDER, i + 1)) at.push(i);
  if (at.length === 0) throw new Error('no request id in the template');
  const out: Buffer[] = [];
  for (let k = 0; k < n; k++) {
    const b = Buffer.from(template);
    for (const i of at) b.write(requestId(first + k), i, 'latin1');
    out.push(b);
  }
  return out;
}

/**
 * CPU seconds of this process's main thread and of its other threads (V8's GC and compiler helpers, libuv's pool, the
 * tokenizer's worker), from /proc/self/task: the other threads' work is not in a `--cpu-prof` profile.
 */
function threadCpu(): Map<string, number> {
  const out = new Map<string, number>();
  let tasks: string[];
  try {
    tasks = readdirSync('/proc/self/task');
  } catch {
    return out; // not Linux: no split by thread
  }
  const tick = 100; // USER_HZ
  for (const t of tasks) {
    try {
      const stat = readFileSync(`/proc/self/task/${t}/stat`, 'utf8');
      // utime and stime: fields 14 and 15 of stat, the 12th and 13th after the name's closing parenthesis.
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const name = Number(t) === process.pid ? 'main' : 'other threads';
      out.set(name, (out.get(name) ?? 0) + (Number(f[11]) + Number(f[12])) / tick);
    } catch {
      // the thread ended between the listing and the read: its time is gone from both readings
    }
  }
  return out;
}

interface ChildResult {
  readonly label: string;
  /** CPU µs per request (user + system of the whole process), one figure per batch. */
  readonly cpuUs: number[];
  /** Of which the Checks, and the reports read and settled (CPU µs per request; the yields between are neither). */
  readonly checkUs: number[];
  readonly reportUs: number[];
  readonly settled: number;
  /** CPU µs per request by thread name over the counted batches. */
  readonly threads: Record<string, number>;
}

/** One build's run: starts its service on a soft-metered copy of its demo config, times batches of requests. */
async function child(srcDir: string, label: string, requests: number, batches: number): Promise<void> {
  const buildRoot = path.resolve(srcDir, '..', '..');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'meter-path-'));
  const doc = parseDocument(readFileSync(path.join(buildRoot, 'envoy', 'modelgate.yaml'), 'utf8'));
  doc.setIn(['meter', 'enabled'], true);
  doc.setIn(['meter', 'mode'], 'soft');
  const configPath = path.join(dir, 'modelgate.yaml');
  writeFileSync(configPath, doc.toString());
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { startService } = require(path.join(srcDir, 'server', 'service')) as typeof import('../src/server/service');
  const { readAccessLogMessage } = require(
    path.join(srcDir, 'meter', 'access-log'),
  ) as typeof import('../src/meter/access-log');
  const service = await startService({
    configPath,
    grpcAddress: '127.0.0.1:0',
    httpAddress: '127.0.0.1:0',
    logDestination: path.join(dir, 'decisions.log'),
    watch: false,
  });
  const request = smallChatRequest(DEMO_KEYS.alice, 'gpt-4o-mini', ID_PLACEHOLDER);
  request.attributes!.request!.http!.headers!['x-modelgate-request'] = ID_PLACEHOLDER;
  const checkTemplate = encodeCheckRequest(request);
  const first = await service.checkBytes(patched(checkTemplate, 0, 1)[0]);
  if (decodeCheckResponse(first).status?.code !== 0) throw new Error(`${label}: the first Check was refused`);
  const logTemplate = accessLogTemplate(first);
  for (const r of readAccessLogMessage(patched(logTemplate, 0, 1)[0]).reports) service.meter.report(r);
  let settledCount = 0;
  const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
  let next = 1;
  const result: ChildResult = { label, cpuUs: [], checkUs: [], reportUs: [], settled: 0, threads: {} };
  const threadSum = new Map<string, number>();
  // The first batch warms the JIT, the key cache and the meter's state; it is not counted.
  for (let b = 0; b <= batches; b++) {
    const checks = patched(checkTemplate, next, requests);
    const logs = patched(logTemplate, next, requests);
    next += requests;
    let lastAnswer: Buffer | undefined;
    let checkUs = 0;
    let reportUs = 0;
    const threads0 = threadCpu();
    const cpu0 = process.cpuUsage();
    // In groups of GROUP: the Checks, then their reports (about as many in flight as bench:e2e's 100 streams), each
    // phase's CPU apart; then, as a server does between socket reads, the ledger's and the log's writes complete.
    const cpuUs = (c: NodeJS.CpuUsage): number => c.user + c.system;
    for (let g = 0; g < requests; g += GROUP) {
      const end = Math.min(requests, g + GROUP);
      const c0 = process.cpuUsage();
      for (let i = g; i < end; i++) {
        const a = service.checkBytes(checks[i]);
        lastAnswer = a instanceof Promise ? await a : a;
      }
      const c1 = process.cpuUsage();
      for (let i = g; i < end; i++) {
        // As the meter's gRPC stream does with each message (server/meter-service.ts).
        const { reports, lost } = readAccessLogMessage(logs[i]);
        if (lost > 0) service.meter.lostReports(lost);
        for (const r of reports) service.meter.report(r);
        settledCount += reports.length;
      }
      const c2 = process.cpuUsage();
      checkUs += cpuUs(c1) - cpuUs(c0);
      reportUs += cpuUs(c2) - cpuUs(c1);
      await yieldToLoop();
    }
    await service.meter.idle();
    await yieldToLoop();
    const cpu = process.cpuUsage(cpu0);
    if (b > 0)
      for (const [name, sec] of threadCpu())
        threadSum.set(name, (threadSum.get(name) ?? 0) + sec - (threads0.get(name) ?? 0));
    if (decodeCheckResponse(lastAnswer!).status?.code !== 0) throw new Error(`${label}: a Check was refused`);
    // Every request was held and settled: nothing is left in flight.
    if (!service.meter.settledAll) throw new Error(`${label}: requests left unsettled`);
    if (b === 0) continue;
    result.cpuUs.push((cpu.user + cpu.system) / requests);
    result.checkUs.push(checkUs / requests);
    result.reportUs.push(reportUs / requests);
  }
  for (const [name, sec] of threadSum) result.threads[name] = (sec * 1e6) / (requests * batches);
  await service.close(1000, 0);
  rmSync(dir, { recursive: true, force: true });
  process.stdout.write(JSON.stringify({ ...result, settled: settledCount }) + '\n');
  process.exit(0);
}

function runChild(label: string, srcDir: string, requests: number, batches: number, profileDir?: string): ChildResult {
  const pinned = os.availableParallelism() >= 2;
  const node = [
    ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${path.join(profileDir, label)}`] : []),
    __filename,
    `--child=${srcDir}`,
    `--label=${label}`,
    `--requests=${requests}`,
    `--batches=${batches}`,
  ];
  const r = pinned
    ? spawnSync('taskset', ['-c', '0', process.execPath, ...node], { encoding: 'utf8', maxBuffer: 1 << 24 })
    : spawnSync(process.execPath, node, { encoding: 'utf8', maxBuffer: 1 << 24 });
  if (r.status !== 0) throw new Error(`${label} failed (${r.status}): ${r.stderr}`);
  const line = r.stdout.trim().split('\n').pop()!;
  return JSON.parse(line) as ChildResult;
}

function fmt(xs: number[]): string {
  return xs.map((x) => x.toFixed(1)).join(' ');
}

function main(): void {
  const childSrc = arg('child');
  const requests = Number(arg('requests') ?? 20_000);
  const batches = Number(arg('batches') ?? 5);
  if (childSrc) {
    child(childSrc, arg('label') ?? 'this', requests, batches).catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
    return;
  }
  const before = arg('before');
  const rounds = Number(arg('rounds') ?? (before ? 6 : 1));
  const profileDir = arg('profile-dir');
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const builds: [string, string][] = [['after', path.join(ROOT, 'dist', 'src')]];
  if (before) builds.push(['before', path.join(path.resolve(before), 'dist', 'src')]);
  console.log(
    `meter path in process: ${requests} requests x ${batches} batches per process, ${rounds} round(s); ` +
      `load average ${os.loadavg()[0].toFixed(2)}`,
  );
  const perBuild = new Map<string, number[]>();
  const fastest = new Map<string, number[]>();
  const ratios: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? builds : [...builds].reverse();
    const got = new Map<string, ChildResult>();
    for (const [label, src] of order) got.set(label, runChild(label, src, requests, batches, profileDir));
    for (const [label] of order) {
      const r = got.get(label)!;
      const m = median(r.cpuUs);
      perBuild.set(label, [...(perBuild.get(label) ?? []), m]);
      fastest.set(label, [...(fastest.get(label) ?? []), ...r.cpuUs]);
      console.log(
        `round ${round + 1} ${label.padEnd(6)}: CPU ${m.toFixed(1)} µs per request (batches ${fmt(r.cpuUs)}); ` +
          `of which Check ${median(r.checkUs).toFixed(1)}, report ${median(r.reportUs).toFixed(1)} µs; by thread ` +
          Object.entries(r.threads)
            .filter(([, us]) => us >= 0.05)
            .map(([name, us]) => `${name} ${us.toFixed(1)}`)
            .join(', '),
      );
    }
    if (before) ratios.push(median(got.get('after')!.cpuUs) / median(got.get('before')!.cpuUs));
  }
  // Other processes on the core only ever add time: the fastest batches are the least disturbed.
  for (const [label, ms] of perBuild)
    console.log(
      `${label}: median ${median(ms).toFixed(1)} µs (${fmt(ms)}); ` +
        `fastest batch ${Math.min(...fastest.get(label)!).toFixed(1)} µs`,
    );
  if (before)
    console.log(
      `after / before: median ${median(ratios).toFixed(3)} (rounds: ${ratios.map((x) => x.toFixed(3)).join(' ')}); ` +
        `fastest batches ${(Math.min(...fastest.get('after')!) / Math.min(...fastest.get('before')!)).toFixed(3)}`,
    );
  console.log(`load average ${os.loadavg()[0].toFixed(2)}`);
}

main();

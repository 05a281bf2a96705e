/**
 * Micro-benchmark of the protobuf readers, in process, one core: the Check's decode
 * (`decodeCheckRequest`, src/check/read-request.ts) of the small chat request and of a 256 KiB chat
 * body, the meter's decode (`readAccessLogMessage`, src/meter/access-log.ts) of a message of 50
 * entries as Envoy batches them, and the rate limit messages (src/ratelimit/rls-codec.ts).
 *
 * With `--baseline=DIR` (a `dist/src` compiled from another commit, e.g. the one before a change)
 * each reader is timed against the same reader of that build, on the same bytes, in alternating
 * rounds (the order reversed every other round), and the ratio this build / baseline is reported
 * per reader: below 1 is faster. Each build's answers are compared first: a benchmark of readers
 * that disagree fails.
 *
 * Usage: npm run build:bench && node dist/bench/wire-readers.bench.js [--baseline=DIR] [--rounds=N] [--out=FILE]
 * (`--only=check` times the readers whose name starts so; `--current=DIR` times another build in place of this one: a
 * baseline against a copy of itself
 * shows the noise of the machine.)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import * as protobuf from 'protobufjs';
import { includeDirs } from '../proto/include-dirs.js';
import { parseConfig } from '../src/config/load';
import { checkRequestFor, fixedMixes, largeChatBodyModelLast, sdkHeaders } from './check-requests';
import { encodeCheckRequest } from './grpc-frame';
import { median } from './latency';
import { DEMO_KEYS } from '../test/support/demo-keys';

const ROOT = path.resolve(__dirname, '..', '..');

/** One reader under test: a name, and a call on prepared bytes returning something to compare. */
interface Case {
  readonly name: string;
  /** Calls per timed batch. */
  readonly batch: number;
  readonly run: (build: Build) => unknown;
  /** What of an answer must agree between builds (default: all of it; encoders: the message it decodes to). */
  readonly meaning?: (answer: unknown, current: Build) => unknown;
}

/** The modules of one build (this one, or the baseline's). */
interface Build {
  readonly label: string;
  readonly readRequest: typeof import('../src/check/read-request');
  readonly accessLog: typeof import('../src/meter/access-log');
  readonly rls: typeof import('../src/ratelimit/rls-codec');
  readonly filter: import('../src/check/read-request').HeaderFilter;
}

function loadBuild(label: string, srcDir: string): Build {
  const readRequest = require(path.join(srcDir, 'check', 'read-request')) as Build['readRequest'];
  const config = parseConfig(readFileSync(path.join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8'));
  return {
    label,
    readRequest,
    accessLog: require(path.join(srcDir, 'meter', 'access-log')) as Build['accessLog'],
    rls: require(path.join(srcDir, 'ratelimit', 'rls-codec')) as Build['rls'],
    filter: readRequest.requestHeaderFilter(config.routes),
  };
}

function loadType(file: string, name: string): protobuf.Type {
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
  root.loadSync(file, { keepCase: true });
  return root.lookupType(name);
}

const struct = (fields: Record<string, string | number | boolean>) => ({
  fields: Object.fromEntries(
    Object.entries(fields).map(([k, v]) => [
      k,
      typeof v === 'string' ? { stringValue: v } : typeof v === 'number' ? { numberValue: v } : { boolValue: v },
    ]),
  ),
});

/** A StreamAccessLogsMessage of `n` entries shaped as the bundle's access log sends them. */
export function accessLogMessage(n: number): Buffer {
  const Message = loadType(
    'envoy/service/accesslog/v3/als.proto',
    'envoy.service.accesslog.v3.StreamAccessLogsMessage',
  );
  const tail = `data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":1234,"completion_tokens":567,"total_tokens":1801}}\n\ndata: [DONE]\n\n`;
  const entries = Array.from({ length: n }, (_, i) => ({
    common_properties: {
      downstream_remote_address: { socket_address: { address: '10.0.0.1', port_value: 40000 + i } },
      upstream_remote_address: { socket_address: { address: '10.0.0.2', port_value: 443 } },
      start_time: { seconds: 1767225600 + i, nanos: 1000 },
      time_to_first_upstream_tx_byte: { seconds: 0, nanos: 200000 },
      time_to_first_upstream_rx_byte: { seconds: 0, nanos: 90000000 },
      time_to_last_downstream_tx_byte: { seconds: 1, nanos: 0 },
      route_name: 'chat_completions',
      metadata: {
        filter_metadata: {
          'envoy.filters.http.ext_authz': struct({
            metered: true,
            keyId: 'alice',
            group: 'basic',
            model: 'gpt-4o-mini',
            style: 'chat',
            path: '/v1/chat/completions',
            replica: 'r1',
            maxInput: 1200,
            maxOutput: 4096,
            price: '0.15,0.6',
          }),
          modelgate: struct({ request: `req-${i}-5f0c2a` }),
          'modelgate.meter': struct({ tail: false, final: tail }),
        },
      },
    },
    request: {
      request_method: 1,
      scheme: 'https',
      authority: 'gw.example',
      path: '/v1/chat/completions',
      user_agent: 'OpenAI/Python 1.54.0',
      request_id: `xrid-${i}`,
      request_headers_bytes: 420,
      request_body_bytes: 1830,
    },
    response: {
      response_code: { value: 200 },
      response_headers_bytes: 210,
      response_body_bytes: 2400,
      response_headers: { 'content-type': 'text/event-stream', 'content-encoding': '' },
    },
  }));
  return Buffer.from(
    Message.encode(
      Message.fromObject({
        identifier: { log_name: 'modelgate_meter', node: { id: 'envoy-1' } },
        http_logs: { log_entry: entries },
      }),
    ).finish(),
  );
}

function cases(): Case[] {
  const small = encodeCheckRequest(fixedMixes().find((m) => m.id === 'small_chat')!.parts[0].request);
  const body = largeChatBodyModelLast(256 * 1024, 'gpt-4o-mini');
  const large = encodeCheckRequest(
    checkRequestFor(
      {
        method: 'POST',
        path: '/v1/chat/completions',
        headers: sdkHeaders({ authorization: `Bearer ${DEMO_KEYS.alice}` }, body.length),
        body,
      },
      'bench-256k',
    ),
  );
  const log50 = accessLogMessage(50);
  const descriptors = [
    {
      entries: [
        { key: 'modelgate_key', value: 'alice' },
        { key: 'modelgate_limit', value: 'rpm' },
      ],
      limit: { requestsPerUnit: 600, unit: 2 },
    },
    {
      entries: [
        { key: 'modelgate_key', value: 'alice' },
        { key: 'modelgate_limit', value: 'tpm' },
      ],
      limit: { requestsPerUnit: 100000, unit: 2 },
      hitsAddend: 1801,
    },
  ];
  return [
    { name: 'check: small chat request', batch: 2000, run: (b) => b.readRequest.decodeCheckRequest(small, b.filter) },
    { name: 'check: 256 KiB chat body', batch: 2000, run: (b) => b.readRequest.decodeCheckRequest(large, b.filter) },
    { name: 'meter: access log, 50 entries', batch: 50, run: (b) => b.accessLog.readAccessLogMessage(log50) },
    { name: 'rate limit: request decode', batch: 2000, run: (b) => b.rls.decodeRequest(rlsRequest(b)) },
    {
      name: 'rate limit: response encode',
      batch: 2000,
      meaning: (a, b) => b.rls.decodeResponse(a as Buffer),
      run: (b) =>
        b.rls.encodeResponse({
          overallCode: 1,
          statuses: [
            { code: 1, limit: { requestsPerUnit: 600, unit: 2 }, remaining: 599, resetSeconds: 41 },
            { code: 1, limit: { requestsPerUnit: 100000, unit: 2 }, remaining: 98199, resetSeconds: 41 },
          ],
        }),
    },
  ];

  function rlsRequest(b: Build): Uint8Array {
    return (rlsBytes ??= b.rls.encodeRequest({ domain: 'modelgate', descriptors, hitsAddend: 1 }));
  }
}
let rlsBytes: Uint8Array | undefined;

const nowNs = (): bigint => process.hrtime.bigint();

/** Plain data of a reader's answer, for comparing two builds (views of bytes as arrays). */
const plain = (v: unknown): unknown =>
  JSON.parse(JSON.stringify(v, (_k, x: unknown) => (x instanceof Uint8Array ? Array.from(x) : x)));

export interface WireBenchRow {
  readonly name: string;
  /** Median time per call of this build, µs. */
  readonly us: number;
  readonly baselineUs?: number;
  /** us / baselineUs. */
  readonly ratio?: number;
}

export function benchWireReaders(
  rounds: number,
  baselineDir?: string,
  currentDir = path.join(ROOT, 'dist', 'src'),
  only = '',
): WireBenchRow[] {
  const builds = [
    loadBuild('this build', path.resolve(currentDir)),
    ...(baselineDir ? [loadBuild('baseline', path.resolve(baselineDir))] : []),
  ];
  const rows: WireBenchRow[] = [];
  for (const c of cases().filter((x) => x.name.startsWith(only))) {
    const answers = builds.map((b) => plain(c.meaning ? c.meaning(c.run(b), builds[0]) : c.run(b)));
    if (answers.length === 2 && !isDeepStrictEqual(answers[0], answers[1]))
      throw new Error(`${c.name}: the builds disagree`);
    for (let i = 0; i < 200; i++) for (const b of builds) c.run(b);
    const times = builds.map((): number[] => []);
    let sink = 0;
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? builds.map((_, i) => i) : builds.map((_, i) => builds.length - 1 - i);
      for (const i of order) {
        const t = nowNs();
        for (let k = 0; k < c.batch; k++) sink += c.run(builds[i]) === undefined ? 0 : 1;
        times[i].push(Number(nowNs() - t) / 1000 / c.batch);
      }
    }
    if (sink === 0) throw new Error(`${c.name}: no answers`);
    const us = median(times[0]);
    const base = builds.length === 2 ? median(times[1]) : undefined;
    rows.push({ name: c.name, us, ...(base !== undefined ? { baselineUs: base, ratio: us / base } : {}) });
  }
  return rows;
}

function main(): void {
  const flag = (n: string): string | undefined =>
    process.argv.find((a) => a.startsWith(`--${n}=`))?.slice(n.length + 3);
  const rows = benchWireReaders(Number(flag('rounds') ?? 60), flag('baseline'), flag('current'), flag('only'));
  for (const r of rows) {
    process.stdout.write(
      `${r.name.padEnd(34)} ${r.us.toFixed(3).padStart(9)} µs${r.baselineUs !== undefined ? `   baseline ${r.baselineUs.toFixed(3).padStart(9)} µs   ratio ${r.ratio!.toFixed(3)}` : ''}\n`,
    );
  }
  const out = flag('out');
  if (out) writeFileSync(out, JSON.stringify(rows, null, 2));
}

if (require.main === module) main();

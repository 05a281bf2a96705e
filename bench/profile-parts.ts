/**
 * Where a modelgate process's time went under load, by part (the Check, the transport, the meter's
 * admission, report decoding, settling and estimates, logging, metrics, GC), in µs per request: a
 * summary of a `.cpuprofile` written by `npm run bench:e2e -- --node-flags="--cpu-prof --cpu-prof-dir=DIR"`.
 *
 *   node dist/bench/profile-parts.js PROFILE REQUESTS [WORKER_PROFILE...]
 *
 * REQUESTS: the requests the process answered while profiled (the bench's log: req/s x (warm-up +
 * duration) of its runs). Only samples between the first and the last one with the Check on the stack
 * count (startup and idle are left out). Each sample goes to the part of the innermost modelgate or
 * library frame on its stack, so native work (a socket write, a Buffer copy) counts for its caller.
 * The profile samples wall time: a thread preempted by another on its core (Envoy, the tokenizer's
 * worker) counts as busy where it stood. Read the parts as shares, and CPU per request from the bench.
 */
import { readFileSync } from 'node:fs';
import type { Profile, ProfileNode } from './cpu-profile-top';

/** First match wins; tested against each frame's script URL, innermost frame first. */
const PARTS: ReadonlyArray<readonly [RegExp, string]> = [
  [/\/src\/meter\/estimate|gpt-tokenizer|node:internal\/worker/, 'meter: estimate (tokenizer handoff)'],
  [/\/src\/meter\/(admission|in-flight|request-shape|leases)/, 'meter: admission (hold, reservation)'],
  [/\/src\/meter\/access-log/, 'meter: report decoding (access log)'],
  [
    /\/src\/meter\/|\/src\/server\/meter-service|\/src\/store\/(file-meter|pg-meter)/,
    'meter: settle (usage, debit, ledger)',
  ],
  [/\/src\/check\/|\/packages\/json-scan\/|@modelgate\/json-scan/, 'Check: read, decide, write'],
  [
    /\/src\/grpc\/|\/src\/server\/grpc-server|\/packages\/grpc-server\/|@modelgate\/grpc-server/,
    'gRPC transport (HTTP/2)',
  ],
  [/prom-client/, 'metrics'],
  [/pino|sonic-boom|\/src\/server\/log-stream/, 'logging'],
  [/\/src\/store\//, 'store (cache)'],
  [/\/src\//, 'other modelgate'],
  [/node_modules/, 'other libraries'],
];

function read(file: string): { p: Profile; byId: Map<number, ProfileNode>; parent: Map<number, number> } {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  return { p, byId, parent };
}

/**
 * Folders read on behalf of a caller (the protocol modules, the wire reader, the shared vocabulary): their frames count
 * for the part of the frame that called them, so a build with them and one from before them compare part by part.
 */
const ON_BEHALF = /\/src\/(providers|wire|contract|errors)\//;

function partOf(prof: ReturnType<typeof read>, id: number): string | undefined {
  const fn = prof.byId.get(id)!.callFrame.functionName;
  if (fn === '(idle)') return undefined;
  if (fn === '(garbage collector)') return 'V8: garbage collector';
  if (fn === '(program)') return 'V8: (program)';
  for (let x: number | undefined = id; x !== undefined; x = prof.parent.get(x)) {
    const url = prof.byId.get(x)!.callFrame.url;
    if (ON_BEHALF.test(url)) continue;
    for (const [re, part] of PARTS) if (re.test(url)) return part;
  }
  return 'node internals (event loop, sockets)';
}

/** Per-sample timestamps, and the window from the first to the last sample with the Check on the stack. */
function loadWindow(prof: ReturnType<typeof read>): { times: number[]; first: number; last: number } {
  const checks = new Set(prof.p.nodes.filter((n) => /\/src\/check\/pipeline/.test(n.callFrame.url)).map((n) => n.id));
  const times: number[] = [];
  let t = prof.p.startTime,
    first = Infinity,
    last = 0;
  for (let i = 0; i < prof.p.samples.length; i++) {
    t += prof.p.timeDeltas[i] ?? 0;
    times.push(t);
    let x: number | undefined = prof.p.samples[i];
    while (x !== undefined && !checks.has(x)) x = prof.parent.get(x);
    if (x !== undefined) {
      first = Math.min(first, t);
      last = t;
    }
  }
  return { times, first, last };
}

export function profileParts(
  file: string,
  requests: number,
  workers: readonly string[] = [],
): { part: string; usPerRequest: number }[] {
  const prof = read(file);
  const { times, first, last } = loadWindow(prof);
  const parts = new Map<string, number>();
  for (let i = 0; i < prof.p.samples.length; i++) {
    if (times[i] < first || times[i] > last) continue;
    const part = partOf(prof, prof.p.samples[i]);
    if (part !== undefined) parts.set(part, (parts.get(part) ?? 0) + (prof.p.timeDeltas[i] ?? 0));
  }
  for (const w of workers) {
    const wp = read(w);
    let t = wp.p.startTime,
      busy = 0;
    for (let i = 0; i < wp.p.samples.length; i++) {
      t += wp.p.timeDeltas[i] ?? 0;
      if (t >= first && t <= last && wp.byId.get(wp.p.samples[i])!.callFrame.functionName !== '(idle)')
        busy += wp.p.timeDeltas[i] ?? 0;
    }
    parts.set(
      'meter: estimate (tokenizer worker thread)',
      (parts.get('meter: estimate (tokenizer worker thread)') ?? 0) + busy,
    );
  }
  return [...parts]
    .map(([part, us]) => ({ part, usPerRequest: us / requests }))
    .sort((a, b) => b.usPerRequest - a.usPerRequest);
}

if (require.main === module) {
  const [file, requests, ...workers] = process.argv.slice(2);
  if (!file || !(Number(requests) > 0)) {
    console.error('usage: node dist/bench/profile-parts.js PROFILE REQUESTS [WORKER_PROFILE...]');
    process.exit(2);
  }
  const rows = profileParts(file, Number(requests), workers);
  const total = rows.reduce((s, r) => s + r.usPerRequest, 0);
  console.log(`| part | µs per request |\n| --- | --- |`);
  for (const r of rows) console.log(`| ${r.part} | ${r.usPerRequest.toFixed(1)} |`);
  console.log(`| total (wall time busy) | ${total.toFixed(1)} |`);
}

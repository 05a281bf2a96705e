/**
 * The scanner on a 1 MiB chat body (long strings with escapes, unicode, JSON inside strings) against
 * JSON.parse of the same bytes, and optionally against another build of the scanner (`--before`):
 * the same buffer, alternating rounds, the median CPU time per call.
 *
 * Usage (after the root's `npm run build:bench`):
 *   node dist/packages/json-scan/bench/scan.bench.js [--before=path/to/scanner.js] [--rounds=N]
 */
import { scanJson } from '../src/scanner';

/** A scan function: this package's scanJson, or another build's. */
export type Scan = (body: Uint8Array) => unknown;

const SENTENCES = [
  'The gateway checks every request before it reaches the model.',
  'A "quoted" word, a tab\tand a newline\nkeep the JSON escapes honest: C:\\path\\to\\file.',
  'Ünïcödé text and emoji 🚀 are part of real prompts too.',
  'Tool arguments are JSON inside a string: {"model":"evil","n":[1,2]}',
];

/** About `size` bytes of chat messages, then `"model"` last (where SDKs put it). */
export function chatBody(size: number): Buffer {
  const messages: string[] = [];
  for (let used = 0, i = 0; used < size; i++) {
    const message = JSON.stringify({
      role: i % 2 ? 'assistant' : 'user',
      content: SENTENCES.slice(i % 4)
        .concat(SENTENCES)
        .join(' ')
        .repeat(1 + (i % 7)),
    });
    messages.push(message);
    used += Buffer.byteLength(message) + 1;
  }
  return Buffer.from(`{"messages":[${messages.join(',')}],"model":"gpt-4o-mini"}`);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/**
 * Median µs of CPU time (user + system; unlike wall time, not lengthened by other processes on a
 * shared machine) per call of each function on the same body, in alternating rounds after a warm-up.
 */
export function benchScan(fns: ReadonlyMap<string, Scan>, body: Buffer, rounds = 200): Map<string, number> {
  const times = new Map<string, number[]>([...fns.keys()].map((k) => [k, []]));
  let sink = 0;
  for (let i = 0; i < 20; i++) for (const fn of fns.values()) sink += fn(body) ? 1 : 0;
  const order = [...fns];
  for (let r = 0; r < rounds; r++) {
    // Each function goes first in every other round, so none gains from its place in the round.
    for (const [name, fn] of r % 2 ? [...order].reverse() : order) {
      const c = process.cpuUsage();
      sink += fn(body) ? 1 : 0;
      const used = process.cpuUsage(c);
      times.get(name)!.push(used.user + used.system);
    }
  }
  if (sink === 0) throw new Error('unreachable');
  return new Map([...times].map(([k, v]) => [k, median(v)]));
}

function main(): void {
  const before = process.argv.find((a) => a.startsWith('--before='))?.slice(9);
  const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.slice(9) ?? 200);
  const body = chatBody(1024 * 1024);
  const fns = new Map<string, Scan>([
    ['scanJson (this build)', (b) => scanJson(b)],
    ['JSON.parse(buf.toString())', (b) => JSON.parse(b.toString()) as unknown],
  ]);
  if (before) fns.set('scanJson (before)', (require(before) as { scanJson: Scan }).scanJson);
  for (const [name, us] of benchScan(fns, body, rounds))
    console.log(
      `json-scan ${(body.length / 1024 / 1024).toFixed(2)} MiB chat body, ${name}: ${us.toFixed(0)} µs CPU per call (median of ${rounds})`,
    );
}

if (require.main === module) main();

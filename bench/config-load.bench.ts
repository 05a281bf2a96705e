/**
 * How long reading a config file takes (YAML parse, validation, the frozen Config), which is what
 * start and every hot reload pay: the demo file, and a file with 100,000 keys. Not part of
 * `npm run bench` (it needs no server); run it alone after a build:
 *
 *   node dist/bench/config-load.bench.js [KEYS]
 *
 * Prints the median of several runs of each: the whole load, and validation with freezing alone
 * (on data parsed once).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseDocument } from 'yaml';
import { configFromData, parseConfig } from '../src/config/load';

const ROOT = join(__dirname, '..', '..');

/** The demo file's groups plus `count` generated keys (every shape a key entry can have). */
export function configWithKeys(count: number): string {
  const demo = readFileSync(join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8');
  const lines = [demo.slice(0, demo.indexOf('\nkeys:')), 'keys:'];
  const groups = ['basic', 'pro', 'paused'];
  for (let i = 0; i < count; i++) {
    const sha = createHash('sha256').update(`key-${i}`).digest('hex');
    lines.push(`  - id: key-${i}`, `    sha256: ${sha}`, `    group: ${groups[i % 3]}`);
    if (i % 2 === 0) lines.push(`    balance: ${(i % 1000) / 10}`);
    if (i % 7 === 0) lines.push('    disabled: true');
    if (i % 11 === 0) lines.push('    expiresAt: 2030-01-01T00:00:00Z');
  }
  return `${lines.join('\n')}\n`;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** Median milliseconds of `runs` calls of `fn` (after one warm-up call). */
function time(runs: number, fn: () => unknown): number {
  fn();
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    fn();
    ms.push(performance.now() - t);
  }
  return median(ms);
}

function report(name: string, text: string, runs: number): void {
  const data = parseDocument(text, { uniqueKeys: true, prettyErrors: false }).toJS();
  const total = time(runs, () => parseConfig(text));
  const validation = time(runs, () => configFromData(data));
  const keys = parseConfig(text).keys.length;
  console.log(
    `${name}: ${keys} keys, ${(text.length / 1024).toFixed(0)} KiB: load ${total.toFixed(2)} ms, of which validation and freeze ${validation.toFixed(2)} ms (the rest is the YAML parse); median of ${runs}`,
  );
}

if (require.main === module) {
  const keys = Number(process.argv[2] ?? 100_000);
  report('demo config', readFileSync(join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8'), 500);
  report('generated config', configWithKeys(keys), 7);
}

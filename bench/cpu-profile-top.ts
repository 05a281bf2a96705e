/**
 * Summarises a V8 .cpuprofile (node --cpu-prof): self time per function, and per code area
 * (modelgate src/, grpc-js, protobufjs, pino, node internals, GC, idle).
 */
import { readFileSync } from 'node:fs';

/** A V8 `.cpuprofile` (node --cpu-prof), the parts read here and in profile-parts.ts. */
export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

export interface Profile {
  nodes: ProfileNode[];
  /** µs, the clock the samples' timeDeltas count from. */
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileRow {
  readonly name: string;
  readonly where: string;
  readonly selfPct: number;
}

export interface ProfileSummary {
  readonly totalMs: number;
  readonly top: ProfileRow[];
  readonly areas: { area: string; selfPct: number }[];
}

function area(url: string, fn: string): string {
  if (fn === '(idle)') return 'idle';
  if (fn === '(garbage collector)') return 'GC';
  if (fn === '(program)') return 'V8/native (program)';
  if (url.includes('/dist/src/')) return 'modelgate src/';
  // The workspace packages (their realpath: packages/<name>/dist/, or node_modules/@modelgate/ in an install).
  if (/\/packages\/[^/]+\/dist\/|@modelgate\//.test(url)) return 'modelgate packages/ (gRPC server, JSON scanner)';
  if (url.includes('@grpc/grpc-js')) return 'grpc-js';
  if (url.includes('protobufjs') || url.includes('@protobufjs')) return 'protobufjs';
  if (url.includes('/pino') || url.includes('sonic-boom') || url.includes('fast-json-stringify'))
    return 'pino (logging)';
  if (url.includes('prom-client')) return 'prom-client (metrics)';
  if (url.includes('lru-cache')) return 'lru-cache';
  if (url.startsWith('node:')) return 'node internals (http2, net, streams)';
  if (url === '') return 'native/builtins';
  return 'other';
}

export function summarizeProfile(file: string, topN = 15): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const dt = p.timeDeltas[i] ?? 0;
    self.set(p.samples[i], (self.get(p.samples[i]) ?? 0) + dt);
    total += dt;
  }
  const fnTotals = new Map<string, { name: string; where: string; us: number }>();
  const areaTotals = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const { functionName, url, lineNumber } = n.callFrame;
    const where = url ? `${url.replace(/^.*\/(node_modules|dist)\//, '$1/')}:${lineNumber + 1}` : '';
    const key = `${functionName}|${where}`;
    const row = fnTotals.get(key) ?? { name: functionName || '(anonymous)', where, us: 0 };
    row.us += us;
    fnTotals.set(key, row);
    const a = area(url, functionName);
    areaTotals.set(a, (areaTotals.get(a) ?? 0) + us);
  }
  const busy = total - (areaTotals.get('idle') ?? 0);
  const pct = (us: number) => (100 * us) / busy;
  return {
    totalMs: total / 1000,
    top: [...fnTotals.values()]
      .filter((r) => r.name !== '(idle)')
      .sort((a, b) => b.us - a.us)
      .slice(0, topN)
      .map((r) => ({ name: r.name, where: r.where, selfPct: pct(r.us) })),
    areas: [...areaTotals.entries()]
      .filter(([a]) => a !== 'idle')
      .sort((a, b) => b[1] - a[1])
      .map(([a, us]) => ({ area: a, selfPct: pct(us) })),
  };
}

if (require.main === module) {
  const s = summarizeProfile(process.argv[2], Number(process.argv[3] ?? 25));
  console.log(JSON.stringify(s, null, 2));
}

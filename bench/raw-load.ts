/** Runs the raw HTTP/2 load generator (raw-load-process.ts) as a child process, pinned like h2load. */
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import type { RawLoadResult, RawLoadSpec } from './raw-load-process';

const ROOT = path.resolve(__dirname, '..', '..');

export async function runRawLoad(spec: RawLoadSpec, outDir: string, cpus?: string): Promise<RawLoadResult> {
  const specFile = path.join(outDir, `raw-spec-${process.pid}-${Date.now()}.json`);
  const resultFile = specFile.replace('raw-spec', 'raw-result');
  writeFileSync(specFile, JSON.stringify(spec));
  const script = path.join(ROOT, 'dist', 'bench', 'raw-load-process.js');
  // A larger young generation: fewer scavenges, so fewer client-side pauses in the paced runs.
  const node = [process.execPath, '--max-semi-space-size=64', script, specFile, resultFile];
  const [cmd, argv] = cpus ? ['taskset', ['-c', cpus, ...node]] : [node[0], node.slice(1)];
  await new Promise<void>((resolve, reject) => {
    const child = spawn(cmd as string, argv as string[], { stdio: ['ignore', 'inherit', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`raw load generator exited ${code}: ${err}`)),
    );
  });
  const result = JSON.parse(readFileSync(resultFile, 'utf8')) as RawLoadResult;
  rmSync(specFile, { force: true });
  rmSync(resultFile, { force: true });
  return result;
}

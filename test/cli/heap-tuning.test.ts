/**
 * serve and up set V8's old-generation growth (src/cli/heap-tuning.ts) unless the operator did.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, test } from 'vitest';
import { HEAP_GROWING_PERCENT, tuneHeap } from '../../src/cli/heap-tuning';

describe('tuneHeap', () => {
  test('sets --heap-growing-percent when neither the command line nor NODE_OPTIONS gives it', () => {
    const set: string[] = [];
    expect(tuneHeap(['--enable-source-maps'], '--max-old-space-size=512', (f) => set.push(f))).toBe(
      `--heap-growing-percent=${HEAP_GROWING_PERCENT}`,
    );
    expect(set).toEqual([`--heap-growing-percent=${HEAP_GROWING_PERCENT}`]);
  });

  test.each([
    ['the command line', ['--heap-growing-percent=50'], undefined],
    ['NODE_OPTIONS', [], '--trace-gc --heap-growing-percent=300'],
    ['NODE_OPTIONS, with underscores', [], '--heap_growing_percent=300'],
  ])('leaves it to the operator who gave it on %s', (_where, execArgv, nodeOptions) => {
    const set: string[] = [];
    expect(tuneHeap(execArgv, nodeOptions, (f) => set.push(f))).toBeUndefined();
    expect(set).toEqual([]);
  });

  test('V8 takes the flag in a running process and keeps collecting', () => {
    const r = spawnSync(
      process.execPath,
      [
        '--expose-gc',
        '-e',
        `
      require('node:v8').setFlagsFromString('--heap-growing-percent=${HEAP_GROWING_PERCENT}');
      let keep = [];
      for (let i = 0; i < 200; i++) { keep.push(Buffer.allocUnsafe(256 * 1024).subarray(1)); if (keep.length > 8) keep = []; global.gc(); }
      console.log('ok');`,
      ],
      { encoding: 'utf8' },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('ok');
  });
});

/**
 * The pool that assembles borrowed requests (src/buffer-pool.ts): bounded in buffers and bytes,
 * the smallest fitting buffer first, and never the same buffer to two takers.
 */
import { describe, expect, test } from 'vitest';
import { BufferPool } from '../src/buffer-pool';

describe('BufferPool', () => {
  test('gives a new buffer of its own memory, in steps of 64 KiB, when it keeps none that fits', () => {
    const pool = new BufferPool();
    const b = pool.take(300_000);
    expect(b.length).toBe(5 * 65536);
    expect(b.byteOffset).toBe(0);
    expect(b.buffer.byteLength).toBe(b.length);
    expect(pool.take(1).length).toBe(65536);
  });

  test('takes back a buffer and gives the smallest that fits, once', () => {
    const pool = new BufferPool();
    const big = pool.take(400_000);
    const small = pool.take(100_000);
    pool.give(big);
    pool.give(small);
    expect(pool.size).toEqual({ buffers: 2, bytes: big.length + small.length });
    expect(pool.take(90_000)).toBe(small);
    expect(pool.take(90_000)).toBe(big);
    expect(pool.take(90_000)).not.toBe(big);
    expect(pool.size).toEqual({ buffers: 0, bytes: 0 });
  });

  test('keeps a buffer given twice once, so two takers never fill the same bytes', () => {
    const pool = new BufferPool();
    const b = pool.take(1000);
    pool.give(b);
    pool.give(b);
    expect(pool.size.buffers).toBe(1);
    const first = pool.take(1000);
    expect(first).toBe(b);
    expect(pool.take(1000)).not.toBe(first);
  });

  test('drops a buffer given past its count or its bytes', () => {
    const byCount = new BufferPool(2, 1 << 30);
    for (let i = 0; i < 3; i++) byCount.give(Buffer.allocUnsafeSlow(65536));
    expect(byCount.size).toEqual({ buffers: 2, bytes: 2 * 65536 });
    const byBytes = new BufferPool(10, 3 * 65536);
    byBytes.give(Buffer.allocUnsafeSlow(2 * 65536));
    byBytes.give(Buffer.allocUnsafeSlow(2 * 65536));
    byBytes.give(Buffer.allocUnsafeSlow(65536));
    expect(byBytes.size).toEqual({ buffers: 2, bytes: 3 * 65536 });
  });
});

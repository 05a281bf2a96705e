/**
 * gRPC's Length-Prefixed-Messages read however the DATA frames cut them: every split point of a
 * run of messages gives the same messages; limits and flags are problems, never throws.
 */
import { describe, expect, test } from 'vitest';
import { BufferPool } from '../src/buffer-pool';
import { frameMessage, MessageReader } from '../src/message-reader';

function readAll(chunks: Buffer[], limit = 1 << 20): { messages: string[]; problem: string | undefined } {
  const messages: string[] = [];
  const reader = new MessageReader(limit, (m) => messages.push(m.toString('latin1')));
  for (const c of chunks) reader.push(c);
  reader.end();
  return { messages, problem: reader.problem };
}

const run = Buffer.concat(
  ['first', '', 'a third, longer message', 'x'.repeat(300)].map((s) => frameMessage(Buffer.from(s))),
);
const expected = ['first', '', 'a third, longer message', 'x'.repeat(300)];

describe('MessageReader', () => {
  test('reads the same messages at every single split point of the stream', () => {
    for (let i = 0; i <= run.length; i++) {
      expect(readAll([run.subarray(0, i), run.subarray(i)])).toEqual({ messages: expected, problem: undefined });
    }
  });

  test('reads the same messages when every byte is its own chunk', () => {
    expect(readAll([...run].map((b) => Buffer.from([b])))).toEqual({ messages: expected, problem: undefined });
  });

  test('reads the same messages from 2,000 random cuttings into 1 to 8 pieces', () => {
    let seed = 7;
    const rnd = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let round = 0; round < 2000; round++) {
      const cuts = [...new Set(Array.from({ length: rnd(8) }, () => rnd(run.length + 1)))].sort((a, b) => a - b);
      const pieces: Buffer[] = [];
      let last = 0;
      for (const c of [...cuts, run.length]) {
        pieces.push(run.subarray(last, c));
        last = c;
      }
      expect(readAll(pieces).messages).toEqual(expected);
    }
  });

  test('hands a message that arrives whole on as a view of its chunk, not a copy', () => {
    const chunk = frameMessage(Buffer.from('hello'));
    let seen: Buffer | undefined;
    new MessageReader(100, (m) => (seen = m)).push(chunk);
    expect(seen!.buffer).toBe(chunk.buffer);
  });

  test('refuses a message announced over the limit before keeping any of it', () => {
    const big = frameMessage(Buffer.alloc(101));
    expect(readAll([big.subarray(0, 7)], 100)).toEqual({ messages: [], problem: 'too_large' });
    expect(readAll([frameMessage(Buffer.alloc(100))], 100).problem).toBeUndefined();
  });

  test('refuses a compressed message (no grpc-encoding is accepted)', () => {
    const m = frameMessage(Buffer.from('zz'));
    m[0] = 1;
    expect(readAll([m])).toEqual({ messages: [], problem: 'compressed' });
  });

  test('calls a stream that ends inside a message or its prefix truncated', () => {
    const m = frameMessage(Buffer.from('abcdef'));
    expect(readAll([m.subarray(0, 3)]).problem).toBe('truncated');
    expect(readAll([m.subarray(0, 8)]).problem).toBe('truncated');
    expect(readAll([m]).problem).toBeUndefined();
  });

  test('ignores whatever follows a problem', () => {
    const bad = frameMessage(Buffer.from('q'));
    bad[0] = 1;
    expect(
      readAll([Buffer.concat([frameMessage(Buffer.from('ok')), bad, frameMessage(Buffer.from('later'))])]),
    ).toEqual({ messages: ['ok'], problem: 'compressed' });
  });

  test('with a pool, assembles a message cut across chunks in a pool buffer and hands it on with that loan', () => {
    const pool = new BufferPool();
    const message = Buffer.alloc(200_000, 7);
    const framed = frameMessage(message);
    const seen: { message: Buffer; loan: Buffer | undefined }[] = [];
    const reader = new MessageReader(1 << 20, (m, loan) => seen.push({ message: m, loan }), pool);
    for (let at = 0; at < framed.length; at += 65536) reader.push(framed.subarray(at, at + 65536));
    reader.end();
    expect(reader.problem).toBeUndefined();
    expect(seen).toHaveLength(1);
    expect(seen[0].message.equals(message)).toBe(true);
    expect(seen[0].message.buffer).toBe(seen[0].loan!.buffer);
    pool.give(seen[0].loan!);
    // The next one reuses it; one that arrives whole is a view of its chunk, with no loan.
    const again: (Buffer | undefined)[] = [];
    const next = new MessageReader(1 << 20, (_m, loan) => again.push(loan), pool);
    next.push(framed.subarray(0, 10));
    next.push(framed.subarray(10));
    next.push(frameMessage(Buffer.from('whole')));
    expect(again).toEqual([seen[0].loan, undefined]);
  });

  test('with a pool, reads the same messages from 500 random cuttings, loans given back as they come', () => {
    const pool = new BufferPool();
    const big = Buffer.alloc(150_000, 'y');
    const stream = Buffer.concat([run, frameMessage(big), run]);
    const want = [...expected, big.toString('latin1'), ...expected];
    let seed = 11;
    const rnd = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let round = 0; round < 500; round++) {
      const got: string[] = [];
      const reader = new MessageReader(
        1 << 20,
        (m, loan) => {
          got.push(m.toString('latin1'));
          if (loan) pool.give(loan);
        },
        pool,
      );
      let at = 0;
      while (at < stream.length) {
        const n = 1 + rnd(70_000);
        reader.push(stream.subarray(at, at + n));
        at += n;
      }
      reader.end();
      expect(got).toEqual(want);
    }
    expect(pool.size.buffers).toBeGreaterThan(0);
  });

  test('with a pool, gives back the buffer of a message the stream ended inside', () => {
    const pool = new BufferPool();
    const framed = frameMessage(Buffer.alloc(100_000));
    const reader = new MessageReader(1 << 20, () => {}, pool);
    reader.push(framed.subarray(0, 50_000));
    expect(pool.size.buffers).toBe(0);
    reader.end();
    expect(reader.problem).toBe('truncated');
    expect(pool.size.buffers).toBe(1);
  });

  test('with a pool, grows a message past its first buffer from the pool and gives the smaller one back', () => {
    const pool = new BufferPool();
    const message = Buffer.alloc(1_500_000);
    for (let i = 0; i < message.length; i++) message[i] = i % 251;
    const framed = frameMessage(message);
    const got: Buffer[] = [];
    const reader = new MessageReader(4 << 20, (m) => got.push(m), pool);
    for (let at = 0; at < framed.length; at += 65536) reader.push(framed.subarray(at, at + 65536));
    reader.end();
    expect(got).toHaveLength(1);
    expect(got[0].equals(message)).toBe(true);
    expect(pool.size.buffers).toBe(1);
  });
});

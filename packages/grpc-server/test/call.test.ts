/**
 * One call (src/call.ts) against a recording ResponseStream: what reaches the method and what
 * the transport is asked to write, whatever order the events come in.
 */
import { describe, expect, test } from 'vitest';
import { BufferPool } from '../src/buffer-pool';
import { CallTracker, openCall, type Method, type ResponseStream } from '../src/call';
import { frameMessage } from '../src/message-reader';
import { GrpcStatus } from '../src/status';

function recorder(): ResponseStream & { log: string[]; writable: boolean } {
  const r = {
    log: [] as string[],
    writable: true,
    send: (m: Buffer) => void r.log.push(`send ${m.toString()}`),
    sendUnary: (m: Buffer) => void r.log.push(`unary ${m.toString()}`),
    end: (code: number, message: string) => void r.log.push(`end ${code} ${message}`),
    refuse: (status: number) => void r.log.push(`refuse ${status}`),
  };
  return r;
}

const ctx = (errors: unknown[] = []) => ({
  limit: 1024,
  tracker: new CallTracker(),
  onError: (e: unknown) => void errors.push(e),
});

describe('a streaming call', () => {
  test('hears no message after it finished itself, and close comes last, once', () => {
    const heard: string[] = [];
    const method: Method = {
      kind: 'stream',
      open: (call) => ({
        message: (m) => {
          heard.push(`message ${m.toString()}`);
          call.finish();
        },
        end: () => heard.push('end'),
        close: () => heard.push('close'),
      }),
    };
    const res = recorder();
    const events = openCall(method, res, ctx());
    events.data(Buffer.concat(['a', 'b', 'c'].map((s) => frameMessage(Buffer.from(s)))));
    events.closed();
    expect(heard).toEqual(['message a', 'close']);
    expect(res.log).toEqual(['end 0 ']);
  });
});

describe('a unary call', () => {
  test("whose method's own answer to unreadable bytes throws fails alone with the framing problem's status, reported, not thrown into the transport", () => {
    const errors: unknown[] = [];
    const method: Method = {
      kind: 'unary',
      handle: (r) => r,
      unreadable: () => {
        throw new Error('boom');
      },
    };
    const res = recorder();
    const events = openCall(method, res, ctx(errors));
    const compressed = frameMessage(Buffer.from('x'));
    compressed[0] = 1;
    expect(() => events.data(compressed)).not.toThrow();
    expect(res.log).toEqual([
      `end ${GrpcStatus.INTERNAL} compressed message received but no grpc-encoding is accepted`,
    ]);
    expect(errors).toHaveLength(1);
  });

  test('whose asynchronous answer meets a transport that throws reports it, and the process goes on', async () => {
    const errors: unknown[] = [];
    const method: Method = { kind: 'unary', handle: async (r) => r };
    const res = recorder();
    res.sendUnary = () => {
      throw new Error('stream closed under us');
    };
    const tracker = new CallTracker();
    const events = openCall(method, res, { ...ctx(errors), tracker });
    events.data(frameMessage(Buffer.from('x')));
    events.end();
    await new Promise((r) => setImmediate(r));
    expect(errors).toHaveLength(1);
    expect(tracker.unaryInFlight).toBe(0);
  });

  test('answered once, whichever of answer, failure and reset comes first', async () => {
    let resolve!: (b: Buffer) => void;
    const method: Method = { kind: 'unary', handle: () => new Promise<Buffer>((r) => (resolve = r)) };
    const res = recorder();
    const tracker = new CallTracker();
    const events = openCall(method, res, { ...ctx(), tracker });
    events.data(frameMessage(Buffer.from('x')));
    events.end();
    events.closed();
    res.writable = false;
    resolve(Buffer.from('late'));
    await new Promise((r) => setImmediate(r));
    expect(res.log).toEqual([]);
    expect(tracker.unaryInFlight).toBe(0);
  });
});

describe('a unary call that borrows its request', () => {
  const big = frameMessage(Buffer.alloc(100_000, 'q'));
  const cutSend = (events: { data(c: Buffer): void; end(): void }): void => {
    events.data(big.subarray(0, 40_000));
    events.data(big.subarray(40_000));
    events.end();
  };
  const poolCtx = (pool: BufferPool) => ({ ...ctx(), limit: 1 << 20, pool });

  test('gives the buffer its request was assembled in back to the pool once its answer is ready, and not before', () => {
    const pool = new BufferPool();
    let inPool = -1;
    const method: Method = {
      kind: 'unary',
      borrowsRequest: true,
      handle: (r) => {
        inPool = pool.size.buffers;
        return Buffer.from(String(r.length));
      },
    };
    const res = recorder();
    cutSend(openCall(method, res, poolCtx(pool)));
    expect(inPool).toBe(0);
    expect(pool.size.buffers).toBe(1);
    expect(res.log).toEqual(['unary 100000']);
  });

  test('keeps it while its promise is pending, even after the client reset the stream', async () => {
    const pool = new BufferPool();
    let release!: () => void;
    const method: Method = {
      kind: 'unary',
      borrowsRequest: true,
      handle: async (r) => {
        await new Promise<void>((done) => (release = done));
        return Buffer.from(r.subarray(0, 1));
      },
    };
    const res = recorder();
    const events = openCall(method, res, poolCtx(pool));
    cutSend(events);
    res.writable = false;
    events.closed();
    await Promise.resolve();
    expect(pool.size.buffers).toBe(0);
    release();
    await new Promise((r) => setImmediate(r));
    expect(pool.size.buffers).toBe(1);
    expect(res.log).toEqual([]);
  });

  test('gives it back when the handler throws, and when the request is not one message', async () => {
    const pool = new BufferPool();
    const throwing: Method = {
      kind: 'unary',
      borrowsRequest: true,
      handle: () => {
        throw new Error('no');
      },
    };
    cutSend(openCall(throwing, recorder(), poolCtx(pool)));
    expect(pool.size.buffers).toBe(1);
    const twice: Method = { kind: 'unary', borrowsRequest: true, handle: (r) => r };
    const events = openCall(twice, recorder(), poolCtx(pool));
    events.data(big.subarray(0, 40_000));
    events.data(Buffer.concat([big.subarray(40_000), big.subarray(0, 50_000)]));
    events.data(big.subarray(50_000));
    events.end();
    expect(pool.size.buffers).toBe(2);
  });

  test("a method that does not borrow gets a buffer of its own, never the pool's", () => {
    const pool = new BufferPool();
    const kept: Buffer[] = [];
    const method: Method = { kind: 'unary', handle: (r) => (kept.push(r), Buffer.from('ok')) };
    cutSend(openCall(method, recorder(), poolCtx(pool)));
    expect(pool.size.buffers).toBe(0);
    expect(kept[0].equals(big.subarray(5))).toBe(true);
  });
});

/**
 * One call (src/call.ts) against a recording ResponseStream: what reaches the method and what
 * the transport is asked to write, whatever order the events come in.
 */
import { describe, expect, test } from 'vitest';
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

/**
 * One gRPC call, whatever carries it: the request's messages read from its DATA, the method run,
 * the answer written. A transport (h2/connection.ts, node-transport.ts) gives each call a
 * ResponseStream and feeds it RequestEvents.
 */
import type { BufferPool } from './buffer-pool';
import { MessageReader, type FramingProblem } from './message-reader';
import { encodeGrpcMessage, GrpcError, GrpcStatus, type GrpcStatusCode } from './status';

/** Why a unary call's request is not exactly one acceptable message. */
export type RequestProblem = FramingProblem | 'no_message' | 'extra_message';

/** A call with one request message and one response message. */
export interface UnaryMethod {
  readonly kind: 'unary';
  /**
   * The response to a request: at once, or a promise. A GrpcError (thrown or rejected) ends the call with its status.
   */
  handle(request: Buffer): Buffer | Promise<Buffer>;
  /**
   * The handler keeps no view of `request` once its answer (or the promise of it) settles, and its
   * answer is no view of it either (a transport may write it later): what must live on is copied.
   * Its requests cut across reads are then assembled in the server's BufferPool and their bytes
   * reused for later calls once the answer settles.
   */
  readonly borrowsRequest?: boolean;
  /**
   * The answer to a request that is not exactly one acceptable message. Without it, the call fails
   * (RESOURCE_EXHAUSTED for `too_large`, INTERNAL otherwise), as grpc-js's server answers.
   */
  unreadable?(problem: RequestProblem): Buffer;
}

/** A call with any number of messages each way (bidirectional, or server streaming). */
export interface StreamMethod {
  readonly kind: 'stream';
  open(call: StreamCall): StreamListener;
}

export interface StreamCall {
  /** Whether messages can still be sent (not finished, not reset by the client). */
  readonly open: boolean;
  send(message: Buffer): void;
  /** Ends the call with a status (OK by default); later calls do nothing. */
  finish(code?: GrpcStatusCode, message?: string): void;
}

export interface StreamListener {
  message(message: Buffer): void;
  /** The client has sent its last message (half-close). */
  end(): void;
  /** The call is over, whatever ended it (finished, reset, connection lost); called once. */
  close(): void;
}

export type Method = UnaryMethod | StreamMethod;

/** What a transport offers a call: the response side of one HTTP/2 stream. */
export interface ResponseStream {
  /** Whether the client can still be answered (not reset, connection up, response not ended). */
  readonly writable: boolean;
  /** One message, after the response headers if they are not sent yet. */
  send(message: Buffer): void;
  /** The whole of a unary answer: headers, the message, OK trailers (one write where it can). */
  sendUnary(message: Buffer): void;
  /** Ends the response with a status: trailers after messages, or a Trailers-Only answer. */
  end(code: GrpcStatusCode, message: string): void;
  /** A plain HTTP answer to a request that is not gRPC at all. */
  refuse(httpStatus: number, text: string): void;
}

/** What a call hears of the request side. */
export interface RequestEvents {
  data(chunk: Buffer): void;
  /** The client's END_STREAM. */
  end(): void;
  /** The stream is gone (reset, connection closed, or both sides ended); called once, last. */
  closed(): void;
}

/** The calls a server has open: what a drain waits for. */
export class CallTracker {
  unaryInFlight = 0;
  readonly streams = new Set<StreamCall>();
  onUnaryIdle: (() => void) | undefined;

  unaryDone(): void {
    if (--this.unaryInFlight === 0) this.onUnaryIdle?.();
  }
}

const ignore = (): void => {};

function statusOfError(err: unknown): [GrpcStatusCode, string] {
  if (err instanceof GrpcError) return [err.code, err.message];
  return [GrpcStatus.UNKNOWN, 'the handler failed'];
}

export function problemStatus(problem: RequestProblem, limit: number): [GrpcStatusCode, string] {
  if (problem === 'too_large') return [GrpcStatus.RESOURCE_EXHAUSTED, `received a message larger than max (${limit})`];
  if (problem === 'compressed')
    return [GrpcStatus.INTERNAL, 'compressed message received but no grpc-encoding is accepted'];
  return [GrpcStatus.INTERNAL, `request is not one message (${problem})`];
}

export interface CallContext {
  readonly limit: number;
  /** Where the requests of methods that borrow them are assembled (UnaryMethod.borrowsRequest). */
  readonly pool?: BufferPool;
  readonly tracker: CallTracker;
  readonly onError: (err: unknown) => void;
}

/** Starts a call of `method` on a stream whose request headers have been read. */
export function openCall(method: Method, res: ResponseStream, ctx: CallContext): RequestEvents {
  return method.kind === 'unary' ? openUnary(method, res, ctx) : openStream(method, res, ctx);
}

function openUnary(method: UnaryMethod, res: ResponseStream, ctx: CallContext): RequestEvents {
  ctx.tracker.unaryInFlight++;
  return new UnaryCall(method, res, ctx);
}

/**
 * One unary call: one object (methods on the prototype, no closures), since a Check is one of
 * these and the Check path counts its garbage.
 */
class UnaryCall implements RequestEvents {
  #request: Buffer | undefined;
  #count = 0;
  #settled = false;
  /** Whether the handler was given the request (it then holds #loans until its answer settles). */
  #handed = false;
  /** The pool's buffers the request's messages are in, given back once nothing reads them. */
  #loans: Buffer[] | undefined;
  readonly #reader: MessageReader;

  constructor(
    readonly method: UnaryMethod,
    readonly res: ResponseStream,
    readonly ctx: CallContext,
  ) {
    this.#reader = new MessageReader(ctx.limit, this.#onMessage, method.borrowsRequest ? ctx.pool : undefined);
  }

  readonly #onMessage = (message: Buffer, loan?: Buffer): void => {
    this.#count++;
    this.#request = message;
    if (loan !== undefined) (this.#loans ??= []).push(loan);
  };

  /** Nothing reads the request's messages any more: their buffers go back to the pool. */
  #giveBack(): void {
    const loans = this.#loans;
    if (loans === undefined) return;
    this.#loans = undefined;
    this.#request = undefined;
    for (const b of loans) this.ctx.pool!.give(b);
  }

  data(chunk: Buffer): void {
    if (this.#settled) return;
    this.#reader.push(chunk);
    // Answered at once: nothing more of this stream will be read.
    if (this.#reader.problem !== undefined) this.#refuse(this.#reader.problem);
  }

  end(): void {
    if (this.#settled) return;
    const reader = this.#reader;
    reader.end();
    const problem =
      reader.problem ?? (this.#count === 0 ? 'no_message' : this.#count > 1 ? 'extra_message' : undefined);
    // A client's reset can look like an end first (node:http2 emits 'end' before 'aborted'): a
    // request cut that way is nobody's to answer, nor a decision to log, so a refusal waits a
    // turn to see which it was.
    if (problem !== undefined) {
      this.#giveBack();
      return void setImmediate(() => this.#guard(() => (this.res.writable ? this.#refuse(problem) : this.#settle())));
    }
    let response: Buffer | Promise<Buffer>;
    this.#handed = true;
    try {
      response = this.method.handle(this.#request!);
    } catch (err) {
      this.#giveBack();
      return this.#fail(statusOfError(err));
    }
    if (response instanceof Promise) {
      // The handler reads the request until its promise settles, whether or not the client still waits.
      response.then(
        (r) => {
          this.#guard(() => this.#answer(r));
          this.#giveBack();
        },
        (err: unknown) => {
          this.#giveBack();
          this.#guard(() => this.#fail(statusOfError(err)));
        },
      );
    } else {
      this.#answer(response);
      this.#giveBack();
    }
  }

  /**
   * Runs a step outside the transport's own read (a timer, a promise): a throw there would end the
   * process, so it ends this call instead (UNKNOWN, or nothing if it was answered) and is reported.
   */
  #guard(step: () => void): void {
    try {
      step();
    } catch (err) {
      this.ctx.onError(err);
      try {
        this.#fail([GrpcStatus.UNKNOWN, 'the handler failed']);
      } catch {
        // the transport cannot write either: the client's timeout ends the call
      }
    }
  }

  /** Reset by the client (Envoy's timeout) or the connection lost: nothing to answer. */
  closed(): void {
    this.#reader.discard();
    // A handler still at work keeps its request until its answer settles.
    if (!this.#handed) this.#giveBack();
    this.#settle();
  }

  #settle(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    this.ctx.tracker.unaryDone();
    return true;
  }

  #answer(response: Buffer): void {
    if (this.#settle() && this.res.writable) this.res.sendUnary(response);
  }

  #fail([code, message]: [GrpcStatusCode, string]): void {
    if (this.#settle() && this.res.writable) this.res.end(code, message);
  }

  #refuse(problem: RequestProblem): void {
    this.#giveBack();
    let answer: Buffer | undefined;
    try {
      answer = this.method.unreadable?.(problem);
    } catch (err) {
      // Its own answer failed: the call fails alone, never the connection it shares with others.
      this.ctx.onError(err);
    }
    if (answer !== undefined) this.#answer(answer);
    else this.#fail(problemStatus(problem, this.ctx.limit));
  }
}

function openStream(method: StreamMethod, res: ResponseStream, ctx: CallContext): RequestEvents {
  let finished = false;
  const call: StreamCall = {
    get open() {
      return !finished && res.writable;
    },
    send(message) {
      if (call.open) res.send(message);
    },
    finish(code = GrpcStatus.OK, message = '') {
      if (finished) return;
      finished = true;
      ctx.tracker.streams.delete(call);
      if (res.writable) res.end(code, message);
    },
  };
  ctx.tracker.streams.add(call);
  let listener: StreamListener = { message: ignore, end: ignore, close: ignore };
  try {
    listener = method.open(call);
  } catch (err) {
    call.finish(...statusOfError(err));
  }
  const guarded = (f: () => void): void => {
    try {
      f();
    } catch (err) {
      ctx.onError(err);
    }
  };
  // Not after the call ended (a message handler may finish it with messages left in the chunk).
  const reader = new MessageReader(ctx.limit, (message) => finished || guarded(() => listener.message(message)));
  return {
    data(chunk) {
      if (finished) return;
      reader.push(chunk);
      if (reader.problem !== undefined) call.finish(...problemStatus(reader.problem, ctx.limit));
    },
    end() {
      if (finished) return;
      reader.end();
      if (reader.problem !== undefined) return call.finish(...problemStatus(reader.problem, ctx.limit));
      guarded(() => listener.end());
    },
    closed() {
      finished = true;
      ctx.tracker.streams.delete(call);
      guarded(() => listener.close());
    },
  };
}

/** Response headers and trailers as plain objects (the node:http2 transport's shapes). */
export const OK_TRAILERS = { 'grpc-status': '0' };

export function statusTrailers(code: GrpcStatusCode, message: string): Record<string, string> {
  return code === GrpcStatus.OK && message === ''
    ? OK_TRAILERS
    : { 'grpc-status': String(code), 'grpc-message': encodeGrpcMessage(message) };
}

/**
 * The log destination for pino. Lines are copied as UTF-8 into a slab of memory as they come (the
 * line strings die young: nothing is kept on the JS heap) and handed to sonic-boom (asynchronous,
 * handles partial writes and EAGAIN) as one buffer at most every `flushMs` (default 100 ms), or at
 * once when `chunkBytes` are waiting. Each asynchronous write is a thread-pool round trip: the
 * writer thread wakes, and so does the event loop when it is done. Where modelgate shares a core
 * with Envoy, that cost more than the write: through Envoy at 950 Checks a second, flushing every
 * 10 ms took 40 µs of CPU per Check and p99 from 5 to 7-25 ms, every 100 ms as good as no allow
 * lines at all (bench/README-e2e.md, "Tail latency").
 *
 * A line reaches the log at most `flushMs` after it was written; `flush()` (pino's logger.flush,
 * called on shutdown) hands on everything at once, and so does process exit.
 *
 * The backlog is bounded: if the reader of the log stalls, what sonic-boom holds is capped at
 * `maxBytes` (a chunk that does not fit is dropped whole and reported through `onDrop`), and what
 * waits here at about `2 × chunkBytes` (a single line longer than that gets a slab of three times
 * its length), instead of growing memory without end.
 */
import pino, { type DestinationStream } from 'pino';

export interface BatchedLogStreamOptions {
  /** Most bytes waiting (here and in sonic-boom) before lines are dropped. */
  readonly maxBytes: number;
  readonly onDrop: (bytes: number) => void;
  /** Longest a line waits before it is handed on (default 100 ms). */
  readonly flushMs?: number;
  /** Waiting bytes that are handed on at once, without waiting for the timer (default 256 KiB). */
  readonly chunkBytes?: number;
}

/** Node's own UTF-8 write (what buf.write(s, offset, 'utf8') ends in, without its argument handling). */
const utf8Write =
  (Buffer.prototype as unknown as { utf8Write?: (this: Buffer, s: string, offset: number) => number }).utf8Write ??
  function (this: Buffer, s: string, offset: number): number {
    return this.write(s, offset, 'utf8');
  };

/** Streams with lines still waiting when the process exits: one 'exit' listener for all of them. */
const live = new Set<WeakRef<BatchedLogStream>>();
let exitHooked = false;

export class BatchedLogStream implements DestinationStream {
  /** Where waiting lines are copied; [#start, #end) is what waits. Handed-on parts stay with sonic-boom. */
  #slab: Buffer;
  #start = 0;
  #end = 0;
  #timer: NodeJS.Timeout | undefined;
  readonly #sink: ReturnType<typeof pino.destination>;
  readonly #flushMs: number;
  readonly #chunkBytes: number;
  readonly #hand = (): void => this.#handOn();

  constructor(
    dest: number | string,
    readonly opts: BatchedLogStreamOptions,
  ) {
    this.#flushMs = opts.flushMs ?? 100;
    this.#chunkBytes = opts.chunkBytes ?? 256 * 1024;
    this.#slab = Buffer.allocUnsafe(2 * this.#chunkBytes);
    this.#sink = pino.destination({ dest, sync: false, maxLength: opts.maxBytes, contentMode: 'buffer' });
    this.#sink.on('drop', (data: Buffer) => opts.onDrop(data.length));
    for (const ref of live) if (ref.deref() === undefined) live.delete(ref);
    live.add(new WeakRef(this));
    if (!exitHooked) {
      exitHooked = true;
      process.once('exit', () => {
        for (const ref of live) {
          const stream = ref.deref();
          if (stream) stream.#flushAtExit();
        }
      });
    }
  }

  write(line: string): void {
    // UTF-8 needs at most 3 bytes per UTF-16 unit: reserve that much, so a line is never cut.
    const worst = line.length * 3;
    if (worst > this.#slab.length - this.#end) {
      this.#handOn();
      // Room for a chunk plus the line that completes it; a longer line gets a slab of its own size.
      this.#slab = Buffer.allocUnsafe(Math.max(2 * this.#chunkBytes, worst));
      this.#start = this.#end = 0;
    }
    this.#end += utf8Write.call(this.#slab, line, this.#end);
    if (this.#end - this.#start >= this.#chunkBytes) this.#handOn();
    else if (this.#timer === undefined) this.#timer = setTimeout(this.#hand, this.#flushMs);
  }

  #handOn(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#end === this.#start) return;
    // sonic-boom counts what it holds against maxBytes and drops (reporting it) beyond that.
    this.#sink.write(this.#slab.subarray(this.#start, this.#end) as never);
    this.#start = this.#end;
  }

  /**
   * At exit: what waits here goes to sonic-boom, and sonic-boom writes what it holds synchronously.
   * A write already under way in the thread pool is not waited for (nothing can wait at exit);
   * in tests, to a file and to a stalled pipe, nothing was lost.
   */
  #flushAtExit(): void {
    try {
      this.#handOn();
      this.#sink.flushSync();
    } catch {
      // an exiting process cannot do more
    }
  }

  /**
   * Hands on everything waiting (pino's logger.flush calls this). As with pino's own destination,
   * `cb` runs once the writer has it, not necessarily once it is written (see #flushAtExit).
   */
  flush(cb?: (err?: Error) => void): void {
    this.#handOn();
    this.#sink.flush((err) => cb?.(err ?? undefined));
  }
}

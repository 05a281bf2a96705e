/**
 * Buffers for messages cut across reads, reused instead of left to the garbage collector: a
 * 256 KiB CheckRequest arrives in several socket reads and is assembled in one buffer, and a fresh
 * buffer per call was about half the garbage of a large Check. Bounded in count and in bytes; a
 * buffer given back past either bound is dropped. Only a method that keeps no view of its request
 * once its answer settles (UnaryMethod.borrowsRequest) gets its request in one of these.
 */

/** Buffers are sized in steps of this, so a request a few bytes longer than the last still fits. */
const STEP = 64 * 1024;

export class BufferPool {
  readonly #free: Buffer[] = [];
  #freeBytes = 0;

  /**
   * @param maxBuffers the most buffers kept for reuse
   * @param maxBytes the most bytes they may hold together
   */
  constructor(
    readonly maxBuffers = 8,
    readonly maxBytes = 8 * 1024 * 1024,
  ) {}

  /** Buffers kept for reuse, and their bytes. */
  get size(): { buffers: number; bytes: number } {
    return { buffers: this.#free.length, bytes: this.#freeBytes };
  }

  /** A buffer of at least `size` bytes, its own memory (no other buffer views it): the smallest kept, or a new one. */
  take(size: number): Buffer {
    let best = -1;
    for (let i = 0; i < this.#free.length; i++) {
      const b = this.#free[i];
      if (b.length >= size && (best < 0 || b.length < this.#free[best].length)) best = i;
    }
    if (best < 0) return Buffer.allocUnsafeSlow(Math.ceil(Math.max(size, 1) / STEP) * STEP);
    const b = this.#free[best];
    this.#free[best] = this.#free[this.#free.length - 1];
    this.#free.pop();
    this.#freeBytes -= b.length;
    return b;
  }

  /**
   * A buffer `take` gave, no longer read by anyone. One given twice is kept once: two calls
   * filling the same buffer would read each other's bytes.
   */
  give(buffer: Buffer): void {
    if (this.#free.length >= this.maxBuffers || this.#freeBytes + buffer.length > this.maxBytes) return;
    if (this.#free.includes(buffer)) return;
    this.#free.push(buffer);
    this.#freeBytes += buffer.length;
  }
}

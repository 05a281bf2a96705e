/**
 * Failed admin authentications per source address (a fixed window each, a bounded LRU of
 * addresses): past `max` failures in a window, the address gets 429 until the window ends, even
 * with a valid token, so guessing tokens costs a window per `max` guesses.
 */
import { LRUCache } from 'lru-cache';

export interface FailureLimitOptions {
  readonly max: number;
  readonly windowMs: number;
  readonly now: () => number;
  /** Addresses tracked at once. */
  readonly maxTracked?: number;
}

export class FailureLimit {
  readonly #seen: LRUCache<string, { start: number; count: number }>;

  constructor(private readonly o: FailureLimitOptions) {
    this.#seen = new LRUCache({ max: o.maxTracked ?? 10_000 });
  }

  /** Seconds until `address` may try again, or 0 when it may now. */
  blockedFor(address: string): number {
    const e = this.#seen.get(address);
    if (!e || e.count < this.o.max) return 0;
    const left = e.start + this.o.windowMs - this.o.now();
    return left > 0 ? Math.ceil(left / 1000) : 0;
  }

  fail(address: string): void {
    const now = this.o.now();
    const e = this.#seen.get(address);
    if (!e || now - e.start >= this.o.windowMs) this.#seen.set(address, { start: now, count: 1 });
    else e.count++;
  }
}

/**
 * Per-minute request limits of the console API, per client address and per key (a fixed window
 * per name). Bounded: each kind of name lives in an LRU of `maxTracked` entries whose entries
 * expire with their window, so a flood of addresses or keys costs memory within the bound. The
 * clock is a parameter (tests use a fake one).
 */
import { LRUCache } from 'lru-cache';

interface Window {
  count: number;
  readonly resetAt: number;
}

export interface RateLimitOptions {
  readonly perMinute: number;
  readonly maxTracked: number;
  readonly now: () => number;
}

export class RateLimiter {
  readonly #windows: LRUCache<string, Window>;

  constructor(readonly options: RateLimitOptions) {
    this.#windows = new LRUCache({ max: options.maxTracked });
  }

  /**
   * Counts one request of `name`. Returns 0 when it is within the limit, else the seconds until
   * the window resets (for `retry-after`).
   */
  take(name: string): number {
    const now = this.options.now();
    let w = this.#windows.get(name);
    if (!w || w.resetAt <= now) {
      w = { count: 0, resetAt: now + 60_000 };
      this.#windows.set(name, w);
    }
    w.count++;
    return w.count <= this.options.perMinute ? 0 : Math.max(1, Math.ceil((w.resetAt - now) / 1000));
  }

  /** How many names are tracked now (bounded by maxTracked). */
  get size(): number {
    return this.#windows.size;
  }
}

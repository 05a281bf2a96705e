/**
 * The embedded rate limit engine (`rateLimits.engine: embedded`, the default of `npm start`):
 * modelgate answers Envoy's rate limit service itself (server/rls-service.ts serves it on the gRPC
 * port), counting in this process's memory. The same contract as envoyproxy/ratelimit with Redis,
 * for descriptors that carry their limit (the only ones modelgate sends): a fixed window per
 * descriptor and unit, aligned to the epoch; each descriptor adds its hits (its own hits_addend,
 * else the request's, 0 there meaning 1), refused or not, and is over the limit when its count
 * after adding is above the limit (envoyproxy/ratelimit's default: a request refused by one limit
 * still counts against the others, and a token charge reaches every window it names).
 *
 * One process only: with `serve --workers N` or several replicas each would count on its own;
 * that is what the global engine is for. Counters are bounded (maxCounters; the oldest window
 * goes first) and expire with their window. Time is a parameter.
 */
import { CODE, UNIT, type RateLimitRequest, type RateLimitResponse, type DescriptorStatus } from './rls-codec';

const UNIT_SECONDS: Readonly<Record<number, number>> = {
  [UNIT.SECOND]: 1,
  [UNIT.MINUTE]: 60,
  [UNIT.HOUR]: 3600,
  [UNIT.DAY]: 86_400,
};

export interface RateLimitEngine {
  shouldRateLimit(req: RateLimitRequest): Promise<RateLimitResponse>;
}

export interface EmbeddedEngineOptions {
  /** Epoch milliseconds. */
  readonly now?: () => number;
  /** Counters kept at once (default 100,000). */
  readonly maxCounters?: number;
}

interface Counter {
  count: number;
  /** Epoch second its window ends. */
  readonly until: number;
}

export class EmbeddedEngine implements RateLimitEngine {
  readonly #counters = new Map<string, Counter>();
  /** The earliest `until` among the counters (or earlier): no counter has expired before it. */
  #soonest = Number.POSITIVE_INFINITY;
  readonly #now: () => number;
  readonly #max: number;

  constructor(opts: EmbeddedEngineOptions = {}) {
    this.#now = opts.now ?? Date.now;
    this.#max = opts.maxCounters ?? 100_000;
  }

  /** Counters held (tests, metrics). */
  get size(): number {
    return this.#counters.size;
  }

  shouldRateLimit(req: RateLimitRequest): Promise<RateLimitResponse> {
    return Promise.resolve(this.decide(req));
  }

  /** The answer, synchronously. */
  decide(req: RateLimitRequest): RateLimitResponse {
    const now = Math.floor(this.#now() / 1000);
    const slots = req.descriptors.map((d) => {
      const seconds = d.limit ? UNIT_SECONDS[d.limit.unit] : undefined;
      if (!d.limit || seconds === undefined) return undefined;
      const start = now - (now % seconds);
      const key = `${req.domain}\0${d.entries.map((e) => `${e.key}\0${e.value}`).join('\0')}\0${seconds}\0${start}`;
      const hits = d.hitsAddend ?? Math.max(1, req.hitsAddend);
      return { key, limit: d.limit, until: start + seconds, hits };
    });
    let overall: number = CODE.OK;
    const statuses: DescriptorStatus[] = slots.map((x) => {
      if (!x) return { code: CODE.OK, remaining: 0, resetSeconds: 0 };
      let c = this.#counters.get(x.key);
      if (x.hits > 0) {
        if (!c) this.#store(x.key, (c = { count: 0, until: x.until }));
        c.count += x.hits;
      }
      const count = c?.count ?? 0;
      const over = count > x.limit.requestsPerUnit;
      if (over) overall = CODE.OVER_LIMIT;
      return {
        code: over ? CODE.OVER_LIMIT : CODE.OK,
        limit: x.limit,
        remaining: over ? 0 : x.limit.requestsPerUnit - count,
        resetSeconds: x.until - now,
      };
    });
    return { overallCode: overall, statuses };
  }

  #store(key: string, c: Counter): void {
    if (this.#counters.size >= this.#max) {
      const now = Math.floor(this.#now() / 1000);
      // Swept only when a counter may have expired since the last sweep: a full table of live
      // counters is not scanned again on every new one.
      if (this.#soonest <= now) {
        this.#soonest = Number.POSITIVE_INFINITY;
        for (const [k, v] of this.#counters) {
          if (v.until <= now) this.#counters.delete(k);
          else if (v.until < this.#soonest) this.#soonest = v.until;
        }
      }
      // Still full: the oldest counters go (Map keeps insertion order).
      for (const k of this.#counters.keys()) {
        if (this.#counters.size < this.#max) break;
        this.#counters.delete(k);
      }
    }
    if (c.until < this.#soonest) this.#soonest = c.until;
    this.#counters.set(key, c);
  }
}

/**
 * Token charges to a remote engine, batched (docs/rate-limits.md): each response's charge names its key's
 * token windows, and many responses' charges fit one RateLimitRequest (each descriptor carries its
 * own hits, so the service adds each on its own). One call per `windowMs` (or per `maxDescriptors`)
 * instead of one per response: measured through Envoy, a gRPC call per charge cost modelgate about
 * as much CPU as the rest of the request (docs/rate-limits.md, "What it costs"). A charge waits at
 * most `windowMs` longer to be counted. Time is a parameter (the timer functions).
 */
import type { RateLimitEngine } from './embedded-engine';
import { type Descriptor, type RateLimitRequest, type RateLimitResponse } from './rls-codec';

export interface BatcherOptions {
  /** How long charges wait for company (default 10 ms). */
  readonly windowMs?: number;
  /** A batch is sent at once when it holds this many descriptors (default 500). */
  readonly maxDescriptors?: number;
}

interface Pending {
  readonly descriptors: Descriptor[];
  readonly waiters: Array<{ resolve: (r: RateLimitResponse) => void; reject: (e: unknown) => void }>;
  timer?: NodeJS.Timeout;
}

export class ChargeBatcher implements RateLimitEngine {
  readonly #byDomain = new Map<string, Pending>();
  readonly #window: number;
  readonly #max: number;

  constructor(
    readonly engine: RateLimitEngine,
    opts: BatcherOptions = {},
  ) {
    this.#window = opts.windowMs ?? 10;
    this.#max = opts.maxDescriptors ?? 500;
  }

  /** Queues a charge (every descriptor with its own hits); resolves with its batch's answer. */
  shouldRateLimit(req: RateLimitRequest): Promise<RateLimitResponse> {
    if (req.descriptors.some((d) => d.hitsAddend === undefined)) return this.engine.shouldRateLimit(req);
    let p = this.#byDomain.get(req.domain);
    if (!p) this.#byDomain.set(req.domain, (p = { descriptors: [], waiters: [] }));
    const batch = p;
    batch.descriptors.push(...req.descriptors);
    const answer = new Promise<RateLimitResponse>((resolve, reject) => batch.waiters.push({ resolve, reject }));
    if (batch.descriptors.length >= this.#max) this.#flush(req.domain);
    else if (!batch.timer) {
      batch.timer = setTimeout(() => this.#flush(req.domain), this.#window);
      batch.timer.unref();
    }
    return answer;
  }

  /** Sends what is queued now (close). */
  async flushAll(): Promise<void> {
    await Promise.allSettled([...this.#byDomain.keys()].map((d) => this.#flush(d)));
  }

  #flush(domain: string): Promise<void> {
    const p = this.#byDomain.get(domain);
    if (!p) return Promise.resolve();
    this.#byDomain.delete(domain);
    clearTimeout(p.timer);
    return this.engine.shouldRateLimit({ domain, descriptors: p.descriptors, hitsAddend: 0 }).then(
      (r) => p.waiters.forEach((w) => w.resolve(r)),
      (e: unknown) => p.waiters.forEach((w) => w.reject(e)),
    );
  }
}

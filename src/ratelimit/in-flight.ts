/**
 * Requests in flight per key (the `inFlight` limit, issue 25). Counting windows cannot express a
 * concurrency cap, so it is a per-replica table: a Check that allows a request of a key with an
 * inFlight limit takes a slot, and the slot is given back when the response ends (the meter's
 * settlement). With R replicas behind Envoy a key can have up to R x inFlight requests in flight
 * (docs/rate-limits.md).
 *
 * The table behind InFlightTable is the meter's to own (its in-flight view also bounds soft-mode
 * overspend); until the meter provides one, LocalInFlight below is the stand-in: a slot comes
 * back at the request's settlement, or after `ttlMs` at the latest (a response whose end is never
 * seen, e.g. a count_tokens call the meter skips, cannot hold a slot for ever).
 */

/** What the Check's concurrency admission needs; the meter's in-flight table implements it. */
export interface InFlightTable {
  /** Requests of the key in flight on this replica now. */
  inFlight(keyId: string): number;
  /** A request of the key starts (once per request id). */
  acquire(keyId: string, requestId: string): void;
  /** The request ended (any outcome); unknown ids are ignored. */
  release(requestId: string): void;
}

export interface LocalInFlightOptions {
  /** Epoch milliseconds. */
  readonly now?: () => number;
  /** The longest a slot is held without its release (default 15 minutes). */
  readonly ttlMs?: number;
  /** Requests tracked at once (default 100,000): past it, the oldest slots are given back. */
  readonly maxEntries?: number;
}

/** The stand-in table (see the module comment). */
export class LocalInFlight implements InFlightTable {
  readonly #byRequest = new Map<string, { keyId: string; until: number }>();
  readonly #byKey = new Map<string, number>();
  readonly #now: () => number;
  readonly #ttl: number;
  readonly #max: number;

  constructor(opts: LocalInFlightOptions = {}) {
    this.#now = opts.now ?? Date.now;
    this.#ttl = opts.ttlMs ?? 15 * 60_000;
    this.#max = opts.maxEntries ?? 100_000;
  }

  inFlight(keyId: string): number {
    this.#expire();
    return this.#byKey.get(keyId) ?? 0;
  }

  acquire(keyId: string, requestId: string): void {
    if (this.#byRequest.has(requestId)) return;
    if (this.#byRequest.size >= this.#max) this.release(this.#byRequest.keys().next().value as string);
    this.#byRequest.set(requestId, { keyId, until: this.#now() + this.#ttl });
    this.#byKey.set(keyId, (this.#byKey.get(keyId) ?? 0) + 1);
  }

  release(requestId: string): void {
    const e = this.#byRequest.get(requestId);
    if (!e) return;
    this.#byRequest.delete(requestId);
    const n = (this.#byKey.get(e.keyId) ?? 1) - 1;
    if (n <= 0) this.#byKey.delete(e.keyId);
    else this.#byKey.set(e.keyId, n);
  }

  /** Slots past their ttl go back (insertion order is expiry order: every slot has the same ttl). */
  #expire(): void {
    const now = this.#now();
    for (const [id, e] of this.#byRequest) {
      if (e.until > now) break;
      this.release(id);
    }
  }
}

/**
 * The requests this replica allowed whose responses have not been settled yet, with what each may
 * cost at most. It is what makes money hold between the Check and the report (docs/metering.md):
 *
 * - soft mode's bound: a key's requests in flight here are counted at their maximum cost against
 *   its cached balance, so concurrency cannot multiply a small balance (admission.ts);
 * - a request whose report never comes (a lost access-log entry, a replica stopped mid-stream)
 *   settles at its maximum when its deadline passes, provisionally: a later report replaces it;
 * - the input estimate: the first bytes of the request body, kept for a response without usage.
 *
 * Bounded: at most `maxEntries` requests (the Check denies more, fail closed); samples are at most
 * INPUT_SAMPLE_BYTES each. Time is a parameter.
 */
import { LRUCache } from 'lru-cache';
import type { PendingRequest } from '../store/store';
import type { BudgetHold } from './budgets';

/**
 * A request in flight: the store's PendingRequest (what survives a restart: key, model, the most it
 * may be charged in tokens and money, the price it was admitted at, `limited` when the key has a
 * balance, its deadline) and what only this process keeps.
 */
export interface InFlightRequest extends PendingRequest {
  /**
   * Strict mode: reserved in the store (`store`: it settles or expires there too) or from this
   * replica's lease (`lease`: leases.ts); false: held here only (soft mode, unlimited keys).
   */
  readonly reserved: false | 'store' | 'lease';
  /** The first bytes of the request body, for an input estimate. */
  readonly sample?: Uint8Array;
  /** What it holds against the budgets of its key and group (budgets.ts) until it settles. */
  readonly budgetHold?: BudgetHold;
}

interface KeyTotals {
  count: number;
  held: number;
}

export class InFlight {
  readonly #byId = new Map<string, InFlightRequest>();
  readonly #byKey = new Map<string, KeyTotals>();
  /**
   * Requests that ended before a Check's answer for them was used (meter.ts, `unanswered`): a Check
   * decided after that is not held in flight, since nothing of it will ever be reported. Bounded.
   */
  readonly #gone = new LRUCache<string, true>({ max: 10_000 });
  /** Changes with every add and take (the state file's checkpoint writes only after a change). */
  version = 0;

  constructor(readonly maxEntries = 250_000) {}

  get size(): number {
    return this.#byId.size;
  }

  /** When the oldest request in flight was allowed (entries are kept in that order); none: undefined. */
  oldestSince(): number | undefined {
    for (const r of this.#byId.values()) return r.since;
    return undefined;
  }

  /**
   * false: full (the caller denies). A request id seen twice replaces its first entry; one already
   * gone (ended without its answer) is not held.
   */
  add(r: InFlightRequest): boolean {
    if (this.#gone.has(r.requestId)) return true;
    if (this.#byId.has(r.requestId)) this.take(r.requestId);
    if (this.#byId.size >= this.maxEntries) return false;
    this.#byId.set(r.requestId, r);
    this.version++;
    const t = this.#byKey.get(r.keyId);
    if (t) {
      t.count++;
      t.held += r.maxCost;
    } else this.#byKey.set(r.keyId, { count: 1, held: r.maxCost });
    return true;
  }

  get(requestId: string): InFlightRequest | undefined {
    return this.#byId.get(requestId);
  }

  /** Removes and returns a request (undefined: not here). */
  take(requestId: string): InFlightRequest | undefined {
    const r = this.#byId.get(requestId);
    if (!r) return undefined;
    this.#byId.delete(requestId);
    this.version++;
    const t = this.#byKey.get(r.keyId) as KeyTotals;
    if (--t.count === 0) this.#byKey.delete(r.keyId);
    else t.held -= r.maxCost;
    return r;
  }

  /** The request ended without a Check's answer: never held from now on (and not now: see take). */
  gone(requestId: string): void {
    this.#gone.set(requestId, true);
  }

  /** Requests of a key in flight here. */
  count(keyId: string): number {
    return this.#byKey.get(keyId)?.count ?? 0;
  }

  /** What a key's requests in flight here may cost at most, together. */
  held(keyId: string): number {
    const t = this.#byKey.get(keyId);
    return t ? Math.max(0, t.held) : 0;
  }

  /**
   * Removes and returns the requests whose deadline is at or before `now`. Entries are kept in the
   * order they were allowed and deadlines are that time plus one setting, so the scan stops at the
   * first one still running (after a reload that shortened the setting, older entries go first).
   */
  expired(now: number): InFlightRequest[] {
    const out: InFlightRequest[] = [];
    for (const r of this.#byId.values()) {
      if (r.deadline > now) break;
      out.push(r);
    }
    for (const r of out) this.take(r.requestId);
    return out;
  }

  /** Removes and returns every request (shutdown). */
  drainAll(): InFlightRequest[] {
    const out = [...this.#byId.values()];
    for (const r of out) this.take(r.requestId);
    return out;
  }

  /** Every request still here (for the state file), oldest first. */
  list(): InFlightRequest[] {
    return [...this.#byId.values()];
  }
}

/**
 * Strict mode without a store round trip per request (quota leasing, as Google's Doorman does): this
 * replica takes a slice of a key's balance from the store in one statement (a lease) and reserves
 * each request's maximum from it in memory. What a request costs comes off the balance and off the
 * lease in the same statement as its debit (store: debit with the replica), and what it had reserved
 * returns to the lease; so balance >= every replica's lease + every reservation at every commit, and
 * no key spends past its balance while the upstream honours the request's maximum.
 *
 * A lease grows (doubling what is in use, but to at most half of what the balance still covers
 * beyond what is needed now, so replicas sharing a small balance each get a share) when a request
 * does not fit, is renewed while in use, and shrinks to nothing once its key has been idle for
 * IDLE_MS, so other replicas can use the balance. Requests of one key wait for one lease call at a time.
 */
export interface LeaseStore {
  lease(
    replica: string,
    keyId: string,
    want: number,
    need: number,
    ttlSeconds: number,
  ): Promise<{ granted: number | null; balance: number | null }>;
}

interface KeyLease {
  /** What the store granted this replica (null: the key is unlimited). */
  granted: number | null;
  /** What requests in flight here have reserved from it, and how many they are. */
  used: number;
  requests: number;
  /** Epoch ms: when the store's grant lapses, and when a request of the key last reserved or settled. */
  expires: number;
  touched: number;
  /** A lease call under way: requests wait for it. */
  call?: Promise<void>;
  /** The key's hash (balance notifications name it). */
  sha?: string;
  /** Epoch ms: when the store last granted less than asked (0: not since something settled). */
  exhausted: number;
  /**
   * The lowest balance notified while a lease call was under way: the grant it brings back may
   * predate that balance (the call and the notification travel on different connections), so it
   * is cut to it as well.
   */
  cutDuringCall?: number;
  /**
   * What requests of the key settled here spent while a lease call was under way: the store took it
   * off this lease with each debit, and the grant the call brings back may predate those debits, so
   * it comes off the grant too (a debit that came first is taken twice: the lease is smaller here
   * than in the store until the next call, never larger).
   */
  spentDuringCall?: number;
}

/** A lease lasts this long unless renewed; renewed while in use when less than half of it is left. */
export const LEASE_SECONDS = 60;
/** A key idle this long gives its lease back. */
export const IDLE_MS = 2000;
/** After the store granted less than asked, requests that do not fit are refused without asking for this long. */
export const EXHAUSTED_MS = 1000;

export type LeaseAnswer = { readonly ok: true } | { readonly ok: false; readonly available: number };

export class LeaseBook {
  readonly #keys = new Map<string, KeyLease>();
  /** Key ids by key hash, for the store's balance notifications (which name the hash). */
  readonly #keyOfSha = new Map<string, string>();

  constructor(
    readonly store: LeaseStore,
    readonly replica: string,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Reserves `amount` of a key's balance for a request, growing the lease if it does not fit. A
   * request asks the store at most once; while another request's call is under way it waits for that
   * one. Once the store could not grant what was asked (the balance is taken), requests that do not
   * fit are refused without asking again until something of the key settles (or EXHAUSTED_MS pass):
   * a flood of requests on an empty balance costs the store nothing.
   */
  async reserve(keyId: string, amount: number, keySha256?: string): Promise<LeaseAnswer> {
    let k = this.#keys.get(keyId);
    if (!k)
      this.#keys.set(
        keyId,
        (k = {
          granted: 0,
          used: 0,
          requests: 0,
          expires: 0,
          touched: this.now(),
          exhausted: 0,
          ...(keySha256 ? { sha: keySha256 } : {}),
        }),
      );
    if (keySha256 && k.sha === undefined) k.sha = keySha256;
    if (k.sha) this.#keyOfSha.set(k.sha, keyId);
    let asked = false;
    for (;;) {
      // The store grants in exact decimals; sums of floats here may exceed it by rounding alone.
      const fits = k.granted === null || (k.used + amount <= k.granted * (1 + 1e-12) && k.expires > this.now());
      if (fits) {
        k.used += amount;
        k.requests++;
        k.touched = this.now();
        return { ok: true };
      }
      if (k.call) {
        await k.call;
        continue;
      }
      if (asked || (k.exhausted > 0 && this.now() - k.exhausted < EXHAUSTED_MS && k.expires > this.now())) break;
      asked = true;
      const need = k.used + amount;
      k.call = this.#ask(keyId, k, Math.max(2 * need, k.granted ?? 0), need);
      await k.call;
    }
    return { ok: false, available: Math.max(0, (k.granted ?? 0) - k.used) };
  }

  async #ask(keyId: string, k: KeyLease, want: number, need: number): Promise<void> {
    k.cutDuringCall = undefined;
    k.spentDuringCall = 0;
    try {
      const r = await this.store.lease(this.replica, keyId, want, need, LEASE_SECONDS);
      const granted = r.granted === null ? null : Math.max(0, r.granted - (k.spentDuringCall ?? 0));
      k.granted = granted !== null && k.cutDuringCall !== undefined ? Math.min(granted, k.cutDuringCall) : granted;
      k.expires = this.now() + LEASE_SECONDS * 1000;
      k.exhausted = r.granted !== null && r.granted < need ? this.now() : 0;
    } finally {
      k.call = undefined;
      k.cutDuringCall = undefined;
      k.spentDuringCall = undefined;
    }
  }

  /**
   * A request that reserved `amount` here ended: `spent` came off the balance and this lease in the
   * store (its debit), so it comes off the granted amount here too.
   */
  settle(keyId: string, amount: number, spent: number): void {
    const k = this.#keys.get(keyId);
    if (!k) return;
    // Float sums of what was reserved leave crumbs: with no request left, nothing is in use.
    k.used = --k.requests <= 0 ? 0 : Math.max(0, k.used - amount);
    if (k.requests < 0) k.requests = 0;
    if (k.granted !== null) k.granted = Math.max(0, k.granted - spent);
    // A grant on its way may predate this debit: it comes off it when it lands (#ask).
    if (k.call) k.spentDuringCall = (k.spentDuringCall ?? 0) + spent;
    k.touched = this.now();
    k.exhausted = 0;
  }

  /**
   * The store says a key's balance is now `balance` (every change notifies it: debits, and a balance
   * lowered outside the meter, by `keys balance` or a billing job). A lease larger than the whole
   * balance is cut to it: a replica never serves past the balance from room the store granted before
   * it was lowered. (Other replicas' leases are not known here: each cuts its own.)
   */
  balanceIs(keySha256: string, balance: number | null): void {
    const keyId = this.#keyOfSha.get(keySha256);
    const k = keyId === undefined ? undefined : this.#keys.get(keyId);
    if (!k || balance === null) return;
    // A grant on its way may predate this balance: it is cut when it lands (#ask).
    if (k.call) k.cutDuringCall = Math.max(0, Math.min(k.cutDuringCall ?? Infinity, balance));
    if (k.granted === null || !(k.granted > balance)) return;
    k.granted = Math.max(0, balance);
  }

  /** Renews leases in use that run out soon; gives back those of idle keys. Errors are the caller's to log. */
  async maintain(): Promise<void> {
    const now = this.now();
    const calls: Promise<void>[] = [];
    for (const [keyId, k] of this.#keys) {
      if (k.call || k.granted === null) continue;
      if (k.used === 0 && now - k.touched > IDLE_MS) {
        this.#keys.delete(keyId);
        if (k.sha) this.#keyOfSha.delete(k.sha);
        if (k.granted > 0) calls.push(this.store.lease(this.replica, keyId, 0, 0, LEASE_SECONDS).then(() => undefined));
      } else if (k.used > 0 && k.expires - now < (LEASE_SECONDS * 1000) / 2) {
        k.call = this.#ask(keyId, k, Math.max(k.granted, k.used), k.used);
        calls.push(k.call);
      }
    }
    await Promise.all(calls);
  }

  /** Gives every lease back (shutdown). */
  async releaseAll(): Promise<void> {
    const keys = [...this.#keys.keys()];
    this.#keys.clear();
    // A lease the store does not take back lapses after LEASE_SECONDS: its amount is held until then, never spent.
    await Promise.all(keys.map((id) => this.store.lease(this.replica, id, 0, 0, LEASE_SECONDS).catch(() => undefined)));
  }

  /** Keys with a lease here (tests, metrics). */
  get size(): number {
    return this.#keys.size;
  }
}

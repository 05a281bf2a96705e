/**
 * Budgets with windows: an amount a key, a key on one model, or a group may spend per day, ISO week
 * or calendar month in an IANA time zone (store/budget-window.ts), alongside the key's lifetime balance (both hold; the
 * tighter
 * refuses, 403 budget_exhausted for a budget). A BudgetBook keeps, per budget, what its current
 * window has spent and what this replica's requests in flight hold against it, so the Check path
 * asks the ledger once per window and budget (`load`), never per request:
 *
 * - a window's spend is loaded from the ledger (`loaded`) when the budget is first used in that
 *   window; from then on this replica counts what its own requests cost (`own`, by `settle` and
 *   `record`); a settlement recorded while the load runs counts in `own` too, so a debit is counted
 *   once or twice, never missed: the book may refuse early, never late.
 * - with R replicas sharing the ledger (Store.replicas), each may spend at most its share of what
 *   the window had left when it loaded: own + held + cost <= (amount - loaded) / R. Since every
 *   replica loads before it spends and the ledger only grows, the replicas together spend at most
 *   amount - (the spend when the first loaded): no replica needs to hear the others.
 * - strict mode: a request must fit that share at its maximum cost: zero overspend per window while
 *   the upstream honours the request's maximum and R does not grow within the window.
 * - soft mode: while the window's spend is under the amount, one request may always run when none
 *   of the budget's is in flight here, and each further one must fit: overspend at most one
 *   request's maximum per window and replica (R x M), as the balance's bound (docs/metering.md).
 * - a load that fails refuses (store_unavailable): fail closed.
 *
 * Pure apart from the loader and the clock, both parameters.
 */
import { budgetWindow, isBudget, type Budget, type BudgetWindow } from '../store/budget-window';

/**
 * Whose budget: a key's (its id), a key's on one model (`model`: the key's id as `name` and the
 * model's name), or a group's (its name), spent by all of its keys.
 */
export type BudgetSubject =
  | { readonly kind: 'key' | 'group'; readonly name: string }
  | { readonly kind: 'model'; readonly name: string; readonly model: string };

/** What the ledger says `subject` spent in [since, until) (epoch ms); rejects when it cannot say. */
export type SpentLoader = (subject: BudgetSubject, since: number, until: number) => Promise<number>;

export type MeterMode = 'soft' | 'strict';

/** A budget's state in a window, as /v1/me and the admin API show it. */
export interface BudgetStatus {
  readonly subject: BudgetSubject;
  readonly budget: Budget;
  readonly window: BudgetWindow;
  readonly spent: number;
  readonly held: number;
  readonly remaining: number;
}

export type BudgetVerdict =
  | { readonly ok: true; readonly hold: BudgetHold }
  | { readonly ok: false; readonly why: 'exhausted'; readonly status: BudgetStatus; readonly cost: number }
  | { readonly ok: false; readonly why: 'unavailable'; readonly subject: BudgetSubject }
  /** This replica cannot count the replicas sharing the ledger (Store.replicas 0): retryable. */
  | { readonly ok: false; readonly why: 'uncounted'; readonly subject: BudgetSubject };

/** What an admitted request holds against its budgets until `settle` or `release`. */
export interface BudgetHold {
  readonly subjects: readonly BudgetSubject[];
  readonly maxCost: number;
}

interface Entry {
  budget: Budget;
  window: BudgetWindow;
  held: number;
  count: number;
  /** What the ledger said the window had spent when this replica first used the budget in it. */
  loaded: number;
  /** What this replica's own requests have cost in the window since (including while it loaded). */
  own: number;
  /** Set while the window's spend is being loaded. */
  loading?: Promise<void>;
  failed: boolean;
}

/** A subject's name in the book (a key id may hold `:`, a model name anything). */
export const subjectKey = (s: BudgetSubject): string =>
  s.kind === 'model' ? `model:${JSON.stringify([s.name, s.model])}` : `${s.kind}:${s.name}`;
const sameBudget = (a: Budget, b: Budget): boolean =>
  a.amount === b.amount && a.period === b.period && a.timeZone === b.timeZone;

/**
 * The rule of one budget on one of `replicas` replicas: may a request of maximum cost `cost` run,
 * given what the window had spent when this replica loaded it, what this replica's requests cost
 * since, what its requests in flight hold and how many there are? Strict: it must fit this
 * replica's share of what was left. Soft: it must fit, or be the budget's only request in flight
 * here while the window has something left. `replicas` 0 (this replica cannot count the others):
 * a share of nothing.
 */
export function budgetAllows(
  mode: MeterMode,
  amount: number,
  loaded: number,
  own: number,
  held: number,
  inFlight: number,
  cost: number,
  replicas = 1,
): boolean {
  const share = replicas >= 1 ? (amount - loaded) / Math.floor(replicas) : 0;
  if (own + held + cost <= share) return true;
  return mode === 'soft' && inFlight === 0 && loaded + own < amount;
}

export class BudgetBook {
  readonly #entries = new Map<string, Entry>();
  readonly #load: SpentLoader;
  readonly #now: () => number;
  readonly #max: number;

  readonly #onSpent?: (
    subject: BudgetSubject,
    budget: Budget,
    window: BudgetWindow,
    before: number,
    after: number,
  ) => void;

  /** `onSpent`: a window's spend (as this replica knows it) moved, for alerts (budget-alerts.ts). */
  constructor(opts: {
    load: SpentLoader;
    now?: () => number;
    maxBudgets?: number;
    onSpent?: (subject: BudgetSubject, budget: Budget, window: BudgetWindow, before: number, after: number) => void;
  }) {
    this.#load = opts.load;
    this.#onSpent = opts.onSpent;
    this.#now = opts.now ?? Date.now;
    this.#max = opts.maxBudgets ?? 100_000;
  }

  /** The entry of a budget in the window holding `now`, a new window's spend loading. */
  #entry(subject: BudgetSubject, budget: Budget, now: number): Entry {
    const key = subjectKey(subject);
    let e = this.#entries.get(key);
    if (e && sameBudget(e.budget, budget) && now >= e.window.start && now < e.window.resetsAt) return e;
    const window = budgetWindow(budget.period, budget.timeZone, now);
    // What is in flight stays held across a window's change: it will be debited in the new window.
    const held = e ? e.held : 0;
    const count = e ? e.count : 0;
    if (!e && this.#entries.size >= this.#max) {
      // Bounded: drop a budget with nothing in flight (its spend is reloaded from the ledger when used again).
      for (const [k, v] of this.#entries)
        if (v.count === 0 && !v.loading) {
          this.#entries.delete(k);
          break;
        }
    }
    e = { budget, window, loaded: 0, own: 0, held, count, failed: false };
    const entry = e;
    entry.loading = this.#load(subject, window.start, window.resetsAt)
      .then((spent) => {
        if (!(Number.isFinite(spent) && spent >= 0)) throw new Error('ledger spend is not a finite number >= 0');
        entry.loaded = spent;
        if (entry.own > 0) this.#onSpent?.(subject, budget, window, spent, spent + entry.own);
      })
      .catch(() => {
        entry.failed = true;
      })
      .finally(() => {
        entry.loading = undefined;
      });
    this.#entries.set(key, entry);
    return entry;
  }

  /**
   * Admits a request of maximum cost `cost` against each of its budgets (a key's, the key's on the
   * model, its group's):
   * all must allow it; then it holds `cost` against each until settled or released.
   */
  async admit(
    budgets: readonly { readonly subject: BudgetSubject; readonly budget: Budget }[],
    cost: number,
    mode: MeterMode,
    replicas = 1,
  ): Promise<BudgetVerdict> {
    const now = this.#now();
    // A budget this runtime cannot place in time (a zone its Intl does not know, stored by another
    // build) refuses as the ledger's failure does: fail closed.
    const bad = budgets.find((b) => !isBudget(b.budget));
    if (bad) return { ok: false, why: 'unavailable', subject: bad.subject };
    const entries = budgets.map((b) => ({ ...b, entry: this.#entry(b.subject, b.budget, now) }));
    for (const { entry } of entries) if (entry.loading) await entry.loading;
    for (const { subject, entry } of entries) {
      if (entry.failed) {
        // Loaded again on the next request.
        this.#entries.delete(subjectKey(subject));
        return { ok: false, why: 'unavailable', subject };
      }
    }
    for (const { subject, entry } of entries) {
      if (!budgetAllows(mode, entry.budget.amount, entry.loaded, entry.own, entry.held, entry.count, cost, replicas)) {
        // Refused for want of a count of the replicas, not of money: retryable.
        if (
          replicas < 1 &&
          !budgetAllows(mode, entry.budget.amount, entry.loaded, entry.own, entry.held, entry.count, cost, 1)
        )
          return { ok: false, why: 'exhausted', cost, status: statusOf(subject, entry) };
        if (replicas < 1) return { ok: false, why: 'uncounted', subject };
        return { ok: false, why: 'exhausted', cost, status: statusOf(subject, entry) };
      }
    }
    for (const { entry } of entries) {
      entry.held += cost;
      entry.count += 1;
    }
    return { ok: true, hold: { subjects: entries.map((e) => e.subject), maxCost: cost } };
  }

  /** A request admitted with `hold` ended without a debit (refused later, an error with no usage). */
  release(hold: BudgetHold): void {
    for (const s of hold.subjects) {
      const e = this.#entries.get(subjectKey(s));
      if (!e) continue;
      e.held = Math.max(0, e.held - hold.maxCost);
      e.count = Math.max(0, e.count - 1);
    }
  }

  /** A request admitted with `hold` was debited `cost` at `time`: it no longer holds, its cost counts. */
  settle(hold: BudgetHold, cost: number, time: number): void {
    this.release(hold);
    for (const s of hold.subjects) this.record(s, cost, time);
  }

  /**
   * A debit of `cost` to `subject` at `time` (epoch ms): this replica's, or one another replica made
   * (the store's settlement notifications). Counted in the window it falls in, if that is the one kept.
   */
  record(subject: BudgetSubject, cost: number, time: number): void {
    if (!(Number.isFinite(cost) && cost > 0)) return;
    const e = this.#entries.get(subjectKey(subject));
    if (!e || time < e.window.start) return;
    if (time >= e.window.resetsAt) {
      // Admitted in a window and settled in the next: the next window is loaded from the ledger, which
      // already holds this debit (a settlement is recorded after its debit), so it is not counted
      // again, and the thresholds it took the window past are reported from there.
      const next = this.#entry(subject, e.budget, time);
      void next.loading?.then(() => {
        if (!next.failed)
          this.#onSpent?.(subject, next.budget, next.window, Math.max(0, next.loaded - cost), next.loaded);
      });
      return;
    }
    const before = e.loaded + e.own;
    e.own += cost;
    // While loading, the load's end reports what was recorded meanwhile.
    if (!e.loading && !e.failed) this.#onSpent?.(subject, e.budget, e.window, before, e.loaded + e.own);
  }

  /**
   * A budget's current window and spend (loading it from the ledger when needed). Rejects when the ledger cannot say.
   */
  async status(subject: BudgetSubject, budget: Budget): Promise<BudgetStatus> {
    const entry = this.#entry(subject, budget, this.#now());
    if (entry.loading) await entry.loading;
    if (entry.failed) {
      this.#entries.delete(subjectKey(subject));
      throw new Error('the ledger could not say what the budget spent');
    }
    return statusOf(subject, entry);
  }

  /** Forgets a budget (removed or changed by the admin API); its spend is reloaded when next used. */
  forget(subject: BudgetSubject): void {
    const e = this.#entries.get(subjectKey(subject));
    if (e && e.count === 0) this.#entries.delete(subjectKey(subject));
  }
}

function statusOf(subject: BudgetSubject, e: Entry): BudgetStatus {
  const spent = e.loaded + e.own;
  return {
    subject,
    budget: e.budget,
    window: e.window,
    spent,
    held: e.held,
    remaining: Math.max(0, e.budget.amount - spent - e.held),
  };
}

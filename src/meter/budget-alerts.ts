/**
 * Alerts at a budget's thresholds (default 50, 80, 95 and 100 % of its amount), each once per
 * window: when a settlement takes a window's spend from below a threshold to it or past it, one
 * event. Its id is derived from the budget, the window and the threshold, so the same crossing seen
 * twice (two replicas, a restart) carries the same id and a receiver keeps it once (idempotency).
 * Pure apart from the sink it hands events to.
 */
import { createHash } from 'node:crypto';
import type { Budget, BudgetWindow } from '../store/budget-window';
import { subjectKey, type BudgetSubject } from './budgets';

export const DEFAULT_THRESHOLDS: readonly number[] = [50, 80, 95, 100];

export interface BudgetAlertEvent {
  /** Stable per budget, window and threshold. */
  readonly id: string;
  readonly type: 'budget.threshold';
  readonly subject: BudgetSubject;
  readonly budget: Budget;
  /** Percent of the amount. */
  readonly threshold: number;
  readonly spent: number;
  /** ISO 8601 UTC. */
  readonly windowStart: string;
  readonly resetsAt: string;
  /** ISO 8601 UTC: when this replica saw the crossing. */
  readonly time: string;
}

/** The thresholds (percent) a spend moving from `before` to `after` reaches, of `amount`. */
export function thresholdsCrossed(
  before: number,
  after: number,
  amount: number,
  thresholds: readonly number[],
): number[] {
  return thresholds.filter((p) => {
    const line = (amount * p) / 100;
    return before < line && after >= line;
  });
}

/** The event id of a threshold of a budget's window: hex of SHA-256, 32 digits. */
export function alertId(subject: BudgetSubject, window: BudgetWindow, threshold: number): string {
  const who = subject.kind === 'model' ? `${subject.name}\0${subject.model}` : subject.name;
  return createHash('sha256')
    .update(`${subject.kind}\0${who}\0${window.start}\0${threshold}`)
    .digest('hex')
    .slice(0, 32);
}

/** Windows remembered (their fired thresholds); past it the oldest are forgotten (ids keep repeats harmless). */
const MAX_WINDOWS = 100_000;

export class BudgetAlerts {
  readonly #fired = new Map<string, Set<number>>();

  constructor(
    private readonly sink: (e: BudgetAlertEvent) => void,
    /** A list, or a function read at each settlement (the webhooks of the admin API change while running). */
    private readonly thresholds: readonly number[] | (() => readonly number[]) = DEFAULT_THRESHOLDS,
    private readonly now: () => number = Date.now,
  ) {}

  /** A window's spend moved from `before` to `after`: an event for each threshold crossed the first time. */
  spent(subject: BudgetSubject, budget: Budget, window: BudgetWindow, before: number, after: number): void {
    const thresholds = typeof this.thresholds === 'function' ? this.thresholds() : this.thresholds;
    if (thresholds.length === 0) return;
    const crossed = thresholdsCrossed(before, after, budget.amount, thresholds);
    if (crossed.length === 0) return;
    const key = `${subjectKey(subject)}:${window.start}`;
    let fired = this.#fired.get(key);
    if (!fired) {
      if (this.#fired.size >= MAX_WINDOWS) this.#fired.delete(this.#fired.keys().next().value as string);
      this.#fired.set(key, (fired = new Set()));
    }
    for (const threshold of crossed) {
      if (fired.has(threshold)) continue;
      fired.add(threshold);
      this.sink({
        id: alertId(subject, window, threshold),
        type: 'budget.threshold',
        subject,
        budget,
        threshold,
        spent: after,
        windowStart: new Date(window.start).toISOString(),
        resetsAt: new Date(window.resetsAt).toISOString(),
        time: new Date(this.now()).toISOString(),
      });
    }
  }
}

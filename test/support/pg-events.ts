/**
 * Test helpers around a store's invalidation events: record every event with its arrival time,
 * and wait for the next one that matches (event-driven, no polling).
 */
import type { InvalidationEvent, Store } from '../../src/store/store';

export interface Arrival {
  readonly event: InvalidationEvent;
  /** performance.now() at arrival. */
  readonly at: number;
}

export interface EventLog {
  readonly arrivals: Arrival[];
  /**
   * Resolves with the first arrival matching `match` after this call (or from index `from` of
   * `arrivals`, when given: for events that may already have come); rejects after timeoutMs.
   */
  next(match: (e: InvalidationEvent) => boolean, timeoutMs?: number, from?: number): Promise<Arrival>;
  stop(): void;
}

export function recordEvents(store: Store): EventLog {
  const arrivals: Arrival[] = [];
  const waiters = new Set<(a: Arrival) => void>();
  const unsubscribe = store.onInvalidate((event) => {
    const arrival = { event, at: performance.now() };
    arrivals.push(arrival);
    for (const w of [...waiters]) w(arrival);
  });
  return {
    arrivals,
    next(match, timeoutMs = 3000, from) {
      const earlier = from === undefined ? undefined : arrivals.slice(from).find((a) => match(a.event));
      if (earlier) return Promise.resolve(earlier);
      return new Promise((resolve, reject) => {
        const waiter = (a: Arrival): void => {
          if (!match(a.event)) return;
          waiters.delete(waiter);
          clearTimeout(timer);
          resolve(a);
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(
            new Error(
              `no matching invalidation within ${timeoutMs} ms; got ${JSON.stringify(arrivals.map((a) => a.event))}`,
            ),
          );
        }, timeoutMs);
        waiters.add(waiter);
      });
    },
    stop: unsubscribe,
  };
}

export const isAll = (e: InvalidationEvent): boolean => e.kind === 'all';
export const isKey =
  (sha256: string) =>
  (e: InvalidationEvent): boolean =>
    e.kind === 'key' && e.sha256 === sha256;
export const isGroup =
  (name: string) =>
  (e: InvalidationEvent): boolean =>
    e.kind === 'group' && e.name === name;

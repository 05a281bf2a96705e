/** Prometheus metrics of one service instance (its own registry, so tests can run several). */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface Metrics {
  readonly registry: Registry;
  /** Counts one decision (label children are cached: no label hashing per Check). */
  countDecision(status: number, reason: string): void;
  /** Counts one cache event, likewise. */
  countCache(event: string, kind: string): void;
  readonly checkSeconds: Histogram;
  readonly reloads: Counter<'result'>;
  readonly storeReady: Gauge;
  readonly logDroppedBytes: Counter;
}

export function createMetrics(defaultMetrics = true): Metrics {
  const registry = new Registry();
  if (defaultMetrics) collectDefaultMetrics({ register: registry });
  const decisions = new Counter({ name: 'modelgate_decisions_total', help: 'Decisions by HTTP status and reason', labelNames: ['status', 'reason'] as const, registers: [registry] });
  // Reasons are a closed catalogue, so this map stays small.
  const children = new Map<string, { inc(): void }>();
  const cache = new Counter({ name: 'modelgate_cache_events_total', help: 'Store cache hits, misses, stale answers and unavailable lookups', labelNames: ['kind', 'event'] as const, registers: [registry] });
  const cacheChildren = new Map<string, { inc(): void }>();
  return {
    registry,
    countCache(event, kind) {
      const k = `${kind} ${event}`;
      let child = cacheChildren.get(k);
      if (!child) cacheChildren.set(k, (child = cache.labels(kind, event)));
      child.inc();
    },
    countDecision(status, reason) {
      let child = children.get(reason);
      if (!child) children.set(reason, (child = decisions.labels(String(status), reason)));
      child.inc();
    },
    checkSeconds: new Histogram({
      name: 'modelgate_check_duration_seconds',
      help: 'Time from receiving a CheckRequest to writing its CheckResponse',
      buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5],
      registers: [registry],
    }),
    reloads: new Counter({ name: 'modelgate_store_reloads_total', help: 'Config/store reloads by result (ok, rejected)', labelNames: ['result'], registers: [registry] }),
    storeReady: new Gauge({ name: 'modelgate_store_ready', help: '1 when the store can answer', registers: [registry] }),
    logDroppedBytes: new Counter({ name: 'modelgate_log_dropped_bytes_total', help: 'Log bytes dropped because the reader of the log stream fell 64 MiB behind', registers: [registry] }),
  };
}

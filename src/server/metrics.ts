/**
 * Prometheus metrics of one service instance (its own registry, so tests can run several).
 *
 * The per-Check counters and the latency histogram are "hot": the Check path only adds to plain
 * numbers (no label hashing, no prom-client call), and the numbers reach prom-client when /metrics
 * is scraped (each metric's `collect`). The rest are ordinary prom-client metrics.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics, type MetricValueWithName } from 'prom-client';
import type { MeterMetrics } from '../meter/meter';
import { genAiMetrics } from './genai-metrics';

export interface Metrics {
  readonly registry: Registry;
  /** Counts one decision. */
  countDecision(status: number, reason: string): void;
  /** Counts one cache event. */
  countCache(event: string, kind: string): void;
  /** Records one Check's duration, in seconds. */
  observeCheckSeconds(seconds: number): void;
  readonly reloads: Counter<'result'>;
  readonly storeReady: Gauge;
  readonly logDroppedBytes: Counter;
  /** Token charges to the rate limit engine after responses (docs/rate-limits.md), by result (charged, failed). */
  readonly rateLimitCharges: Counter<'result'>;
  /** The meter's counts (docs/metering.md): by group and model, never by key (bounded cardinality). */
  readonly meter: MeterMetrics;
  /** Where the meter's in-flight gauges read at scrape time (server/service.ts sets it once). */
  readInFlight(read: () => InFlightReading): void;
  /** The notAfter of the gRPC port's mTLS certificate (`cert`) and client CA (`client_ca`), when grpc.tls is set. */
  readonly tlsCertExpiry: Gauge<'file'>;
}

/** The meter's table of allowed, unsettled requests, as the gauges show it. */
export interface InFlightReading {
  readonly count: number;
  /** Seconds since the oldest one's Check (0: none in flight). */
  readonly oldestAgeSeconds: number;
  /** meter.reservationSeconds: a request older than this should have settled at its maximum. */
  readonly reservationSeconds: number;
}

/** Label values of a hot counter and what was counted since the last scrape. */
interface HotCell {
  readonly labels: string[];
  pending: number;
  /** Its series has been handed to prom-client (a cell counted 0 still shows, as prom-client's inc(0) would). */
  shown: boolean;
}

/**
 * A prom-client Counter whose increments are plain additions, handed to prom-client at scrape
 * time. Label sets are few (a closed catalogue of reasons, cache kinds x events; the meter's groups x
 * the models they allow), so the cells stay a small map keyed by one string.
 */
class HotCounter<L extends string> {
  readonly #cells = new Map<string, HotCell>();

  constructor(name: string, help: string, labelNames: readonly L[], registry: Registry) {
    const cells = this.#cells;
    new Counter<L>({
      // registers itself; read through `collect` at scrape time
      name,
      help,
      labelNames,
      registers: [registry],
      collect() {
        for (const cell of cells.values()) {
          if (cell.pending === 0 && cell.shown) continue;
          this.labels(...cell.labels).inc(cell.pending);
          cell.pending = 0;
          cell.shown = true;
        }
      },
    });
  }

  /** The cell of one label set; its series appears at the first scrape after its first count. */
  cell(...labels: string[]): HotCell {
    const key = labels.join('\u0000');
    let cell = this.#cells.get(key);
    if (!cell) this.#cells.set(key, (cell = { labels, pending: 0, shown: false }));
    return cell;
  }
}

/**
 * A label-less histogram that counts into an array of buckets and exposes prom-client's histogram
 * shape (cumulative `_bucket{le}`, `+Inf`, `_sum`, `_count`; summed across cluster workers).
 */
class HotHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #counts: Float64Array;
  #sum = 0;
  #count = 0;

  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: readonly number[],
    registry: Registry,
  ) {
    this.#counts = new Float64Array(buckets.length);
    registry.registerMetric(this as never);
  }

  observe(value: number): void {
    this.#sum += value;
    this.#count++;
    const b = this.buckets;
    for (let i = 0; i < b.length; i++) {
      if (value <= b[i]) {
        this.#counts[i]++;
        return;
      }
    }
  }

  /** What a Registry (and the cluster aggregator) reads from a metric. */
  async get(): Promise<{
    name: string;
    help: string;
    type: 'histogram';
    values: MetricValueWithName<string>[];
    aggregator: 'sum';
  }> {
    const bucket = `${this.name}_bucket`;
    const values: MetricValueWithName<string>[] = [];
    let acc = 0;
    this.buckets.forEach((le, i) => {
      acc += this.#counts[i];
      values.push({ labels: { le }, value: acc, metricName: bucket });
    });
    values.push(
      { labels: { le: '+Inf' }, value: this.#count, metricName: bucket },
      { labels: {}, value: this.#sum, metricName: `${this.name}_sum` },
      { labels: {}, value: this.#count, metricName: `${this.name}_count` },
    );
    return { name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' };
  }

  reset(): void {
    this.#counts.fill(0);
    this.#sum = 0;
    this.#count = 0;
  }
}

export function createMetrics(defaultMetrics = true): Metrics {
  const registry = new Registry();
  if (defaultMetrics) collectDefaultMetrics({ register: registry });
  const decisions = new HotCounter(
    'modelgate_decisions_total',
    'Decisions by HTTP status and reason',
    ['status', 'reason'] as const,
    registry,
  );
  const cache = new HotCounter(
    'modelgate_cache_events_total',
    'Store cache hits, misses, stale answers and unavailable lookups',
    ['kind', 'event'] as const,
    registry,
  );
  const checkSeconds = new HotHistogram(
    'modelgate_check_duration_seconds',
    'Time from receiving a CheckRequest to writing its CheckResponse',
    [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5],
    registry,
  );
  // Reasons are a closed catalogue (one status each), cache kinds and events likewise: these maps stay small.
  const decisionCells = new Map<string, HotCell>();
  let inFlightSource: (() => InFlightReading) | undefined;
  // Gauges read at scrape time; with --workers N the counts are summed and the oldest age is the maximum.
  new Gauge({
    name: 'modelgate_meter_in_flight',
    help: 'Requests allowed whose responses the meter has not settled yet',
    registers: [registry],
    collect() {
      this.set(inFlightSource?.().count ?? 0);
    },
  });
  new Gauge({
    name: 'modelgate_meter_oldest_in_flight_seconds',
    help: 'Age of the oldest request allowed and not yet settled (0: none in flight)',
    registers: [registry],
    aggregator: 'max',
    collect() {
      this.set(inFlightSource?.().oldestAgeSeconds ?? 0);
    },
  });
  new Gauge({
    name: 'modelgate_meter_reservation_seconds',
    help: 'meter.reservationSeconds: how long a request may go unreported before it settles at its maximum',
    registers: [registry],
    aggregator: 'max',
    collect() {
      this.set(inFlightSource?.().reservationSeconds ?? 0);
    },
  });
  const cacheCells = new Map<string, Map<string, HotCell>>();
  return {
    registry,
    countDecision(status, reason) {
      let cell = decisionCells.get(reason);
      if (!cell) decisionCells.set(reason, (cell = decisions.cell(String(status), reason)));
      cell.pending++;
    },
    countCache(event, kind) {
      let byEvent = cacheCells.get(kind);
      if (!byEvent) cacheCells.set(kind, (byEvent = new Map()));
      let cell = byEvent.get(event);
      if (!cell) byEvent.set(event, (cell = cache.cell(kind, event)));
      cell.pending++;
    },
    observeCheckSeconds: (seconds) => checkSeconds.observe(seconds),
    reloads: zeroed(
      new Counter({
        name: 'modelgate_store_reloads_total',
        help: 'Config/store reloads by result (ok, rejected)',
        labelNames: ['result'],
        registers: [registry],
      }),
      ['ok', 'rejected'],
    ),
    // A gauge is not a count: with --workers N the cluster aggregation takes the minimum (1 only when
    // every worker's store can answer), where counters are summed.
    storeReady: new Gauge({
      name: 'modelgate_store_ready',
      help: "1 when the store can answer (with --workers: every worker's)",
      registers: [registry],
      aggregator: 'min',
    }),
    rateLimitCharges: zeroed(
      new Counter({
        name: 'modelgate_rate_limit_token_charges_total',
        help: "Responses whose tokens were charged to the rate limit engine (charged), or could not be (failed: the engine did not answer; that key's token windows miss them)",
        labelNames: ['result'],
        registers: [registry],
      }),
      ['charged', 'failed'],
    ),
    logDroppedBytes: new Counter({
      name: 'modelgate_log_dropped_bytes_total',
      help: 'Log bytes dropped because the reader of the log stream fell 64 MiB behind',
      registers: [registry],
    }),
    meter: meterMetrics(registry),
    readInFlight(read) {
      inFlightSource = read;
    },
    tlsCertExpiry: new Gauge({
      name: 'modelgate_grpc_tls_cert_expiry_timestamp_seconds',
      help: "When the gRPC port's mTLS certificate (file=cert) and client CA (file=client_ca) expire, as epoch seconds (grpc.tls)",
      labelNames: ['file'],
      registers: [registry],
      aggregator: 'min',
    }),
  };
}

/**
 * A labelled counter with its series shown at 0 from the start: Prometheus's increase() and rate()
 * see the first count only from a series that existed before it (the alerts on rejected reloads and
 * failed charges would miss a first one).
 */
function zeroed<L extends string>(counter: Counter<L>, values: readonly string[]): Counter<L> {
  for (const v of values) counter.labels(v).inc(0);
  return counter;
}

/** Tokens and cost by group and model (the models a group allows: a bounded set), responses by result and reason. */
/**
 * A counter only goes up: a count that is not a finite positive number adds nothing (prom-client would throw at the
 * scrape).
 */
function add(cell: HotCell, n: number): void {
  if (Number.isFinite(n) && n > 0) cell.pending += n;
}

function meterMetrics(registry: Registry): MeterMetrics {
  // Hot counters, as the Check's: a settlement adds to plain numbers found through nested maps (no
  // label object hashed per count, which was a kilobyte of garbage per settled request).
  const tokens = new HotCounter(
    'modelgate_meter_tokens_total',
    'Tokens debited, by group, model and kind (input, cached_input, output); input includes cached_input; estimates and provisional maximums included',
    ['group', 'model', 'kind'] as const,
    registry,
  );
  const cost = new HotCounter(
    'modelgate_meter_cost_total',
    "Cost debited (tokens x price), in the balance's unit, by group and model",
    ['group', 'model'] as const,
    registry,
  );
  const responses = new HotCounter(
    'modelgate_meter_responses_total',
    "Requests settled by the meter, by result (metered: the provider's usage; estimated; provisional: no report, its maximum; released: nothing to debit; failed: the store never took it) and reason",
    ['result', 'reason'] as const,
    registry,
  );
  const lost = new Counter({
    name: 'modelgate_meter_reports_lost_total',
    help: 'Access-log entries that could not be read (their requests settle at their maximum at their deadline)',
    registers: [registry],
  });
  // group -> model -> cells: the models a group allows, a bounded set (as the series themselves are).
  const spent = new Map<string, Map<string, { input: HotCell; cached: HotCell; output: HotCell; cost: HotCell }>>();
  const results = new Map<string, Map<string, HotCell>>();
  const response = (result: string, reason: string): HotCell => {
    let byReason = results.get(result);
    if (!byReason) results.set(result, (byReason = new Map()));
    let cell = byReason.get(reason);
    if (!cell) byReason.set(reason, (cell = responses.cell(result, reason)));
    return cell;
  };
  // Shown at 0 from the start, for the alerts' increase() (see zeroed): debits the store never took.
  for (const reason of ['store_unavailable', 'price_invalid']) response('failed', reason);
  return {
    settled(group, model, usage, c, result, reason) {
      response(result, reason).pending++;
      let byModel = spent.get(group);
      if (!byModel) spent.set(group, (byModel = new Map()));
      let cells = byModel.get(model);
      if (!cells)
        byModel.set(
          model,
          (cells = {
            input: tokens.cell(group, model, 'input'),
            cached: tokens.cell(group, model, 'cached_input'),
            output: tokens.cell(group, model, 'output'),
            cost: cost.cell(group, model),
          }),
        );
      add(cells.input, usage.inputTokens);
      add(cells.cached, usage.cachedInputTokens);
      add(cells.output, usage.outputTokens);
      add(cells.cost, c);
    },
    released: (reason) => {
      response('released', reason).pending++;
    },
    failed: (reason) => {
      response('failed', reason).pending++;
    },
    lostReports: (n) => lost.inc(n),
    served: genAiMetrics(registry),
  };
}

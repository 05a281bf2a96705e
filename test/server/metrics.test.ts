/**
 * The hot metrics: the Check path adds to plain numbers, prom-client sees them at scrape time.
 * The exposition must be exactly what prom-client's own Counter and Histogram would print for the
 * same events, scrapes must not double-count, and cluster aggregation must sum workers.
 */
import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, test } from 'vitest';
import { createMetrics } from '../../src/server/metrics';

const BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5];
const OBSERVED = [0.00003, 0.00005, 0.0002, 0.0009, 0.7, 0.02];

/** One metric's block of the text exposition. */
function block(text: string, name: string): string {
  return (text.split('\n\n').find((b) => b.includes(`# TYPE ${name} `)) ?? '').trim();
}

describe('hot metrics', () => {
  test("the histogram prints exactly what prom-client's Histogram prints for the same observations", async () => {
    const m = createMetrics(false);
    for (const v of OBSERVED) m.observeCheckSeconds(v);
    const ref = new Registry();
    const h = new Histogram({
      name: 'modelgate_check_duration_seconds',
      help: 'Time from receiving a CheckRequest to writing its CheckResponse',
      buckets: BUCKETS,
      registers: [ref],
    });
    for (const v of OBSERVED) h.observe(v);
    const ours = block(await m.registry.metrics(), 'modelgate_check_duration_seconds');
    expect(ours).toContain('modelgate_check_duration_seconds_bucket{le="0.00005"} 2');
    expect(ours).toContain('modelgate_check_duration_seconds_count 6');
    expect(ours).toBe(block(await ref.metrics(), 'modelgate_check_duration_seconds'));
  });

  test("counters print what prom-client's Counter prints, and a second scrape does not count twice", async () => {
    const m = createMetrics(false);
    for (let i = 0; i < 3; i++) m.countDecision(200, 'allowed');
    m.countDecision(403, 'model_not_in_group');
    m.countCache('hit', 'key');
    m.countCache('hit', 'key');
    m.countCache('miss', 'group');
    const ref = new Registry();
    const c = new Counter({
      name: 'modelgate_decisions_total',
      help: 'Decisions by HTTP status and reason',
      labelNames: ['status', 'reason'],
      registers: [ref],
    });
    c.labels('200', 'allowed').inc(3);
    c.labels('403', 'model_not_in_group').inc(1);
    const first = await m.registry.metrics();
    expect(block(first, 'modelgate_decisions_total')).toBe(block(await ref.metrics(), 'modelgate_decisions_total'));
    expect(first).toContain('modelgate_cache_events_total{kind="key",event="hit"} 2');
    expect(first).toContain('modelgate_cache_events_total{kind="group",event="miss"} 1');
    expect(block(await m.registry.metrics(), 'modelgate_decisions_total')).toBe(
      block(first, 'modelgate_decisions_total'),
    );
    m.countDecision(200, 'allowed');
    expect(await m.registry.metrics()).toContain('modelgate_decisions_total{status="200",reason="allowed"} 4');
  });

  test('workers are summed by the cluster aggregator (counters and every histogram bucket)', async () => {
    const workers = [createMetrics(false), createMetrics(false)];
    workers[0].countDecision(200, 'allowed');
    workers[1].countDecision(200, 'allowed');
    workers[1].countDecision(401, 'key_unknown');
    workers[0].observeCheckSeconds(0.0002);
    workers[1].observeCheckSeconds(0.003);
    const summed = AggregatorRegistry.aggregate(await Promise.all(workers.map((w) => w.registry.getMetricsAsJSON())));
    const text = await summed.metrics();
    expect(text).toContain('modelgate_decisions_total{status="200",reason="allowed"} 2');
    expect(text).toContain('modelgate_decisions_total{status="401",reason="key_unknown"} 1');
    expect(text).toContain('modelgate_check_duration_seconds_bucket{le="0.00025"} 1');
    expect(text).toContain('modelgate_check_duration_seconds_bucket{le="0.005"} 2');
    expect(text).toContain('modelgate_check_duration_seconds_count 2');
  });

  test("a gauge is not summed over workers: modelgate_store_ready is 1 only when every worker's store can answer", async () => {
    const workers = [createMetrics(false), createMetrics(false)];
    workers.forEach((w) => w.storeReady.set(1));
    const both = await AggregatorRegistry.aggregate(
      await Promise.all(workers.map((w) => w.registry.getMetricsAsJSON())),
    ).metrics();
    expect(both).toMatch(/^modelgate_store_ready 1$/m);
    workers[1].storeReady.set(0);
    const one = await AggregatorRegistry.aggregate(
      await Promise.all(workers.map((w) => w.registry.getMetricsAsJSON())),
    ).metrics();
    expect(one).toMatch(/^modelgate_store_ready 0$/m);
  });

  test("the meter's counters print what prom-client's Counter prints for the same settlements, a 0 included; a count that is not a finite positive number adds nothing", async () => {
    const m = createMetrics(false);
    const usage = (inputTokens: number, cachedInputTokens: number, outputTokens: number) => ({
      inputTokens,
      cachedInputTokens,
      outputTokens,
    });
    m.meter.settled('team', 'gpt-4o', usage(100, 0, 20), 0.0005, 'metered', '');
    m.meter.settled('team', 'gpt-4o', usage(50, 10, 5), 0.00025, 'estimated', 'stream_without_usage');
    m.meter.settled('team', 'gpt-4o', usage(Number.NaN, -1, Infinity), Number.NaN, 'metered', '');
    m.meter.released('not_forwarded');
    m.meter.failed('store_unavailable');
    const ref = new Registry();
    const tokens = new Counter({
      name: 'modelgate_meter_tokens_total',
      help: 'Tokens debited, by group, model and kind (input, cached_input, output); input includes cached_input; estimates and provisional maximums included',
      labelNames: ['group', 'model', 'kind'],
      registers: [ref],
    });
    const cost = new Counter({
      name: 'modelgate_meter_cost_total',
      help: "Cost debited (tokens x price), in the balance's unit, by group and model",
      labelNames: ['group', 'model'],
      registers: [ref],
    });
    const responses = new Counter({
      name: 'modelgate_meter_responses_total',
      help: "Requests settled by the meter, by result (metered: the provider's usage; estimated; provisional: no report, its maximum; released: nothing to debit; failed: the store never took it) and reason",
      labelNames: ['result', 'reason'],
      registers: [ref],
    });
    responses.labels('failed', 'store_unavailable').inc(0); // shown at 0 from the start (the alerts' increase())
    responses.labels('failed', 'price_invalid').inc(0);
    tokens.labels('team', 'gpt-4o', 'input').inc(150);
    tokens.labels('team', 'gpt-4o', 'cached_input').inc(10);
    tokens.labels('team', 'gpt-4o', 'output').inc(25);
    cost.labels('team', 'gpt-4o').inc(0.00075);
    responses.labels('metered', '').inc(2);
    responses.labels('estimated', 'stream_without_usage').inc(1);
    responses.labels('released', 'not_forwarded').inc(1);
    responses.labels('failed', 'store_unavailable').inc(1);
    const ours = await m.registry.metrics();
    const theirs = await ref.metrics();
    for (const name of [
      'modelgate_meter_tokens_total',
      'modelgate_meter_cost_total',
      'modelgate_meter_responses_total',
    ])
      expect(block(ours, name)).toBe(block(theirs, name));
    // A series counted 0 shows as prom-client's inc(0) would, and a second scrape does not count twice.
    const zero = createMetrics(false);
    zero.meter.settled('team', 'o3', usage(7, 0, 0), 0, 'metered', '');
    expect(await zero.registry.metrics()).toContain(
      'modelgate_meter_tokens_total{group="team",model="o3",kind="cached_input"} 0',
    );
    expect(await zero.registry.metrics()).toContain(
      'modelgate_meter_tokens_total{group="team",model="o3",kind="input"} 7',
    );
  });

  test('shows the counters the alerts take increase() of at 0 before their first count', async () => {
    const text = await createMetrics(false).registry.metrics();
    for (const series of [
      'modelgate_store_reloads_total{result="ok"} 0',
      'modelgate_store_reloads_total{result="rejected"} 0',
      'modelgate_rate_limit_token_charges_total{result="failed"} 0',
      'modelgate_meter_responses_total{result="failed",reason="store_unavailable"} 0',
      'modelgate_meter_reports_lost_total 0',
      'modelgate_log_dropped_bytes_total 0',
    ])
      expect(text).toContain(series);
  });

  test("reads the meter's requests in flight, the oldest one's age and meter.reservationSeconds at scrape time", async () => {
    const m = createMetrics(false);
    expect(await m.registry.metrics()).toMatch(/^modelgate_meter_in_flight 0$/m);
    let reading = { count: 3, oldestAgeSeconds: 42.5, reservationSeconds: 900 };
    m.readInFlight(() => reading);
    let text = await m.registry.metrics();
    expect(text).toMatch(/^modelgate_meter_in_flight 3$/m);
    expect(text).toMatch(/^modelgate_meter_oldest_in_flight_seconds 42.5$/m);
    expect(text).toMatch(/^modelgate_meter_reservation_seconds 900$/m);
    reading = { count: 0, oldestAgeSeconds: 0, reservationSeconds: 60 };
    text = await m.registry.metrics();
    expect(text).toMatch(/^modelgate_meter_in_flight 0$/m);
    expect(text).toMatch(/^modelgate_meter_reservation_seconds 60$/m);
  });
});

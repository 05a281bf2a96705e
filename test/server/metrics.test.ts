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
  test('the histogram prints exactly what prom-client\'s Histogram prints for the same observations', async () => {
    const m = createMetrics(false);
    for (const v of OBSERVED) m.observeCheckSeconds(v);
    const ref = new Registry();
    const h = new Histogram({ name: 'modelgate_check_duration_seconds', help: 'Time from receiving a CheckRequest to writing its CheckResponse', buckets: BUCKETS, registers: [ref] });
    for (const v of OBSERVED) h.observe(v);
    const ours = block(await m.registry.metrics(), 'modelgate_check_duration_seconds');
    expect(ours).toContain('modelgate_check_duration_seconds_bucket{le="0.00005"} 2');
    expect(ours).toContain('modelgate_check_duration_seconds_count 6');
    expect(ours).toBe(block(await ref.metrics(), 'modelgate_check_duration_seconds'));
  });

  test('counters print what prom-client\'s Counter prints, and a second scrape does not count twice', async () => {
    const m = createMetrics(false);
    for (let i = 0; i < 3; i++) m.countDecision(200, 'allowed');
    m.countDecision(403, 'model_not_in_group');
    m.countCache('hit', 'key');
    m.countCache('hit', 'key');
    m.countCache('miss', 'group');
    const ref = new Registry();
    const c = new Counter({ name: 'modelgate_decisions_total', help: 'Decisions by HTTP status and reason', labelNames: ['status', 'reason'], registers: [ref] });
    c.labels('200', 'allowed').inc(3);
    c.labels('403', 'model_not_in_group').inc(1);
    const first = await m.registry.metrics();
    expect(block(first, 'modelgate_decisions_total')).toBe(block(await ref.metrics(), 'modelgate_decisions_total'));
    expect(first).toContain('modelgate_cache_events_total{kind="key",event="hit"} 2');
    expect(first).toContain('modelgate_cache_events_total{kind="group",event="miss"} 1');
    expect(block(await m.registry.metrics(), 'modelgate_decisions_total')).toBe(block(first, 'modelgate_decisions_total'));
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

  test('a gauge is not summed over workers: modelgate_store_ready is 1 only when every worker\'s store can answer', async () => {
    const workers = [createMetrics(false), createMetrics(false)];
    workers.forEach((w) => w.storeReady.set(1));
    const both = await AggregatorRegistry.aggregate(await Promise.all(workers.map((w) => w.registry.getMetricsAsJSON()))).metrics();
    expect(both).toMatch(/^modelgate_store_ready 1$/m);
    workers[1].storeReady.set(0);
    const one = await AggregatorRegistry.aggregate(await Promise.all(workers.map((w) => w.registry.getMetricsAsJSON()))).metrics();
    expect(one).toMatch(/^modelgate_store_ready 0$/m);
  });
});

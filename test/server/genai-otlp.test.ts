/**
 * The GenAI metrics over OTLP (src/server/genai-otlp.ts): the OpenTelemetry SDK's exporter posts to
 * a local receiver, which decodes the body with the OTLP protobuf definitions (the code
 * OpenTelemetry generated from opentelemetry-proto, as shipped in @opentelemetry/otlp-transformer
 * 0.57.2) and checks names, units, attributes, buckets and values against the conventions.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { genAiExport, otlpMetricsEndpoint } from '../../src/server/genai-otlp';
import { DURATION_BUCKETS, TOKEN_BUCKETS } from '../../src/server/genai-metrics';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root') as any; // eslint-disable-line @typescript-eslint/no-explicit-any
const Request = root.opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest;

interface KeyValue {
  key: string;
  value: { stringValue?: string };
}
const attrs = (list: KeyValue[]) => Object.fromEntries(list.map((a) => [a.key, a.value.stringValue]));

describe('GenAI metrics over OTLP', () => {
  let server: http.Server;
  const bodies: Array<{ contentType: string | undefined; body: Buffer; path: string | undefined }> = [];
  let url = '';
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        bodies.push({ contentType: req.headers['content-type'], body: Buffer.concat(chunks), path: req.url });
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  test('is off unless the environment names an endpoint, and reads both standard variables', () => {
    expect(genAiExport({})).toBeUndefined();
    expect(otlpMetricsEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toBe(
      'http://collector:4318/v1/metrics',
    );
    expect(
      otlpMetricsEndpoint({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318',
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'http://b:4318/m',
      }),
    ).toBe('http://b:4318/m');
  });

  test("exports the conventions' instruments with their units, attributes and buckets, never a key", async () => {
    const exp = genAiExport({ OTEL_EXPORTER_OTLP_ENDPOINT: url }, 'modelgate-test')!;
    exp.record(
      'chat',
      'gpt-4o',
      { inputTokens: 100, outputTokens: 20, cachedInputTokens: 30, modal: { audioInput: 40 } },
      1.5,
    );
    exp.record('messages', 'claude-sonnet-4-5', { inputTokens: 10, outputTokens: 5, cachedInputTokens: 0 }, 0.25);
    exp.record('chat', 'gpt-4o', { inputTokens: Number.NaN, outputTokens: 1, cachedInputTokens: 0 }, 1); // not countable: nothing
    await exp.flush();
    await exp.shutdown();
    expect(bodies.length).toBeGreaterThan(0);
    expect(bodies[0]).toMatchObject({ contentType: 'application/x-protobuf', path: '/v1/metrics' });
    const req = Request.decode(bodies[0].body);
    const rm = req.resourceMetrics[0];
    expect(attrs(rm.resource.attributes)['service.name']).toBe('modelgate-test');
    const metrics = rm.scopeMetrics.flatMap((s: { scope: { name: string }; metrics: unknown[] }) => {
      expect(s.scope.name).toBe('modelgate');
      return s.metrics;
    }) as Array<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    const byName = Object.fromEntries(metrics.map((m) => [m.name, m]));
    expect(Object.keys(byName).sort()).toEqual([
      'gen_ai.client.inference.usage.cache_read.input_tokens',
      'gen_ai.client.inference.usage.input_tokens',
      'gen_ai.client.inference.usage.output_tokens',
      'gen_ai.client.token.usage',
      'gen_ai.server.request.duration',
    ]);

    const usage = byName['gen_ai.client.token.usage'];
    expect(usage.unit).toBe('{token}');
    const points = usage.histogram.dataPoints.map((p: any) => ({
      ...attrs(p.attributes),
      sum: p.sum,
      count: Number(p.count),
      bounds: p.explicitBounds,
    })); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(points).toContainEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.token.type': 'input',
      sum: 100,
      count: 1,
      bounds: TOKEN_BUCKETS,
    });
    expect(points).toContainEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.request.model': 'claude-sonnet-4-5',
      'gen_ai.token.type': 'output',
      sum: 5,
      count: 1,
      bounds: TOKEN_BUCKETS,
    });
    expect(points).toHaveLength(4);

    const duration = byName['gen_ai.server.request.duration'];
    expect(duration.unit).toBe('s');
    expect(
      duration.histogram.dataPoints.map((p: any) => [
        attrs(p.attributes)['gen_ai.provider.name'],
        p.sum,
        p.explicitBounds,
      ]),
    ).toContainEqual(['openai', 1.5, DURATION_BUCKETS]); // eslint-disable-line @typescript-eslint/no-explicit-any

    const input = byName['gen_ai.client.inference.usage.input_tokens'];
    expect(input.unit).toBe('{token}');
    expect(input.sum.isMonotonic).toBe(true);
    expect(
      input.sum.dataPoints
        .map((p: any) => [
          attrs(p.attributes)['gen_ai.request.model'],
          attrs(p.attributes)['gen_ai.token.modality'],
          Number(p.asDouble ?? p.asInt),
        ])
        .sort(),
    ) // eslint-disable-line @typescript-eslint/no-explicit-any
      .toEqual([
        ['claude-sonnet-4-5', 'unknown', 10],
        ['gpt-4o', 'audio', 40],
        ['gpt-4o', 'unknown', 60],
      ]);
    expect(
      byName['gen_ai.client.inference.usage.cache_read.input_tokens'].sum.dataPoints.map((p: any) =>
        Number(p.asDouble ?? p.asInt),
      ),
    ).toEqual([30]); // eslint-disable-line @typescript-eslint/no-explicit-any
    const all = bodies.map((b) => b.body.toString('latin1')).join('');
    expect(all).not.toContain('sk-mg-');
  });
});

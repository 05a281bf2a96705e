/**
 * The GenAI metrics of genai-metrics.ts over OTLP (HTTP, protobuf) to an OpenTelemetry Collector,
 * with the OpenTelemetry JS SDK: the conventions' own names (dots), units and bucket boundaries,
 * the same attributes (never a key). On when the standard variable names an endpoint:
 * OTEL_EXPORTER_OTLP_METRICS_ENDPOINT (the whole URL) or OTEL_EXPORTER_OTLP_ENDPOINT (its base;
 * /v1/metrics is added); OTEL_METRIC_EXPORT_INTERVAL (milliseconds, default 60000) sets how often.
 */
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import {
  countableUsage,
  DURATION_BUCKETS,
  GENAI_OPERATIONS,
  modalTokens,
  TOKEN_BUCKETS,
  type GenAiRecorder,
} from './genai-metrics';

export interface GenAiExport {
  readonly endpoint: string;
  readonly record: GenAiRecorder;
  /** Exports what is recorded now (tests; shutdown). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** The OTLP metrics endpoint the environment names, if any. */
export function otlpMetricsEndpoint(env: NodeJS.ProcessEnv): string | undefined {
  const whole = env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT?.trim();
  if (whole) return whole;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return base ? `${base.replace(/\/+$/, '')}/v1/metrics` : undefined;
}

/** The exporter when the environment asks for one; undefined otherwise. */
export function genAiExport(env: NodeJS.ProcessEnv, serviceName = 'modelgate'): GenAiExport | undefined {
  const endpoint = otlpMetricsEndpoint(env);
  if (endpoint === undefined) return undefined;
  const interval = Number(env.OTEL_METRIC_EXPORT_INTERVAL);
  const reader = new PeriodicExportingMetricReader({
    exporter: new OTLPMetricExporter({ url: endpoint }),
    exportIntervalMillis: Number.isInteger(interval) && interval >= 100 ? interval : 60_000,
  });
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName }),
    readers: [reader],
  });
  const meter = provider.getMeter('modelgate');
  const tokenUsage = meter.createHistogram('gen_ai.client.token.usage', {
    unit: '{token}',
    description: 'Number of input and output tokens used.',
    advice: { explicitBucketBoundaries: TOKEN_BUCKETS },
  });
  const duration = meter.createHistogram('gen_ai.server.request.duration', {
    unit: 's',
    description: 'Generative AI server request duration such as time-to-last byte or last output token.',
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  });
  const input = meter.createCounter('gen_ai.client.inference.usage.input_tokens', {
    unit: '{token}',
    description: 'The number of input (prompt) tokens used, including cached tokens.',
  });
  const output = meter.createCounter('gen_ai.client.inference.usage.output_tokens', {
    unit: '{token}',
    description: 'The number of output (completion) tokens used, including reasoning tokens.',
  });
  const cacheRead = meter.createCounter('gen_ai.client.inference.usage.cache_read.input_tokens', {
    unit: '{token}',
    description: "The number of input tokens read from the provider's cache.",
  });
  return {
    endpoint,
    record(protocol, model, usage, seconds) {
      if (!countableUsage(usage)) return;
      const op = GENAI_OPERATIONS[protocol];
      const attrs = {
        'gen_ai.operation.name': op.operation,
        'gen_ai.provider.name': op.provider,
        'gen_ai.request.model': model,
      };
      tokenUsage.record(usage.inputTokens, { ...attrs, 'gen_ai.token.type': 'input' });
      if (op.operation !== 'embeddings')
        tokenUsage.record(usage.outputTokens, { ...attrs, 'gen_ai.token.type': 'output' });
      if (seconds !== undefined && Number.isFinite(seconds) && seconds >= 0) duration.record(seconds, attrs);
      const modal = modalTokens(usage);
      for (const [modality, n] of modal.input) input.add(n, { ...attrs, 'gen_ai.token.modality': modality });
      for (const [modality, n] of modal.output) output.add(n, { ...attrs, 'gen_ai.token.modality': modality });
      if (usage.cachedInputTokens > 0)
        cacheRead.add(usage.cachedInputTokens, { ...attrs, 'gen_ai.token.modality': 'unknown' });
    },
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}

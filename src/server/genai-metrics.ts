/**
 * OpenTelemetry GenAI metrics of the responses the meter settles, under the GenAI semantic
 * conventions' names and attributes (open-telemetry/semantic-conventions-genai, Development status:
 * docs/gen-ai/gen-ai-metrics.md and gen-ai-token-metrics.md; docs/operations.md says which version),
 * on the Prometheus endpoint as OpenTelemetry's Prometheus exporter names them (dots to underscores,
 * `_seconds` for unit s, `_total` on counters, `{token}` dropped). Never per key: the attributes are
 * the protocol's provider and operation, the requested model, the token type and modality.
 */
import { Counter, Histogram, type Registry } from 'prom-client';
import type { Usage } from '../meter/usage-reader';
import type { GenAiOperation } from '../providers/provider';
import { byProtocol } from '../providers/providers';
import type { Protocol } from '../store/store';

/** What a settled response is, in the conventions' attributes. */
export type { GenAiOperation } from '../providers/provider';

/** Each protocol's provider and operation (the conventions' well-known values, from its module). */
export const GENAI_OPERATIONS: Readonly<Record<Protocol, GenAiOperation>> = byProtocol((p) => p.genai);

/** The conventions' bucket boundaries (ExplicitBucketBoundaries advice). */
export const TOKEN_BUCKETS = [
  1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
];
export const DURATION_BUCKETS = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/** One settled response's tokens by modality, as the conventions' counters split them. */
export interface ModalTokens {
  readonly input: ReadonlyArray<readonly [modality: string, tokens: number]>;
  readonly output: ReadonlyArray<readonly [modality: string, tokens: number]>;
}

/**
 * The provider's modality breakdown (audio input, audio and image output) where it gave one; the
 * rest `unknown` (the conventions' value when the provider does not break usage down).
 */
export function modalTokens(usage: Usage): ModalTokens {
  const m = usage.modal ?? {};
  const split = (total: number, known: Array<readonly [string, number]>): Array<readonly [string, number]> => {
    const parts = known.filter(([, n]) => n > 0);
    const rest = total - parts.reduce((s, [, n]) => s + n, 0);
    return rest > 0 || parts.length === 0 ? [...parts, ['unknown', Math.max(0, rest)]] : parts;
  };
  return {
    input: split(usage.inputTokens, [['audio', m.audioInput ?? 0]]),
    output: split(usage.outputTokens, [
      ['audio', m.audioOutput ?? 0],
      ['image', m.imageOutput ?? 0],
    ]),
  };
}

/** Records settled responses; `seconds` is from the Check to the settlement (undefined: not known). */
export type GenAiRecorder = (protocol: Protocol, model: string, usage: Usage, seconds: number | undefined) => void;

/** A usage the metrics can count: finite, not negative, not flagged implausible by the reader. */
export function countableUsage(usage: Usage): boolean {
  return (
    !usage.implausible &&
    [usage.inputTokens, usage.outputTokens, usage.cachedInputTokens].every((n) => Number.isFinite(n) && n >= 0)
  );
}

export function genAiMetrics(registry: Registry): GenAiRecorder {
  const base = ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model'] as const;
  const tokenUsage = new Histogram({
    name: 'gen_ai_client_token_usage',
    help: 'gen_ai.client.token.usage ({token}): input and output tokens used per response',
    labelNames: [...base, 'gen_ai_token_type'],
    buckets: TOKEN_BUCKETS,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'gen_ai_server_request_duration_seconds',
    help: 'gen_ai.server.request.duration (s): from the Check to the end of the response',
    labelNames: base,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const counter = (name: string, help: string) =>
    new Counter({ name, help, labelNames: [...base, 'gen_ai_token_modality'], registers: [registry] });
  const input = counter(
    'gen_ai_client_inference_usage_input_tokens_total',
    'gen_ai.client.inference.usage.input_tokens ({token}): input tokens used, cached included, by modality',
  );
  const output = counter(
    'gen_ai_client_inference_usage_output_tokens_total',
    'gen_ai.client.inference.usage.output_tokens ({token}): output tokens used, reasoning included, by modality',
  );
  const cacheRead = counter(
    'gen_ai_client_inference_usage_cache_read_input_tokens_total',
    "gen_ai.client.inference.usage.cache_read.input_tokens ({token}): input tokens read from the provider's cache",
  );
  return (protocol, model, usage, seconds) => {
    if (!countableUsage(usage)) return;
    const op = GENAI_OPERATIONS[protocol];
    const labels = {
      gen_ai_operation_name: op.operation,
      gen_ai_provider_name: op.provider,
      gen_ai_request_model: model,
    };
    tokenUsage.observe({ ...labels, gen_ai_token_type: 'input' }, usage.inputTokens);
    if (op.operation !== 'embeddings')
      tokenUsage.observe({ ...labels, gen_ai_token_type: 'output' }, usage.outputTokens);
    if (seconds !== undefined && Number.isFinite(seconds) && seconds >= 0) duration.observe(labels, seconds);
    const modal = modalTokens(usage);
    for (const [modality, n] of modal.input) input.inc({ ...labels, gen_ai_token_modality: modality }, n);
    for (const [modality, n] of modal.output) output.inc({ ...labels, gen_ai_token_modality: modality }, n);
    if (usage.cachedInputTokens > 0)
      cacheRead.inc({ ...labels, gen_ai_token_modality: 'unknown' }, usage.cachedInputTokens);
  };
}

/**
 * The OpenTelemetry GenAI metrics on the Prometheus endpoint (src/server/genai-metrics.ts): the
 * conventions' names as OpenTelemetry's Prometheus exporter writes them, their attributes (never a
 * key), their bucket boundaries, and the modality split of the usage counters.
 */
import { Registry } from 'prom-client';
import { describe, expect, test } from 'vitest';
import { DURATION_BUCKETS, genAiMetrics, modalTokens, TOKEN_BUCKETS } from '../../src/server/genai-metrics';

const usage = (inputTokens: number, outputTokens: number, cachedInputTokens = 0, modal?: Record<string, number>) => ({
  inputTokens,
  outputTokens,
  cachedInputTokens,
  ...(modal ? { modal } : {}),
});

describe('GenAI metrics', () => {
  test('records token usage by operation, provider, model and token type, and the request duration', async () => {
    const r = new Registry();
    const record = genAiMetrics(r);
    record('chat', 'gpt-4o', usage(100, 20, 30), 1.5);
    record('messages', 'claude-sonnet-4-5', usage(10, 5), 0.2);
    record('generative', 'gemini-2.5-pro', usage(7, 3), undefined);
    const text = await r.metrics();
    const chat = 'gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o"';
    expect(text).toContain(`gen_ai_client_token_usage_sum{${chat},gen_ai_token_type="input"} 100`);
    expect(text).toContain(`gen_ai_client_token_usage_sum{${chat},gen_ai_token_type="output"} 20`);
    expect(text).toContain(`gen_ai_client_token_usage_bucket{le="64",${chat},gen_ai_token_type="output"} 1`);
    expect(text).toContain(`gen_ai_client_token_usage_bucket{le="16",${chat},gen_ai_token_type="output"} 0`);
    expect(text).toContain(`gen_ai_server_request_duration_seconds_sum{${chat}} 1.5`);
    expect(text).toContain(
      `gen_ai_client_inference_usage_input_tokens_total{${chat},gen_ai_token_modality="unknown"} 100`,
    );
    expect(text).toContain(
      `gen_ai_client_inference_usage_cache_read_input_tokens_total{${chat},gen_ai_token_modality="unknown"} 30`,
    );
    expect(text).toContain(
      'gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_provider_name="anthropic",gen_ai_request_model="claude-sonnet-4-5",gen_ai_token_type="input"} 1',
    );
    expect(text).toContain(
      'gen_ai_client_token_usage_count{gen_ai_operation_name="generate_content",gen_ai_provider_name="gcp.gemini",gen_ai_request_model="gemini-2.5-pro",gen_ai_token_type="output"} 1',
    );
    expect(text).not.toMatch(/gen_ai_server_request_duration_seconds_count\{[^}]*gemini/);
    expect(text).toMatch(/# TYPE gen_ai_client_token_usage histogram/);
    expect(text).toMatch(/# TYPE gen_ai_server_request_duration_seconds histogram/);
    expect(text).toMatch(/# TYPE gen_ai_client_inference_usage_output_tokens_total counter/);
  });

  test("uses the conventions' bucket boundaries", async () => {
    const r = new Registry();
    genAiMetrics(r)('chat', 'm', usage(1, 1), 0.01);
    const text = await r.metrics();
    const bucketsOf = (name: string, type: string) => [
      ...new Set(
        [...text.matchAll(new RegExp(`${name}_bucket\\{le="([^"]+)"[^}]*gen_ai_request_model="m"${type}`, 'g'))].map(
          (m) => m[1],
        ),
      ),
    ];
    expect(bucketsOf('gen_ai_client_token_usage', ',gen_ai_token_type="input"')).toEqual([
      ...TOKEN_BUCKETS.map(String),
      '+Inf',
    ]);
    expect(bucketsOf('gen_ai_server_request_duration_seconds', '')).toEqual([...DURATION_BUCKETS.map(String), '+Inf']);
  });

  test('has no output token observation for embeddings, and records nothing of an implausible usage', async () => {
    const r = new Registry();
    const record = genAiMetrics(r);
    record('embeddings', 'text-embedding-3-small', usage(12, 0), 0.05);
    record('chat', 'gpt-4o', { ...usage(Number.NaN, 5), implausible: true }, 1);
    record('chat', 'gpt-4o', usage(-1, 5), 1);
    const text = await r.metrics();
    expect(text).toContain(
      'gen_ai_client_token_usage_count{gen_ai_operation_name="embeddings",gen_ai_provider_name="openai",gen_ai_request_model="text-embedding-3-small",gen_ai_token_type="input"} 1',
    );
    expect(text).not.toMatch(/gen_ai_token_type="output"\} /);
    expect(text).not.toContain('gpt-4o');
  });

  test('splits usage by the modalities the provider reported; the rest is unknown', () => {
    expect(modalTokens(usage(100, 50, 0, { audioInput: 40, audioOutput: 10, imageOutput: 40 }))).toEqual({
      input: [
        ['audio', 40],
        ['unknown', 60],
      ],
      output: [
        ['audio', 10],
        ['image', 40],
      ],
    });
    expect(modalTokens(usage(0, 0))).toEqual({ input: [['unknown', 0]], output: [['unknown', 0]] });
  });
});

/**
 * `modelgate explain` shows what the meter holds a request at (its metadata: maxInput, and
 * referencedInput for an image or a file the provider reads beyond the body's bytes), as numbers and
 * booleans. Strict mode, the demo config: each image- or file-carrying item of issue 36 (finding 2)
 * is marked referenced and held at meter.referencedInputTokens more than its bytes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runCli } from '../../src/cli/main';
import { startService, type Service } from '../../src/server/service';
import { DEMO_KEYS } from '../support/demo-keys';
import { readFileSync } from 'node:fs';
import { DEMO_CONFIG, LogSink, tempConfig } from '../support/service-harness';

const IMAGE = 'data:image/png;base64,iVBORw0KGgo=';
const CASES: ReadonlyArray<readonly [string, string, string[], unknown]> = [
  [
    'a computer_call_output screenshot (data URL)',
    '/v1/responses',
    [`Authorization: Bearer ${DEMO_KEYS.alice}`],
    {
      model: 'gpt-4o-mini',
      max_output_tokens: 16,
      input: [
        { type: 'computer_call_output', call_id: 'c', output: { type: 'computer_screenshot', image_url: IMAGE } },
      ],
    },
  ],
  [
    'a computer_call_output screenshot (file_id)',
    '/v1/responses',
    [`Authorization: Bearer ${DEMO_KEYS.alice}`],
    {
      model: 'gpt-4o-mini',
      max_output_tokens: 16,
      input: [
        { type: 'computer_call_output', call_id: 'c', output: { type: 'computer_screenshot', file_id: 'file-1' } },
      ],
    },
  ],
  [
    'an image_generation_call by id',
    '/v1/responses',
    [`Authorization: Bearer ${DEMO_KEYS.alice}`],
    { model: 'gpt-4o-mini', max_output_tokens: 16, input: [{ type: 'image_generation_call', id: 'ig_1' }] },
  ],
  [
    'a container_upload',
    '/v1/messages',
    [`x-api-key: ${DEMO_KEYS.alice}`, 'anthropic-version: 2023-06-01'],
    {
      model: 'claude-3-5-haiku-latest',
      max_tokens: 16,
      messages: [{ role: 'user', content: [{ type: 'container_upload', file_id: 'file_1' }] }],
    },
  ],
];

describe('explain shows the meter marks of image- and file-carrying items (strict mode)', () => {
  let service: Service;
  beforeAll(async () => {
    const configPath = tempConfig(readFileSync(DEMO_CONFIG, 'utf8').replace('  mode: soft ', '  mode: strict '));
    service = await startService({
      configPath,
      grpcAddress: '127.0.0.1:0',
      httpAddress: '127.0.0.1:0',
      logDestination: new LogSink(),
      watch: false,
      env: {},
    });
  });
  afterAll(async () => service?.close(1000, 0));

  const explain = async (path: string, headers: string[], body: unknown): Promise<Record<string, unknown>> => {
    let stdout = '';
    const code = await runCli(
      [
        'explain',
        '--addr',
        service.grpcAddress,
        ...headers.flatMap((h) => ['-H', h]),
        '-H',
        'content-type: application/json',
        'POST',
        path,
        JSON.stringify(body),
      ],
      { stdout: (s) => void (stdout += s), stderr: () => {}, env: {} },
    );
    expect(code).toBe(0);
    expect(stdout).toContain('-> ALLOW');
    return JSON.parse(/metadata: (\{.*\})$/m.exec(stdout)![1]) as Record<string, unknown>;
  };

  for (const [what, path, headers, body] of CASES) {
    test(`${what}: referencedInput true, held at 200,000 input tokens more than its bytes`, async () => {
      const meta = await explain(path, headers, body);
      expect(meta.referencedInput).toBe(true);
      expect(meta.maxInput).toBeGreaterThanOrEqual(200_000);
    });
  }

  test('a request without one: no referencedInput, held at its bytes', async () => {
    const meta = await explain('/v1/responses', [`Authorization: Bearer ${DEMO_KEYS.alice}`], {
      model: 'gpt-4o-mini',
      max_output_tokens: 16,
      input: [{ role: 'user', content: 'describe the screenshot' }],
    });
    expect(meta.referencedInput).toBeUndefined();
    expect(meta.maxInput).toBeLessThan(1000);
    expect(meta.maxOutput).toBe(16);
  });
});

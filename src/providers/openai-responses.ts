/**
 * The OpenAI Responses API (`/v1/responses`; Codex CLI appends `/responses` to the root address).
 * Usage: `usage` of the answer, `response.usage` of a stream's `response.completed`.
 */
import { asObject, laxBool, laxCount } from './lax-read';
import { asksEffort, openaiOutputModalities, openaiTier } from './openai';
import { PLAIN_ADMISSION_RULES, PLAIN_SHAPE_RULES } from './plain-rules';
import type { Provider, UsageBag, UsageTokens } from './provider';

function tokens(bag: UsageBag): UsageTokens {
  const n = (k: string): number => bag.get(k) ?? 0;
  return {
    input: bag.get('input_tokens'),
    output: n('output_tokens'),
    cached: n('input_tokens_details.cached_tokens'),
  };
}

export const OPENAI_RESPONSES: Provider = {
  protocol: 'responses',
  family: 'openai',
  genai: { provider: 'openai', operation: 'chat' },
  endpoints: [
    { name: 'responses', method: 'POST', path: '/v1/responses', style: 'responses' },
    // Codex CLI: `base_url = {base_url}` -> POST /responses (docs/spec.md §4.1 row 1).
    { name: 'agent_responses', method: 'POST', path: '/responses', style: 'responses', upstreamPath: '/v1/responses' },
  ],
  keyHeader: 'bearer',
  usage: {
    targets: ['usage', 'response.usage'],
    tokens,
    extras: () => ({}),
    streamUsageOptIn: false,
    toolCallsIn: 'output_items',
  },
  shape: {
    ...PLAIN_SHAPE_RULES,
    // `prompt` is a stored prompt template (an object with an id).
    storedInput: (get) => asObject(get('prompt')) !== undefined,
    background: (get) => laxBool(get('background')),
    reasons: asksEffort,
    maxToolCalls: (_tools, get) => laxCount(get('max_tool_calls')),
    pricedTier: openaiTier,
    outputModalities: openaiOutputModalities,
  },
  admission: PLAIN_ADMISSION_RULES,
  client: {
    sampleBody: (model) => ({ model, input: 'hi', max_output_tokens: 16 }),
    // 16 is the Responses API's smallest max_output_tokens.
    probeBody: (model) => ({ model, input: 'hi', max_output_tokens: 16 }),
    extraHeaders: [],
    openaiSdk: (model) => ({
      ts: [
        `const reply = await client.responses.create({ model: ${JSON.stringify(model)}, input: 'hi' });`,
        'console.log(reply.output_text);',
      ],
      py: [`reply = client.responses.create(model=${JSON.stringify(model)}, input="hi")`, 'print(reply.output_text)'],
    }),
  },
};

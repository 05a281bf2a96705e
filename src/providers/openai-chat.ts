/**
 * OpenAI chat completions (`/v1/chat/completions`; coding agents append `/chat/completions` to the
 * root address). Usage: `usage` of the answer, or of a stream's final chunk only with
 * `stream_options.include_usage`; audio tokens by direction.
 */
import { asObject } from './lax-read';
import { asksEffort, openaiOutputModalities, openaiTier, promptCompletionTokens } from './openai';
import { PLAIN_ADMISSION_RULES, PLAIN_SHAPE_RULES } from './plain-rules';
import type { Provider, UsageBag, UsageExtras } from './provider';

/**
 * Whether a chat body has a message with `audio` (an earlier audio answer, billed as audio input); a body that does not
 * parse counts as having one.
 */
function messageAudio(body: Uint8Array): boolean {
  try {
    const doc = asObject(JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8')));
    const messages = doc?.messages;
    return Array.isArray(messages) && messages.some((m) => asObject(m)?.audio != null);
  } catch {
    // A body this reader cannot parse may hide an audio message: counted as one (fail closed).
    return true;
  }
}

function audioTokens(bag: UsageBag): UsageExtras {
  const audioInput = bag.get('prompt_tokens_details.audio_tokens') ?? 0;
  const audioOutput = bag.get('completion_tokens_details.audio_tokens') ?? 0;
  if (audioInput === 0 && audioOutput === 0) return {};
  return { modal: { ...(audioInput > 0 ? { audioInput } : {}), ...(audioOutput > 0 ? { audioOutput } : {}) } };
}

export const OPENAI_CHAT: Provider = {
  protocol: 'chat',
  family: 'openai',
  genai: { provider: 'openai', operation: 'chat' },
  endpoints: [
    { name: 'chat_completions', method: 'POST', path: '/v1/chat/completions', style: 'chat' },
    // Coding agents of the chat kind use the root address itself as their Base URL (docs/spec.md §4.1
    // row 1: "{base_url}, no /v1 suffix") and append only /chat/completions.
    {
      name: 'agent_chat_completions',
      method: 'POST',
      path: '/chat/completions',
      style: 'chat',
      upstreamPath: '/v1/chat/completions',
    },
  ],
  keyHeader: 'bearer',
  usage: {
    targets: ['usage'],
    tokens: promptCompletionTokens,
    extras: audioTokens,
    streamUsageOptIn: true,
    toolCallsIn: 'nowhere',
  },
  shape: {
    ...PLAIN_SHAPE_RULES,
    // Predicted Outputs: the rejected prediction tokens are billed as output and never shown.
    reasons: (get) => asksEffort(get) || asObject(get('prediction')) !== undefined,
    // Search models bill each answer of a request with `web_search_options`.
    maxToolCalls: (tools, _get, answers) => (tools.every((t) => t === 'web_search') ? answers : undefined),
    pricedTier: openaiTier,
    outputModalities: openaiOutputModalities,
    // An `audio` key below the top level may be a message's audio sent back as input (or a tool
    // parameter's name: the body is parsed to tell).
    inputModalities: (input, _audioParts, add) => {
      const marks = input.fields.marks?.get('audio') ?? 0;
      if (marks > (input.fields.has('audio') ? 1 : 0) && messageAudio(input.body))
        add('audioInput', 'a message\'s "audio"');
    },
  },
  admission: PLAIN_ADMISSION_RULES,
  client: {
    sampleBody: (model) => ({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }),
    probeBody: (model) => ({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }),
    extraHeaders: [],
    openaiSdk: (model) => ({
      ts: [
        `const reply = await client.chat.completions.create({ model: ${JSON.stringify(model)}, messages: [{ role: 'user', content: 'hi' }] });`,
        'console.log(reply.choices[0].message.content);',
      ],
      py: [
        `reply = client.chat.completions.create(model=${JSON.stringify(model)}, messages=[{"role": "user", "content": "hi"}])`,
        'print(reply.choices[0].message.content)',
      ],
    }),
  },
};

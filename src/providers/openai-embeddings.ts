/** OpenAI embeddings (`/v1/embeddings`): no output tokens; usage as chat's, without audio. */
import { promptCompletionTokens } from './openai';
import { PLAIN_ADMISSION_RULES, PLAIN_SHAPE_RULES } from './plain-rules';
import type { Provider } from './provider';

export const OPENAI_EMBEDDINGS: Provider = {
  protocol: 'embeddings',
  family: 'openai',
  genai: { provider: 'openai', operation: 'embeddings' },
  endpoints: [{ name: 'embeddings', method: 'POST', path: '/v1/embeddings', style: 'embeddings' }],
  keyHeader: 'bearer',
  usage: {
    targets: ['usage'],
    tokens: promptCompletionTokens,
    extras: () => ({}),
    streamUsageOptIn: false,
    toolCallsIn: 'nowhere',
  },
  shape: { ...PLAIN_SHAPE_RULES, embeds: () => true, embedsOnly: true },
  admission: PLAIN_ADMISSION_RULES,
  client: {
    sampleBody: (model) => ({ model, input: 'hi' }),
    probeBody: (model) => ({ model, input: 'hi' }),
    extraHeaders: [],
    openaiSdk: (model) => ({
      ts: [
        `const reply = await client.embeddings.create({ model: ${JSON.stringify(model)}, input: 'hi' });`,
        'console.log(reply.data[0].embedding.length);',
      ],
      py: [
        `reply = client.embeddings.create(model=${JSON.stringify(model)}, input="hi")`,
        'print(len(reply.data[0].embedding))',
      ],
    }),
  },
};

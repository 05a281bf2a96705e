/**
 * One request per protocol and mode (answer and stream) for the metering tests, and the usage the
 * client itself saw in the answer (read here independently of the meter's own reader).
 */
import type { Config } from '../../src/config/load';
import type { ModelPrice, Protocol } from '../../src/store/store';
import type { Gateway, Reply } from './gateway';

export interface ProtocolCase {
  readonly name: string;
  readonly protocol: Protocol;
  readonly model: string;
  readonly path: string;
  readonly body: unknown;
  readonly keyHeader: 'bearer' | 'x-api-key' | 'x-goog-api-key';
  readonly stream: boolean;
}

const messages = [{ role: 'user', content: 'Meter me, please: how many tokens is this?' }];
const contents = [{ role: 'user', parts: [{ text: 'Meter me, please: how many tokens is this?' }] }];

export const PROTOCOL_CASES: readonly ProtocolCase[] = [
  {
    name: 'chat completions',
    protocol: 'chat',
    model: 'gpt-4o-mini',
    path: '/v1/chat/completions',
    body: { model: 'gpt-4o-mini', messages },
    keyHeader: 'bearer',
    stream: false,
  },
  {
    name: 'a chat completions stream (include_usage)',
    protocol: 'chat',
    model: 'gpt-4o-mini',
    path: '/v1/chat/completions',
    body: { model: 'gpt-4o-mini', messages, stream: true, stream_options: { include_usage: true } },
    keyHeader: 'bearer',
    stream: true,
  },
  {
    name: 'responses',
    protocol: 'responses',
    model: 'gpt-4o-mini',
    path: '/v1/responses',
    body: { model: 'gpt-4o-mini', input: 'Meter me, please.' },
    keyHeader: 'bearer',
    stream: false,
  },
  {
    name: 'a responses stream',
    protocol: 'responses',
    model: 'gpt-4o-mini',
    path: '/v1/responses',
    body: { model: 'gpt-4o-mini', input: 'Meter me, please.', stream: true },
    keyHeader: 'bearer',
    stream: true,
  },
  {
    name: 'embeddings',
    protocol: 'embeddings',
    model: 'text-embedding-3-small',
    path: '/v1/embeddings',
    body: { model: 'text-embedding-3-small', input: ['meter me', 'and me'] },
    keyHeader: 'bearer',
    stream: false,
  },
  {
    name: 'messages',
    protocol: 'messages',
    model: 'claude-3-5-haiku-latest',
    path: '/v1/messages',
    body: { model: 'claude-3-5-haiku-latest', max_tokens: 100, messages },
    keyHeader: 'x-api-key',
    stream: false,
  },
  {
    name: 'a messages stream',
    protocol: 'messages',
    model: 'claude-3-5-haiku-latest',
    path: '/v1/messages',
    body: { model: 'claude-3-5-haiku-latest', max_tokens: 100, messages, stream: true },
    keyHeader: 'x-api-key',
    stream: true,
  },
  {
    name: 'generateContent',
    protocol: 'generative',
    model: 'gemini-2.5-flash',
    path: '/v1beta/models/gemini-2.5-flash:generateContent',
    body: { contents },
    keyHeader: 'x-goog-api-key',
    stream: false,
  },
  {
    name: 'a streamGenerateContent SSE stream',
    protocol: 'generative',
    model: 'gemini-2.5-flash',
    path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
    body: { contents },
    keyHeader: 'x-goog-api-key',
    stream: true,
  },
  {
    name: 'a streamGenerateContent JSON-array stream',
    protocol: 'generative',
    model: 'gemini-2.5-flash',
    path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
    body: { contents },
    keyHeader: 'x-goog-api-key',
    stream: true,
  },
];

export function keyHeaders(c: ProtocolCase, key: string): Array<[string, string]> {
  const h: Array<[string, string]> = [['content-type', 'application/json']];
  if (c.keyHeader === 'bearer') h.push(['authorization', `Bearer ${key}`]);
  else h.push([c.keyHeader, key]);
  if (c.protocol === 'messages') h.push(['anthropic-version', '2023-06-01']);
  return h;
}

export function sendProtocol(gw: Pick<Gateway, 'send'>, c: ProtocolCase, key: string): Promise<Reply> {
  return gw.send('POST', c.path, { headers: keyHeaders(c, key), body: JSON.stringify(c.body) });
}

/** The JSON documents of an answer: the body, each SSE event's data, or each element of a JSON array. */
function documents(reply: Reply): any[] {
  // eslint-disable-line @typescript-eslint/no-explicit-any
  const text = reply.text.trim();
  if (String(reply.headers['content-type']).startsWith('text/event-stream')) {
    return text.split(/\r?\n\r?\n/).flatMap((ev) => {
      const data = ev
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .join('\n');
      return data && data !== '[DONE]' ? [JSON.parse(data)] : [];
    });
  }
  const v = JSON.parse(text);
  return Array.isArray(v) ? v : [v];
}

/** The usage the client saw: the last document that reports it, in its protocol's own fields. */
export function expectedUsage(c: ProtocolCase, reply: Reply): { input: number; output: number } {
  let input = 0;
  let output = 0;
  for (const d of documents(reply)) {
    const u = d.usage ?? d.response?.usage ?? d.message?.usage ?? d.usageMetadata;
    if (!u) continue;
    if (c.protocol === 'generative')
      [input, output] = [u.promptTokenCount ?? input, (u.candidatesTokenCount ?? 0) + (u.thoughtsTokenCount ?? 0)];
    else if (c.protocol === 'chat' || c.protocol === 'embeddings')
      [input, output] = [u.prompt_tokens, u.completion_tokens ?? 0];
    else [input, output] = [u.input_tokens ?? input, u.output_tokens ?? output];
  }
  return { input, output };
}

export function priceOf(config: Config, group: string, model: string): ModelPrice {
  const price = config.groups.get(group)?.models.get(model)?.price;
  if (!price) throw new Error(`no price for ${group}/${model}`);
  return price;
}

export async function waitFor(what: string, ok: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

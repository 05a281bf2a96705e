/**
 * Anthropic messages (`/v1/messages`, `/v1/messages/count_tokens`). Usage: `usage` of the answer; a
 * stream's `message.usage` of message_start, then `usage` of message_delta (output so far); cache
 * reads and writes apart from `input_tokens`; server tools' calls in `server_tool_use`.
 */
import { asObject, laxCount, tierAbove, word } from './lax-read';
import { PLAIN_ADMISSION_RULES, PLAIN_SHAPE_RULES } from './plain-rules';
import type { HostedTool } from '../store/store';
import type { Provider, UsageBag, UsageExtras, UsageTokens } from './provider';

/**
 * Anthropic's own prompts, in input tokens, rounded up from its published figures: the tool use
 * system prompt whenever the request has `tools` (346 on current models, 530 on older ones), and
 * each client tool's (bash 245, text editor 700, computer use 735 plus a system prompt of up to 499,
 * memory: taken as the text editor's).
 */
export const PROVIDER_TOOL_TOKENS: Readonly<Record<string, number>> = {
  input_schema: 600,
  bash_: 300,
  text_editor_: 800,
  computer_: 1400,
  memory_: 800,
};
/** Anthropic's cache writes: 1.25x the input price for 5 minutes (the default), 2x for 1 hour. */
export const CACHE_WRITE_FACTOR = { minutes5: 1.25, hour1: 2 } as const;

/**
 * input_tokens excludes the cache reads and writes; both are input the provider bills. A write
 * costs 1.25x the input price (5 minutes) or 2x (1 hour, `cache_creation.ephemeral_1h_input_tokens`):
 * the premium counts as input tokens (0.25 or 1 more per token written), so one price bills it.
 * `hourWrites`: writes reported without their breakdown by ttl were 1-hour ones.
 */
function tokens(bag: UsageBag, hourWrites: boolean): UsageTokens {
  const n = (k: string): number => bag.get(k) ?? 0;
  const writes = n('cache_creation_input_tokens');
  const broken =
    bag.has('cache_creation.ephemeral_5m_input_tokens') || bag.has('cache_creation.ephemeral_1h_input_tokens');
  const hour = broken ? n('cache_creation.ephemeral_1h_input_tokens') : hourWrites ? writes : 0;
  const minutes = bag.has('cache_creation.ephemeral_5m_input_tokens')
    ? n('cache_creation.ephemeral_5m_input_tokens')
    : Math.max(0, writes - hour);
  const premium = Math.ceil(minutes * (CACHE_WRITE_FACTOR.minutes5 - 1) + hour * (CACHE_WRITE_FACTOR.hour1 - 1));
  const input = bag.has('input_tokens')
    ? n('input_tokens') + n('cache_read_input_tokens') + Math.max(writes, minutes + hour) + premium
    : undefined;
  return { input, output: n('output_tokens'), cached: n('cache_read_input_tokens') };
}

/**
 * Server tools report their calls in usage (Gemini's and OpenAI's are counted from the answer: meter/tool-calls.ts).
 */
function extras(bag: UsageBag): UsageExtras {
  const searches = bag.get('server_tool_use.web_search_requests') ?? 0;
  return searches > 0 ? { toolCalls: { web_search: searches } } : {};
}

/**
 * Server tools, each with its own max_uses: their sum, when each names one and the scan found no
 * more than the parsed list holds (an escaped type, a key sent twice, a max_uses sent twice in one
 * tool: `"max_uses": 50, "max_uses": 1` is 50 to a parser that keeps the first).
 */
function maxToolCalls(
  tools: readonly HostedTool[],
  get: (k: string) => unknown,
  _answers: number,
  maxUsesKeys: () => number,
): number | undefined {
  const declared = get('tools');
  if (!Array.isArray(declared)) return undefined;
  let sum = 0;
  let hosted = 0;
  for (const t of declared) {
    const type = asObject(t)?.type;
    if (typeof type !== 'string' || !(type.startsWith('web_search') || type.startsWith('code_execution_'))) continue;
    hosted++;
    const uses = laxCount(asObject(t)?.max_uses);
    if (uses === undefined) return undefined;
    sum += uses;
  }
  let parsedMaxUses = 0;
  for (const t of declared) if (asObject(t)?.max_uses !== undefined) parsedMaxUses++;
  return hosted > 0 && hosted >= tools.length && maxUsesKeys() <= parsedMaxUses ? sum : undefined;
}

/** The tool use system prompt once when any tool prompt is marked, and each client tool's own per occurrence. */
function toolPromptTokens(marks: ReadonlyMap<string, number>): number {
  if (marks.size === 0) return 0;
  let n = PROVIDER_TOOL_TOKENS.input_schema;
  for (const [name, count] of marks)
    if (name !== 'input_schema' && name !== 'tools') n += (PROVIDER_TOOL_TOKENS[name] ?? 0) * count;
  return n;
}

export const ANTHROPIC_MESSAGES: Provider = {
  protocol: 'messages',
  family: 'anthropic',
  genai: { provider: 'anthropic', operation: 'chat' },
  endpoints: [
    { name: 'messages', method: 'POST', path: '/v1/messages', style: 'messages' },
    { name: 'messages_count_tokens', method: 'POST', path: '/v1/messages/count_tokens', style: 'messages' },
  ],
  keyHeader: 'bearer',
  usage: { targets: ['message.usage', 'usage'], tokens, extras, streamUsageOptIn: false, toolCallsIn: 'usage' },
  shape: {
    ...PLAIN_SHAPE_RULES,
    reasons: (get) => {
      const t = asObject(get('thinking'));
      return t !== undefined && word(t.type) !== 'disabled';
    },
    maxToolCalls,
    // Fast mode (about 6x), and inference_geo other than global (US-only: 1.1x).
    pricedTier: (get) =>
      tierAbove(get, 'speed', (w) => w === 'standard') ?? tierAbove(get, 'inference_geo', (w) => w === 'global'),
    // Its tool prompts are written with the tools, and a cache breakpoint may cache them all.
    inputCost: (toolPrompts, cacheWrite, ttl) => ({
      providerInput: toolPromptTokens(toolPrompts),
      inputFactor: cacheWrite ? (ttl ? CACHE_WRITE_FACTOR.hour1 : CACHE_WRITE_FACTOR.minutes5) : 1,
    }),
  },
  admission: {
    ...PLAIN_ADMISSION_RULES,
    // A beta can raise a model's output cap at the provider (output-128k-...): with any beta the
    // request's own max_tokens is not held to the configured cap.
    raisesOutputCap: (headers) => (headers['anthropic-beta'] ?? '') !== '',
  },
  client: {
    sampleBody: (model) => ({ model, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    probeBody: (model) => ({ model, max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] }),
    extraHeaders: [['anthropic-version', '2023-06-01']],
  },
};

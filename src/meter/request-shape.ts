/**
 * What a request may cost at most, read from its body the way the laxest upstream would read it
 * (the money rule: a field the gateway reads more strictly than the provider is one a client can
 * use to spend past its reservation). Pure; the values come from the top-level fields the Check's
 * model scan located (check/request-fields.ts), each parsed on its own, so a 1 MiB body is never
 * parsed whole here.
 *
 * Lax means: `"stream": 1`, `"true"`, `"yes"` stream (pydantic's lax booleans); `"n": "8"` and
 * `8.0` are 8, `"1_6"` is 16 (pydantic's lax int), `"1.6e1"` is 16 (proto3's JSON mapping); every alias a provider
 * accepts is read (snake and camel case, top level and inside
 * Gemini's generationConfig); of two spellings the larger maximum counts.
 */
import { extractFields, goFold } from '../check/extract-model';
import type { TopLevelFields } from '../contract/body-fields';
import { REQUEST_MARKS } from '../check/request-fields';
import { asObject, laxBool, laxCount } from '../providers/lax-read';
import type { ShapeInput } from '../providers/provider';
import { PROVIDERS } from '../providers/providers';
import type { HostedTool, Modality, Protocol } from '../store/store';

export interface RequestShape {
  /** The request streams its answer (lax reading). */
  readonly stream: boolean;
  /** A chat stream asked for the final usage chunk (`stream_options.include_usage`). */
  readonly includeUsage: boolean;
  /** The most output tokens one answer may produce, as the request says (undefined: it names none). */
  readonly maxOutput: number | undefined;
  /** Answers produced per request (`n`, `candidateCount`, `best_of`): output is multiplied by it. */
  readonly answers: number;
  /** Thinking tokens a request allows on top of its output maximum (Gemini's thinkingBudget). */
  readonly extraOutput: number;
  /**
   * Input the provider adds from elsewhere: a stored conversation, a previous response, a cached context, or parts it
   * counts beyond their bytes.
   */
  readonly referencedInput: boolean;
  /**
   * How many such sources: one for a stored conversation, previous response, cached context or
   * stored prompt, plus one per marked part (an image, audio, a file, a URL, fetched pages: REQUEST_MARKS).
   */
  readonly referencedCount: number;
  /**
   * Tools the provider runs and bills per call besides tokens, declared in the request, by their name in a price
   * (REQUEST_MARKS `hosted_tool`).
   */
  readonly hostedTools: readonly HostedTool[];
  /**
   * The most calls of them the request itself allows, in all: Responses `max_tool_calls`, the sum of
   * Anthropic's `max_uses` (when every hosted tool names one), one per answer for chat's search
   * models and for Gemini's grounding (billed per grounded prompt); undefined: it names none.
   */
  readonly maxToolCalls?: number;
  /**
   * A field read here, sent in another case (`"N"`; inside generationConfig `"CandidateCount"`):
   * [as sent, as read]. A case-insensitive binder reads it; this reading would not.
   */
  readonly caseVariant?: readonly [string, string];
  /** An embedding request (no output tokens): /v1/embeddings, Gemini's embedContent and batchEmbedContents. */
  readonly embeds: boolean;
  /**
   * A Responses API request in background mode (lax reading): the provider answers at once with a
   * queued response and produces the real one afterwards, where the gateway never sees its usage.
   */
  readonly background: boolean;
  /**
   * A field the meter reads, sent twice with values that differ (top level or inside generationConfig, its
   * thinkingConfig, stream_options).
   */
  readonly twice?: string;
  /**
   * A tier the provider bills above the model's price: [field, value] (OpenAI service_tier priority, Anthropic speed
   * fast, inference_geo).
   */
  readonly pricedTier?: readonly [string, string];
  /**
   * The request asks for reasoning (reasoning_effort, reasoning, Anthropic thinking, Gemini thinkingConfig) or predicts
   * its output (chat `prediction`): output the answer never shows.
   */
  readonly reasoning: boolean;
  /**
   * Input tokens the provider adds to the request's own (Anthropic's tool use system prompt and its
   * client tools' prompts: PROVIDER_TOOL_TOKENS), at most.
   */
  readonly providerInput: number;
  /**
   * What its input may cost per token at most, in input tokens: 1; an Anthropic request with a cache
   * breakpoint writes it at 1.25x the input price (5 minutes), or 2x with a `ttl` (1 hour).
   */
  readonly inputFactor: number;
  /**
   * Modalities the provider bills at prices of their own that the request sends or asks for, each
   * with the field that says so (for the hint): audio input (a chat `input_audio` part or a message's
   * `audio`, a Gemini part of media type audio/* or video/*), audio output (chat `modalities` other
   * than text, `audio`; Gemini `responseModalities` AUDIO, `speechConfig`), image output (Gemini
   * `responseModalities` IMAGE). A value that is not a known modality counts as both outputs (fail closed).
   */
  readonly modalities: readonly (readonly [Modality, string])[];
}

export { CACHE_WRITE_FACTOR, PROVIDER_TOOL_TOKENS } from '../providers/anthropic-messages';
export { laxBool, laxCount } from '../providers/lax-read';

/** The larger of the counts that are set. */
function largest(...vs: (number | undefined)[]): number | undefined {
  let best: number | undefined;
  for (const v of vs) if (v !== undefined && (best === undefined || v > best)) best = v;
  return best;
}

function parseSpan(body: Uint8Array, span: readonly [number, number] | undefined): unknown {
  if (!span) return undefined;
  try {
    return JSON.parse(Buffer.from(body.buffer, body.byteOffset + span[0], span[1] - span[0]).toString('utf8'));
  } catch {
    // Not expected: the Check's scanner validated the whole body; a field that did not parse counts as not sent.
    return undefined;
  }
}

/** Nothing said: one answer, no maximum named, no stream. */
export const PLAIN_SHAPE: RequestShape = Object.freeze({
  stream: false,
  includeUsage: false,
  maxOutput: undefined,
  answers: 1,
  extraOutput: 0,
  referencedInput: false,
  referencedCount: 0,
  hostedTools: [],
  embeds: false,
  background: false,
  reasoning: false,
  providerInput: 0,
  inputFactor: 1,
  modalities: [],
});

/**
 * Reads a request's shape from its body and the located top-level fields.
 * @param path the request path (Gemini streams by endpoint: `:streamGenerateContent`)
 */
export function requestShape(
  protocol: Protocol,
  path: string,
  body: Uint8Array | undefined,
  fields: TopLevelFields | undefined,
  maxDepth = 256,
): RequestShape {
  const rules = PROVIDERS[protocol].shape;
  const streamPath = rules.streamsByPath(path);
  const embeds = rules.embeds(path);
  if (!body || !fields) return streamPath || embeds ? { ...PLAIN_SHAPE, stream: streamPath, embeds } : PLAIN_SHAPE;
  const get = (k: string): unknown => parseSpan(body, fields.get(k));
  const gen = asObject(get('generationConfig')) ?? {};
  const gen2 = asObject(get('generation_config')) ?? {};
  const opts = asObject(get('stream_options')) ?? asObject(get('streamOptions'));
  const thinking =
    asObject(gen.thinkingConfig) ??
    asObject(gen.thinking_config) ??
    asObject(gen2.thinkingConfig) ??
    asObject(gen2.thinking_config);
  const maxOutput = largest(
    laxCount(get('max_tokens')),
    laxCount(get('max_completion_tokens')),
    laxCount(get('max_output_tokens')),
    laxCount(get('maxOutputTokens')),
    laxCount(get('maxTokens')),
    laxCount(get('max_new_tokens')),
    laxCount(gen.maxOutputTokens),
    laxCount(gen.max_output_tokens),
    laxCount(gen2.maxOutputTokens),
    laxCount(gen2.max_output_tokens),
  );
  const answers =
    largest(
      laxCount(get('n')),
      laxCount(get('best_of')),
      laxCount(get('candidateCount')),
      laxCount(get('candidate_count')),
      laxCount(gen.candidateCount),
      laxCount(gen.candidate_count),
      laxCount(gen2.candidateCount),
      laxCount(gen2.candidate_count),
    ) ?? 1;
  const extraOutput = thinking ? (laxCount(thinking.thinkingBudget) ?? laxCount(thinking.thinking_budget) ?? 0) : 0;
  const caseVariant = fields.caseVariant ?? nestedCaseVariant([gen, gen2, thinking ?? {}, opts ?? {}]);
  const present = (k: string): boolean => {
    const v = get(k);
    return v !== undefined && v !== null && v !== '' && v !== false;
  };
  const stored =
    present('previous_response_id') ||
    present('previousResponseId') ||
    present('conversation') ||
    present('cachedContent') ||
    present('cached_content') ||
    rules.storedInput(get);
  const { parts, tools, toolPrompts, cacheControl, ttl, audioParts } = marked(fields);
  const maxToolCalls =
    tools.length > 0
      ? rules.maxToolCalls(tools, get, answers, () => keyCount(body, fields.get('tools'), 'max_uses'))
      : undefined;
  const { providerInput, inputFactor } = rules.inputCost(toolPrompts, cacheControl, ttl);
  const referencedCount = (stored ? 1 : 0) + parts;
  let twice = fields.twice;
  for (const k of NESTED_OBJECTS) twice ??= nestedTwice(body, fields.get(k), maxDepth, k);
  const pricedTier = rules.pricedTier(get);
  return {
    stream: streamPath || laxBool(get('stream')),
    includeUsage: opts !== undefined && laxBool(opts.include_usage ?? opts.includeUsage),
    maxOutput,
    answers,
    extraOutput,
    referencedInput: referencedCount > 0,
    referencedCount,
    hostedTools: tools,
    ...(maxToolCalls !== undefined ? { maxToolCalls } : {}),
    embeds,
    background: rules.background(get),
    reasoning: rules.reasons(get) || thinks(thinking),
    providerInput,
    inputFactor,
    ...(caseVariant ? { caseVariant } : {}),
    ...(twice ? { twice } : {}),
    ...(pricedTier ? { pricedTier } : {}),
    modalities: modalitiesAsked(protocol, { get, body, fields, gens: [gen, gen2] }, audioParts),
  };
}

/**
 * The modalities a request sends or asks for beyond text (RequestShape.modalities): the protocol's
 * output fields, an `input_audio` part the scan marked, then what the protocol reads in its body.
 */
function modalitiesAsked(protocol: Protocol, input: ShapeInput, audioParts: number): (readonly [Modality, string])[] {
  const out: (readonly [Modality, string])[] = [];
  const add = (m: Modality, field: string): void => {
    if (!out.some(([k]) => k === m)) out.push([m, field]);
  };
  const rules = PROVIDERS[protocol].shape;
  rules.outputModalities(input, add);
  if ((input.fields.marks?.get('input_audio') ?? 0) > 0) add('audioInput', 'an "input_audio" part');
  rules.inputModalities(input, audioParts, add);
  return out;
}

/**
 * Gemini's thinkingConfig (read in every protocol's generationConfig) asks for thinking: a budget other than 0, or
 * thoughts.
 */
function thinks(thinking: Record<string, unknown> | undefined): boolean {
  if (!thinking) return false;
  const budget = thinking.thinkingBudget ?? thinking.thinking_budget;
  if (budget !== 0 && budget !== '0') return true;
  return laxBool(thinking.includeThoughts ?? thinking.include_thoughts);
}

/** The top-level objects whose keys are read (and so looked at for duplicates). */
const NESTED_OBJECTS = [
  'generationConfig',
  'generation_config',
  'stream_options',
  'streamOptions',
  'thinking',
  'reasoning',
] as const;
/** Keys read inside them, whose duplicates are looked for. */
const NESTED_WATCH: ReadonlySet<string> = new Set([
  'maxOutputTokens',
  'max_output_tokens',
  'candidateCount',
  'candidate_count',
  'thinkingConfig',
  'thinking_config',
  'thinkingBudget',
  'thinking_budget',
  'includeThoughts',
  'include_thoughts',
  'include_usage',
  'includeUsage',
  'type',
  'budget_tokens',
  'effort',
  'responseModalities',
  'response_modalities',
  'speechConfig',
  'speech_config',
]);

/**
 * A key read inside the object at `span` (and its thinkingConfig), sent twice with different values.
 * The span is part of a body already validated within `maxDepth`, so it scans; if it did not, the
 * object's own name is returned (refused: never read as having no duplicates).
 */
function nestedTwice(
  body: Uint8Array,
  span: readonly [number, number] | undefined,
  maxDepth: number,
  name: string,
  depth = 0,
): string | undefined {
  if (!span || depth > 1 || body[span[0]] !== 0x7b) return undefined;
  const inner = body.subarray(span[0], span[1]);
  const f = extractFields(inner, maxDepth, NESTED_WATCH);
  if (!f) return name;
  return (
    f.twice ??
    nestedTwice(inner, f.get('thinkingConfig'), maxDepth, 'thinkingConfig', depth + 1) ??
    nestedTwice(inner, f.get('thinking_config'), maxDepth, 'thinking_config', depth + 1)
  );
}

/** Glob patterns (`*`: any characters) as one RegExp, compiled once per list. */
const compiledGlobs = new WeakMap<readonly string[], RegExp>();

/**
 * Whether a model matches meter.reasoningModels: its name, or its last `/` segment after an `ft:`
 * prefix (`openai/o3`, `ft:o4-mini:org::id`), case-insensitively.
 */
export function mayReason(patterns: readonly string[], model: string): boolean {
  let re = compiledGlobs.get(patterns);
  if (!re) {
    const alts = patterns.map((p) =>
      p
        .split('*')
        .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*'),
    );
    re = alts.length === 0 ? /(?!)/ : new RegExp(`^(?:${alts.join('|')})$`, 'i');
    compiledGlobs.set(patterns, re);
  }
  const last = model.slice(model.lastIndexOf('/') + 1).replace(/^ft:/i, '');
  return re.test(model) || re.test(last);
}

/** The keys read inside Gemini's generationConfig, its thinkingConfig and stream_options. */
const NESTED_READ = [
  'maxOutputTokens',
  'max_output_tokens',
  'candidateCount',
  'candidate_count',
  'thinkingConfig',
  'thinking_config',
  'thinkingBudget',
  'thinking_budget',
  'include_usage',
  'includeUsage',
  'responseModalities',
  'response_modalities',
  'speechConfig',
  'speech_config',
];
const NESTED_FOLDED = new Map(NESTED_READ.map((k) => [goFold(k), k]));

function nestedCaseVariant(objects: readonly Record<string, unknown>[]): readonly [string, string] | undefined {
  for (const o of objects) {
    for (const k of Object.keys(o)) {
      const read = NESTED_FOLDED.get(goFold(k));
      if (read !== undefined && read !== k) return [k, read];
    }
  }
  return undefined;
}

/**
 * Keys of a JSON text that decode to `name`, at any depth (each string token read whole: a string's text is never taken
 * for a key).
 */
function keyCount(body: Uint8Array, span: readonly [number, number] | undefined, name: string): number {
  if (!span) return 0;
  const text = Buffer.from(body.buffer, body.byteOffset + span[0], span[1] - span[0]).toString('utf8');
  let n = 0;
  for (const m of text.matchAll(/"((?:[^"\\]|\\.)*)"(\s*:)?/g)) {
    if (m[2] === undefined) continue;
    try {
      if (m[1] === name || (m[1].includes('\\') && JSON.parse(`"${m[1]}"`) === name)) n++;
    } catch {
      /* not a string JSON.parse reads: the body was parsed already */
    }
  }
  return n;
}

/**
 * The marked strings the scan found (check/request-fields.ts REQUEST_MARKS): referenced parts, hosted
 * tools, the provider's tool prompts (by mark, with their counts), cache breakpoints.
 */
function marked(fields: TopLevelFields): {
  parts: number;
  tools: HostedTool[];
  toolPrompts: Map<string, number>;
  cacheControl: boolean;
  ttl: boolean;
  audioParts: number;
} {
  let parts = 0;
  let audioParts = 0;
  const tools: HostedTool[] = [];
  const toolPrompts = new Map<string, number>();
  let cacheControl = false;
  let ttl = false;
  if (!fields.marks) return { parts, tools, toolPrompts, cacheControl, ttl, audioParts };
  for (const [name, count] of fields.marks) {
    const mark = REQUEST_MARKS.exact.get(name) ?? REQUEST_MARKS.prefixes.find(([p]) => p === name)?.[1];
    const kind = mark?.kind;
    if (kind === 'referenced') parts += count;
    else if (kind === 'hosted_tool') {
      if (mark?.tool && !tools.includes(mark.tool)) tools.push(mark.tool);
    } else if (kind === 'tool_prompt') toolPrompts.set(name, (toolPrompts.get(name) ?? 0) + count);
    else if (kind === 'cache_write') {
      if (name === 'ttl') ttl = true;
      else cacheControl = true;
    } else if (kind === 'audio_input' && name !== 'audio') audioParts += count;
  }
  return { parts, tools, toolPrompts, cacheControl, ttl, audioParts };
}

/**
 * The most output tokens a request can produce: its own maximum (else the model's cap, else the
 * default), never above the model's cap, times the answers it asks for, plus a thinking budget.
 * Embeddings produce none.
 */
export function maxOutputTokens(shape: RequestShape, modelCap: number | null | undefined, fallback: number): number {
  if (shape.embeds) return 0;
  const cap = modelCap ?? undefined;
  const own =
    shape.maxOutput === undefined
      ? (cap ?? fallback)
      : cap === undefined
        ? shape.maxOutput
        : Math.min(shape.maxOutput, cap);
  return own * shape.answers + shape.extraOutput;
}

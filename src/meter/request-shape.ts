/**
 * What a request may cost at most, read from its body the way the laxest upstream would read it
 * (the money rule: a field the gateway reads more strictly than the provider is one a client can
 * use to spend past its reservation). Pure; the values come from the top-level fields the Check's
 * model scan located (check/request-fields.ts), each parsed on its own, so a 1 MiB body is never
 * parsed whole here.
 *
 * Lax means: `"stream": 1`, `"true"`, `"yes"` stream (pydantic's lax booleans); `"n": "8"` and
 * `8.0` are 8, `"1_6"` is 16 (pydantic's lax int), `"1.6e1"` is 16 (proto3's JSON mapping); every alias a provider accepts is read (snake and camel case, top level and inside
 * Gemini's generationConfig); of two spellings the larger maximum counts.
 */
import { extractFields, goFold, type TopLevelFields } from '../check/extract-model';
import { REQUEST_MARKS } from '../check/request-fields';
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
  /** Input the provider adds from elsewhere: a stored conversation, a previous response, a cached context, or parts it counts beyond their bytes. */
  readonly referencedInput: boolean;
  /**
   * How many such sources: one for a stored conversation, previous response, cached context or
   * stored prompt, plus one per marked part (an image, audio, a file, a URL, fetched pages: REQUEST_MARKS).
   */
  readonly referencedCount: number;
  /** Tools the provider runs and bills per call besides tokens, declared in the request, by their name in a price (REQUEST_MARKS `hosted_tool`). */
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
  /** A field the meter reads, sent twice with values that differ (top level or inside generationConfig, its thinkingConfig, stream_options). */
  readonly twice?: string;
  /** A tier the provider bills above the model's price: [field, value] (OpenAI service_tier priority, Anthropic speed fast, inference_geo). */
  readonly pricedTier?: readonly [string, string];
  /** The request asks for reasoning (reasoning_effort, reasoning, Anthropic thinking, Gemini thinkingConfig) or predicts its output (chat `prediction`): output the answer never shows. */
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

/**
 * Anthropic's own prompts, in input tokens, rounded up from its published figures: the tool use
 * system prompt whenever the request has `tools` (346 on current models, 530 on older ones), and
 * each client tool's (bash 245, text editor 700, computer use 735 plus a system prompt of up to 499,
 * memory: taken as the text editor's).
 */
export const PROVIDER_TOOL_TOKENS: Readonly<Record<string, number>> = { input_schema: 600, bash_: 300, text_editor_: 800, computer_: 1400, memory_: 800 };
/** Anthropic's cache writes: 1.25x the input price for 5 minutes (the default), 2x for 1 hour. */
export const CACHE_WRITE_FACTOR = { minutes5: 1.25, hour1: 2 } as const;

const TRUE_WORDS = new Set(['true', '1', 'yes', 'on', 't', 'y']);

/** A value as a lax upstream reads a boolean. */
export function laxBool(v: unknown): boolean {
  if (v === true) return true;
  if (typeof v === 'number') return v !== 0 && Number.isFinite(v);
  if (typeof v === 'string') return TRUE_WORDS.has(v.trim().toLowerCase());
  return false;
}

/**
 * A count in a string as pydantic's lax int reads it (vLLM's and other OpenAI-compatible servers'
 * request models): digits with underscores between them (`"1_6"` is 16, as Python's int() reads it),
 * a `+`, zero decimals, trimmed of Unicode white space as Rust's str::trim, U+0085 included.
 */
const PYDANTIC_INT = /^[\s\u0085]*\+?(\d+(?:_\d+)*)(?:\.0*)?[\s\u0085]*$/;
/**
 * A count in a string as proto3's JSON mapping reads an integer field (Google's APIs: Gemini's
 * generationConfig): any JSON number whose value is an integer, exponent included (`"1.6e1"` is 16).
 */
const JSON_NUMBER = /^-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** A value as a lax upstream reads a positive integer (8, 8.0, "8", " 8 ", "1_6", "1.6e1"); undefined otherwise. */
export function laxCount(v: unknown): number | undefined {
  let n = typeof v === 'number' ? v : Number.NaN;
  if (typeof v === 'string') {
    const digits = PYDANTIC_INT.exec(v)?.[1];
    n = digits !== undefined ? Number(digits.replace(/_/g, '')) : JSON_NUMBER.test(v) ? Number(v) : Number.NaN;
  }
  return Number.isFinite(n) && n >= 1 && Number.isInteger(n) ? n : undefined;
}

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
    return undefined;
  }
}

const asObject = (v: unknown): Record<string, unknown> | undefined => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);

/** Nothing said: one answer, no maximum named, no stream. */
export const PLAIN_SHAPE: RequestShape = Object.freeze({ stream: false, includeUsage: false, maxOutput: undefined, answers: 1, extraOutput: 0, referencedInput: false, referencedCount: 0, hostedTools: [], embeds: false, background: false, reasoning: false, providerInput: 0, inputFactor: 1, modalities: [] });

/**
 * Reads a request's shape from its body and the located top-level fields.
 * @param path the request path (Gemini streams by endpoint: `:streamGenerateContent`)
 */
export function requestShape(protocol: Protocol, path: string, body: Uint8Array | undefined, fields: TopLevelFields | undefined, maxDepth = 256): RequestShape {
  const streamPath = protocol === 'generative' && path.endsWith(':streamGenerateContent');
  const embeds = protocol === 'embeddings' || (protocol === 'generative' && (path.endsWith(':embedContent') || path.endsWith(':batchEmbedContents')));
  if (!body || !fields) return streamPath || embeds ? { ...PLAIN_SHAPE, stream: streamPath, embeds } : PLAIN_SHAPE;
  const get = (k: string): unknown => parseSpan(body, fields.get(k));
  const gen = asObject(get('generationConfig')) ?? {};
  const gen2 = asObject(get('generation_config')) ?? {};
  const opts = asObject(get('stream_options')) ?? asObject(get('streamOptions'));
  const thinking = asObject(gen.thinkingConfig) ?? asObject(gen.thinking_config) ?? asObject(gen2.thinkingConfig) ?? asObject(gen2.thinking_config);
  const maxOutput = largest(
    laxCount(get('max_tokens')), laxCount(get('max_completion_tokens')), laxCount(get('max_output_tokens')),
    laxCount(get('maxOutputTokens')), laxCount(get('maxTokens')), laxCount(get('max_new_tokens')),
    laxCount(gen.maxOutputTokens), laxCount(gen.max_output_tokens), laxCount(gen2.maxOutputTokens), laxCount(gen2.max_output_tokens),
  );
  const answers = largest(
    laxCount(get('n')), laxCount(get('best_of')), laxCount(get('candidateCount')), laxCount(get('candidate_count')),
    laxCount(gen.candidateCount), laxCount(gen.candidate_count), laxCount(gen2.candidateCount), laxCount(gen2.candidate_count),
  ) ?? 1;
  const extraOutput = thinking ? (laxCount(thinking.thinkingBudget) ?? laxCount(thinking.thinking_budget) ?? 0) : 0;
  const caseVariant = fields.caseVariant ?? nestedCaseVariant([gen, gen2, thinking ?? {}, opts ?? {}]);
  const present = (k: string): boolean => {
    const v = get(k);
    return v !== undefined && v !== null && v !== '' && v !== false;
  };
  // `prompt` is a stored prompt template of the Responses API (an object with an id).
  const stored = present('previous_response_id') || present('previousResponseId') || present('conversation') ||
    present('cachedContent') || present('cached_content') || (protocol === 'responses' && asObject(get('prompt')) !== undefined);
  const { parts, tools, toolPrompts, cacheControl, ttl, audioParts } = marked(fields);
  const maxToolCalls = tools.length > 0 ? toolCallsAllowed(protocol, tools, get, answers, () => keyCount(body, fields.get('tools'), 'max_uses')) : undefined;
  const anthropic = protocol === 'messages';
  const referencedCount = (stored ? 1 : 0) + parts;
  let twice = fields.twice;
  for (const k of NESTED_OBJECTS) twice ??= nestedTwice(body, fields.get(k), maxDepth, k);
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
    background: protocol === 'responses' && laxBool(get('background')),
    reasoning: asksReasoning(protocol, get, thinking),
    providerInput: anthropic ? toolPrompts : 0,
    inputFactor: anthropic && cacheControl ? (ttl ? CACHE_WRITE_FACTOR.hour1 : CACHE_WRITE_FACTOR.minutes5) : 1,
    ...(caseVariant ? { caseVariant } : {}),
    ...(twice ? { twice } : {}),
    ...pricedTier(protocol, get),
    modalities: modalitiesAsked(protocol, get, fields, [gen, gen2], audioParts, body),
  };
}

/** Whether a chat body has a message with `audio` (an earlier audio answer, billed as audio input); a body that does not parse counts as having one. */
function messageAudio(body: Uint8Array): boolean {
  try {
    const doc = asObject(JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8')));
    const messages = doc?.messages;
    return Array.isArray(messages) && messages.some((m) => asObject(m)?.audio != null);
  } catch {
    return true;
  }
}

const GEMINI_PART_KEYS = ['inlineData', 'inline_data', 'fileData', 'file_data'] as const;
/** Media types Gemini bills as text: images, PDF, JSON, text (any other may carry sound: counted as audio). */
const SILENT_MEDIA = /^(?:image\/|text\/|application\/(?:pdf|json)(?:$|[\s;]))/;

/** A media type the scan marks as audio (REQUEST_MARKS: audio/*, video/*), as it reads one: trimmed, in lower case. */
const SOUND_MEDIA = /^(?:audio|video)\//;

/**
 * The field that makes a Gemini body send sound, or undefined: a part (an element of a `parts`
 * array: `contents[].parts`, `systemInstruction.parts`, a `functionResponse.parts`) whose
 * inlineData/fileData names a media type not billed as text, or none (a YouTube fileData needs
 * none, and its sound is billed as audio). Keys named so anywhere else (a tool parameter `file_data`,
 * a call's argument `mimeType: "audio/mpeg"`) are no parts: Gemini reads parts only there, and
 * gemini-cli sends such turns. JSON.parse keeps the last of a key sent twice where
 * another reader may keep the first: when the scan counted more part keys or audio media types than
 * the parsed body holds, one is hidden, and counts as sound (fail closed). Parsed only when the scan
 * found a part key or an audio media type.
 */
function geminiSound(body: Uint8Array, fields: TopLevelFields, audioMarks: number): string | undefined {
  const partMarks = GEMINI_PART_KEYS.reduce((n, k) => n + (fields.marks?.get(k) ?? 0), 0);
  if (partMarks === 0 && audioMarks === 0) return undefined;
  const inPart = 'a part whose "mimeType" is audio/* or video/* (or names none)';
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
  } catch {
    return inPart;
  }
  let partKeys = 0;
  let audio = 0;
  let sound = false;
  // [value, whether it is a part (or an array of them)]
  const stack: (readonly [unknown, boolean])[] = [[doc, false]];
  while (stack.length > 0) {
    const [v, part] = stack.pop() as readonly [unknown, boolean];
    if (!v || typeof v !== 'object') continue;
    if (Array.isArray(v)) {
      for (const e of v) stack.push([e, part]);
      continue;
    }
    const o = v as Record<string, unknown>;
    for (const k in o) {
      const val = o[k];
      if ((GEMINI_PART_KEYS as readonly string[]).includes(k)) {
        partKeys++;
        const p = asObject(val);
        const mime = p?.mimeType ?? p?.mime_type;
        if (part && p && (typeof mime !== 'string' || !SILENT_MEDIA.test(mime.trim().toLowerCase()))) sound = true;
      } else if ((k === 'mimeType' || k === 'mime_type') && typeof val === 'string' && SOUND_MEDIA.test(val.trim().toLowerCase())) audio++;
      stack.push([val, k === 'parts']);
    }
  }
  if (partKeys < partMarks || audio < audioMarks) return 'a part key or "mimeType" sent twice (a reader that keeps the first may see audio)';
  return sound ? inPart : undefined;
}

/** Gemini's Modality enum by name and number (MODALITY_UNSPECIFIED 0, TEXT 1, IMAGE 2, AUDIO 3). */
const GEMINI_MODALITIES: Readonly<Record<string, Modality | 'text'>> = { text: 'text', modality_unspecified: 'text', 0: 'text', 1: 'text', image: 'imageOutput', 2: 'imageOutput', audio: 'audioOutput', 3: 'audioOutput' };

/** The modalities a request sends or asks for beyond text (RequestShape.modalities). */
function modalitiesAsked(protocol: Protocol, get: (k: string) => unknown, fields: TopLevelFields, gens: readonly Record<string, unknown>[], audioParts: number, body?: Uint8Array): (readonly [Modality, string])[] {
  const out: (readonly [Modality, string])[] = [];
  const add = (m: Modality, field: string): void => {
    if (!out.some(([k]) => k === m)) out.push([m, field]);
  };
  const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : v === undefined || v === null ? [] : [v]);
  if (protocol === 'generative') {
    for (const [i, g] of gens.entries()) {
      const name = i === 0 ? 'generationConfig' : 'generation_config';
      for (const key of ['responseModalities', 'response_modalities']) {
        for (const v of list(g[key])) {
          const m = GEMINI_MODALITIES[typeof v === 'string' ? v.trim().toLowerCase() : typeof v === 'number' ? String(v) : ''];
          if (m === 'text') continue;
          const field = `${name}.${key} ${JSON.stringify(v)}`;
          if (m !== undefined) add(m, field);
          else {
            add('audioOutput', field);
            add('imageOutput', field);
          }
        }
      }
      for (const key of ['speechConfig', 'speech_config']) if (g[key] !== undefined && g[key] !== null) add('audioOutput', `${name}.${key}`);
    }
  } else if (protocol === 'chat' || protocol === 'responses') {
    for (const v of list(get('modalities'))) {
      if (typeof v === 'string' && v.trim().toLowerCase() === 'text') continue;
      add('audioOutput', `"modalities": ${JSON.stringify(v)}`);
    }
    const audio = get('audio');
    if (audio !== undefined && audio !== null) add('audioOutput', '"audio"');
  }
  if ((fields.marks?.get('input_audio') ?? 0) > 0) add('audioInput', 'an "input_audio" part');
  // An `audio` key below the top level may be a message's audio sent back as input (or a tool
  // parameter's name: the body is parsed to tell).
  if (protocol === 'chat' && body !== undefined && (fields.marks?.get('audio') ?? 0) > (fields.has('audio') ? 1 : 0) && messageAudio(body)) add('audioInput', 'a message\'s "audio"');
  // Media types are Gemini's (mimeType): its parts alone are read, the body parsed to tell (geminiSound).
  const sound = protocol === 'generative' && body !== undefined ? geminiSound(body, fields, audioParts) : undefined;
  if (sound !== undefined) add('audioInput', sound);
  return out;
}

const word = (v: unknown): string | undefined => (typeof v === 'string' ? v.trim().toLowerCase() : undefined);

/**
 * Tiers billed at the model's standard price or below: OpenAI's auto, default, flex (and the
 * on_demand of OpenAI-compatible providers such as Groq); Gemini's standard and flex (also as the
 * SDK's SERVICE_TIER_ names). Others (priority, scale) cost more.
 */
const STANDARD_TIERS = new Set(['auto', 'default', 'flex', 'on_demand', 'standard']);
const GEMINI_TIERS = new Set(['standard', 'flex', 'unspecified', 'service_tier_standard', 'service_tier_flex', 'service_tier_unspecified']);

/**
 * A tier the provider bills above the model's price, as [field, value]; {} when none. A value that
 * is not a name counts as such a tier (fail closed): proto3's JSON mapping reads an enum by its
 * number too (Gemini's serviceTier: 0 is unspecified, the standard tier), and other providers refuse it.
 */
function pricedTier(protocol: Protocol, get: (k: string) => unknown): { pricedTier?: readonly [string, string] } {
  const check = (field: string, ok: (w: string) => boolean): { pricedTier?: readonly [string, string] } | undefined => {
    const v = get(field);
    if (v === undefined || v === null || (v === 0 && protocol === 'generative')) return undefined;
    const w = word(v);
    return w === undefined || !ok(w) ? { pricedTier: [field, typeof v === 'string' ? v : JSON.stringify(v)] } : undefined;
  };
  if (protocol === 'chat' || protocol === 'responses') return check('service_tier', (w) => STANDARD_TIERS.has(w)) ?? {};
  // Anthropic: fast mode (about 6x), and inference_geo other than global (US-only: 1.1x).
  if (protocol === 'messages') return check('speed', (w) => w === 'standard') ?? check('inference_geo', (w) => w === 'global') ?? {};
  // Gemini's priority tier (billed 75-100% above standard).
  if (protocol === 'generative') return check('service_tier', (w) => GEMINI_TIERS.has(w)) ?? check('serviceTier', (w) => GEMINI_TIERS.has(w)) ?? {};
  return {};
}

/** Whether the request asks the model to reason (output billed that the answer never shows). */
function asksReasoning(protocol: Protocol, get: (k: string) => unknown, thinking: Record<string, unknown> | undefined): boolean {
  if (protocol === 'chat' || protocol === 'responses') {
    const effort = word(get('reasoning_effort'));
    if (effort !== undefined && effort !== 'none') return true;
    const r = asObject(get('reasoning'));
    if (r && word(r.effort) !== 'none') return true;
    // Predicted Outputs: the rejected prediction tokens are billed as output and never shown.
    if (protocol === 'chat' && asObject(get('prediction'))) return true;
  }
  if (protocol === 'messages') {
    const t = asObject(get('thinking'));
    if (t && word(t.type) !== 'disabled') return true;
  }
  if (thinking) {
    const budget = thinking.thinkingBudget ?? thinking.thinking_budget;
    if (budget !== 0 && budget !== '0') return true;
    if (laxBool(thinking.includeThoughts ?? thinking.include_thoughts)) return true;
  }
  return false;
}

/** The top-level objects whose keys are read (and so looked at for duplicates). */
const NESTED_OBJECTS = ['generationConfig', 'generation_config', 'stream_options', 'streamOptions', 'thinking', 'reasoning'] as const;
/** Keys read inside them, whose duplicates are looked for. */
const NESTED_WATCH: ReadonlySet<string> = new Set(['maxOutputTokens', 'max_output_tokens', 'candidateCount', 'candidate_count', 'thinkingConfig', 'thinking_config',
  'thinkingBudget', 'thinking_budget', 'includeThoughts', 'include_thoughts', 'include_usage', 'includeUsage', 'type', 'budget_tokens', 'effort',
  'responseModalities', 'response_modalities', 'speechConfig', 'speech_config']);

/**
 * A key read inside the object at `span` (and its thinkingConfig), sent twice with different values.
 * The span is part of a body already validated within `maxDepth`, so it scans; if it did not, the
 * object's own name is returned (refused: never read as having no duplicates).
 */
function nestedTwice(body: Uint8Array, span: readonly [number, number] | undefined, maxDepth: number, name: string, depth = 0): string | undefined {
  if (!span || depth > 1 || body[span[0]] !== 0x7b) return undefined;
  const inner = body.subarray(span[0], span[1]);
  const f = extractFields(inner, maxDepth, NESTED_WATCH);
  if (!f) return name;
  return f.twice ?? nestedTwice(inner, f.get('thinkingConfig'), maxDepth, 'thinkingConfig', depth + 1) ?? nestedTwice(inner, f.get('thinking_config'), maxDepth, 'thinking_config', depth + 1);
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
    const alts = patterns.map((p) => p.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*'));
    re = alts.length === 0 ? /(?!)/ : new RegExp(`^(?:${alts.join('|')})$`, 'i');
    compiledGlobs.set(patterns, re);
  }
  const last = model.slice(model.lastIndexOf('/') + 1).replace(/^ft:/i, '');
  return re.test(model) || re.test(last);
}

/** The keys read inside Gemini's generationConfig, its thinkingConfig and stream_options. */
const NESTED_READ = ['maxOutputTokens', 'max_output_tokens', 'candidateCount', 'candidate_count', 'thinkingConfig', 'thinking_config', 'thinkingBudget', 'thinking_budget', 'include_usage', 'includeUsage',
  'responseModalities', 'response_modalities', 'speechConfig', 'speech_config'];
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
 * The marked strings the scan found (check/request-fields.ts REQUEST_MARKS): referenced parts, hosted
 * tools, Anthropic's tool prompts in tokens (the tool use system prompt once when any tool is marked,
 * each client tool's own per occurrence: PROVIDER_TOOL_TOKENS), cache breakpoints.
 */
/** Gemini's grounding tools: billed per grounded prompt. */
const GROUNDING: ReadonlySet<HostedTool> = new Set(['google_search', 'google_maps', 'enterprise_web_search']);

/** Keys of a JSON text that decode to `name`, at any depth (each string token read whole: a string's text is never taken for a key). */
function keyCount(body: Uint8Array, span: readonly [number, number] | undefined, name: string): number {
  if (!span) return 0;
  const text = Buffer.from(body.buffer, body.byteOffset + span[0], span[1] - span[0]).toString('utf8');
  let n = 0;
  for (const m of text.matchAll(/"((?:[^"\\]|\\.)*)"(\s*:)?/g)) {
    if (m[2] === undefined) continue;
    try {
      if (m[1] === name || (m[1].includes('\\') && JSON.parse(`"${m[1]}"`) === name)) n++;
    } catch { /* not a string JSON.parse reads: the body was parsed already */ }
  }
  return n;
}

/**
 * The most hosted-tool calls a request allows itself (RequestShape.maxToolCalls).
 * @param maxUsesKeys how many `max_uses` keys the raw `tools` holds (Anthropic): more than the parsed
 *   tools show is one sent twice, which a first-wins parser reads as another number
 */
function toolCallsAllowed(protocol: Protocol, tools: readonly HostedTool[], get: (k: string) => unknown, answers: number, maxUsesKeys: () => number): number | undefined {
  if (protocol === 'responses') return laxCount(get('max_tool_calls'));
  if (protocol === 'chat') return tools.every((t) => t === 'web_search') ? answers : undefined;
  if (protocol === 'generative') return tools.every((t) => GROUNDING.has(t)) ? answers : undefined;
  if (protocol !== 'messages') return undefined;
  // Anthropic's server tools, each with its own max_uses: their sum, when each names one.
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
  // The scan found more than the parsed list holds (an escaped type, a key sent twice, a max_uses
  // sent twice in one tool: `"max_uses": 50, "max_uses": 1` is 50 to a parser that keeps the first): not known.
  let parsedMaxUses = 0;
  for (const t of declared) if (asObject(t)?.max_uses !== undefined) parsedMaxUses++;
  return hosted > 0 && hosted >= tools.length && maxUsesKeys() <= parsedMaxUses ? sum : undefined;
}

function marked(fields: TopLevelFields): { parts: number; tools: HostedTool[]; toolPrompts: number; cacheControl: boolean; ttl: boolean; audioParts: number } {
  let parts = 0;
  let audioParts = 0;
  const tools: HostedTool[] = [];
  let toolPrompts = 0;
  let cacheControl = false;
  let ttl = false;
  if (!fields.marks) return { parts, tools, toolPrompts, cacheControl, ttl, audioParts };
  for (const [name, count] of fields.marks) {
    const mark = REQUEST_MARKS.exact.get(name) ?? REQUEST_MARKS.prefixes.find(([p]) => p === name)?.[1];
    const kind = mark?.kind;
    if (kind === 'referenced') parts += count;
    else if (kind === 'hosted_tool') {
      if (mark?.tool && !tools.includes(mark.tool)) tools.push(mark.tool);
    }
    else if (kind === 'tool_prompt') {
      if (toolPrompts === 0) toolPrompts = PROVIDER_TOOL_TOKENS.input_schema;
      if (name !== 'input_schema' && name !== 'tools') toolPrompts += (PROVIDER_TOOL_TOKENS[name] ?? 0) * count;
    } else if (kind === 'cache_write') {
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
  const own = shape.maxOutput === undefined ? cap ?? fallback : cap === undefined ? shape.maxOutput : Math.min(shape.maxOutput, cap);
  return own * shape.answers + shape.extraOutput;
}

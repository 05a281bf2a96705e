/**
 * Gemini generateContent and its methods (`/v1beta/models/{model}:generateContent`,
 * `:streamGenerateContent`, `:countTokens`, `:embedContent`, `:batchEmbedContents`): the model in
 * the path, the key in the vendor header on the root prefix. Usage: `usageMetadata` of the answer,
 * of an SSE event (`alt=sse`) or of a streamed JSON array's chunks, counts by modality named or
 * numbered.
 */
import { asObject, pathOnly, tierAbove } from './lax-read';
import { PLAIN_SHAPE_RULES } from './plain-rules';
import type { HostedTool, Modality } from '../store/store';
import type { AddModality, EnvelopeView, Provider, ShapeInput, UsageBag, UsageExtras, UsageTokens } from './provider';

/**
 * Gemini's ModalityTokenCount.modality by number (google.ai.generativelanguage.v1beta.Modality):
 * Google's own REST client asks for `$alt=json;enum-encoding=int`, and the answer then writes
 * `{"modality":4,"tokenCount":1920}` for AUDIO.
 */
export const USAGE_MODALITIES = ['MODALITY_UNSPECIFIED', 'TEXT', 'IMAGE', 'VIDEO', 'AUDIO', 'DOCUMENT'] as const;

/** A modality the meter cannot name (an enum number or name it does not know): its bag key suffix. */
export const UNNAMED_MODALITY = '?';

function tokens(bag: UsageBag): UsageTokens {
  const n = (k: string): number => bag.get(k) ?? 0;
  return {
    input: bag.has('promptTokenCount') ? n('promptTokenCount') + n('toolUsePromptTokenCount') : undefined,
    output: n('candidatesTokenCount') + n('thoughtsTokenCount'),
    cached: n('cachedContentTokenCount'),
  };
}

/**
 * Tokens by modality (audio in and out, image out) and of modalities the meter cannot name, by
 * direction (cacheTokensDetails are a part of promptTokensDetails: not counted twice).
 */
function extras(bag: UsageBag): UsageExtras {
  const n = (k: string): number => bag.get(k) ?? 0;
  const audioInput = n('promptTokensDetails.AUDIO') + n('toolUsePromptTokensDetails.AUDIO');
  const audioOutput = n('candidatesTokensDetails.AUDIO');
  const imageOutput = n('candidatesTokensDetails.IMAGE');
  const modal =
    audioInput === 0 && audioOutput === 0 && imageOutput === 0
      ? undefined
      : {
          ...(audioInput > 0 ? { audioInput } : {}),
          ...(audioOutput > 0 ? { audioOutput } : {}),
          ...(imageOutput > 0 ? { imageOutput } : {}),
        };
  const input = n(`promptTokensDetails.${UNNAMED_MODALITY}`) + n(`toolUsePromptTokensDetails.${UNNAMED_MODALITY}`);
  const output = n(`candidatesTokensDetails.${UNNAMED_MODALITY}`);
  const unnamed =
    input === 0 && output === 0 ? undefined : { ...(input > 0 ? { input } : {}), ...(output > 0 ? { output } : {}) };
  return { ...(modal ? { modal } : {}), ...(unnamed ? { unnamed } : {}) };
}

/** Grounding tools: billed per grounded prompt. */
export const GROUNDING: ReadonlySet<HostedTool> = new Set(['google_search', 'google_maps', 'enterprise_web_search']);

/** Tiers at the standard price or below (also as the SDK's SERVICE_TIER_ names); priority costs 75-100% more. */
const GEMINI_TIERS = new Set([
  'standard',
  'flex',
  'unspecified',
  'service_tier_standard',
  'service_tier_flex',
  'service_tier_unspecified',
]);

/** The Modality enum by name and number (MODALITY_UNSPECIFIED 0, TEXT 1, IMAGE 2, AUDIO 3). */
const GEMINI_MODALITIES: Readonly<Record<string, Modality | 'text'>> = {
  text: 'text',
  modality_unspecified: 'text',
  0: 'text',
  1: 'text',
  image: 'imageOutput',
  2: 'imageOutput',
  audio: 'audioOutput',
  3: 'audioOutput',
};

const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : v === undefined || v === null ? [] : [v]);

/**
 * `responseModalities` other than text (a value that is no known modality counts as both outputs: fail closed),
 * `speechConfig`.
 */
function outputModalities(input: ShapeInput, add: AddModality): void {
  for (const [i, g] of input.gens.entries()) {
    const name = i === 0 ? 'generationConfig' : 'generation_config';
    for (const key of ['responseModalities', 'response_modalities']) {
      for (const v of list(g[key])) {
        const m =
          GEMINI_MODALITIES[typeof v === 'string' ? v.trim().toLowerCase() : typeof v === 'number' ? String(v) : ''];
        if (m === 'text') continue;
        const field = `${name}.${key} ${JSON.stringify(v)}`;
        if (m !== undefined) add(m, field);
        else {
          add('audioOutput', field);
          add('imageOutput', field);
        }
      }
    }
    for (const key of ['speechConfig', 'speech_config'])
      if (g[key] !== undefined && g[key] !== null) add('audioOutput', `${name}.${key}`);
  }
}

const PART_KEYS = ['inlineData', 'inline_data', 'fileData', 'file_data'] as const;
/** Media types Gemini bills as text: images, PDF, JSON, text (any other may carry sound: counted as audio). */
const SILENT_MEDIA = /^(?:image\/|text\/|application\/(?:pdf|json)(?:$|[\s;]))/;
/** A media type the scan marks as audio (REQUEST_MARKS: audio/*, video/*), as it reads one: trimmed, in lower case. */
const SOUND_MEDIA = /^(?:audio|video)\//;

/**
 * The field that makes a body send sound, or undefined: a part (an element of a `parts` array:
 * `contents[].parts`, `systemInstruction.parts`, a `functionResponse.parts`) whose
 * inlineData/fileData names a media type not billed as text, or none (a YouTube fileData needs
 * none, and its sound is billed as audio). Keys named so anywhere else (a tool parameter `file_data`,
 * a call's argument `mimeType: "audio/mpeg"`) are no parts: Gemini reads parts only there, and
 * gemini-cli sends such turns. JSON.parse keeps the last of a key sent twice where
 * another reader may keep the first: when the scan counted more part keys or audio media types than
 * the parsed body holds, one is hidden, and counts as sound (fail closed). Parsed only when the scan
 * found a part key or an audio media type.
 */
export function geminiSound(input: Pick<ShapeInput, 'body' | 'fields'>, audioMarks: number): string | undefined {
  const { body, fields } = input;
  const partMarks = PART_KEYS.reduce((n, k) => n + (fields.marks?.get(k) ?? 0), 0);
  if (partMarks === 0 && audioMarks === 0) return undefined;
  const inPart = 'a part whose "mimeType" is audio/* or video/* (or names none)';
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
  } catch {
    // A body this reader cannot parse may hide a sound part: counted as one (fail closed).
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
      if ((PART_KEYS as readonly string[]).includes(k)) {
        partKeys++;
        const p = asObject(val);
        const mime = p?.mimeType ?? p?.mime_type;
        if (part && p && (typeof mime !== 'string' || !SILENT_MEDIA.test(mime.trim().toLowerCase()))) sound = true;
      } else if (
        (k === 'mimeType' || k === 'mime_type') &&
        typeof val === 'string' &&
        SOUND_MEDIA.test(val.trim().toLowerCase())
      )
        audio++;
      stack.push([val, k === 'parts']);
    }
  }
  if (partKeys < partMarks || audio < audioMarks)
    return 'a part key or "mimeType" sent twice (a reader that keeps the first may see audio)';
  return sound ? inPart : undefined;
}

/** `json` or `sse`, with or without `;enum-encoding=int` (any letter case). */
const READABLE = /^(json|sse)(;enum-encoding=int)?$/i;

/**
 * The first `alt`/`$alt` value of a query (names and values percent-decoded, names in any case)
 * that asks for an answer the meter cannot read, or undefined when every one is readable. Google's
 * system parameter `alt` chooses the format: `json` (the default; a streamed JSON array for
 * streamGenerateContent), `sse`, and `proto` (binary protobuf, which the meter cannot read). Google's
 * own REST client (GAPIC) sends `$alt=json;enum-encoding=int`, and enums then arrive as numbers,
 * which the usage reader reads (USAGE_MODALITIES).
 */
export function unreadableAlt(query: string): string | undefined {
  if (query === '') return undefined;
  for (const [name, value] of new URLSearchParams(query)) {
    const n = name.toLowerCase();
    if ((n === 'alt' || n === '$alt') && !READABLE.test(value)) return `${name}=${value}`;
  }
  return undefined;
}

/**
 * A field mask (`?fields=`, `?$fields=`, `x-goog-fieldmask`; names percent-decoded and in any case):
 * the provider trims its answer, usage and text included, and bills the whole.
 */
function fieldMask(view: EnvelopeView): boolean {
  if (view.headers['x-goog-fieldmask'] !== undefined) return true;
  if (view.query === '') return false;
  for (const name of new URLSearchParams(view.query).keys()) {
    const n = name.toLowerCase();
    if (n === 'fields' || n === '$fields') return true;
  }
  return false;
}

export const GEMINI_GENERATIVE: Provider = {
  protocol: 'generative',
  family: 'gemini',
  genai: { provider: 'gcp.gemini', operation: 'generate_content' },
  // Two endpoints only because Envoy refuses a regex whose RE2 program is over 100
  // (re2.max_program_size on 1.36): each is one Envoy route.
  endpoints: [
    {
      name: 'generative',
      method: 'POST',
      path: '/v1beta/models/{model}',
      style: 'generative',
      modelMethods: ['generateContent', 'streamGenerateContent'],
    },
    {
      name: 'generative_count_embed',
      method: 'POST',
      path: '/v1beta/models/{model}',
      style: 'generative',
      modelMethods: ['countTokens', 'embedContent', 'batchEmbedContents'],
    },
  ],
  keyHeader: 'vendor',
  usage: { targets: ['usageMetadata'], tokens, extras, streamUsageOptIn: false, toolCallsIn: 'grounding' },
  shape: {
    ...PLAIN_SHAPE_RULES,
    streamsByPath: (path) => pathOnly(path).endsWith(':streamGenerateContent'),
    embeds: (path) => {
      const p = pathOnly(path);
      return p.endsWith(':embedContent') || p.endsWith(':batchEmbedContents');
    },
    // Grounding is billed per grounded prompt: one per answer.
    maxToolCalls: (tools, _get, answers) => (tools.every((t) => GROUNDING.has(t)) ? answers : undefined),
    // proto3's JSON mapping reads serviceTier by number too: 0 is unspecified, the standard tier.
    pricedTier: (get) =>
      tierAbove(get, 'service_tier', (w) => GEMINI_TIERS.has(w), true) ??
      tierAbove(get, 'serviceTier', (w) => GEMINI_TIERS.has(w), true),
    outputModalities,
    // Media types are read in parts alone, the body parsed to tell (geminiSound).
    inputModalities: (input, audioParts, add) => {
      const sound = geminiSound(input, audioParts);
      if (sound !== undefined) add('audioInput', sound);
    },
  },
  admission: {
    unreadableFormat: unreadableAlt,
    trimsAnswer: fieldMask,
    raisesOutputCap: () => false,
  },
  client: {
    sampleBody: () => ({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    probeBody: () => ({
      contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
      generationConfig: { maxOutputTokens: 1 },
    }),
    extraHeaders: [],
  },
};

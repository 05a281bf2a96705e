/**
 * What a protocol is, as one interface every protocol module satisfies (STYLE.md "Split by provider,
 * behind one interface"): its endpoints, where its key and model are read, its error shape, what its
 * request says about the most it may cost, where its answer reports usage, its admission quirks and
 * the smallest request its clients send. The Check, the meter, the console and the Envoy renderer ask
 * `PROVIDERS[protocol]` (providers.ts) instead of branching on the protocol's name.
 *
 * Every hook is pure and reads only what it is handed.
 */
import type { TopLevelFields } from '../contract/body-fields';
import type { Family } from '../contract/error-body';
import type { HostedTool, Modality, Protocol } from '../store/store';

export interface Endpoint {
  /** The Envoy route's name (its alternate-prefix twin: `alt_` + name). */
  readonly name: string;
  readonly method: 'GET' | 'POST';
  /** The path after the prefix. */
  readonly path: string;
  /**
   * The protocol style it serves, or `models` for what modelgate answers itself (the model lists, the key's own view).
   */
  readonly style: Protocol | 'models';
  /** After `{model}:`, the generative methods (the first is the style's canonical one). */
  readonly modelMethods?: readonly string[];
  /**
   * The path the upstream gets when it is not the request's (after the prefix): the coding agents'
   * root paths are the provider's `/v1/...` (Envoy's prefix_rewrite; the query stays).
   */
  readonly upstreamPath?: string;
}

/** Numbers of a usage object flattened into `a.b` keys (meter/usage-reader.ts absorb). */
export type UsageBag = ReadonlyMap<string, number>;

/** The three counts every usage normalises to; `input` undefined when the answer reported none. */
export interface UsageTokens {
  readonly input: number | undefined;
  readonly output: number;
  readonly cached: number;
}

/** What a usage reports beyond the three counts (meter/usage-reader.ts Usage). */
export interface UsageExtras {
  readonly modal?: Readonly<Partial<Record<Modality, number>>>;
  readonly unnamed?: Readonly<{ input?: number; output?: number }>;
  readonly toolCalls?: Readonly<Partial<Record<HostedTool, number>>>;
}

/** Where and how an answer reports its usage (docs/metering.md, "What is read from each response"). */
export interface UsageRules {
  /**
   * The paths of the usage objects in one answer or stream event, in the order they are read (later
   * reports overwrite earlier ones field by field). Every path ends in the same key.
   */
  readonly targets: readonly string[];
  /** The three counts, from the flattened usage. */
  tokens(bag: UsageBag, hourWrites: boolean): UsageTokens;
  /** Counts by modality, in unknown modalities and of hosted tools, when the protocol reports them. */
  extras(bag: UsageBag): UsageExtras;
  /** A stream reports usage only when the request asked for it (chat's `stream_options.include_usage`). */
  readonly streamUsageOptIn: boolean;
  /**
   * Where an answer shows its hosted tools' calls (meter/tool-calls.ts): its output items (counted by
   * the meter's Lua filter), a grounding mark (one grounded prompt), its usage (UsageExtras.toolCalls),
   * or nowhere (the request's most calls are debited).
   */
  readonly toolCallsIn: 'output_items' | 'grounding' | 'usage' | 'nowhere';
}

/** A request's top-level fields as the meter reads them (meter/request-shape.ts). */
export interface ShapeInput {
  /** A located top-level field, parsed on its own (undefined when absent or not JSON). */
  readonly get: (k: string) => unknown;
  readonly body: Uint8Array;
  readonly fields: TopLevelFields;
  /** generationConfig and generation_config (empty objects when absent). */
  readonly gens: readonly Record<string, unknown>[];
}

/** A modality the request sends or asks for, with the field that says so (first one per modality counts). */
export type AddModality = (m: Modality, field: string) => void;

/** What the protocol's request says about its most cost (meter/request-shape.ts RequestShape). */
export interface ShapeRules {
  /** The path alone asks for a stream (Gemini's `:streamGenerateContent`). The path may carry its query. */
  streamsByPath(path: string): boolean;
  /** An embedding request: no output tokens. The path may carry its query. */
  embeds(path: string): boolean;
  /** Every request of the protocol is an embedding request. */
  readonly embedsOnly: boolean;
  /** A stored input the provider adds beyond the common fields (the Responses API's `prompt` template). */
  storedInput(get: (k: string) => unknown): boolean;
  /** Background mode: the answer is produced after the request (the Responses API's `background`). */
  background(get: (k: string) => unknown): boolean;
  /** The request asks for reasoning in the protocol's own fields (Gemini's thinkingConfig is read for all). */
  reasons(get: (k: string) => unknown): boolean;
  /**
   * The most hosted-tool calls the request allows itself, undefined when it names none.
   * @param maxUsesKeys how many `max_uses` keys the raw `tools` holds
   */
  maxToolCalls(
    tools: readonly HostedTool[],
    get: (k: string) => unknown,
    answers: number,
    maxUsesKeys: () => number,
  ): number | undefined;
  /** A tier billed above the model's price, as [field, value]; undefined when none. */
  pricedTier(get: (k: string) => unknown): readonly [string, string] | undefined;
  /** Output modalities beyond text the request asks for, in the protocol's own fields. */
  outputModalities(input: ShapeInput, add: AddModality): void;
  /** Input modalities beyond text found by reading the body (after the scan's `input_audio` parts). */
  inputModalities(input: ShapeInput, audioParts: number, add: AddModality): void;
  /**
   * Input the provider adds and what a token of input may cost, in input tokens.
   * @param toolPrompts the scan's `tool_prompt` marks with their counts
   */
  inputCost(
    toolPrompts: ReadonlyMap<string, number>,
    cacheWrite: boolean,
    ttl: boolean,
  ): { readonly providerInput: number; readonly inputFactor: number };
}

/** A request as the meter's admission sees its envelope. */
export interface EnvelopeView {
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The query string without its `?`. */
  readonly query: string;
}

/** The meter's admission's protocol quirks (meter/admission.ts). */
export interface AdmissionRules {
  /** An answer format the meter cannot read, as `name=value`; undefined when readable. */
  unreadableFormat(query: string): string | undefined;
  /** The provider may trim its answer, usage and text included, and bill the whole (Gemini's field mask). */
  trimsAnswer(view: EnvelopeView): boolean;
  /** The request may raise the model's output cap at the provider (an Anthropic beta). */
  raisesOutputCap(headers: EnvelopeView['headers']): boolean;
}

/** What the console, the doctor and the docs show a client of the protocol. */
export interface ClientRules {
  /** The smallest useful request body, as the set-up snippets send it. */
  sampleBody(model: string): object;
  /** The smallest request the doctor sends (one output token where the protocol allows it). */
  probeBody(model: string): object;
  /** Headers a hand-built request needs besides the key and content-type. */
  readonly extraHeaders: readonly (readonly [string, string])[];
  /** The OpenAI SDK's call and printing line, TypeScript and Python, for the OpenAI protocols. */
  openaiSdk?(model: string): { readonly ts: readonly string[]; readonly py: readonly string[] };
}

/** OpenTelemetry's GenAI semantic conventions: the well-known values of the protocol's requests. */
export interface GenAiOperation {
  /** gen_ai.provider.name: the provider whose API the protocol is (the upstream may be another speaking it). */
  readonly provider: string;
  /** gen_ai.operation.name. */
  readonly operation: string;
}

export interface Provider {
  readonly protocol: Protocol;
  readonly genai: GenAiOperation;
  /** Its error body shape and model list (contract/error-body.ts, check/routes.ts). */
  readonly family: Family;
  /**
   * The endpoints it serves, its canonical one first (check/routes.ts endpointFor). Its model is read
   * where an endpoint's path names `{model}`, else from the body's `model` field.
   */
  readonly endpoints: readonly Endpoint[];
  /**
   * Where its clients send the key on the root prefix (docs/spec.md §5.2, §5.3); the alternate prefix reads both on
   * `vendor` routes.
   */
  readonly keyHeader: 'bearer' | 'vendor';
  readonly usage: UsageRules;
  readonly shape: ShapeRules;
  readonly admission: AdmissionRules;
  readonly client: ClientRules;
}

/**
 * What a request is held at when its Check allows it, as pure functions (docs/metering.md,
 * "Overspend"): its maximum input and output, its maximum cost at its model's price (the soft hold,
 * the strict reservation, the provisional debit), and soft mode's word on the balance.
 * admission.ts runs them with the store, the requests in flight and the clock.
 */
import type { Config } from '../../config/load';
import {
  costUp,
  MODAL_PRICES,
  type DeclaredTools,
  type HostedTool,
  type Modality,
  type ModelPrice,
  type Protocol,
} from '../../store/store';
import { highestPrice, pricesModalities } from '../modal-cost';
import { mayReason, maxOutputTokens, type RequestShape } from '../request-shape';

/**
 * The most some tokens may cost at a price, in the balance's unit, rounded up to a grain as a
 * debit's is (costUp): input at the dearer of the input and cached prices, and, when the input may be
 * over the price's long-context threshold, at the dearer of its two prices (a provider bills every
 * token of such a request at the long-context price; it may yet come out under the threshold).
 */
export function tokensCost(input: number, output: number, price: ModelPrice): number {
  const at = (p: Pick<ModelPrice, 'input' | 'output' | 'cachedInput'>): number =>
    costUp((input * Math.max(p.input, p.cachedInput ?? 0) + output * p.output) / 1e6);
  const long = price.longContext;
  return long && input > long.above ? Math.max(at(price), at(long)) : at(price);
}

/**
 * A request's maximum cost at its model's price (its hold, its reservation, its provisional debit):
 * tokensCost at the highest price of each direction (modal-cost.ts). A price with both a
 * long-context tier and modality prices is bounded more coarsely: a modality's premium is debited as
 * extra text tokens (modal-cost.ts), which count toward the threshold and then pay the tier's
 * price, so with r the dearest modality price over the cheapest text price above 0, once the input
 * (and the output, when the text output price is 0) times r may be over the threshold every token
 * counts (1 + r) times at the dearest tier price
 * (test/meter/long-context.test.ts checks the hold covers the debit over a grid of such prompts).
 */
export function maximumCost(input: number, output: number, price: ModelPrice): number {
  const top = highestPrice(price);
  const slack = roundingSlack(price);
  const base = slack > 0 ? costUp(tokensCost(input, output, top) + slack) : tokensCost(input, output, top);
  const long = price.longContext;
  if (!long || top === price) return base;
  const cheapest = Math.min(...[price.input, price.output].filter((p) => p > 0));
  const r = Math.max(1, ...MODAL_PRICES.map((m) => (price[m] ?? 0) / cheapest));
  // With a text output price of 0 an output premium is written as input tokens, which count too.
  const counted = price.output === 0 ? input + output : input;
  if (!(counted * r > long.above)) return base;
  return Math.max(
    base,
    costUp(((input + output) * (1 + r) * Math.max(long.input, long.output, long.cachedInput ?? 0)) / 1e6 + slack),
  );
}

/**
 * A modality's premium is debited as whole text tokens, rounded up (modal-cost.ts): at most one text
 * token more per direction, at the dearest text price, which the hold adds.
 */
function roundingSlack(price: ModelPrice): number {
  if (!pricesModalities(price)) return 0;
  return (2 * Math.max(price.input, price.output, price.longContext?.input ?? 0, price.longContext?.output ?? 0)) / 1e6;
}

/**
 * What a request's hosted tools may cost at most: its most calls (its own maximum, else
 * meter.maxHostedToolCalls) at the dearest of their per-call prices.
 */
export function maximumToolsCost(tools: DeclaredTools | undefined, price: ModelPrice): number {
  if (!tools) return 0;
  const dearest = Math.max(0, ...tools.names.map((t) => price.tools?.[t] ?? 0));
  return costUp(tools.maxCalls * dearest);
}

/** What holdFor reads of a request and its model. */
export interface HoldRequest {
  readonly style: Protocol;
  readonly shape: RequestShape;
  /** The model's name as the Check read it (meter.reasoningModels matches it). */
  readonly model: string;
  /** The model's price in its group; null: unpriced (free), or not in the group. */
  readonly price: ModelPrice | null;
  /** The model's own output cap; null or undefined: none. */
  readonly modelCap: number | null | undefined;
  readonly bodyBytes: number;
  /** A Gemini field mask: the provider trims its answer, usage included, and bills the whole. */
  readonly masked: boolean;
  /** The provider may raise the model's output cap for this request (an Anthropic beta). */
  readonly capRaised: boolean;
}

export type HoldMeter = Pick<
  Config['meter'],
  'modalities' | 'hostedTools' | 'maxHostedToolCalls' | 'referencedInputTokens' | 'maxOutputTokens' | 'reasoningModels'
>;

/** A request held: its maxima and what an estimate of it counts. */
export interface Hold {
  readonly kind: 'hold';
  /** Priced hosted tools it declared, with their most calls; undefined: none. */
  readonly tools: DeclaredTools | undefined;
  readonly maxInputTokens: number;
  readonly maxOutputTokens: number;
  /** The output cap soft mode's bound counts (M): the model's cap, else meter.maxOutputTokens. */
  readonly usualCap: number;
  /** An output maximum above usualCap the client named (it must fit the balance); undefined: none. */
  readonly beyondCap: number | undefined;
  /** Its maximum cost at the highest price of each direction, hosted tools included; 0 unpriced. */
  readonly maxCost: number;
  /** Output the meter cannot see (reasoning, a field mask): an estimate of it is its maximum. */
  readonly hidden: boolean;
  /** What an input estimate counts beyond the body; undefined: nothing. */
  readonly inputMarks: { readonly inputExtra?: number; readonly inputFactor?: number } | undefined;
}

export type HoldWord =
  | Hold
  /** Audio or image the model's price does not name (meter.modalities: deny). */
  | {
      readonly kind: 'refuse';
      readonly reason: 'modality_unpriced';
      readonly modality: Modality;
      readonly spelled: string;
    }
  /** A hosted tool the model's price does not name (meter.hostedTools: deny). */
  | { readonly kind: 'refuse'; readonly reason: 'hosted_tool_unpriced'; readonly tool: HostedTool };

/**
 * The hold of a request: its body's bytes as input tokens (an upper bound for byte-level
 * tokenizers) plus what it references and the provider's own prompts, times a cache write's
 * factor; its output maximum (request-shape.ts maxOutputTokens); their cost at the highest prices.
 */
export function holdFor(q: HoldRequest, m: HoldMeter): HoldWord {
  const { shape, price } = q;
  if (price !== null && m.modalities === 'deny') {
    const unpriced = shape.modalities.find(([modality]) => typeof price[modality] !== 'number');
    if (unpriced) return { kind: 'refuse', reason: 'modality_unpriced', modality: unpriced[0], spelled: unpriced[1] };
  }
  const pricedTools = shape.hostedTools.filter((t) => typeof price?.tools?.[t] === 'number');
  if (pricedTools.length < shape.hostedTools.length && m.hostedTools === 'deny') {
    return {
      kind: 'refuse',
      reason: 'hosted_tool_unpriced',
      tool: shape.hostedTools.find((t) => !pricedTools.includes(t)) as HostedTool,
    };
  }
  const tools: DeclaredTools | undefined =
    pricedTools.length > 0
      ? {
          names: pricedTools,
          maxCalls: shape.maxToolCalls ?? m.maxHostedToolCalls,
          ...(q.masked ? { unreported: true as const } : {}),
        }
      : undefined;
  const maxInputTokens = Math.ceil(
    (q.bodyBytes + shape.referencedCount * m.referencedInputTokens + shape.providerInput) * shape.inputFactor,
  );
  // With its cap raised, the request's own maximum is not held to the configured cap.
  const maxOutput = maxOutputTokens(
    shape,
    q.capRaised && shape.maxOutput !== undefined ? null : q.modelCap,
    m.maxOutputTokens,
  );
  const usualCap = q.modelCap ?? m.maxOutputTokens;
  // A Gemini thinking budget counts on top, up to the cap: a larger one must fit too.
  const beyondCap =
    shape.maxOutput !== undefined && shape.maxOutput > usualCap && (q.capRaised || q.modelCap == null)
      ? shape.maxOutput
      : shape.extraOutput > usualCap
        ? shape.extraOutput
        : undefined;
  const maxCost = price ? maximumCost(maxInputTokens, maxOutput, price) + maximumToolsCost(tools, price) : 0;
  const hidden = shape.reasoning || mayReason(m.reasoningModels, q.model) || q.masked;
  const inputMarks =
    shape.providerInput > 0 || shape.inputFactor !== 1
      ? {
          ...(shape.providerInput > 0 ? { inputExtra: shape.providerInput } : {}),
          ...(shape.inputFactor !== 1 ? { inputFactor: shape.inputFactor } : {}),
        }
      : undefined;
  return {
    kind: 'hold',
    tools,
    maxInputTokens,
    maxOutputTokens: maxOutput,
    usualCap,
    beyondCap,
    maxCost,
    hidden,
    inputMarks,
  };
}

/** What soft mode's word reads: the key's balance and what it holds in flight on this replica. */
export interface SoftFacts {
  readonly balance: number;
  /** Replicas sharing the store's balances (Store.replicas); 0: the others may not count this one. */
  readonly replicas: number;
  /** The key's requests in flight here. */
  readonly inFlight: number;
  /** Their maximum costs, summed. */
  readonly held: number;
  readonly maxCost: number;
  /** Answers the request asks for (`n`, `candidateCount`). */
  readonly answers: number;
  /** Hold `beyondCap`. */
  readonly beyondCap: number | undefined;
  /** Its most hosted tool calls; undefined: it declares none. */
  readonly toolCalls: number | undefined;
  readonly maxHostedToolCalls: number;
  /** Sources of input from elsewhere (images, files, URLs, a previous response). */
  readonly referencedCount: number;
}

export type SoftRefusal = 'in_flight' | 'many_answers' | 'beyond_cap' | 'many_tool_calls' | 'referenced';

export type SoftWord =
  | { readonly kind: 'allow' }
  | {
      readonly kind: 'refuse';
      readonly why: SoftRefusal;
      /** The replicas the share was counted over (>= 1). */
      readonly replicas: number;
      /** This replica's share of the balance. */
      readonly share: number;
      /** Not counted by the others: it holds none of the balance (a refusal the store connection causes). */
      readonly blind: boolean;
    };

/**
 * Soft mode: each of R replicas holds a key's requests to its share of the balance, counted at their
 * maximum, so together they hold no more than the balance. A key may always have one request in
 * flight per replica if it asks for one answer, within the usual output cap and hosted tool calls,
 * with no input from elsewhere: one key overspends by at most R x M, however many it sends at once.
 */
export function softWord(f: SoftFacts): SoftWord {
  const blind = f.replicas === 0;
  const replicas = blind ? 1 : Math.max(1, Math.floor(f.replicas) || 1);
  const share = blind ? 0 : f.balance / replicas;
  const left = share - f.held;
  const refuse = (why: SoftRefusal): SoftWord => ({ kind: 'refuse', why, replicas, share, blind });
  if (f.inFlight > 0 && left < f.maxCost) return refuse('in_flight');
  if (left < f.maxCost && f.answers > 1) return refuse('many_answers');
  if (left < f.maxCost && f.beyondCap !== undefined) return refuse('beyond_cap');
  if (left < f.maxCost && f.toolCalls !== undefined && f.toolCalls > f.maxHostedToolCalls)
    return refuse('many_tool_calls');
  if (left < f.maxCost && f.referencedCount > 0) return refuse('referenced');
  return { kind: 'allow' };
}

/**
 * Tokens of other modalities, at their own prices (docs/metering.md, "Prices"). Providers bill audio
 * input, audio output and image output above text (Gemini 2.5 Flash: audio input 1.00 per million
 * against 0.30 for text); the store debits one input and one output price per model, so what a
 * modality costs beyond text is added as tokens at the text price (as Anthropic's cache-write premium
 * is: usage-reader.ts), rounded up. Pure.
 *
 * - a modality the price names (`audioInput`, `audioOutput`, `imageOutput`): its tokens pay that price;
 * - one it does not name (admitted anyway: meter.modalities allow, or a model that answers in images
 *   unasked): its tokens pay the highest price the model has for their direction, and the caller logs it;
 * - tokens of a modality the meter cannot name (Usage.unnamed: a Gemini enum it does not know): the
 *   highest price the model has for their direction, even without a price of any modality, and the
 *   charge says so (`unnamed`: the ledger row is marked `unknown_modality`);
 * - an estimate or a provisional maximum (no breakdown by modality) on a model whose price names any
 *   modality: all of it at the highest price of each direction, as its hold was (admission.ts).
 */
import { MODAL_PRICES, type Modality, type ModelPrice } from '../store/store';
import type { Usage } from './usage-reader';

const inputSide = (m: Modality): boolean => m === 'audioInput';

/** Whether a price names any modality's own price. */
export function pricesModalities(price: ModelPrice): boolean {
  return MODAL_PRICES.some((m) => typeof price[m] === 'number');
}

/**
 * The highest price a model has for each direction: the hold's price (admission.ts) and the price of an unpriced
 * modality.
 */
export function highestPrice(price: ModelPrice): ModelPrice {
  if (!pricesModalities(price)) return price;
  let input = price.input;
  let output = price.output;
  for (const m of MODAL_PRICES) {
    const p = price[m];
    if (typeof p !== 'number') continue;
    if (inputSide(m)) input = Math.max(input, p);
    else output = Math.max(output, p);
  }
  return { ...price, input, output };
}

export interface ModalCharge {
  /** The usage to debit: the provider's, plus each modality's premium as tokens at the text price. */
  readonly usage: Usage;
  /** Modalities the provider reported that the price does not name (charged at the highest price). */
  readonly unpriced: readonly Modality[];
  /**
   * The provider reported tokens of a modality the meter cannot name (charged at the highest price of their direction).
   */
  readonly unnamed?: true;
  /**
   * The premium could not be written as tokens (both text prices 0, a modality priced above 0): the debit would
   * undercharge.
   */
  readonly inexpressible?: true;
}

/**
 * The usage to debit for a usage whose modalities may cost more than text.
 * @param estimated the counts are an estimate or a maximum, with no breakdown by modality
 */
export function modalCharge(usage: Usage, price: ModelPrice | null, estimated: boolean): ModalCharge {
  if (price === null) return { usage, unpriced: [] };
  const tokens: Partial<Record<Modality, number>> = estimated ? {} : { ...usage.modal };
  const unpriced: Modality[] = [];
  const top = highestPrice(price);
  // Premium per direction, in the balance's unit per million tokens.
  let extraIn = 0;
  let extraOut = 0;
  const unnamed =
    !estimated && usage.unnamed !== undefined && ((usage.unnamed.input ?? 0) > 0 || (usage.unnamed.output ?? 0) > 0);
  if (unnamed) {
    extraIn += (usage.unnamed!.input ?? 0) * (top.input - price.input);
    extraOut += (usage.unnamed!.output ?? 0) * (top.output - price.output);
  }
  const mark = unnamed ? { unnamed: true as const } : {};
  if (estimated) {
    if (!pricesModalities(price)) return { usage, unpriced };
    extraIn = Math.max(0, usage.inputTokens - usage.cachedInputTokens) * (top.input - price.input);
    extraOut = usage.outputTokens * (top.output - price.output);
  }
  for (const m of MODAL_PRICES) {
    const n = tokens[m] ?? 0;
    if (n <= 0) continue;
    const own = price[m];
    if (typeof own !== 'number') unpriced.push(m);
    const p = typeof own === 'number' ? own : inputSide(m) ? top.input : top.output;
    const text = inputSide(m) ? price.input : price.output;
    if (p <= text) continue;
    if (inputSide(m)) extraIn += n * (p - text);
    else extraOut += n * (p - text);
  }
  if (extraIn === 0 && extraOut === 0) return { usage, unpriced, ...mark };
  // Written as tokens of the same direction at its text price, else of the other (a text price of 0).
  let addIn = 0;
  let addOut = 0;
  const put = (
    extra: number,
    same: number,
    other: number,
    toSame: (t: number) => void,
    toOther: (t: number) => void,
  ): boolean => {
    if (extra === 0) return true;
    if (same > 0) toSame(Math.ceil(extra / same - 1e-9));
    else if (other > 0) toOther(Math.ceil(extra / other - 1e-9));
    else return false;
    return true;
  };
  const okIn = put(
    extraIn,
    price.input,
    price.output,
    (t) => (addIn += t),
    (t) => (addOut += t),
  );
  const okOut = put(
    extraOut,
    price.output,
    price.input,
    (t) => (addOut += t),
    (t) => (addIn += t),
  );
  const charged: Usage = {
    ...usage,
    inputTokens: usage.inputTokens + addIn,
    outputTokens: usage.outputTokens + addOut,
  };
  return okIn && okOut
    ? { usage: charged, unpriced, ...mark }
    : { usage: charged, unpriced, ...mark, inexpressible: true };
}

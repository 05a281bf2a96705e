/**
 * The price a request was admitted at, as the Check's metadata carries it (`price`, one string field:
 * docs/metering.md, "Prices"), so a report that finds no entry (after the request's deadline, after a
 * restart, at another replica) pays that price and not the price of the moment. One field, not one
 * per number: Envoy parses, stores and copies into each access-log entry every field of the answer's
 * metadata, and a price has up to ten numbers (the text prices, a long-context tier, the modalities').
 * Pure.
 */
import type { LongContextPrice, ModelPrice } from '../store/store';
import { MODAL_PRICES } from '../store/store';

/** Prices are config objects, kept while the config is: each is written out once. */
const written = new WeakMap<ModelPrice, string>();

/** The metadata's `price` field for a price. */
export function priceMark(price: ModelPrice): string {
  let s = written.get(price);
  if (s === undefined) {
    s = JSON.stringify(price);
    written.set(price, s);
  }
  return s;
}

const amount = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;
const optional = (v: unknown): boolean => v === undefined || v === null || amount(v);

function longContextOf(v: unknown): LongContextPrice | null | undefined {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'object') return undefined;
  const l = v as Record<string, unknown>;
  return amount(l.above) && amount(l.input) && amount(l.output) && optional(l.cachedInput)
    ? { above: l.above, input: l.input, output: l.output, cachedInput: amount(l.cachedInput) ? l.cachedInput : null } : undefined;
}

/**
 * The price a `price` field holds; undefined when it holds none that is whole and valid (every
 * number finite and >= 0): the caller then looks the model's price up, as without the field.
 */
export function readPriceMark(v: unknown): ModelPrice | undefined {
  if (typeof v !== 'string') return undefined;
  let p: unknown;
  try {
    p = JSON.parse(v);
  } catch {
    return undefined;
  }
  if (p === null || typeof p !== 'object') return undefined;
  const o = p as Record<string, unknown>;
  if (!amount(o.input) || !amount(o.output) || !optional(o.cachedInput)) return undefined;
  const longContext = longContextOf(o.longContext);
  if (longContext === undefined || !MODAL_PRICES.every((m) => optional(o[m]))) return undefined;
  const out: { -readonly [K in keyof ModelPrice]: ModelPrice[K] } = { input: o.input, output: o.output, cachedInput: amount(o.cachedInput) ? o.cachedInput : null };
  if (longContext) out.longContext = longContext;
  for (const m of MODAL_PRICES) if (amount(o[m])) out[m] = o[m];
  return out;
}

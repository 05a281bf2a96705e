/**
 * The price a request was admitted at, as the Check's metadata carries it (`price`, one string field:
 * docs/metering.md, "Prices"), so a report that finds no entry (after the request's deadline, after a
 * restart, at another replica) pays that price and not the price of the moment. One field, not one
 * per number: Envoy parses, stores and copies into each access-log entry every field of the answer's
 * metadata, and a price has up to ten numbers (the text prices, a long-context tier, the modalities').
 * Pure.
 */
import {
  HOSTED_TOOLS,
  MODAL_PRICES,
  toolPrices,
  validPrice,
  type DeclaredTools,
  type HostedTool,
  type ModelPrice,
} from '../store/store';

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

/** A figure as written: a number, or null or absent where the price allows it (validPrice checks the rest). */
const figure = (v: unknown): v is number | null | undefined => v === undefined || v === null || typeof v === 'number';

/**
 * The price a `price` field holds; undefined when it holds none that is whole and valid (every
 * number finite and >= 0: validPrice): the caller then looks the model's price up, as without the field.
 */
export function readPriceMark(v: unknown): ModelPrice | undefined {
  if (typeof v !== 'string') return undefined;
  let p: unknown;
  try {
    p = JSON.parse(v);
  } catch {
    // not JSON: no price mark
    return undefined;
  }
  if (p === null || typeof p !== 'object') return undefined;
  const o = p as Record<string, unknown>;
  const l = o.longContext as Record<string, unknown> | null | undefined;
  if (
    typeof o.input !== 'number' ||
    typeof o.output !== 'number' ||
    !figure(o.cachedInput) ||
    !MODAL_PRICES.every((m) => figure(o[m]))
  )
    return undefined;
  if (
    l !== undefined &&
    l !== null &&
    (typeof l !== 'object' ||
      typeof l.above !== 'number' ||
      typeof l.input !== 'number' ||
      typeof l.output !== 'number' ||
      !figure(l.cachedInput))
  )
    return undefined;
  const out: { -readonly [K in keyof ModelPrice]: ModelPrice[K] } = {
    input: o.input,
    output: o.output,
    cachedInput: o.cachedInput ?? null,
  };
  if (l)
    out.longContext = {
      above: l.above as number,
      input: l.input as number,
      output: l.output as number,
      cachedInput: (l.cachedInput as number | null | undefined) ?? null,
    };
  for (const m of MODAL_PRICES) if (typeof o[m] === 'number') out[m] = o[m];
  if (o.tools !== undefined && o.tools !== null) {
    if (typeof o.tools !== 'object' || Array.isArray(o.tools)) return undefined;
    const tools = o.tools as Record<string, unknown>;
    const read = toolPrices(tools);
    // A figure that is no number, or a tool this build does not know: not this price.
    if (Object.keys(read).length !== Object.keys(tools).length) return undefined;
    out.tools = read;
  }
  return validPrice(out) ? out : undefined;
}

/**
 * The metadata's `tools` field: the priced hosted tools a request declares and its most calls
 * (`web_search,file_search:10`).
 */
export function toolsMark(t: DeclaredTools): string {
  return `${t.names.join(',')}:${t.maxCalls}${t.unreported ? ':u' : ''}`;
}

/** The declared tools a `tools` field holds; undefined when it holds none that is whole. */
export function readToolsMark(v: unknown): DeclaredTools | undefined {
  if (typeof v !== 'string') return undefined;
  const m = /^([a-z_,]+):(\d{1,16})(:u)?$/.exec(v);
  if (!m) return undefined;
  const names = m[1].split(',');
  if (!names.every((n): n is HostedTool => (HOSTED_TOOLS as readonly string[]).includes(n))) return undefined;
  return { names, maxCalls: Number(m[2]), ...(m[3] ? { unreported: true as const } : {}) };
}

/**
 * Values as the laxest upstream reads them (the money rule: a field the gateway reads more strictly
 * than the provider is one a client can use to spend past its reservation): pydantic's lax booleans
 * and ints, proto3's JSON numbers. Pure.
 */

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

/** A string trimmed and in lower case; undefined for anything else. */
export const word = (v: unknown): string | undefined => (typeof v === 'string' ? v.trim().toLowerCase() : undefined);

/** A JSON object (not an array); undefined for anything else. */
export const asObject = (v: unknown): Record<string, unknown> | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

/**
 * A tier billed above the model's price when `field` is set to a value `ok` refuses, as
 * [field, value]. A value that is not a name counts as such a tier (fail closed).
 * @param zeroIsDefault proto3's JSON mapping reads an enum by number: 0 is its default
 */
export function tierAbove(
  get: (k: string) => unknown,
  field: string,
  ok: (w: string) => boolean,
  zeroIsDefault = false,
): readonly [string, string] | undefined {
  const v = get(field);
  if (v === undefined || v === null || (v === 0 && zeroIsDefault)) return undefined;
  const w = word(v);
  return w === undefined || !ok(w) ? [field, typeof v === 'string' ? v : JSON.stringify(v)] : undefined;
}

/** The path without its query. */
export const pathOnly = (path: string): string => {
  const q = path.indexOf('?');
  return q < 0 ? path : path.slice(0, q);
};

/**
 * Client-supplied strings (model names, paths, methods) made safe to echo in a hint, a header
 * value or a log line: printable ASCII only, bounded length, and nothing left of a key pasted into
 * the wrong field, whole or in pieces:
 * - `sk-mg-` and the 40 characters after it, whatever they are (a key with a stray quote, space or
 *   slash inside is still redacted whole), and any letters or digits that continue it;
 * - every run of 8 or more letters and digits that is not a plain word (lowercase, Capitalised or
 *   camelCase letters with at least 3 lowercase letters after each capital, or digits only) is shown
 *   as its length, `[N chars]`: a key without its prefix, an imported key, or the pieces of a key
 *   split by other characters. A random 8-character piece of a key passes as a word with a
 *   probability of about 0.4%, a 12-character piece about 0.04% (measured by the tests).
 */
import { KEY_PREFIX } from './key-format';

const KEY_LIKE = new RegExp(`${KEY_PREFIX}[\\s\\S]{0,40}[A-Za-z0-9]*`, 'g');
const NOT_PRINTABLE = /[^\x20-\x7e]/;
const NOT_PRINTABLE_ALL = /[^\x20-\x7e]/g;
/** A run of letters and digits long enough to be a piece of a key. */
const LONG_RUN = /[A-Za-z0-9]{8,}/g;
/** Words people write in model names and paths: `completions`, `Instruct`, `streamGenerateContent`, `20241022`. */
const WORD = /^(?:[0-9]+|[A-Za-z][a-z]{3,}(?:[A-Z][a-z]{3,})*)$/;
/** What Envoy generates for x-request-id (irregexp checks it faster than a loop over its characters). */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const maskRun = (run: string): string => (WORD.test(run) ? run : `[${run.length} chars]`);

/** Runs of 8+ letters and digits that are not words, as their length. */
function maskRuns(s: string): string {
  LONG_RUN.lastIndex = 0;
  let m: RegExpExecArray | null;
  // Most text has no such run, or only words: then the string is returned as it is.
  while ((m = LONG_RUN.exec(s)) !== null) {
    if (!WORD.test(m[0])) return s.replace(LONG_RUN, maskRun);
  }
  return s;
}

/** Bounded, printable-ASCII, key-redacted text. */
export function printable(s: string, max = 80): string {
  const long = s.length > max;
  let ascii = long ? s.slice(0, max) : s;
  if (NOT_PRINTABLE.test(ascii)) ascii = ascii.replace(NOT_PRINTABLE_ALL, '?');
  if (ascii.includes(KEY_PREFIX)) ascii = ascii.replace(KEY_LIKE, `${KEY_PREFIX}[redacted]`);
  if (ascii.length >= 8) ascii = maskRuns(ascii);
  return long ? ascii + '...' : ascii;
}

/** A request id as logged: Envoy's own UUIDs as they are, anything else as client text. */
export function printableRequestId(s: string): string {
  return s.length === 36 && UUID.test(s) ? s : printable(s, 128);
}

/**
 * Percent-decoding as lenient servers do it, escape by escape: each run of valid `%XX` escapes
 * becomes the UTF-8 text of its bytes (invalid UTF-8 as U+FFFD), an invalid escape stays as it is,
 * and with `plus` a `+` is a space (query strings). Repeated while anything changes (at most 4
 * rounds), so a double-encoded key is found too. decodeURIComponent fails on the whole string at
 * the first invalid escape, which let a key through beside one.
 */
export function lenientDecode(s: string, plus = false): string {
  let out = s;
  for (let round = 0; round < 4; round++) {
    if (!out.includes('%') && !(plus && out.includes('+'))) return out;
    let next = plus ? out.replace(/\+/g, ' ') : out;
    next = next.replace(ESCAPES, (run) => Buffer.from(run.replace(/%/g, ''), 'hex').toString('utf8'));
    if (next === out) return out;
    out = next;
    plus = false; // a '+' that decoding produced is data, not a space
  }
  return out;
}

const ESCAPES = /(?:%[0-9A-Fa-f]{2})+/g;

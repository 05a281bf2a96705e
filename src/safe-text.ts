/**
 * Client-supplied strings (model names, paths, methods) made safe to echo in a hint, a header
 * value or a log line: printable ASCII only, bounded length, and anything shaped like a modelgate
 * key replaced, so a key pasted into the wrong field never comes back out.
 */
import { KEY_PREFIX } from './key-format';

const KEY_LIKE = new RegExp(`${KEY_PREFIX}[A-Za-z0-9]*`, 'g');
const NOT_PRINTABLE = /[^\x20-\x7e]/g;

/** Bounded, printable-ASCII, key-redacted text. */
export function printable(s: string, max = 80): string {
  const cut = s.length > max ? s.slice(0, max) + '...' : s;
  const ascii = cut.replace(NOT_PRINTABLE, '?');
  return ascii.includes(KEY_PREFIX) ? ascii.replace(KEY_LIKE, `${KEY_PREFIX}[redacted]`) : ascii;
}

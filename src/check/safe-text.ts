/**
 * Client-supplied strings (model names, paths, methods) made safe to echo in a hint, a header
 * value or a log line: printable ASCII only, bounded length, and anything shaped like a modelgate
 * key replaced, so a key pasted into the wrong field never comes back out.
 */
import { KEY_PREFIX } from './key-format';

// Everything after the prefix up to a space, slash or quote: a key with a stray or mistyped
// character ('.', or a non-ASCII one already turned into '?') is still a key and is redacted whole.
const KEY_LIKE = new RegExp(`${KEY_PREFIX}[^\\s/"']*`, 'g');
const NOT_PRINTABLE = /[^\x20-\x7e]/g;

/** Bounded, printable-ASCII, key-redacted text. */
export function printable(s: string, max = 80): string {
  const long = s.length > max;
  let ascii = (long ? s.slice(0, max) : s).replace(NOT_PRINTABLE, '?');
  if (ascii.includes(KEY_PREFIX)) ascii = ascii.replace(KEY_LIKE, `${KEY_PREFIX}[redacted]`);
  return long ? ascii + '...' : ascii;
}

/**
 * A validating JSON scanner (RFC 8259) over the bytes of a body, without parsing it into objects.
 *
 * It agrees with JSON.parse on which bodies are JSON, with one deliberate leniency: raw control
 * characters (bytes < 0x20) inside strings are accepted, although JSON.parse rejects them. Finding
 * them would need a per-byte loop over every string; a subclass that decodes a string (with
 * JSON.parse) finds them there.
 *
 * It must be cheap on large bodies (1 MiB of chat messages): it works on bytes, lets native memchr
 * (`Buffer#indexOf`) skip long string contents, and nests with an explicit stack, so 10,000 levels
 * cannot overflow the call stack. A subclass reads what it needs in the same pass through three
 * hooks: each object member (its key's bytes and where its value starts), a string value it asked
 * for, and the end of a top-level member's value it asked for.
 */
import { isUtf8 } from 'node:buffer';

/**
 * Why a body is not JSON. `empty`: no bytes or only whitespace; `too_deep`: nested deeper than
 * allowed; `invalid_json`: a syntax error at byte `at` (`why` says what was expected).
 */
export type ScanProblem = 'empty' | 'not_utf8' | 'invalid_json' | 'too_deep';

/**
 * Result of {@link JsonScanner.run}: valid JSON (`object`: its top-level value is an object), or why
 * not. `why` gives expectations only, never bytes of the body.
 */
export type ScanResult =
  | { readonly ok: true; readonly object: boolean }
  | { readonly ok: false; readonly problem: ScanProblem; readonly at: number; readonly why: string };

const TAB = 0x09,
  LF = 0x0a,
  CR = 0x0d,
  QUOTE = 0x22,
  PLUS = 0x2b,
  COMMA = 0x2c;
const MINUS = 0x2d,
  DOT = 0x2e,
  ZERO = 0x30,
  NINE = 0x39,
  COLON = 0x3a,
  LBRACKET = 0x5b;
const BACKSLASH = 0x5c,
  RBRACKET = 0x5d,
  LBRACE = 0x7b,
  RBRACE = 0x7d,
  SPACE = 0x20;
const TRUE = Buffer.from('true'),
  FALSE = Buffer.from('false'),
  NULL = Buffer.from('null');
/** 1 for the bytes after a backslash that make a whole escape: " \ / b f n r t (not u). */
const SHORT_ESCAPE = new Uint8Array(256);
for (const c of '"\\/bfnrt') SHORT_ESCAPE[c.charCodeAt(0)] = 1;
/** Bytes of a string read by a JS loop before asking memchr: at its start, in escape clusters. */
const SHORT_RUN = 16,
  CLUSTER_RUN = 12,
  CLUSTER_GAP = 4;

const OBJECT: ScanResult = { ok: true, object: true };
const NOT_OBJECT: ScanResult = { ok: true, object: false };

/** The bytes of a Uint8Array as a Buffer, without a copy. */
export function asBuffer(body: Uint8Array): Buffer {
  return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/**
 * Whether a body is UTF-8 JSON, and if not why. Never throws on any body, whatever its size or nesting.
 *
 * @param maxDepth deepest nesting of objects and arrays allowed (a top-level container is 1)
 * @throws RangeError if maxDepth is not a positive integer
 */
export function scanJson(body: Uint8Array, maxDepth = 256): ScanResult {
  if (!Number.isInteger(maxDepth) || maxDepth < 1) throw new RangeError('maxDepth must be a positive integer');
  if (!isUtf8(body)) return { ok: false, problem: 'not_utf8', at: 0, why: 'not valid UTF-8' };
  return new JsonScanner(asBuffer(body)).run(maxDepth);
}

/**
 * One pass over one body (UTF-8 is the caller's to check: `isUtf8`). Methods return the index after
 * what they read, or -1 after fail(). Subclasses override the hooks; this class alone validates.
 */
export class JsonScanner {
  private failAt = 0;
  private failWhy = '';
  /** Whether the last string read (a key, in {@link onMember}) had an escape: decode it before comparing. */
  protected escaped = false;
  /**
   * The next quote and backslash at or after the scan position when they were last searched
   * (buf.length if none). Searched again only once the scan has passed them.
   */
  private nextQuote = -1;
  private nextBackslash = -1;
  /** Where a string value starts whose end {@link onStringValue} is told (set by onMember). */
  protected stringValueAt = -1;
  /** Where a top-level member's value starts whose end {@link onTopLevelValueEnd} is told (set by onMember). */
  protected topLevelValueAt = -1;

  constructor(protected readonly buf: Buffer) {}

  /**
   * An object member: its key is the string between the quotes at `keyStart` and `keyEnd - 1`
   * (`escaped` says whether it has an escape), its value starts at `valueStart` (not read yet).
   * `topLevel`: a member of the top-level object.
   */
  protected onMember(keyStart: number, keyEnd: number, valueStart: number, topLevel: boolean): void {
    (void keyStart, keyEnd, valueStart, topLevel);
  }

  /**
   * The string value that starts at `stringValueAt`, read: its quotes are at `start` and `end - 1`.
   * Returns `end`, or -1 after {@link fail} to refuse the body.
   */
  protected onStringValue(start: number, end: number): number {
    void start;
    return end;
  }

  /** The value of a top-level member that started at `topLevelValueAt` ends before `end`. */
  protected onTopLevelValueEnd(start: number, end: number): void {
    (void start, end);
  }

  run(maxDepth: number): ScanResult {
    const b = this.buf,
      n = b.length;
    let i = this.space(0);
    if (i === n) return { ok: false, problem: 'empty', at: 0, why: 'empty or only whitespace' };
    const topIsObject = b[i] === LBRACE;
    // The open containers, innermost last: true for an object.
    const objects: boolean[] = [];
    let depth = 0;
    value: for (;;) {
      // i is at the first byte of a value.
      const c = b[i];
      if (c === LBRACE || c === LBRACKET) {
        if (depth === maxDepth)
          return { ok: false, problem: 'too_deep', at: i, why: `nested deeper than ${maxDepth} levels` };
        objects[depth++] = c === LBRACE;
        i = this.space(i + 1);
        if (b[i] === (c === LBRACE ? RBRACE : RBRACKET)) {
          depth--;
          i++;
        } else {
          if (c === LBRACE) i = this.member(i, depth === 1);
          if (i < 0) break;
          continue;
        }
      } else if (c === QUOTE) {
        const start = i;
        i = this.string(i);
        if (i >= 0 && start === this.stringValueAt) i = this.onStringValue(start, i);
      } else if (c === 0x74) i = this.word(i, TRUE);
      else if (c === 0x66) i = this.word(i, FALSE);
      else if (c === 0x6e) i = this.word(i, NULL);
      else i = this.number(i);
      if (i < 0) break;
      // After a value: close containers until one continues with a comma.
      for (;;) {
        if (depth === 1 && this.topLevelValueAt >= 0) {
          this.onTopLevelValueEnd(this.topLevelValueAt, i);
          this.topLevelValueAt = -1;
        }
        i = this.space(i);
        if (depth === 0) {
          if (i !== n) this.fail(i, 'unexpected data after the JSON value');
          else return topIsObject ? OBJECT : NOT_OBJECT;
          break value;
        }
        const inObject = objects[depth - 1];
        if (b[i] === COMMA) {
          i = this.space(i + 1);
          if (inObject) i = this.member(i, depth === 1);
          if (i < 0) break value;
          continue value;
        }
        if (b[i] !== (inObject ? RBRACE : RBRACKET)) {
          this.fail(i, inObject ? "expected ',' or '}'" : "expected ',' or ']'");
          break value;
        }
        depth--;
        i++;
      }
    }
    return { ok: false, problem: 'invalid_json', at: this.failAt, why: this.failWhy };
  }

  /** Reads `"key":` and returns the start of its value. */
  private member(i: number, topLevel: boolean): number {
    if (this.buf[i] !== QUOTE) return this.fail(i, 'expected a string key');
    const end = this.string(i);
    if (end < 0) return -1;
    let v = this.space(end);
    if (this.buf[v] !== COLON) return this.fail(v, "expected ':'");
    v = this.space(v + 1);
    this.onMember(i, end, v, topLevel);
    return v;
  }

  /** Reads a string from its opening quote at i; escapes are checked, control bytes are not. */
  private string(i: number): number {
    const b = this.buf,
      n = b.length;
    let p = i + 1;
    // Where the last escape ended: escapes come in clusters (`\"a\"`, JSON inside a string).
    let afterEscape = -n;
    // Keys and short values end soon, and within a cluster the next escape is near: for a few
    // bytes a JS loop beats a native call (~10 ns).
    let stop = Math.min(p + SHORT_RUN, n);
    this.escaped = false;
    for (;;) {
      while (p < stop) {
        const c = b[p];
        if (c === QUOTE) return p + 1;
        if (c !== BACKSLASH) p++;
        else if ((afterEscape = p = this.escape(p)) < 0) return -1;
        else stop = Math.min(p + CLUSTER_RUN, n);
      }
      // Elsewhere memchr finds the next quote and the next backslash. Both positions are kept
      // until the scan passes them, so these searches read each byte of the body about once.
      if (this.nextQuote < p) this.nextQuote = found(b.indexOf(QUOTE, p), n);
      if (this.nextBackslash < p) this.nextBackslash = found(b.indexOf(BACKSLASH, p), n);
      if (this.nextQuote === n) return this.fail(i, 'unterminated string');
      if (this.nextBackslash > this.nextQuote) return this.nextQuote + 1;
      // An escape comes first (it may escape that very quote): check it, read on after it.
      const clustered = this.nextBackslash - afterEscape <= CLUSTER_GAP;
      if ((afterEscape = p = this.escape(this.nextBackslash)) < 0) return -1;
      stop = clustered ? Math.min(p + CLUSTER_RUN, n) : p;
    }
  }

  /** Checks the escape whose backslash is at p; returns the index after it. */
  private escape(p: number): number {
    const b = this.buf;
    this.escaped = true;
    const c = b[p + 1];
    if (SHORT_ESCAPE[c] === 1) return p + 2;
    if (c !== 0x75) return this.fail(p, p + 1 < b.length ? 'invalid escape' : 'unterminated string');
    for (let k = p + 2; k < p + 6; k++) {
      const h = b[k] | 0x20; // A-F to a-f (but it would also turn bytes 0x10-0x19 into digits)
      if (!(isDigit(b[k]) || (h >= 0x61 && h <= 0x66))) return this.fail(p, 'invalid \\u escape');
    }
    return p + 6;
  }

  /** -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)? */
  private number(i: number): number {
    const b = this.buf;
    let p = i;
    if (b[p] === MINUS) p++;
    if (b[p] === ZERO) p++;
    else if (isDigit(b[p])) p = this.digits(p);
    else return this.fail(i, p === i ? 'expected a value' : 'invalid number');
    if (b[p] === DOT) {
      if (!isDigit(b[++p])) return this.fail(p, 'expected a digit');
      p = this.digits(p);
    }
    if ((b[p] | 0x20) === 0x65) {
      p++;
      if (b[p] === PLUS || b[p] === MINUS) p++;
      if (!isDigit(b[p])) return this.fail(p, 'expected a digit');
      p = this.digits(p);
    }
    return p;
  }

  private digits(p: number): number {
    while (p < this.buf.length && isDigit(this.buf[p])) p++;
    return p;
  }

  private word(i: number, word: Buffer): number {
    for (let k = 0; k < word.length; k++) {
      if (this.buf[i + k] !== word[k]) return this.fail(i, 'expected a value');
    }
    return i + word.length;
  }

  private space(i: number): number {
    const b = this.buf,
      n = b.length;
    while (i < n) {
      const c = b[i];
      if (c !== SPACE && c !== LF && c !== CR && c !== TAB) break;
      i++;
    }
    return i;
  }

  /** Refuses the body as invalid JSON at byte `at`; returns -1 for the caller to return. */
  protected fail(at: number, why: string): -1 {
    this.failAt = at;
    this.failWhy = why;
    return -1;
  }
}

/** An indexOf result, with "not found" as the end of the body. */
function found(index: number, end: number): number {
  return index < 0 ? end : index;
}

function isDigit(c: number): boolean {
  return c >= ZERO && c <= NINE;
}

/**
 * A streaming JSON scanner that keeps only the values it is asked for. Usage figures sit at known
 * places (`usage`, `usageMetadata`, `response.usage`, `message.usage`), often after megabytes of
 * output (embeddings, long completions), so a response is never buffered whole: the scanner reads
 * the bytes as they pass, tracks the path of object keys (arrays are transparent, so the elements
 * of a streamed JSON array are read like top-level objects), and copies out only the object
 * values whose path is one of the targets, each up to a small bound.
 *
 * It validates nothing: a malformed body yields whatever was captured before, and the reader
 * then reports no usage (never a guess).
 */

/** Largest captured value; a usage object is a few hundred bytes. */
const MAX_CAPTURE = 64 * 1024;
/** Keys longer than this never match a target (and are not kept). */
const MAX_KEY = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJ = 0x7b;
const CLOSE_OBJ = 0x7d;
const OPEN_ARR = 0x5b;
const CLOSE_ARR = 0x5d;

export class JsonCapture {
  /** Container stack: true = object, false = array. */
  readonly #stack: boolean[] = [];
  /** The key of each open object level (its last key), '' when none yet. */
  readonly #keys: string[] = [];
  #inString = false;
  #escape = false;
  /** The string being read is a key (an object member name). */
  #stringIsKey = false;
  #key: number[] = [];
  /** In an object: the next string is a key (after '{' or ','). */
  #expectKey = false;
  #capture: number[] | undefined;
  #captureDepth = 0;
  #captureTooBig = false;

  /** @param targets dotted key paths, e.g. ['usage', 'response.usage'] */
  constructor(
    private readonly targets: ReadonlySet<string>,
    private readonly onValue: (path: string, json: string) => void,
  ) {}

  push(chunk: Uint8Array): void {
    const n = chunk.length;
    for (let i = 0; i < n; i++) {
      // Fast path through long string values (output text, base64 embeddings): jump to the next
      // quote or backslash instead of visiting every byte.
      if (this.#inString && !this.#escape && !this.#stringIsKey && this.#capture === undefined) {
        const q = chunk.indexOf(QUOTE, i);
        const e = chunk.indexOf(BACKSLASH, i);
        const next = q === -1 ? e : e === -1 ? q : Math.min(q, e);
        if (next === -1) return;
        i = next;
      }
      this.#byte(chunk[i]);
    }
  }

  #byte(b: number): void {
    if (this.#capture) {
      if (this.#capture.length < MAX_CAPTURE) this.#capture.push(b);
      else this.#captureTooBig = true;
    }
    if (this.#inString) {
      if (this.#escape) this.#escape = false;
      else if (b === BACKSLASH) this.#escape = true;
      else if (b === QUOTE) {
        this.#inString = false;
        if (this.#stringIsKey)
          this.#keys[this.#keys.length - 1] =
            this.#key.length <= MAX_KEY ? String.fromCharCode(...this.#key) : '\u0000';
        return;
      }
      if (this.#stringIsKey && this.#key.length <= MAX_KEY) this.#key.push(b);
      return;
    }
    switch (b) {
      case QUOTE:
        this.#inString = true;
        this.#stringIsKey = this.#expectKey;
        this.#expectKey = false;
        this.#key.length = 0;
        return;
      case OPEN_OBJ:
        this.#maybeStartCapture(b);
        this.#stack.push(true);
        this.#keys.push('');
        this.#expectKey = true;
        return;
      case OPEN_ARR:
        this.#stack.push(false);
        this.#expectKey = false;
        return;
      case CLOSE_OBJ:
      case CLOSE_ARR:
        if (this.#stack.pop()) this.#keys.pop();
        this.#expectKey = false;
        if (this.#capture && this.#stack.length === this.#captureDepth) this.#endCapture();
        return;
      case COMMA:
        this.#expectKey = this.#stack.length > 0 && this.#stack[this.#stack.length - 1];
        return;
      case COLON:
        this.#expectKey = false;
        return;
      default:
    }
  }

  /** An object value begins: capture it when its key path is a target. */
  #maybeStartCapture(b: number): void {
    if (this.#capture || this.#stack.length === 0 || !this.#stack[this.#stack.length - 1]) return;
    const path = this.#keys.filter((k) => k !== '').join('.');
    if (!this.targets.has(path)) return;
    this.#capture = [b];
    this.#captureDepth = this.#stack.length;
    this.#captureTooBig = false;
  }

  #endCapture(): void {
    const bytes = this.#capture as number[];
    this.#capture = undefined;
    if (this.#captureTooBig) return;
    const path = this.#keys.filter((k) => k !== '').join('.');
    this.onValue(path, Buffer.from(bytes).toString('utf8'));
  }
}

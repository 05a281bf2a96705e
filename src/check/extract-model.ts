/**
 * Finds the top-level `"model"` of a JSON request body without parsing it into objects.
 *
 * This is an authorization decision: if we read a different `model` than the upstream's JSON
 * parser does, a caller could use a model its key is not allowed. So the whole body is validated
 * as RFC 8259 JSON (@modelgate/json-scan's scanner, agreeing with JSON.parse), keys are compared
 * decoded, and duplicate `model` keys with different values are refused (JSON.parse keeps the last
 * one, other parsers the first), and so is any other spelling of the key that a case-insensitive
 * binder reads as `model` (Go's encoding/json matches `"MODEL"` or `"Model"` to a field named
 * Model, and the last one wins).
 *
 * It must also be cheap: SDKs put `model` after `messages`, so it often sits at the end of a
 * 1 MiB body. The scanner skips long string contents with memchr; this module decodes only
 * depth-1 keys that could be `model` or a watched field, marked strings, and the model value.
 *
 * The scanner's leniency, raw control characters (bytes < 0x20) inside strings, cannot change
 * which model a lenient parser reads, because they stay inside their string. The model value
 * itself is decoded strictly, so it never contains one.
 */
import { isUtf8 } from 'node:buffer';
import type { TopLevelFields } from '../contract/body-fields';
import { asBuffer, JsonScanner } from '@modelgate/json-scan';

/**
 * Strings to notice anywhere in a body, decoded (`"image\u005furl"` is `image_url`): as keys, or as
 * the string value of a `type` key, exactly or by prefix (found under the prefix's name). Only names up to
 * MAX_MARK_BYTES long; a table by first byte and length keeps the others from being decoded.
 */
export interface NestedMarks {
  /** `mime`: only as the value of a media type's key (`mimeType`, `mime_type`), trimmed, in lower case. */
  readonly exact: ReadonlyMap<string, { readonly as: 'key' | 'value' | 'both' | 'mime' }>;
  readonly prefixes: ReadonlyArray<readonly [string, { readonly as: 'key' | 'value' | 'both' | 'mime' }]>;
}

/** The keys of a media type whose values are marks too (Gemini's inlineData and fileData). */
const MIME_KEYS: ReadonlySet<string> = new Set(['mimeType', 'mime_type']);

/** Longest marked string, in bytes. */
export const MAX_MARK_BYTES = 31;

interface CompiledMarks {
  readonly marks: NestedMarks;
  /** By first byte: bit n set when a marked string of n bytes starts with it. */
  readonly lengths: Uint32Array;
}

const compiled = new WeakMap<NestedMarks, CompiledMarks>();

function compile(marks: NestedMarks): CompiledMarks {
  let c = compiled.get(marks);
  if (c) return c;
  const lengths = new Uint32Array(256);
  for (const name of marks.exact.keys()) {
    if (name.length > MAX_MARK_BYTES) throw new RangeError(`mark ${name} is longer than ${MAX_MARK_BYTES} bytes`);
    lengths[name.charCodeAt(0)] |= 1 << name.length;
  }
  for (const [prefix] of marks.prefixes)
    for (let n = prefix.length; n <= MAX_MARK_BYTES; n++) lengths[prefix.charCodeAt(0)] |= 1 << n;
  c = { marks, lengths };
  compiled.set(marks, c);
  return c;
}

/** The name a decoded string is marked under, if any. */
function markOf(marks: NestedMarks, s: string, as: 'key' | 'value' | 'mime'): string | undefined {
  const fits = (m: { readonly as: string }): boolean => m.as === as || (m.as === 'both' && as !== 'mime');
  const exact = marks.exact.get(s);
  if (exact) return fits(exact) ? s : undefined;
  for (const [prefix, m] of marks.prefixes) if (fits(m) && s.startsWith(prefix)) return prefix;
  return undefined;
}

/** Result of {@link extractModel}: the model, or why the body gives none. */
export type ModelExtraction =
  | { readonly ok: true; readonly model: string; readonly fields?: TopLevelFields }
  | { readonly ok: false; readonly problem: ExtractProblem; readonly detail: string };

/**
 * Why no model could be read. `empty`: no bytes or only whitespace; `not_object`: valid JSON but
 * not an object; `duplicate_model`: several top-level `model` keys that are not all the same
 * string; `model_case`: a top-level key that is `model` in another case (`"MODEL"`);
 * `model_absent`: no top-level `model` key.
 */
export type ExtractProblem =
  | 'empty'
  | 'not_utf8'
  | 'invalid_json'
  | 'not_object'
  | 'too_deep'
  | 'duplicate_model'
  | 'model_case'
  | 'model_not_string'
  | 'model_absent';

/** "model" encoded with a `\uXXXX` for each of its 5 letters: the longest spelling of the key. */
const MAX_MODEL_KEY_BYTES = 30;
const SPACE = 0x20,
  QUOTE = 0x22,
  LBRACKET = 0x5b,
  LBRACE = 0x7b;
const CONTROL_CHAR = /[\u0000-\u001f]/;

/**
 * Reads the top-level `model` of a JSON body. Never throws on any body, whatever its size or
 * nesting; `detail` gives byte positions and expectations only, never bytes of the body.
 *
 * @param body the raw HTTP body
 * @param maxDepth deepest nesting of objects and arrays allowed (the top-level object is 1)
 * @throws RangeError if maxDepth is not a positive integer
 */
export function extractModel(
  body: Uint8Array,
  maxDepth = 256,
  watch?: ReadonlySet<string>,
  marks?: NestedMarks,
): ModelExtraction {
  if (!Number.isInteger(maxDepth) || maxDepth < 1) throw new RangeError('maxDepth must be a positive integer');
  if (!isUtf8(body)) return refuse('not_utf8', 'body is not valid UTF-8');
  const scanner = new ModelScanner(asBuffer(body), watch, marks);
  const r = scanner.run(maxDepth);
  if (!r.ok) {
    if (r.problem === 'empty') return refuse('empty', 'body is empty or only whitespace');
    if (r.problem === 'too_deep') return refuse('too_deep', `JSON nested deeper than ${maxDepth} levels`);
    return refuse('invalid_json', `invalid JSON at byte ${r.at}: ${r.why}`);
  }
  return r.object ? scanner.verdict() : refuse('not_object', 'JSON body is not an object');
}

/**
 * The watched top-level fields of a JSON object body whose model is elsewhere (Gemini's path), from
 * the same validating scan; undefined when the body is not a valid JSON object.
 */
export function extractFields(
  body: Uint8Array,
  maxDepth: number,
  watch: ReadonlySet<string>,
  marks?: NestedMarks,
): TopLevelFields | undefined {
  if (!isUtf8(body)) return undefined;
  const scanner = new ModelScanner(asBuffer(body), watch, marks);
  const r = scanner.run(maxDepth);
  return r.ok && r.object ? (scanner.found() ?? new Map()) : undefined;
}

function refuse(problem: ExtractProblem, detail: string): ModelExtraction {
  return { ok: false, problem, detail };
}

/**
 * One pass over one body: the scanner validates it, this subclass reads the model, the watched
 * top-level fields and the marks from its hooks.
 */
class ModelScanner extends JsonScanner {
  /** Opening quote of a depth-1 value whose key is `model`, if it is a string. */
  private modelValueAt = -1;
  private modelCount = 0;
  private model: string | undefined;
  private modelType = '';
  private conflict = false;
  /** A top-level key spelled `model` in another case, as sent (decoded); refused. */
  private caseVariant: string | undefined;
  /** The watched top-level key whose value is being read, and those read. */
  private fieldKey: string | undefined;
  private fields: Map<string, readonly [number, number]> | undefined;
  /** Longest watched key in bytes (longer keys are not decoded to compare). */
  private readonly watchMax: number;
  /** Watched keys by their lower case (case-insensitive binders read `"N"` as `n`). */
  private readonly watchLower: ReadonlyMap<string, string> | undefined;
  private fieldCase: readonly [string, string] | undefined;
  /** The first watched key seen twice with different values. */
  private twice: string | undefined;
  private readonly marks: CompiledMarks | undefined;
  private marked: Map<string, number> | undefined;
  /** Opening quote of the value of the last `type` key, when marks are looked for (value marks are types). */
  private typeValueAt = -1;
  /** The key just read is a media type's (markKey); the value at typeValueAt is one. */
  private mimeKey = false;
  private typeValueMime = false;

  constructor(
    buf: Buffer,
    private readonly watch?: ReadonlySet<string>,
    marks?: NestedMarks,
  ) {
    super(buf);
    let max = 0;
    if (watch) for (const k of watch) max = Math.max(max, Buffer.byteLength(k));
    this.watchMax = max;
    this.watchLower = watch ? lowerCased(watch) : undefined;
    this.marks = marks ? compile(marks) : undefined;
  }

  /**
   * Notes a key if it is marked; whether it is `type` (whose string value is then looked at), or a
   * media type's key (`mimeType`, `mime_type`: Gemini's parts), whose value is looked at too, trimmed
   * and in lower case (MIME types are case-insensitive), however long.
   */
  private markKey(start: number, end: number): boolean {
    const b = this.buf;
    this.mimeKey = false;
    if (!this.escaped) {
      if (
        end - start === 6 &&
        b[start + 1] === 0x74 &&
        b[start + 2] === 0x79 &&
        b[start + 3] === 0x70 &&
        b[start + 4] === 0x65
      )
        return true;
      if (
        (end - start === 10 || end - start === 11) &&
        b[start + 1] === 0x6d &&
        MIME_KEYS.has(b.toString('latin1', start + 1, end - 1))
      )
        return (this.mimeKey = true);
      this.mark(start, end, true);
      return false;
    }
    // `"typ\u0065"` is `type` to a provider's parser.
    if (end - start - 2 <= 6 * 9) {
      try {
        const key: unknown = JSON.parse(b.toString('utf8', start, end));
        if (key === 'type') return true;
        if (typeof key === 'string' && MIME_KEYS.has(key)) return (this.mimeKey = true);
      } catch {
        /* a raw control character: not `type` */
      }
    }
    this.mark(start, end, true);
    return false;
  }

  /** Notes the string between the quotes at start and end - 1 if it is marked (NestedMarks). */
  private mark(start: number, end: number, asKey: boolean, mime = false): void {
    const { marks, lengths } = this.marks as CompiledMarks;
    const length = end - start - 2;
    let s: unknown;
    if (mime) {
      try {
        s = this.escaped
          ? JSON.parse(this.buf.toString('utf8', start, end))
          : this.buf.toString('utf8', start + 1, end - 1);
      } catch {
        // The scan validated the string but for raw control characters: with one it names no media type.
        return;
      }
      if (typeof s === 'string') s = s.trim().toLowerCase();
    } else if (!this.escaped) {
      if (length > MAX_MARK_BYTES || ((lengths[this.buf[start + 1]] >>> length) & 1) === 0) return;
      s = this.buf.toString('latin1', start + 1, end - 1);
    } else {
      if (length > 6 * MAX_MARK_BYTES) return;
      try {
        s = JSON.parse(this.buf.toString('utf8', start, end));
      } catch {
        return; // a raw control character: not a marked name either
      }
    }
    const name = typeof s === 'string' ? markOf(marks, s, mime ? 'mime' : asKey ? 'key' : 'value') : undefined;
    if (name !== undefined) (this.marked ??= new Map()).set(name, (this.marked.get(name) ?? 0) + 1);
  }

  /** Notes `model` keys of the top object, watched keys, `type` keys and marked keys. */
  protected override onMember(start: number, end: number, i: number, topLevel: boolean): void {
    const isType = this.marks !== undefined && this.markKey(start, end);
    const isModel = topLevel && this.isModelKey(start, end);
    const field = topLevel && this.watch !== undefined && !isModel ? this.watchedKey(start, end) : undefined;
    if (isType) {
      this.typeValueAt = this.stringValueAt = i;
      this.typeValueMime = this.mimeKey;
    }
    if (field !== undefined) {
      this.fieldKey = field;
      this.topLevelValueAt = i;
    }
    if (isModel) {
      if (this.buf[i] === QUOTE)
        this.modelValueAt = this.stringValueAt = i; // decoded once it is read
      else this.recordModel(undefined, typeAt(this.buf[i]));
    }
  }

  protected override onStringValue(start: number, end: number): number {
    if (start === this.typeValueAt) this.mark(start, end, false, this.typeValueMime);
    return start === this.modelValueAt ? this.recordModelString(start, end) : end;
  }

  private isModelKey(start: number, end: number): boolean {
    const b = this.buf,
      length = end - start - 2;
    if (!this.escaped) {
      if (length !== 5) return false;
      if (
        b[start + 1] === 0x6d &&
        b[start + 2] === 0x6f &&
        b[start + 3] === 0x64 &&
        b[start + 4] === 0x65 &&
        b[start + 5] === 0x6c
      )
        return true;
      // ASCII letters only: (c | 0x20) maps A-Z to a-z (and nothing else that is not a letter onto one).
      if (
        (b[start + 1] | 0x20) === 0x6d &&
        (b[start + 2] | 0x20) === 0x6f &&
        (b[start + 3] | 0x20) === 0x64 &&
        (b[start + 4] | 0x20) === 0x65 &&
        (b[start + 5] | 0x20) === 0x6c &&
        isLetter(b[start + 1]) &&
        isLetter(b[start + 2]) &&
        isLetter(b[start + 3]) &&
        isLetter(b[start + 4]) &&
        isLetter(b[start + 5])
      )
        this.caseVariant ??= b.toString('latin1', start + 1, end - 1);
      return false;
    }
    if (length > MAX_MODEL_KEY_BYTES) return false;
    let key: unknown;
    try {
      key = JSON.parse(b.toString('utf8', start, end));
    } catch {
      return false; // a raw control character: then it is not "model" either
    }
    if (key === 'model') return true;
    if (typeof key === 'string' && key.toLowerCase() === 'model') this.caseVariant ??= key;
    return false;
  }

  /** The key between the quotes at start and end - 1, if it is a watched one. */
  private watchedKey(start: number, end: number): string | undefined {
    if (end - start - 2 > (this.escaped ? 6 * this.watchMax : this.watchMax)) return undefined;
    let key: unknown;
    if (!this.escaped) key = this.buf.toString('utf8', start + 1, end - 1);
    else {
      try {
        key = JSON.parse(this.buf.toString('utf8', start, end));
      } catch {
        return undefined; // a raw control character (the scan validated the rest): no watched key has one
      }
    }
    if (typeof key !== 'string') return undefined;
    if (this.watch!.has(key)) return key;
    const watched = this.watchLower!.get(goFold(key));
    if (watched !== undefined) this.fieldCase ??= [key, watched];
    return undefined;
  }

  /** The watched fields read by run(). */
  found(): TopLevelFields | undefined {
    if (this.marked || this.fieldCase || this.twice) {
      return Object.assign(this.fields ?? new Map<string, readonly [number, number]>(), {
        marks: this.marked as ReadonlyMap<string, number> | undefined,
        caseVariant: this.fieldCase,
        twice: this.twice,
      });
    }
    // Watched and none found: an empty map says so (no second scan to look again).
    return this.fields ?? (this.watch ? EMPTY_FIELDS : undefined);
  }

  /** A watched field's value is `[start, end)`. */
  protected override onTopLevelValueEnd(start: number, end: number): void {
    const key = this.fieldKey as string;
    const before = this.fields?.get(key);
    if (before && this.twice === undefined && this.buf.compare(this.buf, before[0], before[1], start, end) !== 0)
      this.twice = key;
    (this.fields ??= new Map()).set(key, [start, end]);
  }

  private recordModelString(start: number, end: number): number {
    let model: string | undefined;
    if (!this.escaped) {
      model = this.buf.toString('utf8', start + 1, end - 1);
      if (CONTROL_CHAR.test(model)) model = undefined;
    } else {
      try {
        model = JSON.parse(this.buf.toString('utf8', start, end)) as string;
      } catch {
        // The string was validated except for raw control characters, so that is the cause.
      }
    }
    if (model === undefined) {
      let at = start + 1;
      while (this.buf[at] >= SPACE) at++;
      return this.fail(at, 'control character in the model string');
    }
    this.recordModel(model, 'string');
    return end;
  }

  private recordModel(model: string | undefined, type: string): void {
    if (this.modelCount === 0) {
      this.model = model;
      this.modelType = type;
    } else if (model === undefined || model !== this.model) {
      this.conflict = true;
    }
    this.modelCount++;
  }

  /** The model of a valid JSON object body, or the policy's refusal. */
  verdict(): ModelExtraction {
    if (this.conflict)
      return refuse('duplicate_model', `${this.modelCount} top-level "model" keys, not all the same string`);
    if (this.caseVariant !== undefined) {
      return refuse(
        'model_case',
        `the top-level key ${JSON.stringify(this.caseVariant)} is "model" in another case, which case-insensitive parsers read as the model`,
      );
    }
    if (this.modelCount === 0) return refuse('model_absent', 'no top-level "model" key');
    if (this.model === undefined) return refuse('model_not_string', `"model" is ${this.modelType}, not a string`);
    const fields = this.found();
    return fields ? { ok: true, model: this.model, fields } : { ok: true, model: this.model };
  }
}

const EMPTY_FIELDS: TopLevelFields = new Map();

/**
 * A key as case-insensitive binders compare it: Go's encoding/json folds with Unicode simple
 * folding, which also maps the long s (U+017F) to s and the Kelvin sign (U+212A) to k.
 */
export function goFold(key: string): string {
  return key.replace(/\u017f/g, 's').toLowerCase();
}

const lowerCache = new WeakMap<ReadonlySet<string>, ReadonlyMap<string, string>>();

function lowerCased(watch: ReadonlySet<string>): ReadonlyMap<string, string> {
  let m = lowerCache.get(watch);
  if (!m) {
    m = new Map([...watch].map((k) => [goFold(k), k]));
    lowerCache.set(watch, m);
  }
  return m;
}

function isLetter(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
}

/** JSON type of a value from its first byte, for the model_not_string hint. */
function typeAt(c: number): string {
  if (c === LBRACE) return 'an object';
  if (c === LBRACKET) return 'an array';
  if (c === 0x74 || c === 0x66) return 'a boolean';
  if (c === 0x6e) return 'null';
  return 'a number';
}

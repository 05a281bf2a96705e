// The Check's one scan of a request body (check/extract-model.ts) finds these; the meter
// (meter/request-shape.ts) and the protocol modules (providers/) read them again without a second scan.

/**
 * Where the values of some top-level keys sit in the body, by key (the last occurrence, as
 * JSON.parse keeps it; `[start, end)` byte offsets of the value as written). Only keys the caller
 * asked for; read in the same pass that finds the model, so the meter's reading of a request (its
 * `n`, `max_tokens`, `stream`...) costs no second scan of a large body.
 */
export type TopLevelFields = ReadonlyMap<string, readonly [number, number]> & {
  /** Marked strings found anywhere in the body (NestedMarks), by name, with how often. */
  readonly marks?: ReadonlyMap<string, number>;
  /** A top-level key that is a watched one in another case (`"N"`, `"Max_Tokens"`): [as sent, watched]. */
  readonly caseVariant?: readonly [string, string];
  /** A watched key sent twice with values that differ as written (first-wins parsers read the first). */
  readonly twice?: string;
};

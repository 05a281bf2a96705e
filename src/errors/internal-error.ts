/**
 * The base of modelgate's own errors: a stable `code` a caller can switch on, a message for the
 * operator (never a key or a secret), and the subclass's name as `name` (what a log line shows).
 * A caller that catches tells its named cases apart by class or code and lets the rest go on.
 */
export class InternalError extends Error {
  constructor(
    readonly code: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The code of one of modelgate's own errors; undefined for anything else. */
export function errorCode(err: unknown): string | undefined {
  return err instanceof InternalError ? err.code : undefined;
}

/** The message of anything thrown, as one line of text for a log or an operator. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

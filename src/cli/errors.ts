import { InternalError } from '../errors/internal-error';
/**
 * A command's failure: a message meant for the operator, shown as one line, and the exit code the
 * CLI ends with (1: the operation failed, 2: the command line was wrong; main.ts adds where to get
 * help to the line of a usage error).
 */
export class CliError extends InternalError {
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 1,
  ) {
    super(exitCode === 2 ? 'usage' : 'command_failed', message);
  }
}

/** A wrong command line (a bad option value or argument): exit code 2. */
export function usageError(message: string): CliError {
  return new CliError(message, 2);
}

// Control characters would break log lines and headers (ids are echoed in x-modelgate headers).
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * Checks an operator-given name (key id, group, model): not empty, no surrounding spaces (the
 * spec's classic mistake, docs/spec.md §7), no control characters, at most `max` characters.
 */
export function checkName(what: string, value: string, max = 200): string {
  if (value === '') throw usageError(`${what} must not be empty`);
  if (value.trim() !== value) throw usageError(`${what} ${JSON.stringify(value)} has leading or trailing spaces`);
  if (CONTROL.test(value)) throw usageError(`${what} ${JSON.stringify(value)} contains control characters`);
  if (value.length > max) throw usageError(`${what} is longer than ${max} characters`);
  return value;
}

/** A command's words after `modelgate` (`keys new`), for messages; '' for the program itself. */
export function commandPath(cmd: { name(): string; readonly parent: unknown }): string {
  const names: string[] = [];
  for (let c = cmd as { name(): string; readonly parent: unknown } | null; c?.parent; c = c.parent as typeof c)
    names.unshift(c.name());
  return names.join(' ');
}

/**
 * An option parser that refuses a second value (commander would keep the last one silently), for
 * options that take one value and have no default.
 */
export function once(option: string): (value: string, previous: string | undefined) => string {
  return (value, previous) => {
    if (previous !== undefined) throw usageError(`option ${option} is given twice`);
    return value;
  };
}

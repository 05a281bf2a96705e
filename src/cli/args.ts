/**
 * Command-line parsing for the admin commands: long options only (`--name value`,
 * `--name=value`, repeatable ones), and where the store is.
 *
 * Hand-written rather than node:util parseArgs because amounts are negative numbers
 * (`balance add alice -0.25`), which parseArgs reads as unknown short options.
 */
import { redactUrl } from '../store/pg/store';
import { usageError } from './errors';

/** string: one value; multi: repeatable, collected in order; boolean: a flag without value. */
export type OptionKind = 'string' | 'multi' | 'boolean';

export interface ParsedArgs {
  readonly positionals: string[];
  readonly strings: Map<string, string>;
  readonly multis: Map<string, string[]>;
  readonly flags: Set<string>;
}

const NUMBER = /^-(\d|\.\d)/;

/** Parses `argv` against the options `spec` allows; anything else is a usage error (exit 2). */
export function parseArgs(argv: readonly string[], spec: Readonly<Record<string, OptionKind>>, command: string): ParsedArgs {
  const parsed: ParsedArgs = { positionals: [], strings: new Map(), multis: new Map(), flags: new Set() };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') {
      parsed.positionals.push(...argv.slice(i + 1));
      break;
    }
    if (arg === '-h') {
      parsed.flags.add('help');
      continue;
    }
    if (!arg.startsWith('-') || NUMBER.test(arg)) {
      parsed.positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') ? arg.slice(2, eq === -1 ? undefined : eq) : '';
    const kind = spec[name];
    if (kind === undefined) throw usageError(`unknown option ${arg.split('=')[0]} for \`${command}\``);
    if (kind === 'boolean') {
      if (eq !== -1) throw usageError(`option --${name} takes no value`);
      parsed.flags.add(name);
      continue;
    }
    let value: string;
    if (eq !== -1) value = arg.slice(eq + 1);
    else if (i + 1 < argv.length && (!argv[i + 1].startsWith('-') || NUMBER.test(argv[i + 1]))) value = argv[++i];
    else throw usageError(`option --${name} needs a value`);
    if (kind === 'multi') {
      parsed.multis.set(name, [...(parsed.multis.get(name) ?? []), value]);
    } else {
      if (parsed.strings.has(name)) throw usageError(`option --${name} is given twice`);
      parsed.strings.set(name, value);
    }
  }
  return parsed;
}

/** Where the admin commands act: the YAML file (they only print) or a PostgreSQL database. */
export type StoreTarget = { readonly mode: 'file' } | { readonly mode: 'postgres'; readonly url: string };

/**
 * `--store` first, then MODELGATE_STORE, then DATABASE_URL; none (or `file`) means file mode.
 * Empty variables count as unset, so `DATABASE_URL= modelgate ...` forces file mode.
 */
export function resolveStore(flag: string | undefined, env: NodeJS.ProcessEnv): StoreTarget {
  const sources: [string, string | undefined][] = [
    ['--store', flag],
    ['MODELGATE_STORE', env.MODELGATE_STORE],
    ['DATABASE_URL', env.DATABASE_URL],
  ];
  for (const [source, value] of sources) {
    if (value === undefined || value === '') continue;
    if (value === 'file') return { mode: 'file' };
    if (/^postgres(ql)?:\/\//.test(value)) return { mode: 'postgres', url: value };
    throw usageError(`${source} (${redactUrl(value)}) is neither "file" nor a postgres:// URL`);
  }
  return { mode: 'file' };
}

const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

/**
 * Parses `--expires`: an ISO 8601 date or date-time (a bare date is midnight UTC). Date alone
 * would read "2027-02-30" as March 2nd; a day that does not exist is refused instead.
 */
export function parseExpires(text: string): Date {
  const m = ISO_TIME.exec(text);
  const day = m ? new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))) : undefined;
  const date = new Date(text);
  if (!m || !day || day.getUTCMonth() !== Number(m[2]) - 1 || day.getUTCDate() !== Number(m[3]) || Number.isNaN(date.getTime())) {
    throw usageError(`--expires ${JSON.stringify(text)} is not an ISO 8601 date such as 2026-12-31 or 2026-12-31T23:59:59Z`);
  }
  return date;
}

/** Parses `--available true|false`. */
export function parseBoolean(option: string, text: string): boolean {
  if (text === 'true') return true;
  if (text === 'false') return false;
  throw usageError(`--${option} must be true or false, not ${JSON.stringify(text)}`);
}

/**
 * File mode of `keys new`: with no PostgreSQL store, modelgate writes nothing and prints the entry
 * to paste into the `keys:` list of the YAML config (same fields as envoy/modelgate.yaml).
 * Only the hash goes into the file; the key itself is shown once, next to it.
 */
import YAML from 'yaml';
import { checkName } from './errors';
import { isoTime } from './text';
import { generateKey, hashKey } from '../contract/key-format';

/** One entry of the config's `keys:` list, in the file store's field names. */
export interface FileKeyEntry {
  readonly id: string;
  readonly sha256: string;
  readonly group: string;
  readonly balance?: number;
  readonly expiresAt?: string;
}

export interface FileKey {
  readonly key: string;
  readonly entry: FileKeyEntry;
  /** The entry as YAML, indented to sit under a top-level `keys:`. */
  readonly yaml: string;
}

/** Generates a key and its config entry; `balance` is a decimal string (absent = unlimited). */
export function fileKey(input: {
  id: string;
  group: string;
  balance?: string | null;
  expiresAt?: Date | null;
}): FileKey {
  const key = generateKey();
  const entry: FileKeyEntry = {
    id: checkName('key id', input.id),
    sha256: hashKey(key),
    group: checkName('group name', input.group),
    ...(input.balance != null ? { balance: Number(input.balance) } : {}),
    ...(input.expiresAt != null ? { expiresAt: isoTime(input.expiresAt) } : {}),
  };
  // The yaml library quotes whatever needs quoting (an id like "yes" or "1e3").
  const yaml = YAML.stringify([entry])
    .trimEnd()
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n');
  return { key, entry, yaml };
}

/**
 * Human-readable output of the admin commands. (`--json` prints the plain data instead.)
 * Keys appear only in keyIssuedText, which is used by `keys new` and `keys rotate` alone.
 */
import type { FileKey } from './file-key';
import type { GroupInfo } from './groups';
import { formatModelSpec } from './groups';
import type { KeyInfo } from './keys';

/** Aligns columns with two spaces between them; no trailing spaces. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ')).join('\n');
}

export function balanceText(balance: number | null): string {
  return balance === null ? 'unlimited' : String(balance);
}

/** active, disabled or expired, as the decision would see the key at `now`. */
export function keyState(k: KeyInfo, now: Date): string {
  if (k.disabled) return 'disabled';
  if (k.expiresAt !== null && Date.parse(k.expiresAt) <= now.getTime()) return 'expired';
  return 'active';
}

export function keySummary(k: KeyInfo): string {
  return `group ${k.group}, balance ${balanceText(k.balance)}, expires ${k.expiresAt ?? 'never'}`;
}

/** The key itself, once, on a line of its own so it can be copied whole. */
export function keyIssuedText(headline: string, key: string): string {
  return `${headline}\nThe key is shown only this once; store it now:\n\n${key}\n`;
}

export function keyTableText(keys: readonly KeyInfo[], now: Date): string {
  if (keys.length === 0) return 'No keys.\n';
  const rows = keys.map((k) => [k.id, k.group, balanceText(k.balance), keyState(k, now), k.expiresAt ?? '-', k.createdAt.replace(/\.\d+Z$/, 'Z')]);
  return `${table([['ID', 'GROUP', 'BALANCE', 'STATE', 'EXPIRES', 'CREATED'], ...rows])}\n`;
}

export function fileKeyText(f: FileKey): string {
  return (
    keyIssuedText(`Key ${f.entry.id} for group ${f.entry.group} (file mode: nothing was written).`, f.key) +
    `\nAdd this entry to the keys: list of your modelgate.yaml (it holds only the hash):\n\n${f.yaml}\n`
  );
}

export function groupText(g: GroupInfo): string {
  const keys = `${g.keys} key${g.keys === 1 ? '' : 's'}`;
  const head = `${g.name} (${g.available ? 'available' : 'unavailable'}, ${keys})`;
  if (g.models.length === 0) return `${head}\n  (no models)\n`;
  const rows = g.models.map((m) => [m.name, m.protocols === null ? 'any protocol' : m.protocols.join(','), m.available ? '' : 'unavailable']);
  const body = table(rows)
    .split('\n')
    .map((line) => `  ${line.trimEnd()}`)
    .join('\n');
  return `${head}\n${body}\n`;
}

export function groupListText(groups: readonly GroupInfo[]): string {
  return groups.length === 0 ? 'No groups.\n' : groups.map(groupText).join('\n');
}

/** The models of a group in --model syntax, for a one-line confirmation. */
export function modelListText(g: GroupInfo): string {
  return g.models.length === 0 ? 'no models' : g.models.map(formatModelSpec).join(' ');
}

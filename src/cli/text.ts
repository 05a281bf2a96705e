/**
 * Text helpers of the store commands' human-readable output (`--json` prints the plain data
 * instead); each command group formats its own records with them.
 */

/** Aligns columns with two spaces between them; no trailing spaces. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows
    .map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '))
    .join('\n');
}

export function balanceText(balance: number | null): string {
  return balance === null ? 'unlimited' : String(balance);
}

/** ISO 8601 without milliseconds when there are none: what people write in the config. */
export function isoTime(date: Date): string {
  return date.toISOString().replace('.000Z', 'Z');
}

/**
 * The pieces both results renderers share (bench/results-md.ts for RESULTS.md, bench/e2e/results.ts
 * for RESULTS-e2e.md): number formats, a verdict, and the Markdown table.
 */

/** A whole number with thousands separators, or – when not measured. */
export const int = (n: number | undefined): string =>
  n === undefined || !Number.isFinite(n) ? '–' : Math.round(n).toLocaleString('en-US');

/** Microseconds as µs below 1 ms, else as ms with 2 or 1 decimals. */
export const us = (v: number | undefined): string =>
  v === undefined || !Number.isFinite(v)
    ? '–'
    : v >= 10_000
      ? `${(v / 1000).toFixed(1)} ms`
      : v >= 1000
        ? `${(v / 1000).toFixed(2)} ms`
        : `${Math.round(v)} µs`;

/** Microseconds, always as ms (the end-to-end tables, where everything is above a millisecond or near it). */
export const ms = (v: number): string =>
  Number.isFinite(v)
    ? v >= 100_000
      ? `${(v / 1000).toFixed(0)} ms`
      : v >= 10_000
        ? `${(v / 1000).toFixed(1)} ms`
        : `${(v / 1000).toFixed(2)} ms`
    : '–';

/** A ratio: 1.23×. */
export const ratio = (n: number | undefined, digits = 2): string =>
  n === undefined || !Number.isFinite(n) ? '–' : `${n.toFixed(digits)}×`;

/** Bytes as MiB (2^20). */
export const mib = (b: number | undefined): string => (b === undefined ? '–' : `${(b / 2 ** 20).toFixed(1)} MiB`);

/** A target's verdict. */
export const verdict = (ok: boolean | undefined): string =>
  ok === undefined ? 'NOT MEASURED' : ok ? '**PASS**' : '**FAIL**';

/** A Markdown table. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return [
    `| ${header.join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}

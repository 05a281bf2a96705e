/** Latency statistics from raw per-request samples (no histogram buckets, no averaging of percentiles). */

/** Nearest-rank percentile of an ascending array (p in 0..100). */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export interface LatencySummary {
  readonly count: number;
  readonly p50Us: number;
  readonly p99Us: number;
  readonly maxUs: number;
}

/** Summary of microsecond samples (sorts a copy). */
export function summarize(samplesUs: ArrayLike<number>): LatencySummary {
  const sorted = Float64Array.from(samplesUs).sort();
  return {
    count: sorted.length,
    p50Us: percentile(sorted, 50),
    p99Us: percentile(sorted, 99),
    maxUs: sorted.length ? sorted[sorted.length - 1] : Number.NaN,
  };
}

/** Median of a few numbers (used for repeated runs and micro-benchmark rounds). */
export function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

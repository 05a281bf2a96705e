/**
 * Latency statistics from raw per-request samples. One run's percentiles are exact (nearest rank
 * of the sorted samples). Repeated runs are pooled, never averaged: each run also keeps a
 * log-linear histogram (buckets 1% wide), and the percentiles of several runs are read from the
 * sum of their histograms (within 1% of the exact value).
 */

/** Nearest-rank percentile of an ascending array (p in 0..100). */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export interface LatencySummary {
  readonly count: number;
  readonly p50Us: number;
  readonly p90Us: number;
  readonly p99Us: number;
  readonly p999Us: number;
  readonly maxUs: number;
  /** Sparse histogram: [bucket, count] pairs, bucket = histogramBucket(µs). */
  readonly histogram: readonly (readonly [number, number])[];
}

/** Buckets grow by 1%: bucket b holds latencies in (GROWTH^(b-1), GROWTH^b] µs. */
const GROWTH = 1.01;
const LOG_GROWTH = Math.log(GROWTH);

export function histogramBucket(us: number): number {
  return us <= 1 ? 0 : Math.ceil(Math.log(us) / LOG_GROWTH - 1e-9);
}

/** The upper bound of a bucket, µs. */
export function bucketUpperUs(bucket: number): number {
  return Math.pow(GROWTH, bucket);
}

function histogramOf(samplesUs: ArrayLike<number>): [number, number][] {
  const counts = new Map<number, number>();
  for (let i = 0; i < samplesUs.length; i++) {
    const b = histogramBucket(samplesUs[i]);
    counts.set(b, (counts.get(b) ?? 0) + 1);
  }
  return [...counts.entries()].sort((a, b) => a[0] - b[0]);
}

/** Nearest-rank percentile (p in 0..100) of the pooled samples of several histograms, µs (bucket upper bound). */
export function pooledPercentile(histograms: readonly (readonly (readonly [number, number])[])[], p: number): number {
  const counts = new Map<number, number>();
  let total = 0;
  for (const h of histograms) {
    for (const [b, n] of h) {
      counts.set(b, (counts.get(b) ?? 0) + n);
      total += n;
    }
  }
  if (total === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * total));
  let seen = 0;
  for (const [b, n] of [...counts.entries()].sort((x, y) => x[0] - y[0])) {
    seen += n;
    if (seen >= rank) return bucketUpperUs(b);
  }
  return Number.NaN;
}

/** Summary of microsecond samples (sorts a copy). */
export function summarize(samplesUs: ArrayLike<number>): LatencySummary {
  const sorted = Float64Array.from(samplesUs).sort();
  return {
    count: sorted.length,
    p50Us: percentile(sorted, 50),
    p90Us: percentile(sorted, 90),
    p99Us: percentile(sorted, 99),
    p999Us: percentile(sorted, 99.9),
    maxUs: sorted.length ? sorted[sorted.length - 1] : Number.NaN,
    histogram: histogramOf(sorted),
  };
}

/** Median of a few numbers (used for repeated runs and micro-benchmark rounds). */
export function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * V8's old-generation growth for the processes that answer Checks (`serve`, `up`, and `--workers`
 * workers, which run `serve`). With V8's own factor (about 1.1-1.7 on a heap of modelgate's size,
 * ~25 MB live) the old generation's limit sits a few MB above what is live, and large request
 * bodies (each a fresh buffer the size of the body) keep reaching it: through Envoy, 150 Checks a
 * second with 256 KiB bodies ran 4-5 mark-compacts a second, half of modelgate's CPU and a p99 of
 * 34-41 ms. With the old generation allowed to double before a major collection: none, half the
 * CPU, p99 6 ms; small chat at 1,000 Checks a second went from a p99 of 8.2 ms to 3.3 ms
 * (bench/README-e2e.md, "Tail latency"). The cost: the heap may hold up to twice what is live
 * before it is collected.
 *
 * `--heap-growing-percent` is read by V8 each time it sets the limit, so it can be set once the
 * process runs (unlike the heap-size flags, or `--single-threaded-gc`, which aborts V8 when set
 * late). A value given on the command line or in NODE_OPTIONS wins.
 */
const FLAG = '--heap-growing-percent';
export const HEAP_GROWING_PERCENT = 100;

/** Sets the flag unless the operator already did; returns the flag set, if any. */
export function tuneHeap(
  execArgv: readonly string[],
  nodeOptions: string | undefined,
  setFlags: (flags: string) => void,
): string | undefined {
  const given = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some((a) => a.replace(/_/g, '-').startsWith(FLAG));
  if (given) return undefined;
  const flag = `${FLAG}=${HEAP_GROWING_PERCENT}`;
  setFlags(flag);
  return flag;
}

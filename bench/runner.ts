/**
 * What both benchmark runners share (`npm run bench`: run.ts; `npm run bench:e2e`: e2e/run.ts): the
 * command line, the log line, where the results go (only a full run replaces the committed
 * RESULTS file; a quick or partial one writes beside its raw numbers), running each measurement
 * so that a failure is recorded and the run goes on, saving after each, and the order of targets
 * in repeated runs (reversed every other repeat, so neither always runs first).
 */
import { writeFileSync } from 'node:fs';

export interface BenchRunner<R extends { errors: string[] }> {
  readonly quick: boolean;
  /** A `--name=value` flag. */
  flag(name: string): string | undefined;
  /** Where the rendered results go: the committed file for a full run, the out folder otherwise. */
  readonly resultsFile: string;
  log(msg: string): void;
  /** Writes results.json and the rendered results (after every measurement). */
  save(): void;
  /** Runs one measurement; a failure is logged and recorded in `results.errors`, and the run goes on. */
  attempt<T>(what: string, fn: () => Promise<T>): Promise<T | undefined>;
  readonly results: R;
}

export interface RunnerOptions<R> {
  /** `bench` or `bench:e2e`, in log lines. */
  readonly name: string;
  readonly argv: readonly string[];
  /** Flags that make a run partial (besides --quick). */
  readonly partialFlags: readonly string[];
  readonly committedFile: string;
  readonly outFile: string;
  readonly jsonFile: string;
  readonly results: R;
  readonly render: (results: R) => string;
  /** JSON.stringify's indent for results.json. */
  readonly jsonIndent?: number;
}

export function benchRunner<R extends { errors: string[] }>(o: RunnerOptions<R>): BenchRunner<R> {
  const flag = (name: string): string | undefined =>
    o.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const quick = o.argv.includes('--quick');
  const partial = quick || o.partialFlags.some((f) => flag(f) !== undefined);
  const resultsFile = flag('out') ?? (partial ? o.outFile : o.committedFile);
  const log = (msg: string): void =>
    void process.stderr.write(`[${o.name} ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  const save = (): void => {
    writeFileSync(o.jsonFile, JSON.stringify(o.results, null, o.jsonIndent));
    writeFileSync(resultsFile, o.render(o.results));
  };
  return {
    quick,
    flag,
    resultsFile,
    log,
    save,
    results: o.results,
    async attempt(what, fn) {
      try {
        return await fn();
      } catch (err) {
        const msg = `${what}: ${err instanceof Error ? err.message : String(err)}`;
        log(`ERROR ${msg}`);
        o.results.errors.push(msg);
        return undefined;
      } finally {
        save();
      }
    },
  };
}

/** The targets of repeat `rep` in turn: reversed every other repeat. */
export function interleaved<T>(list: readonly T[], rep: number): T[] {
  return rep % 2 === 0 ? [...list] : [...list].reverse();
}

/**
 * Process entry for the in-process micro-benchmarks, so run.ts can pin them to one core.
 *
 * Usage: node dist/bench/micro.js extract|check-path OUT.json [CONFIG] [LOGFILE]
 */
import { writeFileSync } from 'node:fs';
import { benchExtractModel } from './extract-model.bench';
import { benchCheckPath } from './check-path.bench';

async function main(): Promise<void> {
  const [what, out, config, logFile] = process.argv.slice(2);
  const result = what === 'extract' ? benchExtractModel() : await benchCheckPath(config, logFile);
  writeFileSync(out, JSON.stringify(result, null, 2));
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);

/**
 * `modelgate envoy-check [FILE]`: checks an Envoy bootstrap strictly against Envoy's own v3 API
 * protos (src/envoy/config-check.ts). Problems go to stderr, one per line, and the exit code is 1.
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { checkEnvoyConfig } from '../envoy/config-check';
import type { CliRun } from './io';

export function envoyCheckCommand(run: CliRun): Command {
  return new Command('envoy-check')
    .description("check an Envoy config strictly against Envoy's v3 API")
    .argument('[file]', 'the Envoy config', 'envoy/envoy.yaml')
    .action((file: string) => {
      const r = checkEnvoyConfig(readFileSync(file, 'utf8'));
      if (r.ok) run.stdout(`${file}: valid envoy.config.bootstrap.v3.Bootstrap\n`);
      else run.stderr(`${file}: ${r.errors.length} problem(s):\n  - ${r.errors.join('\n  - ')}\n`);
      if (r.warnings.length > 0) run.stderr(`${file}: ${r.warnings.length} warning(s):\n  - ${r.warnings.join('\n  - ')}\n`);
      run.exitCode = r.ok ? 0 : 1;
    });
}

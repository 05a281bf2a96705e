/**
 * The Envoy side of the command line:
 * - `modelgate envoy-config`: renders the Envoy bundle from modelgate's config (src/envoy/render.ts):
 *   a complete bootstrap, or with --parts only what a platform team adds to its own Envoy;
 * - `modelgate envoy-check [FILE]`: checks an Envoy bootstrap with the pinned Envoy binary's own
 *   `envoy --mode validate` (src/envoy/validate.ts; src/envoy/ensure.ts finds the binary, or installs
 *   the pinned one). Envoy's error goes to stderr and the exit code is 1.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Command } from 'commander';
import { ConfigError, parseConfig, type Config } from '../config/load';
import { EnvoyUnavailable, ensureEnvoy } from '../envoy/ensure';
import { renderEnvoyParts, renderEnvoyYaml } from '../envoy/render';
import { validateFileWithEnvoy } from '../envoy/validate';
import { CliError, once } from './errors';
import type { CliRun } from './io';

/** The config file a command names, or $MODELGATE_CONFIG, or the demo config. */
export function configPathOf(option: string | undefined, env: NodeJS.ProcessEnv): string {
  return option ?? env.MODELGATE_CONFIG ?? 'envoy/modelgate.yaml';
}

/** Reads and validates a config file, as a one-line CLI failure when it cannot. */
export function readConfig(path: string, env: NodeJS.ProcessEnv): Config {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    return parseConfig(text, env);
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(`${path}: ${err.message}`);
    throw err;
  }
}

/**
 * Upstream credentials are set by modelgate at run time and never written into Envoy's config, so
 * rendering must not need their variables: an environment in which every variable is set.
 */
const EVERY_VARIABLE_SET = new Proxy({}, { get: () => 'set' }) as NodeJS.ProcessEnv;

export function envoyConfigCommand(run: CliRun): Command {
  return new Command('envoy-config')
    .description("render the Envoy bundle from modelgate's config (envoy/envoy.yaml is this for envoy/modelgate.yaml)")
    .option('--config <file>', 'the config file (default: $MODELGATE_CONFIG, else envoy/modelgate.yaml)', once('--config'))
    .option('--parts', 'only the parts to add to your own Envoy: HTTP filters, clusters, virtual host, local replies')
    .option('-o, --out <file>', 'write to this file instead of stdout', once('--out'))
    .action((options: { config?: string; parts?: boolean; out?: string }) => {
      const path = configPathOf(options.config, run.env);
      const config = readConfig(path, EVERY_VARIABLE_SET);
      const text = options.parts ? renderEnvoyParts(config, path) : renderEnvoyYaml(config, path);
      if (options.out) writeFileSync(options.out, text);
      else run.stdout(text);
    });
}

export function envoyCheckCommand(run: CliRun): Command {
  return new Command('envoy-check')
    .description('check an Envoy config with the Envoy binary itself (envoy --mode validate; the pinned version, installed if missing)')
    .argument('[file]', 'the Envoy config', 'envoy/envoy.yaml')
    .action((file: string) => {
      readFileSync(file); // a missing file is one line, before any Envoy is looked for
      let envoy;
      try {
        envoy = ensureEnvoy({ log: (m) => run.stderr(`${m}\n`) });
      } catch (err) {
        if (err instanceof EnvoyUnavailable) throw new CliError(err.message);
        throw err;
      }
      const r = validateFileWithEnvoy(file, envoy.path);
      if (r.ok) run.stdout(`${file}: valid for Envoy ${envoy.version} (envoy --mode validate)\n`);
      else run.stderr(`${file}: Envoy ${envoy.version} refuses it: ${r.message}\n`);
      const warnings = r.output.split('\n').filter((l) => l.includes('[warning]'));
      if (warnings.length > 0) run.stderr(`${file}: ${warnings.length} warning(s) from Envoy:\n  - ${warnings.join('\n  - ')}\n`);
      run.exitCode = r.ok ? 0 : 1;
    });
}

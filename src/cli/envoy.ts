/**
 * The Envoy side of the command line:
 * - `modelgate envoy-config`: renders the Envoy bundle from modelgate's config (src/envoy/render.ts),
 *   a complete bootstrap (a team's own Envoy: `modelgate adopt`, src/cli/adopt.ts);
 * - `modelgate envoy-check [FILE]`: checks an Envoy bootstrap with the pinned Envoy binary's own
 *   `envoy --mode validate` (src/envoy/validate.ts; src/envoy/ensure.ts finds the binary, or installs
 *   the pinned one). Envoy's error goes to stderr and the exit code is 1.
 */
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { Command } from 'commander';
import { ConfigError, parseConfig, type Config } from '../config/load';
import { GrpcAuthError, readGrpcSecret } from '../config/grpc-auth';
import { bundleWarnings } from '../envoy/bundle-warnings';
import { EnvoyUnavailable, ensureEnvoy } from '../envoy/ensure';
import { renderEnvoyYaml, type GatewayRenderInput } from '../envoy/render';
import { validateFileWithEnvoy } from '../envoy/validate';
import { CliError, once } from './errors';
import type { CliRun } from './io';

/**
 * The config file a command names, or $MODELGATE_CONFIG, or the demo config of a clone
 * (envoy/modelgate.yaml from the current folder). Outside a clone (the installed package, the image)
 * there is no default: a missing demo config says to name one.
 */
export function configPathOf(option: string | undefined, env: NodeJS.ProcessEnv): string {
  const path = option ?? env.MODELGATE_CONFIG ?? 'envoy/modelgate.yaml';
  if (option === undefined && env.MODELGATE_CONFIG === undefined && !existsSync(path)) {
    throw new CliError(
      `no config: envoy/modelgate.yaml (the demo config, in a clone of the repository) is not in ${process.cwd()}; name yours with --config <file> or MODELGATE_CONFIG`,
    );
  }
  return path;
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
 * rendering must not need their variables: an environment in which every variable is set. (The
 * gRPC port's secret is written into it: read from the real environment, renderInput.)
 */
const EVERY_VARIABLE_SET = new Proxy({}, { get: () => 'set' }) as NodeJS.ProcessEnv;

/** What the bundle is rendered from: the config, and the gRPC secret it names, read. */
export function renderInput(config: Config, configPath: string, env: NodeJS.ProcessEnv): GatewayRenderInput {
  try {
    return { ...config, grpcSecret: readGrpcSecret(config, { env, configPath }) };
  } catch (err) {
    if (err instanceof GrpcAuthError) throw new CliError(`${configPath}: ${err.message}`);
    throw err;
  }
}

/**
 * Writes a file only its owner can read (0600): a rendered bundle can hold the gRPC secret. An
 * existing file keeps its mode on write, so it is set again.
 */
export function writePrivateFile(path: string, text: string): void {
  writeFileSync(path, text, { mode: 0o600 });
  chmodSync(path, 0o600);
}

export function envoyConfigCommand(run: CliRun): Command {
  return new Command('envoy-config')
    .description("render the Envoy bundle from modelgate's config (envoy/envoy.yaml is this for envoy/modelgate.yaml)")
    .option(
      '--config <file>',
      'the config file (default: $MODELGATE_CONFIG, else envoy/modelgate.yaml)',
      once('--config'),
    )
    .option(
      '-o, --out <file>',
      'write to this file (mode 0600: it can hold the gRPC secret) instead of stdout',
      once('--out'),
    )
    .action((options: { config?: string; out?: string }) => {
      const path = configPathOf(options.config, run.env);
      const config = readConfig(path, EVERY_VARIABLE_SET);
      const input = renderInput(config, path, run.env);
      const text = renderEnvoyYaml(input, path);
      for (const w of bundleWarnings(config)) run.stderr(`warning: ${w}\n`);
      if (options.out) writePrivateFile(options.out, text);
      else run.stdout(text);
    });
}

export function envoyCheckCommand(run: CliRun): Command {
  return new Command('envoy-check')
    .description(
      'check an Envoy config with the Envoy binary itself (envoy --mode validate; the pinned version, installed if missing)',
    )
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
      if (warnings.length > 0)
        run.stderr(`${file}: ${warnings.length} warning(s) from Envoy:\n  - ${warnings.join('\n  - ')}\n`);
      run.exitCode = r.ok ? 0 : 1;
    });
}

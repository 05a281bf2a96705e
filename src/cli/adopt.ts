/**
 * `modelgate adopt`: modelgate added to a team's own Envoy bootstrap (src/envoy/adopt.ts), and
 * `modelgate adopt --check FILE`: the linter of a merged config (src/envoy/adopt-check.ts). Both
 * read YAML or JSON; adopt writes what it read (JSON for a .json file, else YAML), 0600 (it can
 * hold the gRPC secret), and prints its summary on stderr.
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import { UPSTREAM_FAMILIES, type UpstreamFamily } from '../config/load';
import { AdoptError, adopt } from '../envoy/adopt';
import { checkMerged } from '../envoy/adopt-check';
import { toYaml } from '../envoy/render';
import { CliError, once } from './errors';
import { configPathOf, readConfig, renderInput, writePrivateFile } from './envoy';
import type { CliRun } from './io';

type Obj = Record<string, unknown>;

/** Same as envoy.ts: rendering never needs the upstream credentials' variables. */
const EVERY_VARIABLE_SET = new Proxy({}, { get: () => 'set' }) as NodeJS.ProcessEnv;

function readBootstrap(file: string): Obj {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let tree: unknown;
  try {
    tree = parseYaml(text, { uniqueKeys: true }); // JSON is YAML
  } catch (err) {
    throw new CliError(`${file}: not YAML or JSON: ${(err as Error).message.split('\n')[0]}`);
  }
  if (!tree || typeof tree !== 'object' || Array.isArray(tree))
    throw new CliError(`${file}: not an Envoy bootstrap (an object)`);
  return tree as Obj;
}

function upstreamsOption(value: string | undefined): UpstreamFamily[] | undefined {
  if (value === undefined) return undefined;
  const names = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const n of names)
    if (!(UPSTREAM_FAMILIES as readonly string[]).includes(n))
      throw new CliError(`--upstreams: ${n} is not one of ${UPSTREAM_FAMILIES.join(', ')}`, 2);
  return names as UpstreamFamily[];
}

interface AdoptCliOptions {
  envoy?: string;
  config?: string;
  out?: string;
  check?: string;
  listener?: string;
  routeConfig?: string;
  virtualHost?: string;
  upstreams?: string;
  modelLists: boolean;
}

export function adoptCommand(run: CliRun): Command {
  return new Command('adopt')
    .description(
      'add modelgate to your own Envoy config (routes, filters, clusters; nothing of yours changes), or check a merged one (--check)',
    )
    .option('--envoy <file>', 'your Envoy bootstrap (YAML or JSON)', once('--envoy'))
    .option(
      '--config <file>',
      'the modelgate config (default: $MODELGATE_CONFIG, else envoy/modelgate.yaml)',
      once('--config'),
    )
    .option('-o, --out <file>', 'write the merged bootstrap here (mode 0600) instead of stdout', once('--out'))
    .option(
      '--check <file>',
      'check a merged config (made by adopt or by hand): exit 1 on any finding',
      once('--check'),
    )
    .option(
      '--listener <name>',
      'the listener whose HTTP connection manager gets modelgate (when there are several)',
      once('--listener'),
    )
    .option(
      '--route-config <name>',
      'the route_config (by name) that gets modelgate (when there are several)',
      once('--route-config'),
    )
    .option(
      '--virtual-host <name>',
      'the virtual host that gets the routes (default: the one with domain "*", or the only one)',
      once('--virtual-host'),
    )
    .option(
      '--upstreams <list>',
      `the upstreams whose endpoints get routes, comma-separated (default: ${UPSTREAM_FAMILIES.join(',')})`,
      once('--upstreams'),
    )
    .option('--no-model-lists', 'no routes for the model lists (GET /v1/models, /v1beta/models)')
    .action((options: AdoptCliOptions) => {
      const path = configPathOf(options.config, run.env);
      const config = readConfig(path, EVERY_VARIABLE_SET);
      const input = renderInput(config, path, run.env);
      const select = {
        ...(options.listener ? { listener: options.listener } : {}),
        ...(options.routeConfig ? { routeConfig: options.routeConfig } : {}),
      };
      try {
        if (options.check) {
          const findings = checkMerged(readBootstrap(options.check), input, select);
          for (const f of findings) run.stdout(`${options.check}: ${f.at}: ${f.problem}\n  fix: ${f.fix}\n`);
          run.stdout(
            findings.length === 0
              ? `${options.check}: modelgate is wired fail closed and metered (no finding)\n`
              : `${options.check}: ${findings.length} finding(s)\n`,
          );
          run.exitCode = findings.length === 0 ? 0 : 1;
          return;
        }
        if (!options.envoy) throw new CliError('adopt needs --envoy FILE (your Envoy bootstrap), or --check FILE', 2);
        const upstreams = upstreamsOption(options.upstreams);
        const r = adopt(readBootstrap(options.envoy), input, {
          ...select,
          ...(options.virtualHost ? { virtualHost: options.virtualHost } : {}),
          ...(upstreams ? { upstreams } : {}),
          modelLists: options.modelLists,
        });
        const header = ` ${options.envoy} with modelgate added by \`modelgate adopt\` from ${path}. Re-run adopt after a change of\n either file (it replaces only modelgate's parts); check hand edits with \`modelgate adopt --check\`.`;
        const json = /\.json$/i.test(options.out ?? options.envoy);
        const text = json ? `${JSON.stringify(r.bootstrap, null, 2)}\n` : toYaml(r.bootstrap, header);
        if (options.out) writePrivateFile(options.out, text);
        else run.stdout(text);
        const added =
          text.split('\n').length -
          (json
            ? `${JSON.stringify(readBootstrap(options.envoy), null, 2)}\n`
            : toYaml(readBootstrap(options.envoy), header)
          ).split('\n').length;
        run.stderr(`${r.summary.join('\n')}\n  ${added} lines added (as written here)\n`);
        // The result linted as `adopt --check` would: a route of the team's that reaches a provider
        // cluster without modelgate, for one, is a way around it (exit 1, the file written all the same).
        const findings = checkMerged(r.bootstrap, input, select);
        for (const f of findings) run.stderr(`finding: ${f.at}: ${f.problem}\n  fix: ${f.fix}\n`);
        if (findings.length > 0) {
          run.stderr(
            `${findings.length} finding(s) in the result: it is not fail closed until they are fixed (modelgate adopt --check)\n`,
          );
          run.exitCode = 1;
        }
      } catch (err) {
        if (err instanceof AdoptError) throw new CliError(err.message);
        throw err;
      }
    });
}

/**
 * `modelgate up` (what `npm start` runs): the whole gateway on one machine. Envoy on the bundle
 * rendered from the config, modelgate (this process) on the config's server addresses, and with
 * --demo-upstream the demo provider (src/demo/upstream.ts) that the demo config's upstreams point
 * at. Prints the base URL and a curl per protocol; Ctrl-C (or SIGTERM) stops all three. If Envoy
 * stops by itself, everything stops with its last words and exit code 1.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as v8 from 'node:v8';
import { Command } from 'commander';
import { version } from '../../package.json';
import { parseHostPort, type Config } from '../config/load';
import { startDemoUpstream, type DemoUpstream } from '../demo/upstream';
import { ensureEnvoy, EnvoyUnavailable } from '../envoy/ensure';
import { startEnvoy, type EnvoyProcess } from '../envoy/process';
import { renderEnvoyYaml } from '../envoy/render';
import { startService, type Service } from '../server/service';
import { EngineUnavailable, startRatelimit, startRedis, type EngineProcess } from '../server/global-engine';
import { bundleWarnings } from '../envoy/bundle-warnings';
import { configSetsGrpcAuth, ensureInstallSecret, GrpcAuthError, installSecretPath } from '../config/grpc-auth';
import { configPathOf, readConfig, renderInput } from './envoy';
import { tuneHeap } from './heap-tuning';
import { CliError, once } from './errors';
import type { CliRun } from './io';

interface UpOptions {
  readonly config?: string;
  readonly demoUpstream?: string;
  readonly envoyLogLevel?: string;
}

/** The base URL clients use: the public one if configured, else the listener as seen from this machine. */
function baseUrlOf(config: Config): string {
  if (config.gateway.publicBaseUrl) return config.gateway.publicBaseUrl;
  const { host, port } = config.gateway.listen;
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${shown}:${port}`;
}

/** The demo keys beside the config (envoy/demo-keys.env), as `export NAME=key` lines. */
function demoKeyLines(configPath: string): string[] {
  const file = join(dirname(configPath), 'demo-keys.env');
  return existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('export '))
    : [];
}

/**
 * "alice's balance 12.5" for the demo keys the config has with a balance: the banner's figures come from the config.
 */
function balanceOf(config: Config, id: string): string | undefined {
  const k = config.keys.find((x) => x.id === id);
  return k && k.balance !== null ? String(k.balance) : undefined;
}

/** What `up` prints once everything runs (exported for its test). */
export function banner(
  config: Config,
  configPath: string,
  envoyVersion: string,
  upstream: { readonly url: string } | undefined,
  secretFile?: string,
): string {
  const base = baseUrlOf(config);
  const g = config.gateway;
  const upstreams = upstream
    ? `the demo upstream at ${upstream.url} (every protocol family)`
    : Object.entries(g.upstreams)
        .map(([f, u]) => `${f} ${u.tls ? 'https' : 'http'}://${u.host}:${u.port}`)
        .join(', ');
  const lines = [
    '',
    `modelgate ${version} gateway is up: Envoy ${envoyVersion}, modelgate, ${upstream ? 'demo upstream' : 'your upstreams'}`,
    `  base URL     ${base}`,
    `  console      ${base}/console/   (sign in with a key: access, client setup, the doctor)`,
    `  upstreams    ${upstreams}`,
    `  modelgate    gRPC ${config.server.grpc}, HTTP ${config.server.http} (/metrics, /readyz)`,
    ...(secretFile
      ? [`  gRPC secret  ${secretFile} (this install's, mode 0600: Envoy sends it, modelgate requires it)`]
      : []),
    `  Envoy admin  http://${g.admin.host}:${g.admin.port}`,
    config.rateLimits.engine === 'global'
      ? `  rate limits  envoyproxy/ratelimit on ${config.rateLimits.service.host}:${config.rateLimits.service.port}, Redis on ${config.rateLimits.redis.host}:${config.rateLimits.redis.port}`
      : '  rate limits  embedded (counted by modelgate itself; one process)',
  ];
  const keys = upstream ? demoKeyLines(configPath) : [];
  if (keys.length > 0) {
    lines.push(
      '',
      `Try it (demo keys from ${join(dirname(configPath), 'demo-keys.env')}, published in README.md: demo only):`,
      `  ${keys[0].replace(/\s+#.*$/, '')}`,
      `  curl -s ${base}/v1/chat/completions -H "Authorization: Bearer $ALICE" -H 'content-type: application/json' -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'`,
      `  curl -s ${base}/v1/messages -H "x-api-key: $ALICE" -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' -d '{"model":"claude-3-5-haiku-latest","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}'`,
      `  curl -s ${base}/v1beta/models/gemini-2.5-flash:generateContent -H "x-goog-api-key: $ALICE" -H 'content-type: application/json' -d '{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}'`,
      `  curl -s ${base}/v1/models -H "Authorization: Bearer $ALICE"`,
      `  npm run verify    (every demo key through the gateway, every answer checked)`,
      '',
      'Metering: every answer debits the key by tokens x price ("msg":"usage" lines show the cost and the balance after);',
      `  npx modelgate usage --key alice     (the ledger${balanceOf(config, 'alice') ? `; alice's balance in the config: ${balanceOf(config, 'alice')}` : ''})`,
    );
    const trial = balanceOf(config, 'trial');
    if (trial)
      lines.push(`  $TRIAL starts with a balance of ${trial} (the config's): it runs out after a few requests`);
    lines.push(
      '',
      `Rate limits (${config.rateLimits.engine} engine): $GRACE may make 3 requests a minute; its fourth gets 429 rate_limited with retry-after.`,
    );
  }
  lines.push(
    '',
    'Decision lines (modelgate) and access-log lines (Envoy) follow as JSON on stdout. Ctrl-C stops all three.',
    '',
  );
  return lines.join('\n');
}

/** The install's gRPC secret, created on first use; a failure is one CLI line (never the value). */
function installSecretOrFail(configPath: string): string {
  try {
    return ensureInstallSecret(configPath);
  } catch (err) {
    if (err instanceof GrpcAuthError)
      throw new CliError(`${err.message}; set grpc.secret in ${configPath} (docs/security.md)`);
    throw err;
  }
}

export function upCommand(run: CliRun): Command {
  return new Command('up')
    .description(
      'run the whole gateway: Envoy on the rendered bundle, modelgate, and optionally the demo upstream (npm start)',
    )
    .option(
      '--config <file>',
      'the config file (default: $MODELGATE_CONFIG, else envoy/modelgate.yaml)',
      once('--config'),
    )
    .option(
      '--demo-upstream <host:port>',
      'also run the demo upstream here (the demo config points its upstreams at 127.0.0.1:9300)',
      once('--demo-upstream'),
    )
    .option(
      '--envoy-log-level <level>',
      "Envoy's own log level on stderr (trace, debug, info, warn, error, critical, off)",
      once('--envoy-log-level'),
    )
    .action(async (options: UpOptions) => {
      tuneHeap(process.execArgv, run.env.NODE_OPTIONS, v8.setFlagsFromString);
      let upstream: DemoUpstream | undefined;
      let service: Service | undefined;
      let envoy: EnvoyProcess | undefined;
      const engines: EngineProcess[] = [];
      let stopping = false;
      const stopAll = async (): Promise<void> => {
        stopping = true;
        // Envoy first: the streams it cuts are reported to the meter as it stops; the meter then waits
        // briefly for those reports and settles what is left at its maximum, provisionally.
        await envoy?.stop();
        await service?.close(3000, 2000);
        for (const e of engines.reverse()) await e.stop();
        await upstream?.close();
      };
      // Ctrl-C, SIGTERM, or the death of the process that started this one (npm killed with SIGKILL, a
      // supervisor that signals only its own child, which would leave this one to init): stop all
      // three, never leaving Envoy holding the ports. Installed first (a signal during Envoy's install or
      // the start is kept, and acted on after the step under way: what it started is then known).
      let ready = false;
      let interrupted = false;
      const onSignal = (): void => {
        if (stopping) return;
        if (!ready) {
          interrupted = true;
          return;
        }
        run.stderr('\nmodelgate: stopping Envoy, modelgate and the demo upstream\n');
        void stopAll().then(() => process.exit(0));
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      const parent = process.ppid;
      setInterval(() => {
        if (process.ppid !== parent && !stopping) {
          run.stderr('modelgate: the process that started this one is gone; stopping\n');
          onSignal();
        }
      }, 1000).unref();
      const env = run.env;
      const configPath = configPathOf(options.config, env);
      const config = readConfig(configPath, env);
      // The gRPC port's secret: the config's, else this install's own (config/grpc-auth.ts), never none.
      const installSecret = configSetsGrpcAuth(config) ? undefined : installSecretOrFail(configPath);
      const input =
        installSecret === undefined
          ? renderInput(config, configPath, env)
          : {
              ...config,
              grpc: { ...config.grpc, secret: { env: null, file: installSecretPath(configPath) } },
              grpcSecret: installSecret,
            };
      for (const w of bundleWarnings(config)) run.stderr(`warning: ${w}\n`);
      let envoyBin: { path: string; version: string };
      try {
        envoyBin = ensureEnvoy({ log: (m) => run.stderr(`${m}\n`) });
      } catch (err) {
        if (err instanceof EnvoyUnavailable) throw new CliError(err.message);
        throw err;
      }
      if (interrupted) process.exit(0);

      try {
        // The global rate limit engine (docs/rate-limits.md): Redis, then envoyproxy/ratelimit counting in it.
        if (config.rateLimits.engine === 'global') {
          const r = config.rateLimits;
          const started = async (p: Promise<EngineProcess>): Promise<void> => {
            engines.push(
              await p.catch((err: Error) => {
                throw new CliError(
                  err instanceof EngineUnavailable
                    ? err.message
                    : `the global rate limit engine cannot start: ${err.message}`,
                );
              }),
            );
          };
          await started(startRedis(r.redis, env));
          await started(startRatelimit({ grpc: r.service, redis: r.redis, domain: r.domain, env }));
        }
        if (options.demoUpstream) {
          const at = parseHostPort(options.demoUpstream);
          upstream = await startDemoUpstream({ host: at.host, port: at.port }).catch((err: NodeJS.ErrnoException) => {
            throw new CliError(
              `the demo upstream cannot listen on ${options.demoUpstream}: ${err.code ?? err.message}`,
            );
          });
        }
        service = await startService({ configPath, env, defaultGrpcSecret: installSecret }).catch(
          (err: NodeJS.ErrnoException) => {
            throw new CliError(
              `modelgate cannot start: ${err.code === 'EADDRINUSE' ? `${err.message} (another gateway running?)` : err.message}`,
            );
          },
        );
        envoy = await startEnvoy({
          binary: envoyBin.path,
          config: renderEnvoyYaml(input, configPath),
          logLevel: options.envoyLogLevel ?? 'warn',
          onStdout: (c) => process.stdout.write(c),
          onStderr: (c) => process.stderr.write(c),
        }).catch((err: Error) => {
          throw new CliError(
            `${err.message} (is ${config.gateway.listen.host}:${config.gateway.listen.port} or the admin port ${config.gateway.admin.port} in use?)`,
          );
        });
      } catch (err) {
        await stopAll();
        throw err;
      }
      ready = true;
      if (interrupted) return onSignal();
      run.stdout(
        banner(
          config,
          configPath,
          envoyBin.version,
          upstream,
          installSecret === undefined ? undefined : installSecretPath(configPath),
        ),
      );
      void envoy.exited.then((code) => {
        if (stopping) return;
        run.stderr(`modelgate: Envoy exited (${code}); stopping\n`);
        void stopAll().then(() => process.exit(1));
      });
    });
}

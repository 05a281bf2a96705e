/**
 * `modelgate serve`: the service (gRPC Check and health, HTTP health, metrics and model lists) on
 * one process, or on N worker processes sharing the ports (server/workers.ts). SIGTERM and SIGINT
 * drain: health goes NOT_SERVING, checks in flight are answered, then the process exits.
 */
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import * as v8 from 'node:v8';
import { Command } from 'commander';
import { ConfigError, parseConfig } from '../config/load';
import { startService, type Service } from '../server/service';
import { runWorkers } from '../server/workers';
import { configPathOf } from './envoy';
import { tuneHeap } from './heap-tuning';
import { CliError, once, usageError } from './errors';
import type { CliRun } from './io';
import { resolveStore } from './store-admin';

interface ServeOptions {
  readonly config?: string;
  readonly grpc?: string;
  readonly http?: string;
  readonly store?: string;
  readonly workers?: string;
}

export function serveCommand(run: CliRun): Command {
  return new Command('serve')
    .description('run the service: gRPC Check and health, HTTP health, metrics and model lists')
    .option(
      '--config <file>',
      'the config file (default: $MODELGATE_CONFIG, else envoy/modelgate.yaml)',
      once('--config'),
    )
    .option(
      '--grpc <host:port>',
      "the gRPC listener (default: $MODELGATE_GRPC_ADDR, else the config's server.grpc, 127.0.0.1:9191)",
      once('--grpc'),
    )
    .option(
      '--http <host:port>',
      "the HTTP listener (default: $MODELGATE_HTTP_ADDR, else the config's server.http, 127.0.0.1:9192)",
      once('--http'),
    )
    .option(
      '--store <url>',
      "postgres://... or file (default: $MODELGATE_STORE, then $DATABASE_URL, then the config's store:)",
      once('--store'),
    )
    .option('--workers <n>', 'worker processes sharing the ports, 1 to 64 (default: 1)', once('--workers'))
    .action(async (options: ServeOptions) => {
      tuneHeap(process.execArgv, run.env.NODE_OPTIONS, v8.setFlagsFromString);
      const workers = Number(options.workers ?? 1);
      if (!Number.isInteger(workers) || workers < 1 || workers > 64)
        throw usageError('--workers must be an integer from 1 to 64');
      const env = run.env;
      const configPath = configPathOf(options.config, env);
      // Same order as the store commands: --store, MODELGATE_STORE, DATABASE_URL, else the config's `store:`.
      const override =
        options.store || env.MODELGATE_STORE || env.DATABASE_URL ? resolveStore(options.store, env) : undefined;
      if (workers > 1 && cluster.isPrimary) {
        if (fileMeter(configPath, override?.mode, env)) {
          throw usageError(
            `--workers ${workers} with the meter on the file store: each worker would keep its own balances, so a key could spend ${workers} times its balance; run one process (no --workers), or keep balances on PostgreSQL (--store postgres://...)`,
          );
        }
        return runWorkers(workers, run.stderr);
      }
      let service: Service;
      try {
        service = await startService({
          configPath,
          grpcAddress: options.grpc ?? env.MODELGATE_GRPC_ADDR,
          httpAddress: options.http ?? env.MODELGATE_HTTP_ADDR,
          storeUrl: override && (override.mode === 'file' ? 'file' : override.url),
          storeSource: override && override.mode === 'postgres' ? override.source : undefined,
          env,
        });
      } catch (err) {
        if (err instanceof CliError) throw err;
        if (err instanceof ConfigError) throw new CliError(`${configPath}: ${err.message}`);
        throw new CliError(err instanceof Error ? err.message : String(err));
      }
      drainOnSignals(service);
    });
}

/**
 * The meter is on and its balances are on the file store (they live in one process's memory). A
 * config that does not load says nothing here: the workers report it as a single process would.
 */
function fileMeter(configPath: string, storeMode: 'file' | 'postgres' | undefined, env: NodeJS.ProcessEnv): boolean {
  let config;
  try {
    config = parseConfig(readFileSync(configPath, 'utf8'), env);
  } catch {
    // the workers report it, as a single process would (above)
    return false;
  }
  return config.meter.enabled && (storeMode ? storeMode === 'file' : config.store.kind !== 'postgres');
}

/** SIGTERM or SIGINT: drain, then exit 0. A repeated signal is ignored. */
function drainOnSignals(service: Service): void {
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    service.logger.info({ signal }, 'draining: health NOT_SERVING, answering in-flight checks');
    void service.close(5000).then(() => process.exit(0));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

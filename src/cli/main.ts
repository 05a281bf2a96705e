#!/usr/bin/env node
/**
 * The `modelgate` command: serve, explain, envoy-check, and the admin commands (keys, groups,
 * balance, migrate; see store-admin.ts).
 */
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { runAdminCommand } from './store-admin';
import { resolveStore } from './args';
import { serveClusterMetrics } from '../server/cluster-metrics';
import { ConfigError } from '../config/load';
import { checkEnvoyConfig } from '../envoy/config-check';
import { renderDecision, sendCheck } from './explain';
import { startService } from '../server/service';

const USAGE = `usage:
  modelgate serve [--config FILE] [--grpc HOST:PORT] [--http HOST:PORT] [--store URL] [--workers N]
  modelgate explain [--addr HOST:PORT] [-H 'Name: value']... METHOD PATH [BODY|@FILE]
  modelgate envoy-check [FILE]
  modelgate keys new --group G [--id ID] [--balance N] [--expires ISO] [--store URL] [--json]
  modelgate keys list|disable|enable|rotate|delete ...   (PostgreSQL store)
  modelgate groups set|list|remove ...                     (PostgreSQL store)
  modelgate balance show|set|add ...                       (PostgreSQL store)
  modelgate migrate [--store URL]
env: MODELGATE_CONFIG, MODELGATE_GRPC_ADDR, MODELGATE_HTTP_ADDR, MODELGATE_STORE (or DATABASE_URL)`;

function fail(message: string, code = 2): never {
  process.stderr.write(`modelgate: ${message}\n`);
  process.exit(code);
}

async function serve(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { config: { type: 'string' }, grpc: { type: 'string' }, http: { type: 'string' }, store: { type: 'string' }, workers: { type: 'string' } },
    strict: true,
  });
  const configPath = values.config ?? process.env.MODELGATE_CONFIG ?? 'envoy/modelgate.yaml';
  const workers = Number(values.workers ?? 1);
  if (!Number.isInteger(workers) || workers < 1 || workers > 64) fail('--workers must be an integer from 1 to 64');
  if (workers > 1 && cluster.isPrimary) {
    // node:cluster shares the listening sockets: every worker serves the same gRPC and HTTP ports.
    for (let i = 0; i < workers; i++) cluster.fork();
    serveClusterMetrics();
    let stopping = false;
    cluster.on('exit', (w, code) => {
      if (!stopping) {
        process.stderr.write(`modelgate: worker ${w.process.pid} exited (${code}); restarting it\n`);
        cluster.fork();
      }
    });
    // A signal may reach the whole process group (systemd, a terminal): repeats are ignored, not fatal.
    const stop = (): void => {
      if (stopping) return;
      stopping = true;
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
      setTimeout(() => process.exit(0), 6000).unref();
      cluster.on('exit', () => Object.keys(cluster.workers ?? {}).length === 0 && process.exit(0));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    return;
  }
  let service;
  try {
    // Same order as the admin commands: --store, MODELGATE_STORE, DATABASE_URL, else the config's `store:`.
    const override = values.store || process.env.MODELGATE_STORE || process.env.DATABASE_URL ? resolveStore(values.store, process.env) : undefined;
    service = await startService({
      configPath,
      grpcAddress: values.grpc ?? process.env.MODELGATE_GRPC_ADDR ?? '127.0.0.1:9191',
      httpAddress: values.http ?? process.env.MODELGATE_HTTP_ADDR ?? '127.0.0.1:9192',
      storeUrl: override && (override.mode === 'file' ? 'file' : override.url),
    });
  } catch (err) {
    if (err instanceof ConfigError) fail(`${configPath}: ${err.message}`, 1);
    fail(err instanceof Error ? err.message : String(err), 1);
  }
  const s = service;
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    s.logger.info({ signal }, 'draining: health NOT_SERVING, answering in-flight checks');
    void s.close(5000).then(() => process.exit(0));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

async function explain(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { addr: { type: 'string' }, header: { type: 'string', short: 'H', multiple: true } },
    allowPositionals: true,
    strict: true,
  });
  const [method, path, bodyArg] = positionals;
  if (!method || !path || positionals.length > 3) fail(`explain takes METHOD PATH [BODY]\n${USAGE}`);
  const headers = (values.header ?? []).map((h): [string, string] => {
    const colon = h.indexOf(':');
    if (colon <= 0) fail(`-H wants 'Name: value', got ${JSON.stringify(h.slice(0, 40))}`);
    return [h.slice(0, colon).trim(), h.slice(colon + 1).trim()];
  });
  const body = bodyArg?.startsWith('@') ? readFileSync(bodyArg.slice(1)) : bodyArg;
  const line = { method: method.toUpperCase(), path, headers, body };
  const addr = values.addr ?? process.env.MODELGATE_GRPC_ADDR ?? '127.0.0.1:9191';
  try {
    process.stdout.write(renderDecision(line, await sendCheck(addr, line)) + '\n');
  } catch (err) {
    fail(`${addr}: ${err instanceof Error ? err.message : String(err)}`, 1);
  }
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve': return serve(rest);
    case 'explain': return explain(rest);
    case 'envoy-check': {
      const file = rest[0] ?? 'envoy/envoy.yaml';
      const r = checkEnvoyConfig(readFileSync(file, 'utf8'));
      if (r.ok) process.stdout.write(`${file}: valid envoy.config.bootstrap.v3.Bootstrap\n`);
      else process.stderr.write(`${file}: ${r.errors.length} problem(s):\n  - ${r.errors.join('\n  - ')}\n`);
      if (r.warnings.length > 0) process.stderr.write(`${file}: ${r.warnings.length} warning(s):\n  - ${r.warnings.join('\n  - ')}\n`);
      process.exit(r.ok ? 0 : 1);
    }
    case 'keys': case 'groups': case 'balance': case 'migrate': {
      const code = await runAdminCommand(argv, { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s), env: process.env });
      process.exit(code);
    }
    case undefined: case 'help': case '--help': case '-h':
      process.stdout.write(USAGE + '\n');
      return;
    default:
      fail(`unknown command ${JSON.stringify(command)}\n${USAGE}`);
  }
}

void main(process.argv.slice(2)).catch((err: unknown) => fail(err instanceof Error ? err.message : String(err), 1));

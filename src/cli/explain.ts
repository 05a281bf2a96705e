/**
 * `modelgate explain`: sends one CheckRequest, built as Envoy would build it for an HTTP request,
 * to a running service (authenticated as Envoy is, with --config), and prints the decision. Secrets in the answer (an
 * upstream credential)
 * are masked; the client's key is never printed.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { Command } from 'commander';
import type { CheckResponse__Output } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import { HEADER } from '../contract/headers';
import { SHOULD_RETRY_HEADER } from '../contract/retry-advice';
import { buildCheckRequest, type HttpRequestLine } from '../envoy/check-request';
import { authPackageDefinition, authorizationClient } from '../envoy/protos';
import { DRY_RUN_REQUEST_ID_PREFIX } from '../meter/admission';
import { configSetsGrpcAuth, GRPC_SECRET_HEADER, GrpcAuthError, readInstallSecret } from '../config/grpc-auth';
import { configPathOf, readConfig, renderInput } from './envoy';
import { CliError, once, usageError } from './errors';
import type { CliRun } from './io';

/**
 * How `explain` authenticates to the gRPC port, as Envoy does (docs/security.md): the secret, and Envoy's client
 * certificate.
 */
export interface PortAuth {
  readonly secret?: string;
  readonly tls?: {
    readonly cert: Buffer;
    readonly key: Buffer;
    readonly ca: Buffer;
    readonly serverName: string | null;
  };
}

/** Sends one CheckRequest to `address` and resolves with Envoy's view of the answer. */
export function sendCheck(
  address: string,
  line: HttpRequestLine,
  timeoutMs = 5000,
  auth: PortAuth = {},
): Promise<CheckResponse__Output> {
  const Client = authorizationClient();
  const creds = auth.tls
    ? grpc.credentials.createSsl(auth.tls.ca, auth.tls.key, auth.tls.cert)
    : grpc.credentials.createInsecure();
  const client = new Client(
    address,
    creds,
    auth.tls?.serverName ? { 'grpc.ssl_target_name_override': auth.tls.serverName } : {},
  );
  const metadata = new grpc.Metadata();
  if (auth.secret !== undefined) metadata.set(GRPC_SECRET_HEADER, `Bearer ${auth.secret}`);
  return new Promise((resolve, reject) => {
    // A dry run for the meter: decided as any Check, but nothing is held or reserved for a request
    // that never goes upstream (Envoy always sets its own x-request-id, so no client can send this).
    const dryRun = {
      ...line,
      headers: [
        ...(line.headers ?? []).filter(([k]) => k.toLowerCase() !== 'x-request-id'),
        ['x-request-id', `${DRY_RUN_REQUEST_ID_PREFIX}${randomUUID()}`] as const,
      ],
    };
    client.Check(buildCheckRequest(dryRun), metadata, { deadline: Date.now() + timeoutMs }, (err, res) => {
      client.close();
      if (err) reject(new Error(`Check failed: ${err.details || err.message}`));
      else resolve(res!);
    });
  });
}

/** envoy.type.v3.StatusCode arrives as its name (enums: String); print the number. */
function statusNumber(code: unknown): string {
  if (typeof code === 'number') return String(code);
  const def = authPackageDefinition()['envoy.type.v3.StatusCode'] as unknown as {
    type?: { value?: { name: string; number: number }[] };
  };
  return String(def.type?.value?.find((v) => v.name === code)?.number ?? code);
}

/** Headers whose values are shown: modelgate's own and the denial's plain ones (anything else may be a credential). */
const SHOWN_AS_IS: ReadonlySet<string> = new Set([
  ...Object.values(HEADER),
  'content-type',
  'www-authenticate',
  'allow',
  SHOULD_RETRY_HEADER,
  'retry-after',
]);

/** Renders a CheckResponse for people (what Envoy would do with the request). */
export function renderDecision(line: HttpRequestLine, res: CheckResponse__Output): string {
  const out: string[] = [];
  const show = (k: string, v: string): string =>
    SHOWN_AS_IS.has(k) ? `${k}: ${v}` : `${k}: <set, ${v.length} characters, not shown>`;
  // Metadata values as they are: the meter's marks are numbers (maxInput) and booleans (referencedInput).
  const meta = Object.fromEntries(
    Object.entries(res.dynamic_metadata?.fields ?? {}).map(([k, v]) => [
      k,
      v.stringValue ?? v.numberValue ?? v.boolValue ?? '',
    ]),
  );
  if (!res.status?.code) {
    const ok = res.ok_response;
    out.push(`${line.method} ${line.path.split('?')[0]} -> ALLOW (Envoy forwards it upstream)`);
    for (const h of ok?.headers ?? [])
      out.push(`  set upstream header     ${show(h.header?.key ?? '', h.header?.value ?? '')}`);
    if (ok?.headers_to_remove?.length) out.push(`  remove upstream headers ${ok.headers_to_remove.join(', ')}`);
    if (ok?.query_parameters_to_remove?.length)
      out.push(`  remove query parameters ${ok.query_parameters_to_remove.join(', ')}`);
  } else {
    const denied = res.denied_response;
    const headers = Object.fromEntries(
      (denied?.headers ?? []).map((h) => [h.header?.key ?? '', h.header?.value ?? '']),
    );
    out.push(
      `${line.method} ${line.path.split('?')[0]} -> DENY ${statusNumber(denied?.status?.code)} ${headers[HEADER.reason] ?? ''}`,
    );
    out.push(`  hint: ${headers[HEADER.hint] ?? ''}`);
    for (const h of denied?.headers ?? [])
      out.push(`  response header ${show(h.header?.key ?? '', h.header?.value ?? '')}`);
    out.push(`  body: ${denied?.body ?? ''}`);
  }
  out.push(`  metadata: ${JSON.stringify(meta)}`);
  return out.join('\n');
}

/** Where and how to reach the gRPC port, as the config's Envoy does; nothing without a config. */
export interface PortOfConfig {
  /** gateway.authz (default server.grpc), a wildcard host as loopback. */
  readonly address?: string;
  readonly auth: PortAuth;
}

/**
 * The port a config names and its credentials, read: the secret (the config's grpc.secret, else the
 * install secret `modelgate up` made beside the config) and Envoy's client certificate.
 */
export function portOfConfig(configPath: string | undefined, env: NodeJS.ProcessEnv): PortOfConfig {
  if (configPath === undefined) return { auth: {} };
  // Upstream credentials are not needed here: their variables count as set (as for envoy-config).
  const config = readConfig(configPath, new Proxy(env, { get: (t, k: string) => t[k] || 'set' }));
  let secret: string | undefined;
  try {
    secret =
      renderInput(config, configPath, env).grpcSecret ??
      (configSetsGrpcAuth(config) ? undefined : readInstallSecret(configPath));
  } catch (err) {
    if (err instanceof GrpcAuthError) throw new CliError(`${configPath}: ${err.message}`);
    throw err;
  }
  const t = config.gateway.authzTls;
  const file = (p: string): Buffer => {
    try {
      return readFileSync(resolve(dirname(configPath), p));
    } catch (err) {
      throw new CliError(
        `${configPath}: gateway.authzTls: ${p} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  };
  const { host, port } = config.gateway.authz;
  const shown = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '[::1]' : host.includes(':') ? `[${host}]` : host;
  return {
    address: `${shown}:${port}`,
    auth: {
      secret,
      tls: t
        ? { cert: file(t.certFile), key: file(t.keyFile), ca: file(t.caFile), serverName: t.serverName }
        : undefined,
    },
  };
}

/**
 * The config explain reads: --config, $MODELGATE_CONFIG, else envoy/modelgate.yaml when it is there
 * and loads (what `npm start` runs: its port and install secret), else none.
 */
function explainConfigPath(option: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  const named = option ?? env.MODELGATE_CONFIG;
  if (named !== undefined) return named;
  const demo = configPathOf(undefined, env);
  try {
    portOfConfig(demo, env);
    return demo;
  } catch {
    // no demo config, or one that does not load: explain runs without a config
    return undefined;
  }
}

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

/** `modelgate explain [--addr HOST:PORT] [-H 'Name: value']... METHOD PATH [BODY|@FILE]`. */
export function explainCommand(run: CliRun): Command {
  return new Command('explain')
    .description('show what a running modelgate answers to one HTTP request')
    .argument('<method>', 'the HTTP method, e.g. POST')
    .argument('<path>', 'the path with its query, e.g. /v1/chat/completions')
    .argument('[body]', 'the request body, or @FILE to read it from a file')
    .option(
      '--addr <host:port>',
      "the gRPC address of modelgate (default: $MODELGATE_GRPC_ADDR, else the config's gateway.authz or server.grpc, else 127.0.0.1:9191)",
      once('--addr'),
    )
    .option(
      '-H, --header <name: value>',
      "a request header, e.g. 'Authorization: Bearer sk-mg-...' (repeatable)",
      collect,
    )
    .option(
      '--config <file>',
      "reach and authenticate as the config's Envoy does: its gRPC address, grpc.secret (else the secret \`modelgate up\` made beside it) and gateway.authzTls (default: $MODELGATE_CONFIG, else envoy/modelgate.yaml if it loads; without any, 127.0.0.1:9191 and no authentication)",
      once('--config'),
    )
    .addHelpText('after', "\nThe client's key is never printed, and upstream credentials in the answer are masked.")
    .action(
      async (
        method: string,
        path: string,
        bodyArg: string | undefined,
        options: { addr?: string; header?: string[]; config?: string },
      ) => {
        const headers = (options.header ?? []).map((h): [string, string] => {
          const colon = h.indexOf(':');
          if (colon <= 0) throw usageError(`-H wants 'Name: value', got ${JSON.stringify(h.slice(0, 40))}`);
          return [h.slice(0, colon).trim(), h.slice(colon + 1).trim()];
        });
        const body = bodyArg?.startsWith('@') ? readFileSync(bodyArg.slice(1)) : bodyArg;
        const line = { method: method.toUpperCase(), path, headers, body };
        const port = portOfConfig(explainConfigPath(options.config, run.env), run.env);
        const addr = options.addr ?? run.env.MODELGATE_GRPC_ADDR ?? port.address ?? '127.0.0.1:9191';
        let answer: CheckResponse__Output;
        try {
          answer = await sendCheck(addr, line, 5000, port.auth);
        } catch (err) {
          throw new CliError(`${addr}: ${err instanceof Error ? err.message : String(err)}`);
        }
        run.stdout(renderDecision(line, answer) + '\n');
      },
    );
}

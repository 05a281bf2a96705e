/**
 * The one Envoy bundle every setup runs: `renderBootstrap()` of the demo config (what
 * `modelgate envoy-config` writes), with the listener and admin on free ports and every upstream
 * pointed at the setup's target. A setup changes only what it must (bench/README-e2e.md,
 * "The bundle of each setup"):
 *
 * - no ext_authz filter (Envoy alone, and LiteLLM, which is itself the proxy);
 * - the authz cluster pointed at the no-op server or OPA-Envoy, without the grpc.health.v1 check
 *   (neither serves that service: Envoy would mark the host unhealthy and route in panic mode);
 * - `pack_as_bytes: false` for OPA-Envoy (its documented setting; see peers/README.md);
 * - the meter's filters and access log only in the metering rows (the config's `meter.enabled`).
 *
 * Envoy runs pinned with taskset, `--concurrency` workers, its access log (stdout) to a file.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Config } from '../../src/config/load';
import { renderBootstrap, toYaml } from '../../src/envoy/render';
import { DECOMPRESSOR_FILTER, METER_FILTER } from '../../src/envoy/meter-filters';
import { CLUSTER, EXT_AUTHZ_FILTER } from '../../src/envoy/render-routes';
import { REQUEST_FILTER, REQUEST_METADATA_FILTER } from '../../src/envoy/request-mark';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface BundleOptions {
  /** Where the authz cluster points; undefined: no ext_authz filter at all. */
  readonly authz?: { readonly port: number; readonly healthCheck: boolean; readonly packAsBytes: boolean };
  /** modelgate's HTTP port (model lists); any port when there is no modelgate. */
  readonly httpPort: number;
  /** Every upstream family goes here. */
  readonly upstreamPort: number;
  /** The meter's filters and access log (needs modelgate as the authz target). */
  readonly meter: boolean;
  /**
   * Which of the meter's parts Envoy runs (to split its cost): all; without the decompressor; the
   * access log alone (no Lua tail capture: the meter then estimates every response).
   */
  readonly meterParts?: 'all' | 'nogzip' | 'log';
  /**
   * The rate limit filters (docs/rate-limits.md): kept only for the rate limit rows, so the other rows stay as they
   * were measured.
   */
  readonly rateLimits?: boolean;
  /**
   * Keep the client's credential headers on the way upstream (LiteLLM: the upstream is the
   * authorizer, and reads the key from them). The generated routes remove them.
   */
  readonly keepCredentialHeaders?: boolean;
  /** The gRPC port's secret, read (the config's grpc.secret), rendered into every call to modelgate. */
  readonly grpcSecret?: string;
}

/** The bundle as Envoy reads it, and what was changed from the generated one. */
export function renderBundle(config: Config, o: BundleOptions): { yaml: string; changes: string[] } {
  const up = { tls: false, host: '127.0.0.1', port: o.upstreamPort, caFile: '', cluster: null };
  const b = renderBootstrap({
    ...config,
    grpcSecret: o.grpcSecret,
    meter: { ...config.meter, enabled: o.meter },
    gateway: {
      ...config.gateway,
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      authz: { host: '127.0.0.1', port: o.authz?.port ?? 1 },
      http: { host: '127.0.0.1', port: o.httpPort },
      upstreams: { chat: up, messages: up, generative: up, alt: up },
      // As a production gateway is set up: hints name the public address, rendered into the bundle
      // (without it, a Lua filter writes the address each client used into hints: src/envoy/base-url-filter.ts).
      publicBaseUrl: config.gateway.publicBaseUrl ?? 'https://gateway.bench.example',
    },
  }) as Obj;
  const changes: string[] = [
    'listener and admin on free loopback ports; every upstream cluster at the stand-in; gateway.publicBaseUrl set',
  ];
  const hcm = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const authzCluster = (b.static_resources.clusters as Obj[]).find((c) => c.name === CLUSTER.authz)!;
  if (!o.authz) {
    hcm.http_filters = (hcm.http_filters as Obj[]).filter(
      (f) =>
        ![EXT_AUTHZ_FILTER, METER_FILTER, DECOMPRESSOR_FILTER, REQUEST_FILTER, REQUEST_METADATA_FILTER].includes(
          String(f.name),
        ),
    );
    delete authzCluster.health_checks;
    changes.push('no ext_authz filter (and no meter, no request mark)');
  } else {
    const ea = (hcm.http_filters as Obj[]).find((f) => f.name === EXT_AUTHZ_FILTER)!.typed_config;
    if (!o.authz.healthCheck) {
      delete authzCluster.health_checks;
      changes.push('no grpc_health_check on the authz cluster');
    }
    if (!o.authz.packAsBytes) {
      ea.with_request_body.pack_as_bytes = false;
      changes.push('with_request_body.pack_as_bytes: false');
    }
  }
  if (process.env.BENCH_NO_STDOUT_LOG) {
    // An experiment (bench/README.md, "The Check's answer"): what Envoy's JSON access log costs.
    hcm.access_log = (hcm.access_log as Obj[]).filter((l) => l.name !== 'envoy.access_loggers.stdout');
    changes.push('no JSON access log (BENCH_NO_STDOUT_LOG)');
  }
  if (o.keepCredentialHeaders) {
    for (const r of hcm.route_config.virtual_hosts[0].routes as Obj[]) delete r.request_headers_to_remove;
    changes.push("no request_headers_to_remove on the routes (the client's key goes to LiteLLM)");
  }
  if (o.meter) {
    const parts = o.meterParts ?? 'all';
    if (parts !== 'all')
      hcm.http_filters = (hcm.http_filters as Obj[]).filter(
        (f) => f.name !== DECOMPRESSOR_FILTER && (parts === 'nogzip' || f.name !== METER_FILTER),
      );
    if (process.env.BENCH_METER_CAPTURE === 'native') nativeCapture(hcm, changes);
    changes.push(
      parts === 'all'
        ? "the meter's filters (Lua tail capture, gzip decompressor) and its gRPC access log"
        : parts === 'nogzip'
          ? "the meter's Lua tail capture and its gRPC access log (no decompressor)"
          : "the meter's gRPC access log only (no Lua, no decompressor)",
    );
  }
  if (!o.rateLimits) {
    hcm.http_filters = (hcm.http_filters as Obj[]).filter((f) => !String(f.name).startsWith('modelgate.ratelimit_'));
    b.static_resources.clusters = (b.static_resources.clusters as Obj[]).filter((c) => c.name !== CLUSTER.ratelimit);
    for (const r of hcm.route_config.virtual_hosts[0].routes as Obj[]) {
      const pf = r.typed_per_filter_config as Obj | undefined;
      if (pf) for (const k of Object.keys(pf)) if (k.startsWith('modelgate.ratelimit_')) delete pf[k];
    }
  } else changes.push("the rate limit filters (tokens, then requests) calling the engine's cluster");
  if (config.grpc.secret) changes.push('the gRPC secret in every call to modelgate (grpc_service initial_metadata)');
  if (config.gateway.authzTls) changes.push("mTLS to modelgate's gRPC port (the authz cluster's TLS transport socket)");
  return { yaml: toYaml(b, ' modelgate end-to-end benchmark: the generated bundle, see bench/e2e/envoy.ts'), changes };
}

/**
 * An experiment (bench/README.md, "Metering: Envoy's own filters instead of the Lua tail"): the Lua
 * tail capture replaced by Envoy's native filters that lift a usage object into dynamic metadata:
 * json_to_metadata's response rules for JSON answers (one rule per count; it holds the answer until
 * its end to parse it) and sse_to_metadata's JSON parser for event streams (every event parsed; a
 * work-in-progress API in Envoy 1.40). It measures Envoy's CPU per request; the meter gets no tail,
 * so modelgate estimates every answer (its figures are not comparable in this variant).
 */
function nativeCapture(hcm: Obj, changes: string[]): void {
  const filters = hcm.http_filters as Obj[];
  const at = filters.findIndex((f) => f.name === METER_FILTER);
  if (at < 0) return;
  const ns = METER_FILTER;
  const rule = (key: string): Obj => ({ selectors: [{ key }], on_present: { metadata_namespace: ns, key } });
  // json_to_metadata writes numbers, strings and booleans only (an object is "missing"): one rule per
  // count the meter reads from an answer (docs/metering.md, "What is read from each response").
  const counts: string[][] = [
    ['usage', 'prompt_tokens'],
    ['usage', 'completion_tokens'],
    ['usage', 'prompt_tokens_details', 'cached_tokens'],
    ['usage', 'input_tokens'],
    ['usage', 'output_tokens'],
    ['usage', 'input_tokens_details', 'cached_tokens'],
    ['usage', 'cache_read_input_tokens'],
    ['usage', 'cache_creation_input_tokens'],
    ['usageMetadata', 'promptTokenCount'],
    ['usageMetadata', 'candidatesTokenCount'],
    ['usageMetadata', 'thoughtsTokenCount'],
    ['usageMetadata', 'cachedContentTokenCount'],
  ];
  const countRule = (path: string[]): Obj => ({
    selectors: path.map((key) => ({ key })),
    on_present: { metadata_namespace: ns, key: path.join('.'), type: 'NUMBER' },
  });
  filters.splice(
    at,
    1,
    {
      name: METER_FILTER,
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.filters.http.json_to_metadata.v3.JsonToMetadata',
        response_rules: { rules: counts.map(countRule), allow_content_types: ['application/json'] },
      },
    },
    {
      name: `${METER_FILTER}_sse`,
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.filters.http.sse_to_metadata.v3.SseToMetadata',
        response_rules: {
          content_parser: {
            name: 'envoy.content_parsers.json',
            typed_config: {
              '@type': 'type.googleapis.com/envoy.extensions.content_parsers.json.v3.JsonContentParser',
              rules: [{ rule: rule('usage') }, { rule: rule('usageMetadata') }],
            },
          },
        },
      },
    },
  );
  changes.push(
    'the Lua tail capture replaced by json_to_metadata (answers) and sse_to_metadata (streams): usage counts only (BENCH_METER_CAPTURE=native)',
  );
}

export interface RunningEnvoy {
  readonly pid: number;
  readonly port: number;
  readonly adminUrl: string;
  stop(): Promise<void>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function getText(url: string): Promise<string | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return res.ok ? await res.text() : undefined;
  } catch {
    return undefined;
  }
}

/** Starts Envoy on `yaml` (pinned to `cpus`), its access log to `accessLog`; resolves once LIVE. */
export async function startPinnedEnvoy(o: {
  binary: string;
  yaml: string;
  dir: string;
  name: string;
  cpus?: string;
  concurrency: number;
  accessLog: string;
}): Promise<RunningEnvoy> {
  const configFile = path.join(o.dir, `envoy-${o.name}.yaml`);
  const adminFile = path.join(o.dir, `envoy-${o.name}.admin`);
  rmSync(adminFile, { force: true });
  writeFileSync(configFile, o.yaml);
  const args = [
    '-c',
    configFile,
    '--disable-hot-restart',
    '--admin-address-path',
    adminFile,
    '-l',
    'warn',
    '--concurrency',
    String(o.concurrency),
  ];
  const out = openSync(o.accessLog, 'w');
  const child: ChildProcess = o.cpus
    ? spawn('taskset', ['-c', o.cpus, o.binary, ...args], { stdio: ['ignore', out, 'pipe'] })
    : spawn(o.binary, args, { stdio: ['ignore', out, 'pipe'] });
  closeSync(out);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  let gone = false;
  void exited.then(() => (gone = true));
  const stop = async (): Promise<void> => {
    if (!gone) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    }
  };
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline && !gone) {
    let admin: string | undefined;
    try {
      admin = readFileSync(adminFile, 'utf8').trim() || undefined;
    } catch {
      /* not yet */
    }
    if (admin && (await getText(`http://${admin}/ready`))?.trim() === 'LIVE') {
      const ls = JSON.parse((await getText(`http://${admin}/listeners?format=json`)) ?? '{}') as Obj;
      const port = ls.listener_statuses?.[0]?.local_address?.socket_address?.port_value as number | undefined;
      if (port) return { pid: child.pid!, port, adminUrl: `http://${admin}`, stop };
    }
    await sleep(50);
  }
  await stop();
  throw new Error(`Envoy ${o.name} did not start: ${stderr.trim().split('\n').slice(-3).join(' | ')}`);
}

/** Envoy's downstream response counters (2xx/4xx/5xx) of the listener's connection manager. */
export async function envoyResponseCounts(adminUrl: string): Promise<Record<string, number>> {
  const text = (await getText(`${adminUrl}/stats?filter=^http\\.modelgate\\.downstream_rq_[0-9]xx$`)) ?? '';
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/downstream_rq_(\dxx): (\d+)/g)) out[m[1]] = Number(m[2]);
  return out;
}

/** Envoy's version line (`envoy --version`). */
export function envoyVersion(binary: string): string {
  const r = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  return /version: (\S+)/.exec(r.stdout)?.[1] ?? 'unknown';
}

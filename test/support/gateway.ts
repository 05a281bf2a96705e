/**
 * The whole gateway for an end-to-end test file: a recording demo upstream, modelgate (in this
 * process, or as a real `modelgate serve` process for fail-closed drills), and a real Envoy on the
 * bundle that `modelgate envoy-config` renders for this config, all on free ports. Requests go to
 * Envoy's listener exactly as a client sends them; the test then checks what the client got and
 * what the upstream received.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import * as http from 'node:http';
import * as http2 from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, inject } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { readGrpcSecret } from '../../src/config/grpc-auth';
import { parseConfig, UPSTREAM_FAMILIES, type UpstreamFamily } from '../../src/config/load';
import {
  startDemoUpstream,
  type DemoUpstream,
  type DemoUpstreamOptions,
  type ReceivedRequest,
} from '../../src/demo/upstream';
import { startEnvoy, type EnvoyProcess } from '../../src/envoy/process';
import { renderEnvoyYaml } from '../../src/envoy/render';
import { startService, type Service } from '../../src/server/service';
import type { Store } from '../../src/store/store';
import { DEMO_CONFIG, LogSink } from './service-harness';

/** The Envoy binary found by the global setup, or why there is none. */
export function envoyBinary(): string {
  const e = inject('envoy');
  if ('missing' in e) throw new Error(e.missing);
  return e.path;
}

/** The Envoy version the end-to-end files run on. */
export function envoyVersion(): string {
  const e = inject('envoy');
  return 'missing' in e ? 'none' : e.version;
}

/**
 * `describe` for an end-to-end file: runs it when the global setup found Envoy; otherwise (never in
 * CI, where a missing Envoy fails the run) skips it, the setup having said why in one line.
 */
export const describeE2E: typeof describe = (
  'missing' in inject('envoy') ? describe.skip : describe
) as typeof describe;

/** What an upstream received, and which upstream cluster (protocol family) it came through. */
export interface Received extends ReceivedRequest {
  readonly family: UpstreamFamily;
}

const ROOT = join(__dirname, '..', '..');

export interface GatewayOptions {
  /** The modelgate config as YAML (default: the demo config), or a change to the demo config's text. */
  readonly config?: string | ((demo: string) => string);
  /** 'process' runs `modelgate serve` as a child (it can be killed, frozen, restarted). Default in-process. */
  readonly modelgate?: 'in-process' | 'process';
  readonly workers?: number;
  /** Environment of modelgate (upstream credential variables). */
  readonly env?: NodeJS.ProcessEnv;
  readonly upstream?: Omit<DemoUpstreamOptions, 'onRequest'>;
  /** Envoy worker threads (default 1: test files run in parallel on small machines). */
  readonly concurrency?: number;
  /** Changes the rendered bundle before Envoy runs it (drills: a meter that cannot be reached). */
  readonly envoyConfig?: (yaml: string) => string;
  /** In-process only: the store modelgate uses instead of the config's (failing or hanging stores). */
  readonly store?: Store;
  /** Families sent somewhere other than their recording upstream (e.g. a closed port). */
  readonly upstreamTargets?: Partial<Record<UpstreamFamily, { readonly host: string; readonly port: number }>>;
  /**
   * Changes the rendered bundle before Envoy runs it (e.g. an upstream cluster pointed at a test's
   * own HTTP/2 server); `envoyYaml` is then the edited text, the one Envoy runs.
   */
  readonly editEnvoy?: (bootstrap: Record<string, any>) => void; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** Process only: `serve --store URL` (a PostgreSQL store) instead of the config file's keys. */
  readonly storeUrl?: string;
  /** Process only: keep at most this many of modelgate's last log lines (long drills). Default: all. */
  readonly keepLogLines?: number;
}

export interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
  readonly text: string;
  json(): any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export interface SendOptions {
  /** [name, value] pairs, sent as given (repeats stay separate lines). */
  readonly headers?: ReadonlyArray<readonly [string, string]>;
  readonly body?: string | Buffer;
  /** h2c with prior knowledge instead of HTTP/1.1. */
  readonly http2?: boolean;
}

export interface ModelgateHandle {
  readonly grpcAddress: string;
  readonly httpAddress: string;
  /** In-process only. */
  readonly service?: Service;
  /** Log lines (JSON text) modelgate wrote. */
  logLines(): string[];
  /** Process only: signals and restarts. */
  readonly pid?: number;
  kill(signal: NodeJS.Signals): void;
  /** Process only: starts it again on the same ports after a kill. */
  restart(): Promise<void>;
  /** Process only: stop reading its stdout (a stuck log reader: the pipe fills), and read again. */
  pauseOutput?(): void;
  resumeOutput?(): void;
  close(): Promise<void>;
}

export interface Gateway {
  /** http://127.0.0.1:<port>: the base address clients are configured with. */
  readonly baseUrl: string;
  readonly envoy: EnvoyProcess;
  readonly modelgate: ModelgateHandle;
  /** Every request an upstream received, oldest first, with the family (cluster) it came through. */
  readonly received: Received[];
  /** One demo upstream per family, so a test sees which cluster Envoy chose. */
  readonly upstreams: Readonly<Record<UpstreamFamily, DemoUpstream>>;
  /** Envoy's access-log lines, parsed. */
  accessLog(): Array<Record<string, unknown>>;
  /**
   * The access log once `ok` holds for it: Envoy writes it every 20 ms here, later on a busy
   * machine, so a test waits for the lines it expects instead of sleeping (generous timeout).
   */
  accessLogWhen(
    ok: (log: Array<Record<string, unknown>>) => boolean,
    timeoutMs?: number,
  ): Promise<Array<Record<string, unknown>>>;
  /** Envoy's raw stdout and stderr text. */
  envoyOutput(): string;
  /** The Envoy bundle this gateway runs (as `modelgate envoy-config` renders it for these ports). */
  readonly envoyYaml: string;
  /** The names of the rendered routes, in order. */
  routeNames(): string[];
  /** Configuration file modelgate runs on (rewrite it to hot-reload). */
  readonly configPath: string;
  send(method: string, path: string, opts?: SendOptions): Promise<Reply>;
  close(): Promise<void>;
}

const waitFor = async (what: string, ok: () => boolean, timeoutMs = 15_000): Promise<void> => {
  const until = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

async function startModelgateProcess(
  configPath: string,
  env: NodeJS.ProcessEnv,
  workers: number,
  ports?: { grpc: string; http: string },
  storeUrl?: string,
  keepLogLines = Infinity,
): Promise<ModelgateHandle> {
  const lines: string[] = [];
  let grpcAddress = ports?.grpc ?? '';
  let httpAddress = ports?.http ?? '';
  let child: ChildProcess;
  let listening = 0;
  const launch = async (): Promise<void> => {
    child = spawn(
      process.execPath,
      [
        join(ROOT, 'dist', 'src', 'cli', 'main.js'),
        'serve',
        '--config',
        configPath,
        '--grpc',
        grpcAddress || '127.0.0.1:0',
        '--http',
        httpAddress || '127.0.0.1:0',
        '--workers',
        String(workers),
        ...(storeUrl ? ['--store', storeUrl] : []),
      ],
      {
        env: { ...process.env, ...env, MODELGATE_STORE: 'file' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let buf = '';
    child.stdout!.on('data', (c: Buffer) => {
      buf += c.toString('utf8');
      let i;
      while ((i = buf.indexOf('\n')) !== -1) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        lines.push(line);
        if (lines.length > keepLogLines) lines.splice(0, lines.length - keepLogLines);
        if (line.includes('"modelgate listening"')) listening++;
        if (!grpcAddress && line.includes('"modelgate listening"')) {
          const l = JSON.parse(line) as { grpcAddress: string; httpAddress: string };
          grpcAddress = l.grpcAddress;
          httpAddress = l.httpAddress;
        }
      }
    });
    child.stderr!.on('data', (c: Buffer) => lines.push(c.toString('utf8')));
    const before = listening;
    await waitFor('modelgate to listen', () => listening > before);
  };
  await launch();
  return {
    get grpcAddress() {
      return grpcAddress;
    },
    get httpAddress() {
      return httpAddress;
    },
    get pid() {
      return child.pid;
    },
    logLines: () => lines,
    kill: (signal) => child.kill(signal),
    restart: launch,
    pauseOutput: () => child.stdout!.pause(),
    resumeOutput: () => child.stdout!.resume(),
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGCONT');
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
    },
  } as ModelgateHandle;
}

/** Starts upstream, modelgate and Envoy; call close() in afterAll. */
export async function startGateway(opts: GatewayOptions = {}): Promise<Gateway> {
  const received: Received[] = [];
  const upstreams = {} as Record<UpstreamFamily, DemoUpstream>;
  for (const family of UPSTREAM_FAMILIES) {
    upstreams[family] = await startDemoUpstream({
      chunkDelayMs: 5,
      ...opts.upstream,
      onRequest: (r) => received.push({ ...r, family }),
    });
  }
  const demo = readFileSync(DEMO_CONFIG, 'utf8');
  const yamlText = typeof opts.config === 'function' ? opts.config(demo) : (opts.config ?? demo);
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-e2e-'));
  const configPath = join(dir, 'modelgate.yaml');
  writeFileSync(configPath, yamlText);
  const env = { ...opts.env };

  let modelgate: ModelgateHandle;
  if (opts.modelgate === 'process' || (opts.workers ?? 1) > 1) {
    // Needs the build (npm test builds first).
    modelgate = await startModelgateProcess(
      configPath,
      env,
      opts.workers ?? 1,
      undefined,
      opts.storeUrl,
      opts.keepLogLines,
    );
  } else {
    const logs = new LogSink();
    const service = await startService({
      configPath,
      grpcAddress: '127.0.0.1:0',
      httpAddress: '127.0.0.1:0',
      logDestination: logs,
      env,
      watchIntervalMs: 50,
      store: opts.store,
    });
    modelgate = {
      grpcAddress: service.grpcAddress,
      httpAddress: service.httpAddress,
      service,
      logLines: () => logs.raw,
      kill: () => {
        throw new Error('an in-process modelgate cannot be signalled; use modelgate: "process"');
      },
      restart: () => Promise.reject(new Error('in-process modelgate cannot restart')),
      // Envoy is stopped first: no report can come any more.
      close: () => service.close(1000, 0),
    };
  }

  // The bundle for this config, pointed at this test's ports: what `modelgate envoy-config` renders.
  const config = parseConfig(yamlText, { ...process.env, ...env });
  const [gh, gp] = hostPort(modelgate.grpcAddress);
  const [hh, hp] = hostPort(modelgate.httpAddress);
  const target = (f: UpstreamFamily) => ({
    tls: false,
    host: '127.0.0.1',
    port: upstreams[f].port,
    caFile: '',
    cluster: null,
    ...opts.upstreamTargets?.[f],
  });
  let envoyYaml = renderEnvoyYaml({
    ...config,
    grpcSecret: readGrpcSecret(config, { env: { ...process.env, ...env }, configPath }),
    gateway: {
      ...config.gateway,
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      authz: { host: gh, port: gp },
      http: { host: hh, port: hp },
      upstreams: {
        chat: target('chat'),
        messages: target('messages'),
        generative: target('generative'),
        alt: target('alt'),
      },
    },
  });
  if (opts.envoyConfig) envoyYaml = opts.envoyConfig(envoyYaml);
  if (opts.editEnvoy) {
    const bootstrap = parseYaml(envoyYaml) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    opts.editEnvoy(bootstrap);
    envoyYaml = stringifyYaml(bootstrap);
  }
  let out = '';
  const envoy = await startEnvoy({
    binary: envoyBinary(),
    config: envoyYaml,
    concurrency: opts.concurrency ?? 1,
    // The access log is read by tests: flushed every 20 ms instead of Envoy's default 10 s.
    extraArgs: ['--file-flush-interval-msec', '20'],
    onStdout: (c) => (out += c.toString('utf8')),
    onStderr: (c) => (out += c.toString('utf8')),
  });
  const baseUrl = envoy.listenerUrl;

  return {
    baseUrl,
    envoy,
    modelgate,
    upstreams,
    received,
    configPath,
    envoyYaml,
    routeNames: () => {
      const hcm = (parseYaml(envoyYaml) as any).static_resources.listeners[0].filter_chains[0].filters[0].typed_config; // eslint-disable-line @typescript-eslint/no-explicit-any
      return (hcm.route_config.virtual_hosts[0].routes as Array<{ name: string }>).map((r) => r.name);
    },
    accessLog: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    async accessLogWhen(ok, timeoutMs = 30_000) {
      const read = () =>
        out
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as Record<string, unknown>);
      const until = Date.now() + timeoutMs;
      while (!ok(read()) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      return read();
    },
    envoyOutput: () => out,
    send: (method, path, o = {}) => send(baseUrl, method, path, o),
    async close() {
      await recordRequestCount(envoy.adminUrl);
      await envoy.stop();
      await modelgate.close();
      for (const u of Object.values(upstreams)) await u.close();
    },
  };
}

/**
 * Adds the requests this gateway's Envoy took on its public listener to the run's tally (the
 * global setup prints the total at the end of `npm test`).
 */
async function recordRequestCount(adminUrl: string): Promise<void> {
  try {
    const stats = await (await fetch(`${adminUrl}/stats?filter=^http\\.modelgate\\.downstream_rq_total$`)).text();
    const m = /downstream_rq_total: (\d+)/.exec(stats);
    if (m) appendFileSync(inject('e2eTally'), `${m[1]}\n`);
  } catch {
    /* Envoy already gone: nothing to count */
  }
}

function hostPort(addr: string): [string, number] {
  const i = addr.lastIndexOf(':');
  return [addr.slice(0, i).replace(/^\[|\]$/g, ''), Number(addr.slice(i + 1))];
}

function reply(status: number, headers: Reply['headers'], body: Buffer): Reply {
  const text = body.toString('utf8');
  return { status, headers, body, text, json: () => JSON.parse(text) };
}

/** One request, HTTP/1.1 or h2c, with headers exactly as given. */
export function send(baseUrl: string, method: string, path: string, o: SendOptions = {}): Promise<Reply> {
  const url = new URL(baseUrl);
  const body = o.body === undefined ? undefined : Buffer.from(o.body);
  if (o.http2) {
    return new Promise((resolve, reject) => {
      const session = http2.connect(baseUrl);
      session.once('error', reject);
      const headers: http2.OutgoingHttpHeaders = { ':method': method, ':path': path };
      for (const [k, v] of o.headers ?? []) {
        const prev = headers[k.toLowerCase()];
        headers[k.toLowerCase()] = prev === undefined ? v : ([] as string[]).concat(prev as string | string[], v);
      }
      const req = session.request(headers, { endStream: body === undefined });
      const chunks: Buffer[] = [];
      let status = 0;
      let resHeaders: Reply['headers'] = {};
      req.on('response', (h) => {
        status = Number(h[':status']);
        resHeaders = h as Reply['headers'];
      });
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        session.close();
        resolve(reply(status, resHeaders, Buffer.concat(chunks)));
      });
      req.on('error', reject);
      if (body !== undefined) req.end(body);
    });
  }
  return new Promise((resolve, reject) => {
    const raw: string[] = [];
    // With raw headers node adds no Host: send one unless the test gave its own (or wants none: '').
    if (!(o.headers ?? []).some(([k]) => k.toLowerCase() === 'host')) raw.push('host', url.host);
    for (const [k, v] of o.headers ?? []) if (!(k.toLowerCase() === 'host' && v === '')) raw.push(k, v);
    if (
      body !== undefined &&
      !(o.headers ?? []).some(([k]) => k.toLowerCase() === 'content-length' || k.toLowerCase() === 'transfer-encoding')
    )
      raw.push('content-length', String(body.length));
    const req = http.request(
      { host: url.hostname, port: url.port, method, path, headers: raw, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(reply(res.statusCode ?? 0, res.headers, Buffer.concat(chunks))));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

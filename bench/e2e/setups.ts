/**
 * The setups of the end-to-end benchmark (bench/README.md), each one Envoy on the generated bundle in
 * front of the same stand-in upstream, differing only in who authorizes:
 *
 *   envoy               Envoy alone (no ext_authz): the floor
 *   noop                Envoy + a no-op grpc-js ext_authz (always OK): the reference
 *   noop-builtin        Envoy + a no-op on modelgate's own gRPC server: the limit of our stack
 *   noop-go             Envoy + a no-op on grpc-go (bench/peers/grpc-go-noop): the Check's reference
 *   modelgate           Envoy + modelgate, 1 worker, file store
 *   modelgate-w2        Envoy + modelgate --workers 2, file store
 *   modelgate-pg        Envoy + modelgate, PostgreSQL store (warm cache)
 *   opa                 Envoy + OPA-Envoy (the same decision in Rego)
 *   litellm             Envoy -> LiteLLM proxy (keys and per-key model access) -> the stand-in
 *   litellm-budget      the same with LiteLLM's own budget enforcement: each key's balance as its
 *                       max_budget, each response priced and counted by LiteLLM (bench/peers/README.md)
 *   modelgate-meter     modelgate, file store, the meter on (soft)          } metering rows
 *   modelgate-pg-meter  modelgate, PostgreSQL, the meter on (soft)          } (docs/metering.md)
 *   modelgate-pg-strict modelgate, PostgreSQL, the meter on, strict mode    }
 *   modelgate-rl        modelgate + meter (soft, file store), rate limits on the   } rate limit rows
 *                       keys, embedded engine (modelgate answers the filters)      } (docs/rate-limits.md): every
 *   modelgate-rl-global the same, global engine: envoyproxy/ratelimit + Redis      } request asks the engine
 *   modelgate-before    (--setups and --before=DIR only) modelgate built from another checkout DIR (its
 *                       dist/, demo config and node_modules), in the same bundle: before and after a
 *                       change, measured in one run
 *   modelgate-meter-before (--setups and --before=DIR only) the same with the meter on (soft), beside
 *                       modelgate-meter
 *   modelgate-secret    (--setups only) modelgate with grpc.secret            } the gRPC port
 *   modelgate-mtls      (--setups only) modelgate with mTLS (grpc.tls)        } authenticated
 *   modelgate-secret-mtls (--setups only) both                                } (docs/security.md)
 *
 * Placement (2 cores): Envoy and the authorizing process on the "gateway" core, the load generator,
 * the upstream and PostgreSQL on the "load" core. bench/README-e2e.md says why.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { parseDocument } from 'yaml';
import { readGrpcSecret } from '../../src/config/grpc-auth';
import { parseConfig, type Config } from '../../src/config/load';
import { renderBundle, startPinnedEnvoy, type RunningEnvoy } from './envoy';
import type { HttpKind } from './mixes';
import { peerData } from './peer-data';
import type { BenchPg } from './pg';
import { freePort } from '../../src/server/free-port';
import { httpStatus, listening, pin, spawnPinned, type Proc } from './procs';
import { startRatelimit, startRedis, type EngineProcess } from '../../src/server/global-engine';
import { UPSTREAM_MARKERS } from './upstream';

export const SETUP_IDS = [
  'envoy',
  'noop',
  'noop-builtin',
  'noop-go',
  'modelgate',
  'modelgate-w2',
  'modelgate-pg',
  'opa',
  'litellm',
  'litellm-budget',
  'modelgate-meter',
  'modelgate-pg-meter',
  'modelgate-pg-strict',
  'modelgate-rl',
  'modelgate-rl-global',
] as const;
/** Not in the default run; `--setups=` names them (OPA with modelgate's pack_as_bytes: true). */
export const EXTRA_SETUP_IDS = [
  'modelgate-before',
  'modelgate-meter-before',
  'opa-bytes',
  'noop-node',
  'modelgate-secret',
  'modelgate-mtls',
  'modelgate-secret-mtls',
  'modelgate-meter-nogzip',
  'modelgate-meter-logonly',
] as const;
export type SetupId = (typeof SETUP_IDS)[number] | (typeof EXTRA_SETUP_IDS)[number];

export const SETUP_TITLES: Record<SetupId, string> = {
  envoy: 'Envoy alone (floor)',
  noop: 'Envoy + no-op ext_authz (grpc-js)',
  'noop-builtin': "Envoy + no-op ext_authz (modelgate's gRPC server)",
  'noop-go': 'Envoy + no-op ext_authz (grpc-go)',
  modelgate: 'Envoy + modelgate (1 worker, file store)',
  'modelgate-before': 'Envoy + modelgate before the change (--before=DIR, 1 worker, file store)',
  'modelgate-meter-before': 'modelgate + meter, soft (file store), before the change (--before=DIR)',
  'modelgate-w2': 'Envoy + modelgate --workers 2 (file store)',
  'modelgate-pg': 'Envoy + modelgate (PostgreSQL, warm cache)',
  opa: 'Envoy + OPA-Envoy',
  'opa-bytes': 'Envoy + OPA-Envoy, pack_as_bytes: true',
  'noop-node': "Envoy + no-op ext_authz (modelgate's gRPC server on node:http2)",
  litellm: 'Envoy + LiteLLM proxy',
  'litellm-budget': 'Envoy + LiteLLM proxy with its budget (max_budget, spend tracking)',
  'modelgate-meter': 'modelgate + meter, soft (file store)',
  'modelgate-meter-nogzip': "modelgate + meter, soft, without the decompressor (Envoy's share of the meter)",
  'modelgate-meter-logonly':
    "modelgate + meter, soft, access log only: no Lua, no decompressor (Envoy's share of the meter)",
  'modelgate-pg-meter': 'modelgate + meter, soft (PostgreSQL)',
  'modelgate-pg-strict': 'modelgate + meter, strict (PostgreSQL)',
  'modelgate-rl': 'modelgate + meter + rate limits, embedded engine',
  'modelgate-rl-global': 'modelgate + meter + rate limits, global engine (envoyproxy/ratelimit, Redis)',
  'modelgate-secret': 'Envoy + modelgate, gRPC port with grpc.secret',
  'modelgate-mtls': 'Envoy + modelgate, gRPC port with mTLS (grpc.tls)',
  'modelgate-secret-mtls': 'Envoy + modelgate, gRPC port with grpc.secret and mTLS',
};

export interface BenchContext {
  readonly root: string;
  readonly outDir: string;
  readonly envoyBin: string;
  readonly envoyConcurrency: number;
  /** Envoy and the authorizing process. */
  readonly gatewayCpus?: string;
  /** Load generator, upstream, PostgreSQL. */
  readonly loadCpus?: string;
  readonly upstreamPort: number;
  /** The demo config's text (envoy/modelgate.yaml). */
  readonly demoConfig: string;
  readonly pg?: BenchPg;
  /** Extra node flags for modelgate and the no-op server (tail-latency experiments). */
  readonly nodeFlags: readonly string[];
  readonly opaBin: string;
  readonly litellmBin: string;
  /** bench/peers/grpc-go-noop/build.sh's binary. */
  readonly goNoopBin: string;
  /** Another checkout of modelgate, built (`--before=DIR`): the `modelgate-before` setup runs it. */
  readonly beforeRoot?: string;
  /** `--profile-dir=DIR`: each modelgate setup runs under `node --cpu-prof`, its profiles in DIR/<setup>/. */
  readonly profileDir?: string;
}

export interface RunningSetup {
  readonly id: SetupId;
  readonly title: string;
  readonly envoy: RunningEnvoy;
  /** The authorizing process(es): the no-op, modelgate, OPA, LiteLLM. */
  readonly authz?: Proc;
  /** PostgreSQL's processes, when this setup uses it. */
  readonly storePids?: () => number[];
  /** modelgate's HTTP address (for /metrics). */
  readonly modelgateHttp?: string;
  readonly bundleChanges: readonly string[];
  readonly notes: readonly string[];
  /** What the body of a right answer to `kind` contains, in this setup. */
  mustContain(kind: HttpKind): string[];
  stop(): Promise<void>;
}

const allowMarker = (kind: HttpKind): string =>
  kind.expect.allowed ? UPSTREAM_MARKERS[kind.expect.family] : UPSTREAM_MARKERS.chat;

/** Rate limits the benchmark's traffic never reaches: every request asks the engine, none is refused. */
const BENCH_LIMITS = { rpm: 1_000_000_000, tpm: 4_000_000_000 };

/** How a setup's gRPC port authenticates Envoy (docs/security.md): the secret's file, the certificates' files. */
interface PortAuth {
  readonly secretFile?: string;
  readonly tls?: {
    readonly serverCert: string;
    readonly serverKey: string;
    readonly serverCa: string;
    readonly clientCert: string;
    readonly clientKey: string;
    readonly clientCa: string;
  };
}

/**
 * modelgate's config for a setup: the demo config with the meter, store and gRPC port
 * authentication of the setup, and for the rate limit rows, the engine and limits on the
 * benchmark's keys (key-wide requests and tokens per minute: both filters call the engine, and
 * each response's tokens are charged).
 */
function modelgateConfig(
  demo: string,
  meter: 'off' | 'soft' | 'strict',
  storeUrl?: string,
  auth: PortAuth = {},
  rateLimits?: { engine: 'embedded' | 'global'; service?: string; redis?: string },
): string {
  const doc = parseDocument(demo);
  doc.setIn(['meter', 'enabled'], meter !== 'off');
  if (meter !== 'off') doc.setIn(['meter', 'mode'], meter);
  if (storeUrl) doc.set('store', storeUrl);
  if (rateLimits) {
    doc.setIn(['rateLimits', 'engine'], rateLimits.engine);
    if (rateLimits.service) doc.setIn(['rateLimits', 'service'], rateLimits.service);
    if (rateLimits.redis) doc.setIn(['rateLimits', 'redis'], rateLimits.redis);
    const keys = doc.get('keys') as { items: Array<{ get(k: string): unknown; set(k: string, v: unknown): void }> };
    for (const k of keys.items)
      if (['alice', 'bob'].includes(String(k.get('id')))) k.set('limits', doc.createNode(BENCH_LIMITS));
  }
  if (auth.secretFile) doc.setIn(['grpc', 'secret'], doc.createNode({ file: auth.secretFile }));
  if (auth.tls) {
    const t = auth.tls;
    doc.setIn(
      ['grpc', 'tls'],
      doc.createNode({ certFile: t.serverCert, keyFile: t.serverKey, clientCaFile: t.clientCa }),
    );
    doc.setIn(
      ['gateway', 'authzTls'],
      doc.createNode({
        certFile: t.clientCert,
        keyFile: t.clientKey,
        caFile: t.serverCa,
        serverName: BENCH_SERVER_NAME,
      }),
    );
  }
  return doc.toString();
}

const BENCH_SERVER_NAME = 'modelgate.bench';

/** ` at COMMIT` for a git checkout, else ''. */
function gitHead(dir: string): string {
  const r = spawnSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' });
  return r.status === 0 ? ` at ${r.stdout.trim()}` : '';
}

/**
 * The litellm-budget setup's LiteLLM config: bench/peers/litellm/config.yaml with LiteLLM's own
 * spend-tracking callback registered (spend_tracking.py: its ProxyDBLogger, which LiteLLM registers
 * itself only when a database is connected). custom_auth.py, told by MODELGATE_PEER_BUDGET, returns
 * each key's balance as its max_budget; LiteLLM's budget reservation enforces it.
 */
export function litellmBudgetConfig(configYaml: string): string {
  const doc = parseDocument(configYaml);
  doc.setIn(['litellm_settings', 'callbacks'], doc.createNode(['spend_tracking.proxy_db_logger']));
  return doc.toString();
}

/** A CA each for modelgate and Envoy, and a certificate each (P-256, as a deployment would make them). */
function makeCerts(dir: string): NonNullable<PortAuth['tls']> {
  mkdirSync(dir, { recursive: true });
  const ssl = (args: string[]): void => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args[0]} failed: ${r.stderr}`);
  };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  for (const ca of ['server-ca', 'client-ca'])
    ssl([
      'req',
      '-x509',
      ...ec,
      '-days',
      '30',
      '-subj',
      `/CN=${ca}`,
      '-keyout',
      `${ca}.key`,
      '-out',
      `${ca}.crt`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
    ]);
  for (const [leaf, ca, ext] of [
    ['server', 'server-ca', `subjectAltName=DNS:${BENCH_SERVER_NAME}\n`],
    ['client', 'client-ca', 'extendedKeyUsage=clientAuth\n'],
  ]) {
    ssl(['req', ...ec, '-subj', `/CN=${leaf}`, '-keyout', `${leaf}.key`, '-out', `${leaf}.csr`]);
    writeFileSync(path.join(dir, `${leaf}.ext`), ext);
    ssl([
      'x509',
      '-req',
      '-in',
      `${leaf}.csr`,
      '-CA',
      `${ca}.crt`,
      '-CAkey',
      `${ca}.key`,
      '-CAcreateserial',
      '-days',
      '30',
      '-out',
      `${leaf}.crt`,
      '-extfile',
      `${leaf}.ext`,
    ]);
  }
  const f = (n: string): string => path.join(dir, n);
  return {
    serverCert: f('server.crt'),
    serverKey: f('server.key'),
    serverCa: f('server-ca.crt'),
    clientCert: f('client.crt'),
    clientKey: f('client.key'),
    clientCa: f('client-ca.crt'),
  };
}

async function startModelgateProc(
  ctx: BenchContext,
  id: string,
  configPath: string,
  workers: number,
  root = ctx.root,
): Promise<{ proc: Proc; grpcPort: number; http: string }> {
  const grpcPort = await freePort();
  const httpPort = await freePort();
  const http = `127.0.0.1:${httpPort}`;
  const profile = ctx.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${path.join(ctx.profileDir, id)}`] : [];
  const args = [
    ...ctx.nodeFlags,
    ...profile,
    path.join(root, 'dist/src/cli/main.js'),
    'serve',
    '--config',
    configPath,
    '--grpc',
    `127.0.0.1:${grpcPort}`,
    '--http',
    http,
  ];
  if (workers > 1) args.push('--workers', String(workers));
  const proc = await spawnPinned({
    name: id,
    cmd: process.execPath,
    args,
    cpus: ctx.gatewayCpus,
    cwd: root,
    // Every decision is logged (the demo config's log.allows), to this file, as in the in-process bench.
    logFile: path.join(ctx.outDir, `${id}.log`),
    ready: async (p) =>
      (await httpStatus(`http://${http}/readyz`)) === 200 && (workers === 1 || p.pids().length > workers),
  });
  return { proc, grpcPort, http };
}

export async function startSetup(ctx: BenchContext, id: SetupId): Promise<RunningSetup> {
  const demo = parseConfig(ctx.demoConfig);
  const notes: string[] = [];
  let authz: Proc | undefined;
  let storePids: (() => number[]) | undefined;
  let modelgateHttp: string | undefined;
  let bundle: { yaml: string; changes: string[] };
  let markers = (k: HttpKind): string[] => [k.expect.allowed ? allowMarker(k) : `[modelgate: ${k.expect.reason}]`];
  let upstreamPort = ctx.upstreamPort;
  const httpPortFor = async (): Promise<number> => freePort();
  const engines: EngineProcess[] = [];

  switch (id) {
    case 'envoy': {
      bundle = renderBundle(demo, { httpPort: await httpPortFor(), upstreamPort, meter: false });
      markers = (k) => [allowMarker(k)];
      break;
    }
    case 'noop':
    case 'noop-builtin':
    case 'noop-node': {
      const port = await freePort();
      authz = await spawnPinned({
        name: id,
        cmd: process.execPath,
        args:
          id === 'noop'
            ? [...ctx.nodeFlags, path.join(ctx.root, 'dist/bench/baseline-server.js'), `127.0.0.1:${port}`]
            : [
                ...ctx.nodeFlags,
                path.join(ctx.root, 'dist/bench/baseline-builtin-server.js'),
                `127.0.0.1:${port}`,
                id === 'noop-node' ? 'node' : 'builtin',
                // An experiment (bench/README.md, "The Check's answer"): the no-op answers with these bytes.
                ...(process.env.BENCH_NOOP_ANSWER ? [process.env.BENCH_NOOP_ANSWER] : []),
              ],
        cpus: ctx.gatewayCpus,
        logFile: path.join(ctx.outDir, `${id}.log`),
        ready: () => listening(port),
      });
      bundle = renderBundle(demo, {
        authz: { port, healthCheck: false, packAsBytes: true },
        httpPort: await httpPortFor(),
        upstreamPort,
        meter: false,
      });
      if (id !== 'noop' && process.env.BENCH_NOOP_ANSWER)
        notes.push(`the no-op answers with ${path.basename(process.env.BENCH_NOOP_ANSWER)} (BENCH_NOOP_ANSWER)`);
      markers = (k) => [allowMarker(k)];
      break;
    }
    case 'noop-go': {
      const port = await freePort();
      if (!existsSync(ctx.goNoopBin))
        throw new Error(`${ctx.goNoopBin} missing: run bench/peers/grpc-go-noop/build.sh`);
      authz = await spawnPinned({
        name: id,
        cmd: ctx.goNoopBin,
        args: [`127.0.0.1:${port}`],
        cpus: ctx.gatewayCpus,
        logFile: path.join(ctx.outDir, `${id}.log`),
        ready: () => listening(port),
      });
      bundle = renderBundle(demo, {
        authz: { port, healthCheck: false, packAsBytes: true },
        httpPort: await httpPortFor(),
        upstreamPort,
        meter: false,
      });
      markers = (k) => [allowMarker(k)];
      break;
    }
    case 'modelgate-secret':
    case 'modelgate-mtls':
    case 'modelgate-secret-mtls': {
      // The same as `modelgate`, with the gRPC port authenticated (docs/security.md): what each costs per Check.
      const auth: PortAuth = {
        ...(id.includes('secret') ? { secretFile: path.join(ctx.outDir, 'grpc-secret') } : {}),
        ...(id.includes('mtls') ? { tls: makeCerts(path.join(ctx.outDir, 'certs')) } : {}),
      };
      if (auth.secretFile) writeFileSync(auth.secretFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
      const configPath = path.join(ctx.outDir, `${id}.yaml`);
      writeFileSync(configPath, modelgateConfig(ctx.demoConfig, 'off', undefined, auth));
      const m = await startModelgateProc(ctx, id, configPath, 1);
      authz = m.proc;
      modelgateHttp = m.http;
      const config = parseConfig(readFileSync(configPath, 'utf8'));
      bundle = renderBundle(config, {
        authz: { port: m.grpcPort, healthCheck: true, packAsBytes: true },
        httpPort: Number(m.http.split(':')[1]),
        upstreamPort,
        meter: false,
        grpcSecret: readGrpcSecret(config, { env: {}, configPath }),
      });
      break;
    }
    case 'modelgate':
    case 'modelgate-before':
    case 'modelgate-meter-before':
    case 'modelgate-w2':
    case 'modelgate-pg':
    case 'modelgate-meter':
    case 'modelgate-meter-nogzip':
    case 'modelgate-meter-logonly':
    case 'modelgate-pg-meter':
    case 'modelgate-pg-strict':
    case 'modelgate-rl':
    case 'modelgate-rl-global': {
      const meter =
        id === 'modelgate-pg-strict'
          ? 'strict'
          : id.includes('-meter') || id.startsWith('modelgate-rl')
            ? 'soft'
            : 'off';
      let rateLimits: { engine: 'embedded' | 'global'; service?: string; redis?: string } | undefined;
      if (id === 'modelgate-rl') rateLimits = { engine: 'embedded' };
      if (id === 'modelgate-rl-global') {
        // Redis and envoyproxy/ratelimit on the load core, as PostgreSQL: infrastructure beside the gateway.
        const redisPort = await freePort();
        const grpc = { host: '127.0.0.1', port: await freePort() };
        const redis = await startRedis({ host: '127.0.0.1', port: redisPort });
        const ratelimit = await startRatelimit({
          grpc,
          redis: { host: '127.0.0.1', port: redisPort },
          domain: 'modelgate',
        }).catch(async (err: unknown) => {
          await redis.stop();
          throw err;
        });
        if (ctx.loadCpus) await pin([redis.pid, ratelimit.pid], ctx.loadCpus);
        engines.push(ratelimit, redis);
        storePids = () => [redis.pid, ratelimit.pid];
        rateLimits = { engine: 'global', service: `127.0.0.1:${grpc.port}`, redis: `127.0.0.1:${redisPort}` };
        notes.push('store CPU: Redis and envoyproxy/ratelimit, pinned to the load core');
      }
      let storeUrl: string | undefined;
      if (id.includes('-pg')) {
        if (!ctx.pg) throw new Error('no PostgreSQL');
        storeUrl = await ctx.pg.database(id.replace(/-/g, '_'), demo);
        storePids = () => ctx.pg!.pids();
      }
      const configPath = path.join(ctx.outDir, `${id}.yaml`);
      const before = id === 'modelgate-before' || id === 'modelgate-meter-before';
      if (before && !ctx.beforeRoot) throw new Error(`${id} needs --before=DIR (a built checkout)`);
      // The earlier checkout reads its own demo config (its schema may differ); the bundle is this one's.
      const demoText = before
        ? readFileSync(path.join(ctx.beforeRoot!, 'envoy', 'modelgate.yaml'), 'utf8')
        : ctx.demoConfig;
      writeFileSync(configPath, modelgateConfig(demoText, meter, storeUrl, {}, rateLimits));
      rmSync(configPath.replace(/\.yaml$/, '.state.json'), { force: true });
      const m = await startModelgateProc(
        ctx,
        id,
        configPath,
        id === 'modelgate-w2' ? 2 : 1,
        before ? ctx.beforeRoot : ctx.root,
      );
      if (before) notes.push(`modelgate from ${ctx.beforeRoot}${gitHead(ctx.beforeRoot!)}`);
      authz = m.proc;
      modelgateHttp = m.http;
      bundle = renderBundle(parseConfig(readFileSync(configPath, 'utf8')), {
        authz: { port: m.grpcPort, healthCheck: true, packAsBytes: true },
        httpPort: Number(m.http.split(':')[1]),
        upstreamPort,
        meter: meter !== 'off',
        meterParts: id === 'modelgate-meter-logonly' ? 'log' : id === 'modelgate-meter-nogzip' ? 'nogzip' : 'all',
        rateLimits: rateLimits !== undefined,
      });
      break;
    }
    case 'opa':
    case 'opa-bytes': {
      if (!existsSync(ctx.opaBin))
        throw new Error(`no OPA-Envoy binary at ${ctx.opaBin}: run bench/peers/opa/build.sh`);
      const grpcPort = await freePort();
      const httpPort = await freePort();
      const dataFile = path.join(ctx.outDir, 'peer-data.json');
      writeFileSync(dataFile, JSON.stringify(peerData(demo)));
      const cfg = path.join(ctx.outDir, `${id}-config.yaml`);
      writeFileSync(
        cfg,
        readFileSync(path.join(ctx.root, 'bench/peers/opa/config.yaml'), 'utf8').replaceAll(
          '${GRPC_ADDR}',
          `127.0.0.1:${grpcPort}`,
        ),
      );
      const peers = path.join(ctx.root, 'bench/peers/opa');
      authz = await spawnPinned({
        name: id,
        cmd: ctx.opaBin,
        args: [
          'run',
          '--server',
          '--addr',
          `127.0.0.1:${httpPort}`,
          '--config-file',
          cfg,
          '--log-level',
          'error',
          '--ignore',
          '.*',
          path.join(peers, 'policy.rego'),
          path.join(peers, 'mask.rego'),
          dataFile,
        ],
        cpus: ctx.gatewayCpus,
        logFile: path.join(ctx.outDir, `${id}.log`),
        ready: async () => (await httpStatus(`http://127.0.0.1:${httpPort}/health?plugins`)) === 200,
      });
      bundle = renderBundle(demo, {
        authz: { port: grpcPort, healthCheck: false, packAsBytes: id === 'opa-bytes' },
        httpPort: await httpPortFor(),
        upstreamPort,
        meter: false,
      });
      break;
    }
    case 'litellm':
    case 'litellm-budget': {
      if (!existsSync(ctx.litellmBin))
        throw new Error(`no LiteLLM at ${ctx.litellmBin}: run bench/peers/litellm/install.sh`);
      const port = await freePort();
      const dataFile = path.join(ctx.outDir, 'peer-data.json');
      writeFileSync(dataFile, JSON.stringify(peerData(demo)));
      const up = `http://127.0.0.1:${ctx.upstreamPort}`;
      const workers = ctx.gatewayCpus ? ctx.gatewayCpus.split(',').length : 2;
      const peerDir = path.join(ctx.root, 'bench/peers/litellm');
      const budget = id === 'litellm-budget';
      let config = path.join(peerDir, 'config.yaml');
      if (budget) {
        // Written beside the run's other files; its modules (custom_auth, spend_tracking) come from PYTHONPATH.
        config = path.join(ctx.outDir, 'litellm-budget-config.yaml');
        writeFileSync(config, litellmBudgetConfig(readFileSync(path.join(peerDir, 'config.yaml'), 'utf8')));
      }
      authz = await spawnPinned({
        name: id,
        cmd: ctx.litellmBin,
        args: ['--config', config, '--host', '127.0.0.1', '--port', String(port), '--num_workers', String(workers)],
        cpus: ctx.gatewayCpus,
        cwd: peerDir,
        env: {
          ...process.env,
          PYTHONPATH: peerDir,
          STANDIN_BASE: up,
          STANDIN_OPENAI_BASE: `${up}/v1`,
          STANDIN_GEMINI_BASE: up,
          STANDIN_API_KEY: 'standin-upstream-credential',
          LITELLM_MASTER_KEY: `sk-peer-master-${Math.random().toString(36).slice(2)}`,
          MODELGATE_PEER_DATA: dataFile,
          MODELGATE_PEER_BUDGET: budget ? '1' : '0',
          // LiteLLM's production page: errors only, no .env loading; no network here: the bundled cost map.
          LITELLM_LOG: 'ERROR',
          LITELLM_MODE: 'PRODUCTION',
          LITELLM_LOCAL_MODEL_COST_MAP: 'True',
        },
        logFile: path.join(ctx.outDir, `${id}.log`),
        ready: async () => (await httpStatus(`http://127.0.0.1:${port}/health/liveliness`)) === 200,
        timeoutMs: 120_000,
      });
      notes.push(`LiteLLM --num_workers ${workers} (one per core it may use, as its production page says)`);
      if (budget) {
        notes.push(
          "each key's balance is its LiteLLM max_budget (alice: 12.5 USD, never reached here), enforced by LiteLLM's budget reservation; each response priced from LiteLLM's model cost map and counted by its own cost callback (ProxyDBLogger), spend in memory (no database: bench/peers/README.md)",
        );
      }
      upstreamPort = port;
      bundle = renderBundle(demo, {
        httpPort: await httpPortFor(),
        upstreamPort,
        meter: false,
        keepCredentialHeaders: true,
      });
      bundle.changes.push('every upstream cluster at LiteLLM (LiteLLM forwards to the stand-in)');
      markers = (k) => (k.expect.allowed ? [allowMarker(k)] : ['key_model_access_denied']);
      break;
    }
  }
  let envoy: RunningEnvoy;
  try {
    envoy = await startPinnedEnvoy({
      binary: ctx.envoyBin,
      yaml: bundle.yaml,
      dir: ctx.outDir,
      name: id,
      cpus: ctx.gatewayCpus,
      concurrency: ctx.envoyConcurrency,
      accessLog: path.join(ctx.outDir, `envoy-${id}.access.log`),
    });
  } catch (err) {
    await authz?.stop();
    for (const e of engines) await e.stop();
    throw err;
  }
  return {
    id,
    title: SETUP_TITLES[id],
    envoy,
    authz,
    storePids,
    modelgateHttp,
    bundleChanges: bundle.changes,
    notes,
    mustContain: (k) => markers(k),
    async stop() {
      await envoy.stop();
      await authz?.stop();
      for (const e of engines) await e.stop();
    },
  };
}

/**
 * Wires one modelgate instance together: config, store, cache, the Check pipeline, the gRPC and
 * HTTP listeners, hot reload and draining. Everything a process needs; nothing reads the
 * environment after start.
 */
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { AggregatorRegistry } from 'prom-client';
import pino, { type DestinationStream, type Logger } from 'pino';
import type { CheckRequest } from '../../proto/types/envoy/service/auth/v3/CheckRequest';
import type { CheckResponse__Output } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import { createCatalogHandler } from './catalog';
import { decodeCheckRequest } from '../check/read-request';
import { readGrpcSecret, readGrpcTls } from '../config/grpc-auth';
import { isLoopback, parseConfig, parseHostPort, type Config } from '../config/load';
import { watchConfig } from '../config/watch';
import { FileStore } from '../store/file-store';
import { startGrpcServer } from './grpc-server';
import { startHttpServer, type RouteHandler } from './http-server';
import { createConsoleHandler } from '../console/http-handler';
import type { UsageProvider } from '../console/usage';
import { BatchedLogStream } from './log-stream';
import { createMetrics } from './metrics';
import { openPgStore, redactUrl } from '../store/pg/store';
import { authorizationService } from '../envoy/protos';
import { createPipeline } from '../check/pipeline';
import { requestHeaderFilter } from '../check/read-request';
import { ResponseEncoder } from '../check/response-encoder';
import { statusOf } from '../check/reasons';
import { classify } from '../check/routes';
import { StoreCache } from '../store/cache';
import type { MeterStore, Store } from '../store/store';
import { createAdmission } from '../meter/admission';
import { Meter } from '../meter/meter';
import { recentUsage } from '../meter/recent-usage';
import { externalProcessorMethod } from './ext-proc';
import type { Method, RequestProblem } from '../grpc/server';
import type { Config as RuntimeConfig } from '../config/load';
import type { Decision } from '../check/decision';
import type { RequestView } from '../check/request-view';
import type { MaybePromise } from '../check/decide';
import { admitInFlight } from '../ratelimit/admission';
import { chargeTokens } from '../ratelimit/charges';
import { ChargeBatcher } from '../ratelimit/charge-batcher';
import { limitsLeft } from '../ratelimit/left';
import { EmbeddedEngine, type RateLimitEngine } from '../ratelimit/embedded-engine';
import { LocalInFlight, type InFlightTable } from '../ratelimit/in-flight';
import { effectiveLimits, type EffectiveLimits } from '../ratelimit/limits';
import { LRUCache } from 'lru-cache';
import type { KeyRecord } from '../store/store';
import { RemoteEngine } from './rls-client';
import { rateLimitServiceMethod } from './rls-service';

export interface ServiceOptions {
  readonly configPath: string;
  readonly grpcAddress?: string;
  readonly httpAddress?: string;
  /** Overrides the config's `store`: a postgres:// URL, or `file` for the file store. */
  readonly storeUrl?: string;
  /** Where storeUrl came from (`--store`, `DATABASE_URL`, ...), named in connection errors. */
  readonly storeSource?: string;
  /** Where log lines go: a stream, or a file path; default stdout. */
  readonly logDestination?: DestinationStream | string;
  readonly env?: NodeJS.ProcessEnv;
  /** Injected clock for tests (epoch ms). */
  readonly now?: () => number;
  /** A store to use instead of the configured one (tests inject failing or counting stores). */
  readonly store?: Store;
  /** Watch the config file for changes (default true). */
  readonly watch?: boolean;
  /** Poll interval of the config watcher. */
  readonly watchIntervalMs?: number;
  /** Recent usage per key for the console's access view (the meter); absent: no usage section. */
  readonly usage?: UsageProvider;
  /**
   * Requests in flight per key (the inFlight limit). The meter's in-flight table will provide it;
   * until then (and by default) a LocalInFlight stand-in released at each settlement.
   */
  readonly inFlight?: InFlightTable;
}

export interface Service {
  readonly grpcAddress: string;
  readonly httpAddress: string;
  readonly logger: Logger;
  readonly cache: StoreCache;
  readonly store: Store;
  /** The meter (issue 11). */
  readonly meter: Meter;
  /** The rate limit engine modelgate charges tokens to (and, embedded, answers Envoy from). */
  readonly rateLimitEngine: RateLimitEngine;
  readonly inFlight: InFlightTable;
  /**
   * The full read-decide-write path, as the gRPC handler runs it: the bytes of a CheckRequest in,
   * the serialised CheckResponse out, synchronously when no store round trip was needed.
   */
  checkBytes(request: Buffer): Buffer | Promise<Buffer>;
  /** The same for a CheckRequest object (encoded first), decoded back (for tests and tools). */
  check(req: CheckRequest): Promise<CheckResponse__Output>;
  config(): Config;
  /** SIGTERM path: health NOT_SERVING, answer in-flight checks, close, flush logs. */
  close(graceMs?: number): Promise<void>;
}

/** The hint of a Check call whose bytes are not one CheckRequest message (src/grpc reads the framing). */
const UNREADABLE_HINTS: Record<RequestProblem, (limit: number) => string> = {
  too_large: (limit) => `the authorization request was larger than grpc.maxReceiveMessageBytes (${limit} bytes): it must stay above Envoy's with_request_body.max_request_bytes by 1 MiB`,
  compressed: () => 'the authorization request was compressed: modelgate reads uncompressed gRPC messages only',
  truncated: () => 'the authorization request ended inside its message: the gateway must send one whole CheckRequest',
  no_message: () => 'the authorization request carried no message: the gateway must send one CheckRequest',
  extra_message: () => 'the authorization request carried more than one message: the gateway must send one CheckRequest',
};

/** The hint of a Check without the gRPC port's secret: the gateway's operator has to act, not the client. */
const UNAUTHENTICATED_HINT = "the gateway's proxy did not authenticate to its authorization service, so nothing was sent upstream: the gateway's operator must render and load Envoy's bundle with grpc.secret (modelgate envoy-config)";

export async function startService(opts: ServiceOptions): Promise<Service> {
  const env = opts.env ?? process.env;
  let config = parseConfig(readFileSync(opts.configPath, 'utf8'), env);
  // The gRPC port's secret and certificates: read once, at start, before anything is opened.
  const grpcAuth = { secret: readGrpcSecret(config, { env, configPath: opts.configPath }), tls: readGrpcTls(config, { env, configPath: opts.configPath }) };
  const metrics = createMetrics();
  const destination = opts.logDestination !== undefined && typeof opts.logDestination !== 'string'
    ? opts.logDestination
    : new BatchedLogStream(opts.logDestination ?? 1, { maxBytes: 64 * 1024 * 1024, onDrop: (bytes) => metrics.logDroppedBytes.inc(bytes) });
  const logger = pino({ level: config.log.level, base: { svc: 'modelgate' } }, destination);
  // Registered at start: a worker's registry must be known before the primary first aggregates,
  // and constructing an AggregatorRegistry is what makes prom-client answer the primary's requests.
  if (cluster.isWorker) {
    new AggregatorRegistry();
    AggregatorRegistry.setRegistries([metrics.registry]);
  }

  const storeUrl = opts.storeUrl === 'file' ? undefined : opts.storeUrl ?? (config.store.kind === 'postgres' ? config.store.url : undefined);
  const storeSource = opts.storeUrl !== undefined ? opts.storeSource : `store: in ${opts.configPath}`;
  let store: Store;
  let fileStore: FileStore | undefined;
  if (opts.store) {
    store = opts.store;
  } else if (storeUrl) {
    store = await openPgStore(storeUrl, { ...config.postgres, source: storeSource, onError: (err, where) => logger.warn({ where, err: err.message }, 'store connection problem') });
    logger.info({ store: redactUrl(storeUrl) }, 'using the PostgreSQL store');
  } else {
    store = fileStore = new FileStore(config.groups, config.keys, config.meter.enabled
      ? { path: meterStatePath(opts.configPath, config.meter.stateFile), onError: (err) => logger.error({ err: err.message }, 'meter state file not written (kept in memory; retried)') }
      : undefined);
  }
  const cache = new StoreCache(store, {
    ...config.cache,
    now: opts.now,
    onEvent: (event, kind) => metrics.countCache(event, kind),
  });

  const checkDef = authorizationService().Check;
  const encoder = new ResponseEncoder((r) => checkDef.responseSerialize(r));
  const decisionLog = { enabled: () => logger.isLevelEnabled('info'), write: (line: string) => destination.write(line), bindings: '"svc":"modelgate"' };
  if (fileStore?.meter && cluster.isWorker) {
    logger.warn({ store: 'file' }, 'metering on the file store with --workers: each worker keeps its own balances and state file writes; meter on PostgreSQL instead');
  }
  const meterAdmit = createAdmission({ store: store.meter, groups: cache.groups });
  // Rate limits (issue 25): the in-flight cap here; requests and tokens per window in Envoy's
  // rate limit filters, counted by the engine (embedded: this process; global: envoyproxy/ratelimit).
  const inFlight = opts.inFlight ?? new LocalInFlight({ now: opts.now });
  const embedded = config.rateLimits.engine === 'embedded' ? new EmbeddedEngine({ now: opts.now }) : undefined;
  const remote = embedded ? undefined : new RemoteEngine(config.rateLimits.service, Math.max(config.rateLimits.timeoutMs, 1000));
  const rateLimitEngine: RateLimitEngine = embedded ?? (remote as RemoteEngine);
  // Charges to the global engine go in batches (one call per 10 ms, not one per response).
  const charges = remote ? new ChargeBatcher(remote) : undefined;
  const chargeEngine: RateLimitEngine = charges ?? rateLimitEngine;
  const admit = (d: Decision, view: RequestView, c: RuntimeConfig): MaybePromise<Decision> => {
    const { decision, acquired } = admitInFlight(inFlight, d, view);
    if (!decision.allowed) return decision;
    if (!acquired) return meterAdmit(decision, view, c);
    // A slot was taken: given back if the meter refuses the request.
    const released = (m: Decision): Decision => {
      if (!m.allowed) inFlight.release(view.requestId);
      return m;
    };
    const m = meterAdmit(decision, view, c);
    return m instanceof Promise ? m.then(released, (err: unknown) => {
      inFlight.release(view.requestId);
      throw err;
    }) : released(m);
  };
  const check = createPipeline({ config: () => config, lookups: cache, logger, metrics, now: opts.now, encoder, decisionLog, admit });
  // Always served: with `meter.enabled: false` (a reload, while Envoy still sends) each response is
  // counted as unmetered (meter_disabled), never refused.
  const meter = new Meter({ config: () => config, groups: cache.groups, store: store.meter, metrics: metrics.meter, logger });
  const keysById = new LRUCache<string, { key: KeyRecord | null }>({ max: 10_000, ttl: Math.max(config.cache.ttlMs, 1) });
  const limitsOf = async (keyId: string, group: string, model: string): Promise<EffectiveLimits | null> => {
    let hit = keysById.get(keyId);
    if (!hit) keysById.set(keyId, (hit = { key: store.findKeyById ? await store.findKeyById(keyId) : null }));
    if (!hit.key) return null;
    const g = await cache.groups.get(group);
    if (g.status === 'unavailable') throw new Error(`the group cannot be looked up: ${g.error}`);
    const found = g.status === 'found' ? g.value : undefined;
    return effectiveLimits(hit.key, found, found?.models.get(model));
  };
  meter.onSettled = (s) => {
    if (s.result !== 'metered' && s.result !== 'unmetered') return;
    inFlight.release(s.request.requestId);
    if (s.result !== 'metered') return;
    const tokens = s.usage.inputTokens + s.usage.outputTokens;
    chargeTokens({ engine: chargeEngine, domain: () => config.rateLimits.domain, limits: limitsOf }, { keyId: s.request.keyId, group: s.request.group, model: s.request.model, tokens })
      .then((n) => { if (n > 0) metrics.rateLimitCharges.inc({ result: 'charged' }); })
      .catch((err: unknown) => {
        metrics.rateLimitCharges.inc({ result: 'failed' });
        logger.warn({ keyId: s.request.keyId, model: s.request.model, tokens, err: err instanceof Error ? err.message : String(err) }, 'tokens not charged to the rate limit engine');
      });
  };
  // The headers the decoder keeps follow the config (key header names can change on reload).
  let headerFilter = requestHeaderFilter(config.routes);
  const denyUndecided = (reason: 'internal_error' | 'check_request_malformed' | 'authz_unauthenticated', hint: string): Buffer => {
    logger.error({ decision: 'deny', status: statusOf(reason), reason, hint }, 'decision');
    metrics.countDecision(statusOf(reason), reason);
    const route = classify('', '', config.routes.altPrefix, false);
    return encoder.encode({ allowed: false, reason, status: statusOf(reason), hint, route }, config);
  };
  // A Check without the port's secret: denied before anything of it is read (so in the generic error shape).
  const unauthenticated = (): Buffer => denyUndecided('authz_unauthenticated', UNAUTHENTICATED_HINT);
  const failClosed = (): Buffer => denyUndecided('internal_error', 'the authorization service failed to decide; retry shortly');
  const unreadable = (problem: RequestProblem): Buffer => denyUndecided('check_request_malformed', UNREADABLE_HINTS[problem](config.grpc.maxReceiveMessageBytes));
  const checkBytes = (request: Buffer): Buffer | Promise<Buffer> => {
    const started = performance.now();
    const view = decodeCheckRequest(request, headerFilter);
    if (view === undefined) return denyUndecided('check_request_malformed', 'the authorization request could not be decoded: the gateway must send an Envoy ext_authz v3 CheckRequest');
    return check(view, started);
  };
  const handlers = { check: checkBytes, failClosed, unreadable, unauthenticated };

  let draining = false;
  // gRPC health (Envoy's health check) follows the store too: a replica whose store is down is
  // avoided while others can answer, and with every one down Envoy's panic threshold uses them all.
  const ready = (): boolean => !draining && store.ready();
  // Readiness (/readyz) is "can answer Checks": a store outage is answered from the cache or with a
  // prompt 503, so it must not take the replica out of a load balancer (issue 14 §3).
  const answering = (): boolean => !draining;
  const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));
  const grpcServer = await startGrpcServer(opts.grpcAddress ?? config.server.grpc, handlers, { ...config.grpc, ...grpcAuth },
    [externalProcessorMethod(meter, (err) => logger.error({ err: errorText(err) }, 'meter failed on a message')), ...(embedded ? [rateLimitServiceMethod(embedded) as [string, Method]] : [])],
    (err) => logger.warn({ err: errorText(err) }, 'gRPC connection problem'));
  const catalog = createCatalogHandler({ config: () => config, lookups: cache, logger, now: opts.now });
  // The console's "recent usage" comes from the meter's ledger (PostgreSQL, or the file store's state file).
  const usage: UsageProvider | undefined = opts.usage ?? (store.meter ? ledgerUsage(store.meter) : undefined);
  const consoleHandler = createConsoleHandler({
    config: () => config, lookups: cache, logger, now: opts.now, usage,
    rateLimitsLeft: (record, group) => limitsLeft(rateLimitEngine, config.rateLimits.domain, effectiveLimits(record, group, undefined), record.id),
  });
  const routes: RouteHandler = async (req, res) => (await consoleHandler(req, res)) || catalog(req, res);
  const httpServer = await startHttpServer(opts.httpAddress ?? config.server.http, answering, metrics.registry, routes, (err) => logger.error({ err: err instanceof Error ? err.message : String(err) }, 'http handler failed'), () => store.ready());

  const unwatch = opts.watch === false ? () => {} : watchConfig(opts.configPath, env, logger, (next) => {
    // Everything that can fail is built before anything is swapped.
    const nextFilter = requestHeaderFilter(next.routes);
    config = next;
    headerFilter = nextFilter;
    logger.level = next.log.level;
    if (fileStore) fileStore.replace(next.groups, next.keys);
    metrics.reloads.inc({ result: 'ok' });
  }, () => config, opts.watchIntervalMs, () => metrics.reloads.inc({ result: 'rejected' }));

  // Health follows the store: SERVING only while it can answer (PostgreSQL may come and go).
  const healthTimer = setInterval(() => {
    const ok = ready();
    grpcServer.setServing(ok);
    metrics.storeReady.set(ok ? 1 : 0);
  }, 500);
  healthTimer.unref();
  grpcServer.setServing(ready());
  metrics.storeReady.set(store.ready() ? 1 : 0);

  logger.info({ grpcAddress: grpcServer.address, httpAddress: httpServer.address, store: store.kind, groups: config.groups.size, grpcAuth: grpcAuthText(grpcAuth) }, 'modelgate listening');
  if (!grpcAuth.secret && !grpcAuth.tls && !isLoopback(parseHostPort(grpcServer.address).host)) {
    logger.warn({ grpcAddress: grpcServer.address },
      'the gRPC port listens beyond loopback without authentication: anything that reaches it can run Checks (a key oracle without limits) and send meter streams that debit any key; set grpc.secret or grpc.tls (docs/security.md, "The gRPC port")');
  }

  return {
    grpcAddress: grpcServer.address,
    httpAddress: httpServer.address,
    logger,
    cache,
    store,
    meter,
    rateLimitEngine,
    inFlight,
    checkBytes,
    check: async (req) => checkDef.responseDeserialize(await checkBytes(checkDef.requestSerialize(req))) as CheckResponse__Output,
    config: () => config,
    async close(graceMs = 5000) {
      draining = true;
      grpcServer.setServing(false);
      clearInterval(healthTimer);
      unwatch();
      await grpcServer.drain(graceMs);
      await httpServer.close();
      // Debits still waiting for the store get a moment to land.
      await Promise.race([meter.idle(), new Promise((r) => setTimeout(r, Math.min(graceMs, 2000)).unref())]);
      cache.close();
      await charges?.flushAll();
      remote?.close();
      await store.close();
      logger.info('modelgate stopped');
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
    },
  };
}

/** How the gRPC port authenticates its callers, for the start line (never the secret). */
function grpcAuthText(a: { secret?: string; tls?: unknown }): string {
  return [a.secret ? 'secret' : '', a.tls ? 'mtls' : ''].filter(Boolean).join('+') || 'none';
}

/** The console's usage rows from the meter's ledger: a cost only where the model had a price. */
function ledgerUsage(meterStore: MeterStore): UsageProvider {
  return {
    recent: async (keyId, limit) => (await recentUsage(meterStore, keyId, limit)).map((e) => ({
      time: new Date(e.time).toISOString(), model: e.model, inputTokens: e.inputTokens, outputTokens: e.outputTokens, cost: e.priced ? e.cost : null,
    })),
  };
}

/** The file store's meter state: `meter.stateFile` (relative to the config), else <config>.state.json beside it. */
export function meterStatePath(configPath: string, stateFile: string | null | undefined): string {
  if (stateFile) return resolve(dirname(configPath), stateFile);
  return configPath.replace(/\.(ya?ml|json)$/i, '') + '.state.json';
}

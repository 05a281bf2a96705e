/**
 * Wires one modelgate instance together: config, store, cache, the Check pipeline, the gRPC and
 * HTTP listeners, hot reload and draining. Everything a process needs; nothing reads the
 * environment after start.
 */
import { randomUUID, X509Certificate } from 'node:crypto';
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { AggregatorRegistry } from 'prom-client';
import pino, { type DestinationStream, type Logger } from 'pino';
import type { CheckRequest } from '../../proto/types/envoy/service/auth/v3/CheckRequest';
import type { CheckResponse__Output } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import { createCatalogHandler } from './catalog';
import { createKeyViewHandler } from './key-view';
import type { AdminBackend } from '../admin/backend';
import { adminStatePath, FileAdminBackend } from '../admin/file-backend';
import type { WebhookDelivery } from '../admin/backend';
import { PgAdminBackend } from '../admin/pg-backend';
import { openAdminPool } from '../store/pg/admin';
import { createAdminHandler } from '../admin/handler';
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
import { genAiExport } from './genai-otlp';
import { openPgStore, redactUrl } from '../store/pg/store';
import { authorizationService } from '../envoy/protos';
import { createPipeline, type Admission } from '../check/pipeline';
import { ResponseEncoder } from '../check/response-encoder';
import { StoreCache } from '../store/cache';
import type { MeterStore, Store } from '../store/store';
import { createAdmission, uncappedPricedModels } from '../meter/admission';
import { BudgetAlerts } from '../meter/budget-alerts';
import { BudgetBook } from '../meter/budgets';
import { BudgetWebhooks } from './budget-webhooks';
import { Meter, type MeterMetrics } from '../meter/meter';
import { InFlight } from '../meter/in-flight';
import { LeaseBook } from '../meter/leases';
import { createEstimator, workerTokenCounter } from '../meter/estimate';
import { recentUsage } from '../meter/recent-usage';
import { meterService } from './meter-service';
import type { Method } from '@modelgate/grpc-server';
import type { Decision } from '../check/decision';
import { admitInFlight } from '../check/in-flight-cap';
import { chargeTokens } from '../ratelimit/charges';
import { ChargeBatcher } from '../ratelimit/charge-batcher';
import { limitsLeft } from '../ratelimit/left';
import { EmbeddedEngine, type RateLimitEngine } from '../ratelimit/embedded-engine';
import type { InFlightTable } from '../ratelimit/in-flight';
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
  /** Failed admin API authentications an address may make per window (default 20 a minute; fuzzing tests raise it). */
  readonly adminFailureLimit?: { readonly max: number; readonly windowMs: number };
  /** Recent usage per key for the console's access view (the meter); absent: no usage section. */
  readonly usage?: UsageProvider;
  /** The gRPC port's secret when the config sets none (`modelgate up`'s install secret, config/grpc-auth.ts). */
  readonly defaultGrpcSecret?: string;
}

export interface Service {
  readonly grpcAddress: string;
  readonly httpAddress: string;
  readonly logger: Logger;
  readonly cache: StoreCache;
  readonly store: Store;
  /** The meter (docs/metering.md). */
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
  /**
   * Drains and stops: no new calls; the meter waits up to `meterDrainMs` (meter.drainSeconds by
   * default) for the reports of requests still running, then settles the rest provisionally.
   */
  close(graceMs?: number, meterDrainMs?: number): Promise<void>;
}

export async function startService(opts: ServiceOptions): Promise<Service> {
  const env = opts.env ?? process.env;
  let config = parseConfig(readFileSync(opts.configPath, 'utf8'), env);
  // The gRPC port's secret and certificates: read once, at start, before anything is opened.
  const grpcAuth = {
    secret: readGrpcSecret(config, { env, configPath: opts.configPath }) ?? opts.defaultGrpcSecret,
    tls: readGrpcTls(config, { env, configPath: opts.configPath }),
  };
  const metrics = createMetrics();
  if (grpcAuth.tls) {
    metrics.tlsCertExpiry.set({ file: 'cert' }, certExpirySeconds(grpcAuth.tls.cert));
    metrics.tlsCertExpiry.set({ file: 'client_ca' }, certExpirySeconds(grpcAuth.tls.clientCa));
  }
  const destination =
    opts.logDestination !== undefined && typeof opts.logDestination !== 'string'
      ? opts.logDestination
      : new BatchedLogStream(opts.logDestination ?? 1, {
          maxBytes: 64 * 1024 * 1024,
          onDrop: (bytes) => metrics.logDroppedBytes.inc(bytes),
        });
  const logger = pino({ level: config.log.level, base: { svc: 'modelgate' } }, destination);
  // Registered at start: a worker's registry must be known before the primary first aggregates,
  // and constructing an AggregatorRegistry is what makes prom-client answer the primary's requests.
  if (cluster.isWorker) {
    new AggregatorRegistry();
    AggregatorRegistry.setRegistries([metrics.registry]);
  }

  const storeUrl =
    opts.storeUrl === 'file'
      ? undefined
      : (opts.storeUrl ?? (config.store.kind === 'postgres' ? config.store.url : undefined));
  const storeSource = opts.storeUrl !== undefined ? opts.storeSource : `store: in ${opts.configPath}`;
  let store: Store;
  let fileStore: FileStore | undefined;
  if (opts.store) {
    store = opts.store;
  } else if (storeUrl) {
    store = await openPgStore(storeUrl, {
      ...config.postgres,
      replicaMemoryMs: config.meter.reservationSeconds * 1000,
      source: storeSource,
      onError: (err, where) => logger.warn({ where, err: err.message }, 'store connection problem'),
    });
    logger.info({ store: redactUrl(storeUrl) }, 'using the PostgreSQL store');
  } else {
    store = fileStore = new FileStore(
      config.groups,
      config.keys,
      config.meter.enabled
        ? {
            path: meterStatePath(opts.configPath, config.meter.stateFile),
            ...(opts.now ? { now: opts.now } : {}),
            onError: (err) =>
              logger.error({ err: err.message }, 'meter state file not written (kept in memory; retried)'),
          }
        : undefined,
    );
  }
  const cache = new StoreCache(store, {
    ...config.cache,
    now: opts.now,
    onEvent: (event, kind) => metrics.countCache(event, kind),
  });

  // Set once the warnings below exist: the admin backend hands its groups to the store from its constructor on.
  let onManagedGroups = (): void => {};
  // The admin API (docs/admin-api.md): on the file store, its keys and tokens live beside the config,
  // loaded before the first Check so that the keys it created are served from the start.
  const adminBackend: AdminBackend | undefined =
    storeUrl && !opts.store
      ? new PgAdminBackend(openAdminPool(storeUrl), opts.now)
      : fileStore
        ? new FileAdminBackend(fileStore, {
            path: adminStatePath(opts.configPath),
            configPath: opts.configPath,
            now: opts.now,
            onError: (err) =>
              logger.error(
                { err: err.message },
                'admin state file changed and cannot be read (the last good state stays in use)',
              ),
            onGroups: () => onManagedGroups(),
          })
        : undefined;

  const checkDef = authorizationService().Check;
  // This process's name in the store's leases (strict mode on PostgreSQL) and in the Check's metadata.
  const replica = randomUUID();
  const encoder = new ResponseEncoder((r) => checkDef.responseSerialize(r), undefined, replica);
  const decisionLog = {
    enabled: () => logger.isLevelEnabled('info'),
    write: (line: string) => destination.write(line),
    bindings: '"svc":"modelgate"',
  };
  // Every served group counts, the admin API's on the file store too; a change of those groups warns
  // only when the list changed, a start or a reload always.
  let uncappedWarned = '';
  const warnUncapped = (c: Config, onlyIfChanged = false): void => {
    const models = c.meter.enabled && fileStore ? uncappedPricedModels(fileStore.groups()) : [];
    const listed = models.join('\n');
    if (onlyIfChanged && listed === uncappedWarned) return;
    uncappedWarned = listed;
    if (models.length > 0) {
      logger.warn(
        { models, assumed: c.meter.maxOutputTokens },
        "priced models without maxOutputTokens: a request naming no maximum is held at meter.maxOutputTokens, and a provider whose own cap is higher may spend past the overspend bound; set each one's maxOutputTokens to its provider's cap",
      );
    }
  };
  warnUncapped(config);
  onManagedGroups = () => warnUncapped(config, true);
  if (fileStore?.meter && cluster.isWorker) {
    logger.warn(
      { store: 'file' },
      'metering on the file store with --workers: each worker keeps its own balances and state file writes; meter on PostgreSQL instead',
    );
  }
  // Requests allowed here and not settled yet (meter/in-flight.ts): soft mode's bound, deadlines, input
  // samples, and the rate limits' in-flight cap (a request is in flight from its Check to its settlement).
  const inFlight = new InFlight();
  metrics.readInFlight(() => {
    const since = inFlight.oldestSince();
    return {
      count: inFlight.size,
      oldestAgeSeconds: since === undefined ? 0 : Math.max(0, ((opts.now ?? Date.now)() - since) / 1000),
      reservationSeconds: config.meter.reservationSeconds,
    };
  });
  const meterStore = store.meter;
  const leases = meterStore?.lease
    ? new LeaseBook({ lease: (r, k, w, n, t) => meterStore.lease!(r, k, w, n, t) }, replica, opts.now)
    : undefined;
  // Budgets per window (meter/budgets.ts): each window's spend read from the ledger once, then counted here.
  // Alerts at a budget's thresholds (meter.budgetAlerts), by webhook; read at start.
  const alertsConfig = config.budgetAlerts;
  // The config's webhook and the admin API's (GET /admin/v1/webhooks), each alert sent to each that takes it.
  const webhooks =
    alertsConfig || adminBackend
      ? new BudgetWebhooks({
          config: alertsConfig,
          ...(adminBackend ? { load: () => adminBackend.listWebhooks() } : {}),
          now: opts.now,
          log: (o) =>
            o.delivered
              ? logger.info(o, 'budget alert delivered')
              : logger.warn(o, 'budget alert not delivered (retried with backoff)'),
          onLoadError: (err) => logger.warn({ err: err.message }, 'webhooks of budget alerts not read from the store'),
          // Shown by the admin API (GET /admin/v1/webhooks/deliveries); a failed write is logged, the delivery goes on.
          ...(adminBackend
            ? {
                record: (d: WebhookDelivery) =>
                  void adminBackend
                    .recordDelivery(d)
                    .catch((err: Error) =>
                      logger.warn({ id: d.eventId, err: err.message }, 'budget alert delivery status not stored'),
                    ),
              }
            : {}),
        })
      : undefined;
  // A webhook changed on another replica (PostgreSQL's notification): its thresholds hold here at once.
  const unwatchWebhooks = webhooks
    ? store.onInvalidate((e) => {
        if (e.kind === 'webhooks' || e.kind === 'all') void webhooks.refresh();
      })
    : undefined;
  const alerts = webhooks
    ? new BudgetAlerts(
        (e) => {
          logger.info(
            {
              id: e.id,
              subject: `${e.subject.kind}:${e.subject.name}`,
              ...(e.subject.kind === 'model' ? { model: e.subject.model } : {}),
              threshold: e.threshold,
              spent: e.spent,
              resetsAt: e.resetsAt,
            },
            'budget threshold reached',
          );
          webhooks.send(e);
        },
        () => webhooks.thresholds(),
        opts.now,
      )
    : undefined;
  const budgets = meterStore?.spentIn
    ? new BudgetBook({
        load: (s, since, until) =>
          meterStore.spentIn!({
            ...(s.kind === 'group' ? { group: s.name } : { keyId: s.name }),
            ...(s.kind === 'model' ? { model: s.model } : {}),
            since,
            until,
          }),
        now: opts.now,
        ...(alerts ? { onSpent: (s, b, w, before, after) => alerts.spent(s, b, w, before, after) } : {}),
      })
    : undefined;
  const meterAdmit = createAdmission({
    store: meterStore,
    groups: cache.groups,
    inFlight,
    now: opts.now,
    leases,
    replicas: () => store.replicas?.() ?? 1,
    budgets,
  });
  // A balance lowered outside the meter cuts this replica's lease to it (meter/leases.ts balanceIs).
  const unwatchBalances = leases
    ? store.onInvalidate((e) => {
        if (e.kind === 'key' && e.balance !== undefined) leases.balanceIs(e.sha256, e.balance);
      })
    : undefined;
  // Rate limits (docs/rate-limits.md): the in-flight cap here; requests and tokens per window in Envoy's
  // rate limit filters, counted by the engine (embedded: this process; global: envoyproxy/ratelimit).
  // The cap counts the meter's table (a request is in flight from its Check to its settlement), plus
  // the Checks between the cap and the meter's admission (a store round trip in strict mode), so
  // concurrent Checks of one key cannot all pass the cap before any of them is recorded.
  const admitting = new Map<string, string>();
  const admittingByKey = new Map<string, number>();
  const slots: InFlightTable = {
    inFlight: (keyId) => inFlight.count(keyId) + (admittingByKey.get(keyId) ?? 0),
    acquire: (keyId, requestId) => {
      if (admitting.has(requestId)) return;
      admitting.set(requestId, keyId);
      admittingByKey.set(keyId, (admittingByKey.get(keyId) ?? 0) + 1);
    },
    release: (requestId) => {
      const keyId = admitting.get(requestId);
      if (keyId === undefined) return;
      admitting.delete(requestId);
      const n = (admittingByKey.get(keyId) ?? 1) - 1;
      if (n <= 0) admittingByKey.delete(keyId);
      else admittingByKey.set(keyId, n);
    },
  };
  const embedded = config.rateLimits.engine === 'embedded' ? new EmbeddedEngine({ now: opts.now }) : undefined;
  const remote = embedded
    ? undefined
    : new RemoteEngine(config.rateLimits.service, Math.max(config.rateLimits.timeoutMs, 1000));
  const rateLimitEngine: RateLimitEngine = embedded ?? (remote as RemoteEngine);
  // Charges to the global engine go in batches (one call per 10 ms, not one per response).
  const charges = remote ? new ChargeBatcher(remote) : undefined;
  const chargeEngine: RateLimitEngine = charges ?? rateLimitEngine;
  // The last word on an allowed request: the in-flight cap, then the meter's admission.
  const admit: Admission = (d, view, c) => {
    const { decision, acquired } = admitInFlight(slots, d, view);
    if (!decision.allowed) return decision;
    if (!acquired) return meterAdmit(decision, view, c);
    // The slot taken for the admission is given back once the meter has decided: allowed, the
    // request is in the meter's table from then on; refused, it never ran.
    const m = meterAdmit(decision, view, c);
    if (!(m instanceof Promise)) {
      slots.release(view.requestId);
      return m;
    }
    return m.finally(() => slots.release(view.requestId));
  };
  // The GenAI metrics also over OTLP when the standard OTEL_EXPORTER_OTLP_* variables name a collector (genai-otlp.ts).
  const genAiOtlp = genAiExport(env);
  const meterMetrics: MeterMetrics =
    genAiOtlp === undefined
      ? metrics.meter
      : {
          ...metrics.meter,
          served(protocol, model, usage, seconds) {
            metrics.meter.served?.(protocol, model, usage, seconds);
            genAiOtlp.record(protocol, model, usage, seconds);
          },
        };
  // Shutting down: the port stays open for the meter's reports, and a Check arriving meanwhile is
  // denied (fail closed; another replica, or this gateway once restarted, answers the retry).
  let draining = false;
  const pipeline = createPipeline({
    config: () => config,
    lookups: cache,
    logger,
    metrics,
    now: opts.now,
    encoder,
    decisionLog,
    admit,
    draining: () => draining,
  });
  pipeline.prepare(config);
  // Always served: with `meter.enabled: false` (a reload, while Envoy still sends) each response is
  // counted as released (meter_disabled), never refused.
  const tokenCounter = workerTokenCounter();
  const meter = new Meter({
    config: () => config,
    groups: cache.groups,
    store: store.meter,
    inFlight,
    estimator: createEstimator(tokenCounter),
    metrics: meterMetrics,
    logger,
    now: opts.now,
    // The file store tells the cache itself, at once; PostgreSQL's notification comes a moment later.
    onBalance: fileStore ? undefined : (sha, balance) => cache.keys.patch(sha, (k) => ({ ...k, balance })),
    usageLog: decisionLog,
    leases,
    budgets,
  });
  // Requests this replica allowed and another one settled (PostgreSQL's notifications).
  const unsubscribeSettled = meterStore?.onSettled?.((settled) => meter.settledElsewhere(settled));
  const restored = meter.restore();
  if (restored > 0)
    logger.info(
      { requests: restored },
      'requests in flight at the last stop: settled when reported, or at their maximum at their deadline',
    );
  const meterTimer = setInterval(() => meter.tick(), 1000);
  meterTimer.unref();
  const meterGrpc = meterService(meter, (err) =>
    logger.error({ err: err instanceof Error ? err.message : String(err) }, 'meter failed on a message'),
  );
  const keysById = new LRUCache<string, { key: KeyRecord | null }>({
    max: 10_000,
    ttl: Math.max(config.cache.ttlMs, 1),
  });
  const limitsOf = async (keyId: string, group: string, model: string): Promise<EffectiveLimits | null> => {
    let hit = keysById.get(keyId);
    if (!hit) keysById.set(keyId, (hit = { key: store.findKeyById ? await store.findKeyById(keyId) : null }));
    if (!hit.key) return null;
    const g = await cache.groups.get(group);
    if (g.status === 'unavailable') throw new Error(`the group cannot be looked up: ${g.error}`);
    const found = g.status === 'found' ? g.value : undefined;
    return effectiveLimits(hit.key, found, found?.models.get(model));
  };
  // Tokens a response used count against the key's token limits (whatever settled it: usage the
  // upstream reported, or the meter's estimate). The in-flight slot needs no release: the settlement
  // took the request out of the meter's table.
  meter.onSettled = (s) => {
    if ((s.result !== 'metered' && s.result !== 'estimated') || !s.debit.applied) return;
    const tokens = s.usage.inputTokens + s.usage.outputTokens;
    chargeTokens(
      { engine: chargeEngine, domain: () => config.rateLimits.domain, limits: limitsOf },
      { keyId: s.request.keyId, group: s.request.group, model: s.request.model, tokens },
    )
      .then((n) => {
        if (n > 0) metrics.rateLimitCharges.inc({ result: 'charged' });
      })
      .catch((err: unknown) => {
        metrics.rateLimitCharges.inc({ result: 'failed' });
        logger.warn(
          {
            keyId: s.request.keyId,
            model: s.request.model,
            tokens,
            err: err instanceof Error ? err.message : String(err),
          },
          'tokens not charged to the rate limit engine',
        );
      });
  };

  // gRPC health (Envoy's health check) follows the store too: a replica whose store is down is
  // avoided while others can answer, and with every one down Envoy's panic threshold uses them all.
  const ready = (): boolean => !draining && store.ready();
  // Readiness (/readyz) is "can answer Checks": a store outage is answered from the cache or with a
  // prompt 503, so it must not take the replica out of a load balancer (docs/operations.md: health).
  const answering = (): boolean => !draining;
  const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));
  const grpcServer = await startGrpcServer(
    opts.grpcAddress ?? config.server.grpc,
    pipeline,
    { ...config.grpc, ...grpcAuth },
    [meterGrpc.method, ...(embedded ? [rateLimitServiceMethod(embedded) as [string, Method]] : [])],
    (err) => logger.warn({ err: errorText(err) }, 'gRPC connection problem'),
  );
  const catalog = createCatalogHandler({ lookups: cache, pipeline });
  // The console's "recent usage" comes from the meter's ledger (PostgreSQL, or the file store's state file).
  const usage: UsageProvider | undefined = opts.usage ?? (store.meter ? ledgerUsage(store.meter) : undefined);
  const consoleHandler = createConsoleHandler({
    config: () => config,
    lookups: cache,
    logger,
    now: opts.now,
    usage,
    rateLimitsLeft: (record, group) =>
      limitsLeft(rateLimitEngine, config.rateLimits.domain, effectiveLimits(record, group, undefined), record.id),
  });
  const admin = adminBackend
    ? createAdminHandler({
        backend: adminBackend,
        logger,
        now: opts.now,
        configTokens: () => config.adminTokens,
        configWebhook: () => alertsConfig,
        configFile: opts.configPath,
        onWebhooksChanged: () => void webhooks?.refresh(),
        failures: opts.adminFailureLimit,
      })
    : undefined;
  const keyView = createKeyViewHandler({
    lookups: cache,
    pipeline,
    usage,
    now: opts.now ?? Date.now,
    ...(budgets ? { budgetStatus: (subject, budget) => budgets.status(subject, budget) } : {}),
    keyById: async (id) => (store.findKeyById ? store.findKeyById(id) : null),
  });
  const routes: RouteHandler = async (req, res) =>
    (admin !== undefined && (await admin(req, res))) ||
    (await consoleHandler(req, res)) ||
    (await keyView(req, res)) ||
    catalog(req, res);
  const httpServer = await startHttpServer(
    opts.httpAddress ?? config.server.http,
    answering,
    metrics.registry,
    routes,
    (err) => logger.error({ err: err instanceof Error ? err.message : String(err) }, 'http handler failed'),
    () => store.ready(),
  );

  const unwatch =
    opts.watch === false
      ? () => {}
      : watchConfig(
          opts.configPath,
          env,
          logger,
          (next) => {
            // Everything that can fail is built before anything is swapped.
            pipeline.prepare(next);
            config = next;
            logger.level = next.log.level;
            if (fileStore) fileStore.replace(next.groups, next.keys);
            warnUncapped(next);
            metrics.reloads.inc({ result: 'ok' });
          },
          () => config,
          opts.watchIntervalMs,
          () => metrics.reloads.inc({ result: 'rejected' }),
        );

  // Health follows the store: SERVING only while it can answer (PostgreSQL may come and go).
  const healthTimer = setInterval(() => {
    const ok = ready();
    grpcServer.setServing(ok);
    metrics.storeReady.set(ok ? 1 : 0);
  }, 500);
  healthTimer.unref();
  grpcServer.setServing(ready());
  metrics.storeReady.set(store.ready() ? 1 : 0);

  logger.info(
    {
      grpcAddress: grpcServer.address,
      httpAddress: httpServer.address,
      store: store.kind,
      groups: (fileStore?.groups() ?? config.groups).size,
      grpcAuth: grpcAuthText(grpcAuth),
    },
    'modelgate listening',
  );
  if (!grpcAuth.secret && !grpcAuth.tls && !isLoopback(parseHostPort(grpcServer.address).host)) {
    logger.warn(
      { grpcAddress: grpcServer.address },
      'the gRPC port listens beyond loopback without authentication: anything that reaches it can run Checks (a key oracle without limits) and send meter streams that debit any key; set grpc.secret or grpc.tls (docs/security.md, "The gRPC port")',
    );
  }

  return {
    grpcAddress: grpcServer.address,
    httpAddress: httpServer.address,
    logger,
    cache,
    store,
    meter,
    rateLimitEngine,
    inFlight: slots,
    checkBytes: pipeline.check,
    check: async (req) =>
      checkDef.responseDeserialize(await pipeline.check(checkDef.requestSerialize(req))) as CheckResponse__Output,
    config: () => config,
    async close(graceMs = 5000, meterDrainMs = config.meter.drainSeconds * 1000) {
      draining = true;
      grpcServer.setServing(false);
      clearInterval(healthTimer);
      unwatch();
      // No new calls (GOAWAY); the meter's access-log streams stay open until every request
      // allowed here has been reported (or the drain time passed), then they end and the rest
      // settle at their maximum, provisionally.
      const meterDrained = meter.drain(meterDrainMs).then((left) => {
        if (left > 0)
          logger.warn({ requests: left }, 'requests still running at shutdown settled at their maximum, provisionally');
        meterGrpc.endAll();
      });
      await grpcServer.drain(Math.max(graceMs, meterDrainMs + 1000), meterDrained);
      await meterDrained;
      clearInterval(meterTimer);
      meter.checkpoint();
      unsubscribeSettled?.();
      await httpServer.close();
      // Debits still waiting for the store get a moment to land.
      await Promise.race([meter.idle(), new Promise((r) => setTimeout(r, Math.min(graceMs, 2000)).unref())]);
      await tokenCounter.close();
      cache.close();
      unwatchBalances?.();
      await charges?.flushAll();
      remote?.close();
      unwatchWebhooks?.();
      webhooks?.close();
      await adminBackend?.close();
      await store.close();
      // The last GenAI counts go to the collector; one that does not answer does not hold the exit.
      if (genAiOtlp)
        await Promise.race([
          genAiOtlp.shutdown().catch(() => undefined),
          new Promise((r) => setTimeout(r, 2000).unref()),
        ]);
      logger.info('modelgate stopped');
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
    },
  };
}

/** How the gRPC port authenticates its callers, for the start line (never the secret). */
/**
 * The notAfter of the first certificate in a PEM file, as epoch seconds (0: none readable, which alerts as expired).
 */
function certExpirySeconds(pem: Buffer): number {
  try {
    const t = Date.parse(new X509Certificate(pem).validTo);
    return Number.isFinite(t) ? Math.floor(t / 1000) : 0;
  } catch {
    // not a PEM certificate: 0, which alerts as expired
    return 0;
  }
}

function grpcAuthText(a: { secret?: string; tls?: unknown }): string {
  return [a.secret ? 'secret' : '', a.tls ? 'mtls' : ''].filter(Boolean).join('+') || 'none';
}

/** The console's usage rows from the meter's ledger: a cost only where the model had a price. */
function ledgerUsage(meterStore: MeterStore): UsageProvider {
  return {
    recent: async (keyId, limit) =>
      (await recentUsage(meterStore, keyId, limit)).map((e) => ({
        time: new Date(e.time).toISOString(),
        model: e.model,
        inputTokens: e.inputTokens,
        outputTokens: e.outputTokens,
        cost: e.priced ? e.cost : null,
      })),
  };
}

/** The file store's meter state: `meter.stateFile` (relative to the config), else <config>.state.json beside it. */
export function meterStatePath(configPath: string, stateFile: string | null | undefined): string {
  if (stateFile) return resolve(dirname(configPath), stateFile);
  return configPath.replace(/\.(ya?ml|json)$/i, '') + '.state.json';
}

/**
 * The meter: settles every allowed, billable request when Envoy reports its end (access-log.ts),
 * with a debit of tokens x price, once per request id, in the store. Nothing is free
 * (docs/metering.md):
 *
 * - the provider's usage, when it reported a complete, plausible one (finite, >= 0, under
 *   meter.usageCeiling): `metered`, exact;
 * - else an estimate (estimate.ts), debited and marked with why: `stream_without_usage`,
 *   `no_usage`, `incomplete` (the stream was cut: the client left, the upstream reset),
 *   `undecodable` (an encoding the meter cannot read), `implausible` (usage out of bounds);
 * - a request whose report never comes settles at its maximum cost when its deadline passes
 *   (`provisional`, reason `no_report`): a report that comes later replaces it;
 * - an upstream error (4xx/5xx before any answer) costs nothing: `released`; so does a request
 *   that ended before a Check's answer reached it (the Check timed out at Envoy, or the client left
 *   during it), which Envoy reports without the Check's metadata: `released`, `not_forwarded`.
 *
 * Settling never throws: a store that cannot take a debit is retried, then logged with every
 * figure needed to bill it by hand (`failed`, counted).
 */
import type { Config } from '../config/load';
import { PROVIDERS } from '../providers/providers';
import type { Lookup } from '../store/cache';
import {
  PROTOCOLS,
  validPrice,
  type DebitResult,
  type DeclaredTools,
  type EstimateReason,
  type GroupRecord,
  type MeterStore,
  type ModelPrice,
  type PendingRequest,
  type Protocol,
  type SettledRequest,
} from '../store/store';
import type { BudgetBook } from './budgets';
import type { LeaseBook } from './leases';
import type { MeterReport } from './access-log';
import type { Estimator } from './estimate';
import type { InFlight, InFlightRequest } from './in-flight';
import { readPriceMark, readToolsMark } from './price-mark';
import { answerReportsCalls, NO_TOOLS } from './tool-calls';
import { chargeOf } from './policy/debit';
import { bodyUsage } from './body-usage';
import { capturedText } from './response-text';
import { CACHE_WRITE_FACTOR } from './request-shape';
import {
  boundEstimate,
  classifyReport,
  NOTHING_READ,
  outputPlan,
  plausible,
  reportBounds,
  routeReport,
  tokenCount,
} from './policy/settle';
import { tailUsage } from './tail-usage';
import { isIdentity, isSse, type Usage } from './usage-reader';

/** Why a request cost nothing. */
export type ReleaseReason = 'upstream_error' | 'meter_disabled' | 'not_forwarded';

/** What the meter counts (server/metrics.ts implements it with prom-client). */
export interface MeterMetrics {
  /** A debit: exact (`estimate` undefined), estimated or provisional. */
  settled(
    group: string,
    model: string,
    usage: Usage,
    cost: number,
    result: 'metered' | 'estimated' | 'provisional',
    reason: string,
  ): void;
  /** Nothing to debit: an upstream error, the meter switched off, token counting. */
  released(reason: ReleaseReason | 'not_billable'): void;
  /** A debit the store never took (after its retries). */
  failed(reason: 'store_unavailable' | 'price_invalid'): void;
  /** Access-log entries that could not be read. */
  lostReports(n: number): void;
  /**
   * A response debited from its report (metered or estimated, not provisional): its protocol, model,
   * usage and the seconds from its Check (undefined: not held here). The GenAI metrics.
   */
  served?(protocol: Protocol, model: string, usage: Usage, seconds: number | undefined): void;
}

export interface MeterLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface MeterDeps {
  readonly config: () => Config;
  /** Cached group lookups (StoreCache.groups): the price of the model. */
  readonly groups: { get(name: string): Lookup<GroupRecord> | Promise<Lookup<GroupRecord>> };
  readonly store: MeterStore | undefined;
  readonly inFlight: InFlight;
  readonly estimator: Estimator;
  readonly metrics?: MeterMetrics;
  readonly logger: MeterLogger;
  /** Epoch milliseconds. */
  readonly now?: () => number;
  /** Waits between debit attempts while the store cannot answer. */
  readonly retryDelaysMs?: readonly number[];
  /** A debit's resulting balance, for the local cache (so the next Check sees it before any notification). */
  readonly onBalance?: (keySha256: string, balance: number | null) => void;
  /**
   * Where the exact path's "usage" lines go, written in pino's line format by a fixed-shape
   * serialiser (as the Check's decision lines); absent: through the logger.
   */
  readonly usageLog?: { enabled(): boolean; write(line: string): void; readonly bindings: string };
  /** Strict mode's leases (leases.ts), when the store leases: a settled request's cost comes off them too. */
  readonly leases?: LeaseBook;
  /** Budgets per window (budgets.ts): a settled request gives back its hold and its cost counts in the window. */
  readonly budgets?: BudgetBook;
}

/** The request as the meter knows it. */
export interface MeteredRequest {
  readonly requestId: string;
  readonly keyId: string;
  readonly group: string;
  readonly model: string;
  readonly protocol: Protocol;
  /** Strict mode on leases: the replica that allowed it (its lease pays). */
  readonly replica?: string;
}

/** One settled request, for tests, tools and the rate limits (token counts). */
export type Settlement =
  | {
      readonly result: 'metered' | 'estimated' | 'provisional';
      readonly request: MeteredRequest;
      readonly usage: Usage;
      readonly estimate?: EstimateReason;
      readonly debit: DebitResult;
      readonly price: ModelPrice | null;
    }
  | { readonly result: 'released'; readonly request: MeteredRequest; readonly reason: ReleaseReason }
  | {
      readonly result: 'failed';
      readonly request: MeteredRequest;
      readonly reason: 'store_unavailable' | 'price_invalid';
    }
  | { readonly result: 'skipped' | 'not_billable' };

/** Store reservations past their time are settled every this many ticks (seconds). */
const EXPIRE_EVERY_TICKS = 10;

/** Requests in flight a state file keeps at most. */
const CHECKPOINT_MAX = 50_000;

/** What survives a restart of a request in flight (no body sample, no price). */
function pendingOf(r: PendingRequest): PendingRequest {
  return {
    requestId: r.requestId,
    keyId: r.keyId,
    ...(r.keySha256 ? { keySha256: r.keySha256 } : {}),
    group: r.group,
    model: r.model,
    protocol: r.protocol,
    limited: r.limited,
    maxInputTokens: r.maxInputTokens,
    maxOutputTokens: r.maxOutputTokens,
    maxCost: r.maxCost,
    bodyBytes: r.bodyBytes,
    referencedInput: r.referencedInput,
    stream: r.stream,
    ...(r.outputHidden ? { outputHidden: true } : {}),
    ...(r.inputExtra ? { inputExtra: r.inputExtra } : {}),
    ...(r.inputFactor && r.inputFactor !== 1 ? { inputFactor: r.inputFactor } : {}),
    ...(r.price !== undefined ? { price: r.price } : {}),
    ...(r.tools ? { tools: r.tools } : {}),
    since: r.since,
    deadline: r.deadline,
  };
}

/** The priced hosted tools a request declared: its entry's, else the Check's metadata's (`tools`: price-mark.ts). */
function declaredTools(entry: PendingRequest | undefined, a: MeterReport['authz']): DeclaredTools | undefined {
  return entry ? entry.tools : readToolsMark(a.tools);
}

/**
 * The price a request was admitted at: its entry's, else the Check's metadata's (`price`:
 * price-mark.ts); undefined: neither says (looked up when it settles). A report after the request's
 * deadline, after a restart or at another replica pays it, not the price of the moment.
 */
function admittedPrice(entry: PendingRequest | undefined, a: MeterReport['authz']): ModelPrice | null | undefined {
  if (entry?.price !== undefined) return entry.price;
  return readPriceMark(a.price);
}

/**
 * What the request's input costs per token (request-shape.ts inputFactor): its entry's, else the Check's metadata's.
 */
const inputFactorOf = (entry: PendingRequest | undefined, r: MeterReport): number =>
  Math.max(1, entry ? (entry.inputFactor ?? 1) : (tokenCount(r.authz.inputFactor) ?? 1));

/** The request named a 1-hour cache write (a factor of 2): writes reported without a breakdown were those. */
const hourWrites = (entry: PendingRequest | undefined, r: MeterReport): boolean =>
  inputFactorOf(entry, r) >= CACHE_WRITE_FACTOR.hour1;

const NO_TOKENS: Usage = Object.freeze({ inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 });

/** The exact path's "usage" line, in pino's line format (what logger.info would write for the same fields). */
function usageLine(
  q: MeteredRequest,
  u: Usage,
  d: DebitResult,
  priced: boolean,
  bindings: string,
  time: number,
): string {
  return (
    `{"level":30,"time":${time},${bindings},"requestId":${JSON.stringify(q.requestId)},"keyId":${JSON.stringify(q.keyId)},"group":${JSON.stringify(q.group)},"model":${JSON.stringify(q.model)},"protocol":"${q.protocol}",` +
    `"inputTokens":${u.inputTokens},"outputTokens":${u.outputTokens},"cachedInputTokens":${u.cachedInputTokens},"cost":${d.cost},"priced":${priced},"balance":${d.balance},"msg":"usage"}\n`
  );
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms).unref());
const isProtocol = (s: unknown): s is Protocol => typeof s === 'string' && (PROTOCOLS as readonly string[]).includes(s);
const EMPTY = new Uint8Array(0);

export class Meter {
  #pending = 0;
  readonly #idle: (() => void)[] = [];
  readonly #now: () => number;
  /** Called with every settlement (tests wait on it; the rate limits count tokens from it). */
  onSettled?: (s: Settlement) => void;

  constructor(readonly deps: MeterDeps) {
    this.#now = deps.now ?? Date.now;
  }

  /** Settlements still running (debits waiting for the store, estimates). */
  get pending(): number {
    return this.#pending;
  }

  /** Nothing in flight and no settlement running (tests wait on it). */
  get settledAll(): boolean {
    return this.deps.inFlight.size === 0 && this.#pending === 0;
  }

  /** Resolves when no settlement is running. */
  idle(): Promise<void> {
    return this.#pending === 0 ? Promise.resolve() : new Promise((r) => this.#idle.push(r));
  }

  /** Access-log entries that could not be read: their requests settle at their deadline. */
  lostReports(n: number): void {
    this.deps.metrics?.lostReports(n);
    this.deps.logger.error(
      { entries: n },
      'access-log entries could not be read; their requests settle at their maximum when their deadline passes',
    );
  }

  /**
   * One access-log report (Envoy's word that a request ended). The common case (a whole,
   * uncompressed answer or stream whose usage is complete and plausible) settles at once, without a
   * promise, on a store that debits synchronously; everything else takes the full path.
   */
  report(r: MeterReport): void {
    const a = r.authz;
    if (a.metered === undefined) return this.#unanswered(r);
    if (a.metered !== true || typeof a.keyId !== 'string' || !isProtocol(a.style) || !r.requestId)
      return this.onSettled?.({ result: 'skipped' });
    const request: MeteredRequest = {
      requestId: r.requestId,
      keyId: a.keyId,
      group: typeof a.group === 'string' ? a.group : '',
      model: typeof a.model === 'string' ? a.model : '',
      protocol: a.style,
      ...(typeof a.replica === 'string' ? { replica: a.replica } : {}),
    };
    const entry = this.deps.inFlight.get(r.requestId);
    const usage = this.#exactUsage(request.protocol, r, hourWrites(entry, r));
    if (usage) {
      const store = this.deps.store;
      const tools = declaredTools(entry, a);
      // Tokens by modality (named or not) and hosted tools' calls take the full path, which prices them (modal-cost.ts,
      // tool-calls.ts).
      if (
        store?.debitNow &&
        entry &&
        entry.price !== undefined &&
        !usage.modal &&
        !usage.unnamed &&
        !tools &&
        !answerReportsCalls(request.protocol, r.calls, usage)
      ) {
        let debit: DebitResult | undefined;
        try {
          debit = store.debitNow({
            requestId: request.requestId,
            keyId: request.keyId,
            group: request.group,
            model: request.model,
            protocol: request.protocol,
            inputTokens: usage.inputTokens,
            outputTokens: usage.outputTokens,
            cachedInputTokens: usage.cachedInputTokens,
            price: entry.price,
            estimated: null,
            provisional: false,
          });
        } catch {
          /* the full path retries it */
        }
        if (debit) {
          const s = this.#settled(request, entry, usage, undefined, false, debit, entry.price);
          this.#finish(r.requestId, s);
          this.onSettled?.(s);
          return;
        }
      }
      void this.#track(
        this.#debit(request, entry, usage, undefined, false, admittedPrice(entry, a), {
          tools: tools ?? NO_TOOLS,
          report: r,
        }).then((s) => this.#finish(r.requestId, s)),
      );
      return;
    }
    void this.#track(this.#fromReport(request, r, entry));
  }

  /** The provider's usage of a whole, uncompressed, complete response, if it is plausible; else undefined. */
  #exactUsage(protocol: Protocol, r: MeterReport, hourWrites: boolean): Usage | undefined {
    const config = this.deps.config();
    if (
      !config.meter.enabled ||
      r.status < 200 ||
      r.status >= 400 ||
      !r.ended ||
      !r.tail ||
      r.tail.length < r.responseBodyBytes
    )
      return undefined;
    if (!isIdentity(r.contentEncoding)) return undefined;
    const usage = bodyUsage(protocol, r.tail, isSse(r.contentType), hourWrites);
    return plausible(usage, config.meter.usageCeiling) ? usage : undefined;
  }

  /**
   * A request Envoy reports without any Check's metadata: no answer of a Check reached it (the Check
   * timed out at Envoy, or the client left while it ran), so nothing went upstream and it costs
   * nothing. Allowed here: released. Else it may be allowed here later (a Check still running) or
   * have been allowed by another replica: remembered as gone, and announced through the store.
   */
  #unanswered(r: MeterReport): void {
    // Envoy sends nothing upstream without a Check's answer (failure_mode_allow: false); if it did,
    // the request is left to its deadline rather than released.
    if (!r.requestId || r.upstreamSent) return this.onSettled?.({ result: 'skipped' });
    const entry = this.deps.inFlight.take(r.requestId);
    if (!entry) {
      this.deps.inFlight.gone(r.requestId);
      this.deps.store?.announceReleased?.(r.requestId);
      return this.onSettled?.({ result: 'skipped' });
    }
    const request: MeteredRequest = {
      requestId: entry.requestId,
      keyId: entry.keyId,
      group: entry.group,
      model: entry.model,
      protocol: entry.protocol,
    };
    void this.#track(this.#release(request, 'not_forwarded', entry).then((s) => this.#leaseSettled(entry, s)));
  }

  /** Requests whose deadline passed with no report: settled at their maximum, provisionally. */
  expire(): void {
    for (const entry of this.deps.inFlight.expired(this.#now()))
      void this.#track(this.#provisional(entry, true).then((s) => this.#leaseSettled(entry, s)));
  }

  /**
   * Requests another replica settled (the store's notifications): those allowed here are done; a
   * leased one's cost came off this replica's lease with its debit.
   */
  settledElsewhere(settled: readonly SettledRequest[]): void {
    for (const s of settled) {
      const entry = this.deps.inFlight.take(s.requestId);
      // Released by a report another replica received: a Check still running here is not held.
      if (!entry && s.released) this.deps.inFlight.gone(s.requestId);
      if (entry?.reserved === 'lease')
        this.deps.leases?.settle(entry.keyId, entry.maxCost, s.replica === this.deps.leases.replica ? s.cost : 0);
      if (entry?.budgetHold) this.deps.budgets?.settle(entry.budgetHold, s.released ? 0 : s.cost, this.#now());
    }
  }

  /** A request settled: no longer in flight here; a leased one gives back what it reserved, less what it cost. */
  #finish(requestId: string, s: Settlement): Settlement {
    const entry = this.deps.inFlight.take(requestId);
    if (entry) this.#leaseSettled(entry, s);
    return s;
  }

  #leaseSettled(entry: InFlightRequest, s: Settlement): Settlement {
    const charged =
      (s.result === 'metered' || s.result === 'estimated' || s.result === 'provisional') && s.debit.applied
        ? Math.max(0, s.debit.cost)
        : 0;
    // A failed debit (store down) is retried by no one here: its hold is given back, and the
    // ledger, read again next window, has whatever the store kept.
    if (entry.budgetHold) this.deps.budgets?.settle(entry.budgetHold, charged, this.#now());
    if (entry.reserved !== 'lease' || !this.deps.leases) return s;
    this.deps.leases.settle(entry.keyId, entry.maxCost, charged);
    return s;
  }

  #checkpointed = -1;
  #ticks = 0;

  /**
   * Once a second: expiry, and the requests in flight handed to a store that keeps them across a
   * restart (the file store's state file; at most CHECKPOINT_MAX, the newest).
   */
  tick(): void {
    this.expire();
    this.deps.leases
      ?.maintain()
      .catch((err: unknown) =>
        this.deps.logger.warn(
          { err: err instanceof Error ? err.message : String(err) },
          'leases not renewed yet (retried)',
        ),
      );
    const store = this.deps.store;
    if (store?.expireReservations && ++this.#ticks % EXPIRE_EVERY_TICKS === 0) {
      store
        .expireReservations()
        .catch((err: unknown) =>
          this.deps.logger.warn(
            { err: err instanceof Error ? err.message : String(err) },
            'expired reservations not settled yet (retried)',
          ),
        );
    }
    this.checkpoint();
  }

  /** Hands the requests in flight to a store that keeps them across a restart, if they changed. */
  checkpoint(): void {
    const store = this.deps.store;
    const inFlight = this.deps.inFlight;
    if (!store?.checkpointPending || inFlight.version === this.#checkpointed) return;
    this.#checkpointed = inFlight.version;
    store.checkpointPending(inFlight.list().slice(-CHECKPOINT_MAX).map(pendingOf));
  }

  /** Takes back the requests an earlier process left in flight (file store), before serving. */
  restore(): number {
    const left = this.deps.store?.restorePending?.() ?? [];
    for (const p of left) this.deps.inFlight.add({ ...pendingOf(p), reserved: false });
    return left.length;
  }

  /**
   * Shutdown: waits until every request allowed here has been reported (or `timeoutMs` passed),
   * then settles the rest at their maximum, provisionally (a report reaching another replica, or
   * this one once restarted, replaces it). Resolves when every settlement has landed.
   */
  async drain(timeoutMs: number): Promise<number> {
    const deadline = this.#now() + timeoutMs;
    while (this.deps.inFlight.size > 0 && this.#now() < deadline) await sleep(50);
    const left = this.deps.inFlight.drainAll();
    for (const entry of left)
      void this.#track(this.#provisional(entry, false).then((s) => this.#leaseSettled(entry, s)));
    await this.idle();
    await this.deps.leases?.releaseAll();
    return left.length;
  }

  async #track(p: Promise<Settlement>): Promise<void> {
    this.#pending++;
    try {
      const s = await p;
      this.onSettled?.(s);
    } catch (err) {
      this.deps.logger.error(
        { err: err instanceof Error ? err.message : String(err) },
        'meter failed to settle a request',
      );
    } finally {
      if (--this.#pending === 0) for (const wake of this.#idle.splice(0)) wake();
    }
  }

  async #fromReport(request: MeteredRequest, r: MeterReport, entry: InFlightRequest | undefined): Promise<Settlement> {
    let s: Settlement = { result: 'skipped' };
    try {
      s = await this.#settleReport(request, r, entry);
      return s;
    } finally {
      // Held against the key until its debit is in the store and the local cache (soft mode's bound).
      this.#finish(r.requestId, s);
    }
  }

  async #settleReport(
    request: MeteredRequest,
    r: MeterReport,
    entry: InFlightRequest | undefined,
  ): Promise<Settlement> {
    const config = this.deps.config();
    const route = routeReport(config.meter.enabled, r);
    if (route.kind === 'release') return this.#release(request, route.reason, entry);
    const sse = isSse(r.contentType);
    const tail = r.tail ?? EMPTY;
    const whole = r.ended && tail.length >= r.responseBodyBytes;
    const read = route.readAnswer
      ? await tailUsage(request.protocol, tail, whole, r.contentType, r.contentEncoding, r.ended, hourWrites(entry, r))
      : NOTHING_READ;
    const ceiling = config.meter.usageCeiling;
    const admitted = admittedPrice(entry, r.authz);
    const tools = declaredTools(entry, r.authz);
    const c = classifyReport(
      { status: r.status, ended: r.ended, unanswered: route.unanswered, sse, protocol: request.protocol },
      read,
      ceiling,
    );
    if (c.kind === 'exact')
      return this.#debit(request, entry, c.usage, undefined, false, admitted, { tools: tools ?? NO_TOOLS, report: r });

    const trusted = c.trusted;
    const bounds = reportBounds(entry, r.authz, config.meter.reasoningModels, request.model);
    const est = this.deps.estimator;
    const estimatedInput =
      trusted && trusted.inputTokens > 0
        ? trusted.inputTokens
        : Math.ceil(
            ((await est.input(
              request.protocol,
              {
                sample: entry?.sample,
                bodyBytes: entry?.bodyBytes ?? r.requestBodyBytes,
                referencedInput: entry?.referencedInput ?? r.authz.referencedInput === true,
              },
              config.meter.referencedInputTokens,
            )) +
              bounds.inputExtra) *
              bounds.inputFactor,
          );
    const path = typeof r.authz.path === 'string' ? r.authz.path : r.path;
    const rules = PROVIDERS[request.protocol].shape;
    const embeds = rules.embeds(path);
    const streamed = sse || (entry ? entry.stream : rules.streamsByPath(path));
    const plan = outputPlan(
      {
        embeds,
        unanswered: route.unanswered,
        ended: r.ended,
        upstreamAnswered: r.upstreamAnswered,
        streamed,
        hidden: bounds.hidden,
        responseBodyBytes: r.responseBodyBytes,
      },
      bounds.maxOutput ?? config.meter.maxOutputTokens,
    );
    let estimatedOutput = 0;
    if (plan.kind === 'maximum') estimatedOutput = plan.tokens;
    else if (plan.kind === 'from_answer') {
      // An answer that is not an event stream leaves no tail when cut short: its bytes count (one token each).
      const text = read.undecodable || (!sse && tail.length === 0) ? undefined : capturedText(tail, sse, whole);
      estimatedOutput = await est.output(request.protocol, text?.text, text?.bytes ?? 0, r.responseBodyBytes, sse);
    }
    const usage = boundEstimate({ input: estimatedInput, output: estimatedOutput }, bounds, trusted, ceiling);
    return this.#debit(request, entry, usage, c.reason, false, admitted, tools && { tools });
  }

  /** A request with no report: its maximum, provisionally (`expired`: its deadline passed; else shutdown). */
  #provisional(entry: InFlightRequest, expired: boolean): Promise<Settlement> {
    const request: MeteredRequest = {
      requestId: entry.requestId,
      keyId: entry.keyId,
      group: entry.group,
      model: entry.model,
      protocol: entry.protocol,
      ...(entry.reserved === 'lease' && this.deps.leases ? { replica: this.deps.leases.replica } : {}),
    };
    this.deps.logger.warn(
      { ...request, after: expired ? 'deadline' : 'shutdown', since: new Date(entry.since).toISOString() },
      'no report of the response yet: settling at its maximum, provisionally',
    );
    return this.#debit(
      request,
      entry,
      { inputTokens: entry.maxInputTokens, outputTokens: entry.maxOutputTokens, cachedInputTokens: 0 },
      'no_report',
      true,
      entry.price,
      entry.tools && { tools: entry.tools },
    );
  }

  async #release(
    request: MeteredRequest,
    reason: ReleaseReason,
    entry: InFlightRequest | undefined,
  ): Promise<Settlement> {
    this.deps.metrics?.released(reason);
    if (reason === 'meter_disabled')
      this.deps.logger.warn({ ...request, reason }, 'not metered: the meter is switched off');
    if (reason === 'not_forwarded')
      this.deps.logger.info(
        { ...request, reason },
        'released: no answer of its Check reached the request (it timed out at Envoy, or the client left while it ran), so nothing went upstream',
      );
    // A reservation the store fails to release lapses at its expiry: the balance is held until then, never debited.
    if ((entry ? entry.reserved === 'store' : this.deps.config().meter.mode === 'strict') && this.deps.store)
      await this.deps.store.release(request.requestId).catch(() => {});
    return { result: 'released', request, reason };
  }

  async #price(request: MeteredRequest): Promise<ModelPrice | null | 'unavailable' | 'invalid'> {
    const found = await this.deps.groups.get(request.group);
    if (found.status === 'unavailable') return 'unavailable';
    if (found.status === 'not_found') return null;
    const price = found.value.models.get(request.model)?.price ?? null;
    if (price === null) return null;
    return validPrice(price) ? price : 'invalid';
  }

  /**
   * @param admitted the price the request was admitted at (admittedPrice); undefined: the group's price now
   * @param tooling the priced hosted tools it declared (NO_TOOLS: none), and the report whose answer
   *   counts their calls and those of priced tools it did not declare (tool-calls.ts); without a
   *   report, or with an estimate, their most calls
   */
  async #debit(
    request: MeteredRequest,
    entry: InFlightRequest | undefined,
    usage: Usage,
    estimate: EstimateReason | undefined,
    provisional: boolean,
    admitted: ModelPrice | null | undefined,
    tooling?: { readonly tools: DeclaredTools; readonly report?: MeterReport },
  ): Promise<Settlement> {
    const store = this.deps.store;
    const delays = this.deps.retryDelaysMs ?? [200, 1000, 5000, 15_000, 30_000, 60_000];
    let lastError = 'no store keeps balances';
    for (let attempt = 0; store && attempt <= delays.length; attempt++) {
      if (attempt > 0) await sleep(delays[attempt - 1]);
      try {
        const price = admitted !== undefined ? admitted : await this.#price(request);
        if (price === 'invalid') return this.#failed(request, usage, 'price_invalid', 'the model has an invalid price');
        if (price === 'unavailable') throw new Error('the group cannot be looked up');
        const charge = chargeOf(usage, price, estimate, provisional, request.protocol, tooling);
        if (charge.kind === 'inexpressible')
          return this.#failed(
            request,
            usage,
            'price_invalid',
            'the model prices audio or image tokens above 0 and text at 0: the debit cannot carry it',
          );
        if (charge.unpriced.length > 0 && attempt === 0) {
          this.deps.logger.warn(
            { ...request, modalities: charge.unpriced, modal: usage.modal },
            'tokens of a modality the model has no price for: debited at its highest price for their direction',
          );
        }
        const debit = await store.debit({
          ...request,
          ...charge.fields,
          price,
          estimated: charge.mark ?? null,
          provisional,
        });
        return this.#settled(request, entry, charge.usage, charge.mark, provisional, debit, price);
      } catch (err) {
        lastError = err instanceof Error ? err.message : String(err);
      }
    }
    return this.#failed(request, usage, 'store_unavailable', lastError);
  }

  /** A debit landed: the cache, the counters, the "usage" line. */
  #settled(
    request: MeteredRequest,
    entry: InFlightRequest | undefined,
    usage: Usage,
    estimate: EstimateReason | undefined,
    provisional: boolean,
    debit: DebitResult,
    price: ModelPrice | null,
  ): Settlement {
    const result = provisional ? 'provisional' : estimate ? 'estimated' : 'metered';
    if (entry?.keySha256 && debit.applied) this.deps.onBalance?.(entry.keySha256, debit.balance);
    if (debit.applied)
      this.deps.metrics?.settled(request.group, request.model, usage, debit.cost, result, estimate ?? '');
    else this.deps.metrics?.settled(request.group, request.model, NO_TOKENS, 0, result, estimate ?? '');
    if (debit.applied && !provisional)
      this.deps.metrics?.served?.(
        request.protocol,
        request.model,
        usage,
        entry ? (this.#now() - entry.since) / 1000 : undefined,
      );
    const fast = this.deps.usageLog;
    if (!estimate && !provisional && debit.applied && fast) {
      if (fast.enabled()) fast.write(usageLine(request, usage, debit, price !== null, fast.bindings, this.#now()));
    } else {
      const line: Record<string, unknown> = {
        ...request,
        ...usage,
        cost: debit.cost,
        priced: price !== null,
        balance: debit.balance,
      };
      if (estimate) line.estimated = estimate;
      if (provisional) line.provisional = true;
      if (!debit.applied) line.duplicate = true;
      if (estimate === 'stream_without_usage')
        line.hint = 'the client did not set stream_options.include_usage: true, so the usage was estimated';
      if (estimate === 'unknown_modality')
        line.hint =
          "the provider reported tokens of a modality modelgate cannot name: they were debited at the model's highest price of their direction";
      if (estimate) this.deps.logger.warn(line, 'usage');
      else this.deps.logger.info(line, 'usage');
    }
    return estimate ? { result, request, usage, estimate, debit, price } : { result, request, usage, debit, price };
  }

  #failed(
    request: MeteredRequest,
    usage: Usage,
    reason: 'store_unavailable' | 'price_invalid',
    error: string,
  ): Settlement {
    this.deps.metrics?.failed(reason);
    // Every figure needed to bill it by hand.
    this.deps.logger.error({ ...request, ...usage, reason, error }, 'unsettled: the store did not take the debit');
    return { result: 'failed', request, reason };
  }
}

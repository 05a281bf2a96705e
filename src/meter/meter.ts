/**
 * The meter (issue 11): follows one request through Envoy's ext_proc stream (request headers, then
 * response headers and body), reads the usage the response reports (usage-reader.ts) and settles
 * it: a debit of tokens x price, once per request id, in the store. Nothing here can delay or
 * break a response: Envoy sends the stream in observability mode (it does not wait for us), and
 * every failure ends as a count and a log line, never an exception.
 *
 * A response is either metered (a ledger row, tokens and cost counted), not billable (token
 * counting endpoints), or unmetered with a reason (no usage in the answer, an upstream error, a
 * cut stream, a store that stayed down): never silently free.
 */
import type { Config } from '../config/load';
import { HEADER } from '../check/headers';
import { classify } from '../check/routes';
import type { Lookup } from '../store/cache';
import type { DebitResult, GroupRecord, MeterStore, ModelPrice, Protocol } from '../store/store';
import { UsageReader, type UnmeteredReason, type Usage } from './usage-reader';

/** What the meter counts (server/metrics.ts implements it with prom-client). */
export interface MeterMetrics {
  metered(group: string, model: string, usage: Usage, cost: number): void;
  unmetered(reason: UnmeteredReason): void;
  notBillable(): void;
}

export interface MeterLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface MeterDeps {
  readonly config: () => Config;
  /** Cached group lookups (StoreCache.groups): the price of the model. */
  readonly groups: { get(name: string): Lookup<GroupRecord> | Promise<Lookup<GroupRecord>> };
  readonly store: MeterStore | undefined;
  readonly metrics?: MeterMetrics;
  readonly logger: MeterLogger;
  /** Waits between debit attempts while the store cannot answer (default 0.2 s, 1 s, 5 s). */
  readonly retryDelaysMs?: readonly number[];
}

/** A header of an ext_proc headers message, by lowercase name. */
export type HeaderGetter = (name: string) => string | undefined;

/** The request as the meter knows it from its headers (set by ext_authz on allowed requests). */
export interface MeteredRequest {
  readonly requestId: string;
  readonly keyId: string;
  readonly group: string;
  readonly model: string;
  readonly protocol: Protocol;
}

/** One settled response, for tests and tools. */
export type Settlement =
  | { readonly result: 'metered'; readonly request: MeteredRequest; readonly usage: Usage; readonly debit: DebitResult; readonly price: ModelPrice | null }
  | { readonly result: 'unmetered'; readonly request: MeteredRequest; readonly reason: UnmeteredReason }
  | { readonly result: 'not_billable' | 'skipped' };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms).unref());

export class Meter {
  #pending = 0;
  readonly #idle: (() => void)[] = [];
  /** Called with every settlement (tests wait on it). */
  onSettled?: (s: Settlement) => void;

  constructor(readonly deps: MeterDeps) {}

  /** A new ext_proc stream. */
  stream(): MeterStream {
    return new MeterStream(this);
  }

  /** Settlements still running (debits waiting for the store). */
  get pending(): number {
    return this.#pending;
  }

  /** Resolves when no settlement is running (drain before close). */
  idle(): Promise<void> {
    return this.#pending === 0 ? Promise.resolve() : new Promise((r) => this.#idle.push(r));
  }

  /** @internal settles one response; never rejects. */
  async settle(request: MeteredRequest, outcome: { usage: Usage } | { reason: UnmeteredReason }): Promise<Settlement> {
    this.#pending++;
    try {
      const s = 'usage' in outcome ? await this.#debit(request, outcome.usage) : await this.#unmetered(request, outcome.reason);
      this.onSettled?.(s);
      return s;
    } finally {
      if (--this.#pending === 0) for (const wake of this.#idle.splice(0)) wake();
    }
  }

  async #price(request: MeteredRequest): Promise<ModelPrice | null | 'unavailable' | 'invalid'> {
    const found = await this.deps.groups.get(request.group);
    if (found.status === 'unavailable') return 'unavailable';
    if (found.status === 'not_found') return null;
    const price = found.value.models.get(request.model)?.price ?? null;
    if (price === null) return null;
    const ok = (n: number | null): boolean => n === null || (Number.isFinite(n) && n >= 0);
    return ok(price.input) && ok(price.output) && ok(price.cachedInput) ? price : 'invalid';
  }

  async #debit(request: MeteredRequest, usage: Usage): Promise<Settlement> {
    const store = this.deps.store;
    if (!store) return this.#unmetered(request, 'store_unavailable');
    const delays = this.deps.retryDelaysMs ?? [200, 1000, 5000];
    let lastError = '';
    for (let attempt = 0; attempt <= delays.length; attempt++) {
      if (attempt > 0) await sleep(delays[attempt - 1]);
      try {
        const price = await this.#price(request);
        if (price === 'invalid') return this.#unmetered(request, 'price_invalid');
        if (price === 'unavailable') throw new Error('the group cannot be looked up');
        const debit = await store.debit({ ...request, ...usage, price });
        const cost = debit.applied ? debit.cost : 0;
        this.deps.metrics?.metered(request.group, request.model, debit.applied ? usage : { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 }, cost);
        this.deps.logger.info({
          ...request, ...usage, cost: debit.cost, priced: price !== null, balance: debit.balance, ...(debit.applied ? {} : { duplicate: true }),
        }, 'usage');
        return { result: 'metered', request, usage, debit, price };
      } catch (err) {
        lastError = err instanceof Error ? err.message : String(err);
      }
    }
    this.deps.logger.warn({ ...request, ...usage, error: lastError }, 'unmetered: the store did not take the debit');
    return this.#unmetered(request, 'store_unavailable', true);
  }

  async #unmetered(request: MeteredRequest, reason: UnmeteredReason, logged = false): Promise<Settlement> {
    this.deps.metrics?.unmetered(reason);
    if (!logged) this.deps.logger.warn({ ...request, reason, ...(reason === 'stream_without_usage' ? { hint: 'the client must set stream_options.include_usage: true' } : {}) }, 'unmetered');
    // Strict mode: what was reserved at Check time goes back (no usage to settle it with).
    if (this.deps.config().meter.mode === 'strict' && this.deps.store) await this.deps.store.release(request.requestId).catch(() => {});
    return { result: 'unmetered', request, reason };
  }
}

/** Path without query, a token-counting endpoint (free at every provider). */
function notBillable(path: string): boolean {
  return path.endsWith('/count_tokens') || path.endsWith(':countTokens');
}

/** The state of one ext_proc stream. */
export class MeterStream {
  #request: MeteredRequest | undefined;
  #reader: UsageReader | undefined;
  #status = 0;
  #done = false;

  constructor(private readonly meter: Meter) {}

  /** Nothing more to read on this stream (the processor may close it: Envoy then stops sending). */
  get done(): boolean {
    return this.#done;
  }

  /** The request headers (after ext_authz set x-modelgate-*). */
  requestHeaders(get: HeaderGetter): void {
    const keyId = get(HEADER.keyId);
    const requestId = get('x-request-id');
    if (!keyId || !requestId) return this.#finish({ result: 'skipped' });
    const path = (get(':path') ?? '').split('?')[0];
    const config = this.meter.deps.config();
    const route = classify('POST', path, config.routes.altPrefix, false);
    if (route.kind !== 'protocol') return this.#finish({ result: 'skipped' });
    if (notBillable(path)) {
      this.meter.deps.metrics?.notBillable();
      return this.#finish({ result: 'not_billable' });
    }
    this.#request = { requestId, keyId, group: get(HEADER.group) ?? '', model: get(HEADER.model) ?? route.model ?? '', protocol: route.style };
    if (!config.meter.enabled) this.#settle({ reason: 'meter_disabled' });
  }

  responseHeaders(get: HeaderGetter, endOfStream: boolean): void {
    if (this.#done || !this.#request) return;
    this.#status = Number(get(':status') ?? 0);
    if (this.#status >= 400 || this.#status === 0) return this.#settle({ reason: 'upstream_error' });
    this.#reader = new UsageReader(this.#request.protocol, get('content-type') ?? '', get('content-encoding') ?? '');
    if (endOfStream) this.#end(true);
  }

  responseBody(chunk: Uint8Array, endOfStream: boolean): void {
    if (this.#done || !this.#reader) return;
    if (chunk.length > 0) this.#reader.push(chunk);
    if (endOfStream) this.#end(true);
  }

  /** The ext_proc stream ended (Envoy closed it, or it failed). */
  close(): void {
    if (this.#done || !this.#request) return;
    if (!this.#reader) return this.#settle({ reason: 'incomplete' });
    this.#end(false);
  }

  #end(complete: boolean): void {
    const reader = this.#reader as UsageReader;
    this.#done = true;
    void reader.end(complete).then((outcome) => this.meter.settle(this.#request as MeteredRequest, outcome));
  }

  #settle(outcome: { reason: UnmeteredReason }): void {
    this.#done = true;
    void this.meter.settle(this.#request as MeteredRequest, outcome);
  }

  #finish(s: Settlement): void {
    this.#done = true;
    this.meter.onSettled?.(s);
  }
}

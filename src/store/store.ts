/**
 * The store contract shared by the file store (embedded default) and the PostgreSQL store.
 * Keys are looked up only by the SHA-256 of the full key string (hex, lowercase); the key itself
 * never reaches a store.
 */
import type { Budget } from './budget-window';

/** Protocol styles of the spec (docs/spec.md §1, §4.2). */
export const PROTOCOLS = ['chat', 'responses', 'embeddings', 'messages', 'generative'] as const;
export type Protocol = (typeof PROTOCOLS)[number];

/**
 * Rate limits (docs/rate-limits.md), each `null` or absent when there is none: requests and tokens per minute
 * and per day (fixed windows, counted by the rate limit engine across replicas), and requests in
 * flight (per replica, released when the response ends).
 */
export interface Limits {
  readonly rpm?: number | null;
  readonly tpm?: number | null;
  readonly rpd?: number | null;
  readonly tpd?: number | null;
  readonly inFlight?: number | null;
}

/** The limit names, in the order they are shown. */
export const LIMIT_NAMES = ['rpm', 'tpm', 'rpd', 'tpd', 'inFlight'] as const;
export type LimitName = (typeof LIMIT_NAMES)[number];

/** The limits that are set (whole numbers > 0) of a record from any source, or null when none is. */
export function toLimits(v: unknown): Limits | null {
  if (!v || typeof v !== 'object') return null;
  const out: Record<string, number> = {};
  for (const name of LIMIT_NAMES) {
    const n = (v as Record<string, unknown>)[name];
    if (typeof n === 'number' && Number.isInteger(n) && n > 0) out[name] = n;
  }
  return Object.keys(out).length === 0 ? null : out;
}

/**
 * Amounts of money are counted to 1 / COST_GRAINS of the balance's unit by the file store (float
 * sums drift below it; PostgreSQL counts exactly). A whole number (1e12): dividing by it gives the
 * nearest float to the decimal, where multiplying by 1e-12 may not.
 */
export const COST_GRAINS = 1e12;

/**
 * A cost rounded up to a grain (1 / COST_GRAINS): anything priced costs at least one grain, never
 * nothing (rounded to the nearest, a request costing under half a grain was free however many were
 * sent). Its float error (a millionth of a grain) is not rounded up, so a cost on the grain stays as
 * it is. A request's maximum cost is rounded the same way, so it always covers what it is charged.
 */
export function costUp(c: number): number {
  return c > 0 ? Math.max(1, Math.ceil(c * COST_GRAINS - 1e-6)) / COST_GRAINS : c;
}

/** A model's price per million tokens, in the balance's unit (docs/metering.md). */
export interface ModelPrice {
  readonly input: number;
  readonly output: number;
  /** Cached input tokens (where the provider reports them); `null`: the input price. */
  readonly cachedInput: number | null;
  /** The price of a request whose input is over `above` tokens, for every token of it; absent or `null`: none. */
  readonly longContext?: LongContextPrice | null;
  /**
   * Audio input, audio output and image output tokens, where the provider bills them above the text
   * price (meter/modal-cost.ts); absent or `null`: not priced (a request for them is refused unless
   * meter.modalities is allow).
   */
  readonly audioInput?: number | null;
  readonly audioOutput?: number | null;
  readonly imageOutput?: number | null;
  /**
   * Per call of a tool the provider runs and bills besides tokens (docs/metering.md, "Hosted tools"),
   * in the balance's unit; a tool absent (or `null` for all): not priced (a request declaring it is
   * refused unless meter.hostedTools is allow).
   */
  readonly tools?: HostedToolPrices | null;
}

/**
 * The hosted tools a price may name: OpenAI's web_search (Responses and chat search models),
 * file_search, code_interpreter (per container), image_generation; Anthropic's web_search and
 * code_execution; Gemini's grounding (google_search, google_maps, enterprise_web_search) and file_search.
 */
export const HOSTED_TOOLS = [
  'web_search',
  'file_search',
  'code_interpreter',
  'code_execution',
  'image_generation',
  'google_search',
  'google_maps',
  'enterprise_web_search',
] as const;
export type HostedTool = (typeof HOSTED_TOOLS)[number];
export type HostedToolPrices = Readonly<Partial<Record<HostedTool, number>>>;

/**
 * The tool prices of a mapping that names them (other names, and figures that are not numbers >= 0, left out), frozen.
 */
export function toolPrices(t: Readonly<Record<string, unknown>>): HostedToolPrices {
  const out: Partial<Record<HostedTool, number>> = {};
  for (const k of HOSTED_TOOLS) {
    const v = t[k];
    if (typeof v === 'number' && Number.isFinite(v) && v >= 0) out[k] = v;
  }
  return Object.freeze(out);
}

/** The cost of tool calls at a price (calls by tool), rounded up to a grain; 0 without a price. */
export function toolsCost(
  price: ModelPrice | null,
  calls: Readonly<Partial<Record<HostedTool, number>>> | undefined,
): number {
  if (!price || !calls) return 0;
  let c = 0;
  for (const t of HOSTED_TOOLS) {
    const n = calls[t] ?? 0;
    const p = price.tools?.[t];
    if (n > 0 && typeof p === 'number') c += n * p;
  }
  return costUp(c);
}

/** The hosted tools a request declares, and how many calls it may make in all. */
export interface DeclaredTools {
  readonly names: readonly HostedTool[];
  readonly maxCalls: number;
  /** The answer may not show the calls (a Gemini field mask trims it): its most calls are debited. */
  readonly unreported?: true;
}

/**
 * A long-context price (docs/metering.md, "Long prompts"): providers bill every token of a request
 * whose prompt is over a length (Gemini 2.5 Pro and 3 Pro, Claude Sonnet 4 and 4.5 with the 1M
 * window: over 200,000 input tokens, cached ones included) at a higher input and output price.
 */
export interface LongContextPrice {
  /** Input tokens (cached included, as the provider counts them): a request with more pays this price. */
  readonly above: number;
  readonly input: number;
  readonly output: number;
  /** `null`: this tier's input price. */
  readonly cachedInput: number | null;
}

/**
 * The flat price a request with this many input tokens (cached included) is charged at: the
 * long-context price when it has one and the input is over its threshold, else the model's own.
 */
export function priceAt(price: ModelPrice, inputTokens: number): ModelPrice {
  const long = price.longContext;
  // Not `!(inputTokens > above)`: a threshold that is not a number (never through the config or the
  // CHECKs) yields that price, which no store debits (a cost that is not finite is refused, logged).
  if (!long || inputTokens <= long.above) return price;
  return { input: long.input, output: long.output, cachedInput: long.cachedInput };
}

/**
 * Whether every figure of a price is a finite amount >= 0. One that is not (a PostgreSQL row of a
 * newer schema, a mangled `price` field in the Check's metadata) is never debited as if it were
 * another: the meter refuses it (price_invalid) or looks the price up.
 */
export function validPrice(p: ModelPrice): boolean {
  const amount = (n: unknown): boolean => typeof n === 'number' && Number.isFinite(n) && n >= 0;
  const optional = (n: unknown): boolean => n === undefined || n === null || amount(n);
  const l = p.longContext;
  const t = p.tools;
  const tools =
    t === undefined ||
    t === null ||
    (typeof t === 'object' &&
      Object.entries(t).every(([k, v]) => (HOSTED_TOOLS as readonly string[]).includes(k) && amount(v)));
  return (
    tools &&
    amount(p.input) &&
    amount(p.output) &&
    optional(p.cachedInput) &&
    MODAL_PRICES.every((m) => optional(p[m])) &&
    (l === undefined ||
      l === null ||
      (amount(l.above) && amount(l.input) && amount(l.output) && optional(l.cachedInput)))
  );
}

/** The modalities a price may name besides text (ModelPrice). */
export const MODAL_PRICES = ['audioInput', 'audioOutput', 'imageOutput'] as const;
export type Modality = (typeof MODAL_PRICES)[number];

/** The modality prices of a price that names them (absent ones left out). */
export function modalPrices(p: {
  readonly audioInput?: number | null;
  readonly audioOutput?: number | null;
  readonly imageOutput?: number | null;
}): Partial<Record<Modality, number>> {
  const out: Partial<Record<Modality, number>> = {};
  for (const k of MODAL_PRICES) {
    const v = p[k];
    if (typeof v === 'number') out[k] = v;
  }
  return out;
}

export interface ModelRecord {
  readonly name: string;
  /** Protocol styles this model is served on; `null` means any. */
  readonly protocols: readonly Protocol[] | null;
  /** false: 403 model_unavailable (its channel is down). */
  readonly available: boolean;
  /** Absent or `null`: no price (metered in tokens, costs nothing). */
  readonly price?: ModelPrice | null;
  /** Strict mode: output tokens reserved when a request names no maximum (absent: the meter's default). */
  readonly maxOutputTokens?: number | null;
  /** Limits per key for this model (requests and tokens; not inFlight), on top of the key's own. */
  readonly limits?: Limits | null;
}

export interface GroupRecord {
  readonly name: string;
  /** false: every key of the group gets 403 group_unavailable. */
  readonly available: boolean;
  /** By exact name (case and spaces matter, docs/spec.md §2). */
  readonly models: ReadonlyMap<string, ModelRecord>;
  /** The default limits of each of its keys (each key counted on its own). */
  readonly limits?: Limits | null;
  /** What all its keys together may spend per window (meter/budgets.ts); absent or null: none. */
  readonly budget?: Budget | null;
}

export interface KeyRecord {
  /** Shown in logs and headers; never the key itself. */
  readonly id: string;
  /** Lowercase hex SHA-256 of the full key string. */
  readonly sha256: string;
  readonly group: string;
  /** `null` = unlimited; anything but a finite number > 0 denies with balance_insufficient. */
  readonly balance: number | null;
  readonly disabled: boolean;
  /** Epoch milliseconds, or `null` for never. */
  readonly expiresAt: number | null;
  /** The key's own limits: each one set overrides its group's. */
  readonly limits?: Limits | null;
  /** What the key may spend per window beside its balance (meter/budgets.ts); absent or null: none. */
  readonly budget?: Budget | null;
  /**
   * What the key may spend per window on one model (by the group's exact model name), beside its
   * budget and balance (meter/budgets.ts, 403 model_budget_exhausted); absent or null: none.
   */
  readonly modelBudgets?: Readonly<Record<string, Budget>> | null;
}

/**
 * Whose spend in a window (MeterStore.spentIn): a key's (`keyId`), a key's on one model (`keyId` and `model`), or a
 * group's.
 */
export interface SpentQuery {
  readonly keyId?: string;
  readonly model?: string;
  readonly group?: string;
  readonly since: number;
  readonly until: number;
}

/**
 * What every store implements. `null` means "definitely not found". A thrown error or rejected
 * promise means "could not decide" (store down or slow): callers fail closed with store_unavailable
 * unless a fresh-enough cached answer exists. Never confuse the two.
 */
export interface Store {
  readonly kind: string;
  findKey(sha256: string): Promise<KeyRecord | null>;
  findGroup(name: string): Promise<GroupRecord | null>;
  /** A key by its id (the rate limits' token charges know only the id); optional for test stores. */
  findKeyById?(id: string): Promise<KeyRecord | null>;
  /** Subscribe to invalidations; returns an unsubscribe function. */
  onInvalidate(listener: (event: InvalidationEvent) => void): () => void;
  /** true once the store has loaded and can answer. */
  ready(): boolean;
  close(): Promise<void>;
  /** Balances that move (docs/metering.md): debits, reservations and the usage ledger. */
  readonly meter?: MeterStore;
  /**
   * modelgate processes sharing this store's balances, this one included (PostgreSQL: counted every
   * few seconds; absent: one); 0 when this one cannot count them. Soft mode holds a key's requests in
   * flight here to its share (none of it at 0: one request at a time).
   */
  replicas?(): number;
}

/**
 * Why a debit is an estimate rather than the provider's own usage (docs/metering.md):
 * `stream_without_usage` a chat stream without stream_options.include_usage; `no_usage` an answer
 * that reports none; `incomplete` a response cut short (the client left, the upstream reset);
 * `undecodable` an encoding the meter cannot read; `implausible` usage out of bounds (negative,
 * not a number, over meter.usageCeiling); `no_report` no report of the response arrived before its
 * deadline (provisional: its maximum cost); `unknown_modality` the provider's counts, with tokens of
 * a modality the meter cannot name debited at the model's highest price of their direction.
 */
export const ESTIMATE_REASONS = [
  'stream_without_usage',
  'no_usage',
  'incomplete',
  'undecodable',
  'implausible',
  'no_report',
  'unknown_modality',
] as const;
export type EstimateReason = (typeof ESTIMATE_REASONS)[number];

/** One metered response, as the ledger records it. */
export interface UsageEntry {
  /** Epoch milliseconds. */
  readonly time: number;
  /** Envoy's x-request-id: one debit per request id, however often it is settled. */
  readonly requestId: string;
  readonly keyId: string;
  readonly group: string;
  readonly model: string;
  readonly protocol: string;
  /** All input tokens, the cached ones included. */
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedInputTokens: number;
  /** What was debited, in the balance's unit (0 for a model without a price). */
  readonly cost: number;
  /** false: the model had no price (metered in tokens, cost nothing). */
  readonly priced: boolean;
  /** Why the tokens are an estimate; absent (or null): the provider's own usage. */
  readonly estimated?: EstimateReason | null;
  /** Calls of hosted tools debited (their cost is in `cost`); absent: none. */
  readonly toolCalls?: number;
  /** A request settled at its maximum without a report: a later report replaces it. */
  readonly provisional?: boolean;
}

/** A debit to apply: the usage and the price it is charged at. */
export interface DebitRequest {
  readonly requestId: string;
  readonly keyId: string;
  readonly group: string;
  readonly model: string;
  readonly protocol: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedInputTokens: number;
  readonly price: ModelPrice | null;
  /** Why the tokens are an estimate (null: the provider's usage). */
  readonly estimated?: EstimateReason | null;
  /** Calls of hosted tools debited besides the tokens (0 or absent: none). */
  readonly toolCalls?: number;
  /**
   * What they cost (toolsCost: calls x the price's per-call figure), added to the tokens' cost when the model is
   * priced.
   */
  readonly toolCost?: number;
  /**
   * A settlement without a report (the request's maximum): replaced by the next settlement of the
   * same request id, if any comes. A settlement that is not provisional is final.
   */
  readonly provisional?: boolean;
  /** The replica that allowed the request: its lease (strict mode) is debited the cost too. */
  readonly replica?: string | null;
}

export interface DebitResult {
  /**
   * false: this request id was already settled finally (nothing debited this time). A final
   * settlement of a request settled provisionally is applied: the difference is debited.
   */
  readonly applied: boolean;
  readonly cost: number;
  /** The key's balance afterwards (`null`: unlimited, or the key is gone). */
  readonly balance: number | null;
}

/** A request settled by some replica: its id, the replica that allowed it (strict mode's lease holder), its cost. */
export interface SettledRequest {
  readonly requestId: string;
  readonly replica: string | null;
  readonly cost: number;
  /** Not settled but released: the request ended before a Check's answer reached it (nothing went upstream). */
  readonly released?: boolean;
}

/** What a reservation holds, for the provisional debit it becomes if it expires. */
export interface ReservedRequest {
  readonly group: string;
  readonly model: string;
  readonly protocol: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
}

export interface ReserveResult {
  readonly ok: boolean;
  /** balance - open reservations (after this one when ok); `null`: unlimited or no such key. */
  readonly available: number | null;
}

/**
 * A request allowed and not yet settled, as a store keeps it across a restart (file store): enough
 * to settle it at its maximum when its deadline passes, or to hold it against its key meanwhile.
 */
export interface PendingRequest {
  readonly requestId: string;
  readonly keyId: string;
  readonly keySha256?: string;
  readonly group: string;
  readonly model: string;
  readonly protocol: Protocol;
  readonly limited: boolean;
  readonly maxInputTokens: number;
  readonly maxOutputTokens: number;
  readonly maxCost: number;
  readonly bodyBytes: number;
  readonly referencedInput: boolean;
  readonly stream: boolean;
  /**
   * The model may reason (meter.reasoningModels), the request asked it to, or a Gemini field mask hides the answer: an
   * estimate of its output is its maximum.
   */
  readonly outputHidden?: boolean;
  /** Input tokens the provider adds to the request's own (Anthropic's tool prompts: request-shape.ts providerInput). */
  readonly inputExtra?: number;
  /** What its input may cost per token, in input tokens (an Anthropic cache write: 1.25 or 2). */
  readonly inputFactor?: number;
  /** The price it was admitted at (null: none; absent: looked up when it settles). */
  readonly price?: ModelPrice | null;
  /** Hosted tools the request declares and may call up to `maxCalls` times in all (admission.ts); absent: none. */
  readonly tools?: DeclaredTools;
  /** Epoch milliseconds. */
  readonly since: number;
  readonly deadline: number;
}

export interface UsageQuery {
  readonly keyId?: string;
  readonly group?: string;
  /** Epoch milliseconds. */
  readonly since?: number;
  /** Newest first, at most this many (default 100). */
  readonly limit?: number;
}

/**
 * What the meter needs from a store. Every call is atomic; `debit` is idempotent per request id
 * (and drops that request's reservation), except that a final settlement replaces a provisional
 * one; a balance or a total spent never becomes anything but a finite number (a debit that would
 * make one rejects); a rejected promise means "could not do it".
 */
export interface MeterStore {
  debit(request: DebitRequest): Promise<DebitResult>;
  /** debit(), synchronously, where the store can (in memory: the file store). Throws what debit() rejects with. */
  debitNow?(request: DebitRequest): DebitResult;
  /**
   * Strict mode: holds `amount` for a request while balance - open reservations covers it. `held`
   * says what the request is (its maximum in tokens): a reservation never settled becomes a
   * provisional debit of `amount` with those tokens when it expires.
   */
  reserve(
    requestId: string,
    keyId: string,
    amount: number,
    ttlSeconds: number,
    held?: ReservedRequest,
  ): Promise<ReserveResult>;
  /** Settles reservations past their time (provisionally, at what they hold); returns how many. */
  expireReservations?(): Promise<number>;
  /** Drops a request's reservation without a debit (an error, no usage). */
  release(requestId: string): Promise<void>;
  usage(query: UsageQuery): Promise<UsageEntry[]>;
  /**
   * What a key (`keyId`), a key on one model (`keyId` and `model`) or a group (`group`) was debited
   * in [since, until) (epoch ms), for budgets per window (meter/budgets.ts): asked once per budget and
   * window, not per request. Exact for windows starting on a quarter hour (every IANA zone's midnight today).
   */
  spentIn?(query: SpentQuery): Promise<number>;
  /**
   * Strict mode without a round trip per request (a store that can: PostgreSQL): sets `replica`'s
   * lease on a key's balance to `want` for `ttlSeconds`, but at most half of what the balance still
   * covers beyond `need` and never more than it covers; what a request of `replica` costs comes off
   * the lease with its debit. `granted` null: the key is unlimited.
   */
  lease?(
    replica: string,
    keyId: string,
    want: number,
    need: number,
    ttlSeconds: number,
  ): Promise<{ granted: number | null; balance: number | null }>;
  /**
   * Settlements any replica made (a store shared by replicas): the replica that allowed a request
   * hears that it was settled elsewhere. Returns an unsubscribe function.
   */
  /**
   * Announces to every replica requests that ended before a Check's answer reached them (their
   * reports came here; the replica that allowed one releases it, and a store reservation of it is
   * deleted). Batched; a store with one process needs none.
   */
  announceReleased?(requestId: string): void;
  onSettled?(listener: (settled: readonly SettledRequest[]) => void): () => void;
  /** Keeps the requests in flight across a restart (a store that can: the file store). */
  checkpointPending?(requests: readonly PendingRequest[]): void;
  /** The requests in flight an earlier process left (once, at start). */
  restorePending?(): PendingRequest[];
}

/**
 * An invalidation tells caches exactly which entries a change touched.
 * `all` is sent when a store cannot know what it missed (reload of a file, a dropped LISTEN connection).
 * A key event with `balance` says that only the key's balance changed, to that value (`null`:
 * unlimited): a cache may take it as is instead of looking the key up again (a debit per response
 * would otherwise send every Check of a busy key to the store).
 */
export type InvalidationEvent =
  | { readonly kind: 'key'; readonly sha256: string; readonly balance?: number | null }
  | { readonly kind: 'group'; readonly name: string }
  /** The admin API's webhooks of budget alerts changed (nothing cached about keys or groups moves). */
  | { readonly kind: 'webhooks' }
  | { readonly kind: 'all' };

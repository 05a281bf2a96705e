/**
 * The meter's word at Check time, run by the Check pipeline on allowed requests only
 * (check/pipeline.ts `admit`). Every billable request is recorded in flight here (in-flight.ts)
 * with what it may cost at most: its body as input (one token per byte, an upper bound for
 * byte-level tokenizers, plus meter.referencedInputTokens for input it only references) and its
 * maximum output (request-shape.ts: the request's own maximum under any alias, else the model's
 * cap, else meter.maxOutputTokens; never above the cap; times `n`/`candidateCount`).
 *
 * - a Responses API request in background mode (`background`, read as a lax upstream reads it) is
 *   refused (400 background_unsupported): its answer is produced after the request, where the
 *   meter never sees it, and this gateway serves no route to fetch it.
 * - a Gemini request asking for an answer format the meter cannot read (`alt`/`$alt` other than
 *   json or sse, response-format.ts) is refused (400 response_format_unsupported).
 * - a request declaring a hosted tool (billed per call besides tokens: check/request-fields.ts
 *   REQUEST_MARKS) that the model's price does not name (price.tools) is refused (400
 *   hosted_tool_unpriced, the hint naming the client's own switch when its user-agent says which
 *   client it is) unless `meter.hostedTools: allow`; priced ones count in the maximum cost at the
 *   request's most calls (Responses max_tool_calls, Anthropic max_uses, else meter.maxHostedToolCalls).
 * - `meter.unmeteredStreams: deny`: a chat stream without `stream_options.include_usage` (read as
 *   a lax upstream reads `stream`) is refused with a hint (400 stream_usage_required).
 * - soft mode: no store round trip. A key with a positive balance may always have one request in
 *   flight on this replica if it asks for one answer, holds no input from elsewhere (images, files,
 *   URLs, a previous response) and allows no more hosted tool calls than meter.maxHostedToolCalls;
 *   each further one, and one asking for several answers, holding such input or allowing more calls, must fit what the balance has left once the requests in flight are counted at their
 *   maximum. So one key can overspend by at most one single-answer request's maximum per replica,
 *   however many it sends at once.
 * - strict mode: the maximum is reserved in the store before the request goes upstream; a request
 *   that does not fit the balance minus open reservations is refused. Zero overspend while the
 *   upstream honours the request's maximum (or the model's cap).
 */
import type { Config } from '../config/load';
import { amountText, type MaybePromise } from '../check/decide';
import { namesModel, type AllowedDecision, type AllowedWithModel, type Decision } from '../check/decision';
import { isTokenCount } from '../check/endpoints';
import { extractFields } from '../check/extract-model';
import { REQUEST_FIELDS, REQUEST_MARKS } from '../check/request-fields';
import { hostedToolSwitch } from '../check/client-switches';
import { printable } from '../contract/safe-text';
import type { Admission } from '../check/pipeline';
import { HINTS, type DenyReason } from '../contract/reasons';
import type { MeterMarks } from '../contract/meter-marks';
import type { RequestView } from '../check/request-view';
import type { Lookup } from '../store/cache';
import { costUp, MODAL_PRICES, type DeclaredTools, type GroupRecord, type HostedTool, type MeterStore, type ModelPrice, type Protocol, type ReservedRequest } from '../store/store';
import { INPUT_SAMPLE_BYTES } from './estimate';
import type { BudgetBook, BudgetHold, BudgetSubject } from './budgets';
import type { Budget } from '../store/budget-window';
import type { LeaseBook } from './leases';
import type { InFlight, InFlightRequest } from './in-flight';
import { highestPrice } from './modal-cost';
import { priceMark, toolsMark } from './price-mark';
import { mayReason, maxOutputTokens, requestShape, type RequestShape } from './request-shape';
import { unreadableAlt } from './response-format';

export interface AdmissionDeps {
  readonly store: MeterStore | undefined;
  /** Strict mode on a store that leases (PostgreSQL): reservations from this replica's lease. */
  readonly leases?: LeaseBook;
  readonly groups: { get(name: string): Lookup<GroupRecord> | Promise<Lookup<GroupRecord>> };
  readonly inFlight: InFlight;
  /** Replicas sharing the store's balances (Store.replicas): soft mode holds a key's requests here to its share. */
  readonly replicas?: () => number;
  /** Epoch milliseconds. */
  readonly now?: () => number;
  /** Budgets per window of keys and groups (budgets.ts); absent: budgets are not enforced. */
  readonly budgets?: BudgetBook;
}

function deny(d: Decision, reason: DenyReason, hint: string): Decision {
  return { allowed: false, reason, hint, route: d.route, keyId: d.keyId, group: d.group, model: d.model, modelKnown: d.modelKnown, stale: d.stale };
}

/**
 * Priced models with no output cap of their own (`maxOutputTokens`), as `group/model`: a request to
 * one that names no maximum is held at meter.maxOutputTokens, and a provider whose own cap is higher
 * may write past it, beyond soft mode's stated bound (docs/metering.md, "Overspend"). Logged at
 * start and on reload for the groups of the config file.
 */
export function uncappedPricedModels(groups: ReadonlyMap<string, GroupRecord>): string[] {
  const out: string[] = [];
  for (const g of groups.values()) {
    for (const m of g.models.values()) {
      // An embeddings-only model writes no output tokens.
      const embeddingsOnly = m.protocols !== null && m.protocols.every((p) => p === 'embeddings');
      if (m.price && m.maxOutputTokens == null && !embeddingsOnly) out.push(`${g.name}/${m.name}`);
    }
  }
  return out;
}

/**
 * The most some tokens may cost at a price, in the balance's unit, rounded up to a grain as a
 * debit's is (costUp): input at the dearer of the input and cached prices, and, when the input may be
 * over the price's long-context threshold, at the dearer of its two prices (a provider bills every
 * token of such a request at the long-context price; it may yet come out under the threshold).
 */
export function tokensCost(input: number, output: number, price: ModelPrice): number {
  const at = (p: Pick<ModelPrice, 'input' | 'output' | 'cachedInput'>): number => costUp((input * Math.max(p.input, p.cachedInput ?? 0) + output * p.output) / 1e6);
  const long = price.longContext;
  return long && input > long.above ? Math.max(at(price), at(long)) : at(price);
}

/**
 * A request's maximum cost at its model's price (its hold, its reservation, its provisional debit):
 * tokensCost at the highest price of each direction (modal-cost.ts). A price with both a
 * long-context tier and modality prices is bounded more coarsely: a modality's premium is debited as
 * extra text tokens (modal-cost.ts), which count toward the threshold and then pay the tier's
 * price, so with r the dearest modality price over the cheapest text price above 0, once the input
 * times r may be over the threshold every token counts (1 + r) times at the dearest tier price
 * (test/meter/long-context.test.ts checks the hold covers the debit over a grid of such prompts).
 */
export function maximumCost(input: number, output: number, price: ModelPrice): number {
  const top = highestPrice(price);
  const base = tokensCost(input, output, top);
  const long = price.longContext;
  if (!long || top === price) return base;
  const cheapest = Math.min(...[price.input, price.output].filter((p) => p > 0));
  const r = Math.max(1, ...MODAL_PRICES.map((m) => (price[m] ?? 0) / cheapest));
  if (!(input * r > long.above)) return base;
  return Math.max(base, costUp(((input + output) * (1 + r) * Math.max(long.input, long.output, long.cachedInput ?? 0)) / 1e6));
}

/**
 * What a request's hosted tools may cost at most: its most calls (its own maximum, else
 * meter.maxHostedToolCalls) at the dearest of their per-call prices.
 */
export function maximumToolsCost(tools: DeclaredTools | undefined, price: ModelPrice): number {
  if (!tools) return 0;
  const dearest = Math.max(0, ...tools.names.map((t) => price.tools?.[t] ?? 0));
  return costUp(tools.maxCalls * dearest);
}

/**
 * The request body's first bytes, for an input estimate. A small body is kept as it is (a view of
 * the message it came in, no copy); of a larger one a copy of its start, so a request in flight
 * never holds megabytes.
 */
function sampleOf(body: Uint8Array | undefined): Uint8Array | undefined {
  if (!body) return undefined;
  return body.length <= INPUT_SAMPLE_BYTES ? body : Uint8Array.prototype.slice.call(body, 0, INPUT_SAMPLE_BYTES);
}

/** Six significant digits, written as a decimal (the same form as the Check's balance hints). */
const round = (n: number): string => amountText(Number(n.toPrecision(6)));

/**
 * Request ids of dry runs (`modelgate explain`): decided as any Check, but nothing is held in flight
 * or reserved, since the request never goes upstream and will never be reported. Envoy replaces
 * every client's x-request-id with its own (generate_request_id, preserve_external_request_id:
 * false in the bundle), so no request through Envoy carries one.
 */
export const DRY_RUN_REQUEST_ID_PREFIX = 'modelgate-dry-run-';

const insufficient = (available: number, amount: number): string => HINTS.balance_insufficient.reserved(round(available), round(amount));

/**
 * A Gemini field mask (`?fields=`, `?$fields=`, `x-goog-fieldmask`): the provider trims its answer,
 * usage and text included, and bills the whole. Its output is then debited at the maximum, as a
 * reasoning model's is (the meter sees no usage and no text of what was produced).
 */
function fieldMask(view: RequestView): boolean {
  if (view.headers['x-goog-fieldmask'] !== undefined) return true;
  if (view.query === '') return false;
  // Names percent-decoded and in any case, as alt's are read (response-format.ts).
  for (const name of new URLSearchParams(view.query).keys()) {
    const n = name.toLowerCase();
    if (n === 'fields' || n === '$fields') return true;
  }
  return false;
}

/** The budgets a request is held to: its key's and its group's, those that are set. */
function budgetsOf(d: AllowedWithModel, groupBudget: Budget | null | undefined): { subject: BudgetSubject; budget: Budget }[] {
  const out: { subject: BudgetSubject; budget: Budget }[] = [];
  if (d.budget) out.push({ subject: { kind: 'key', name: d.keyId }, budget: d.budget });
  if (groupBudget) out.push({ subject: { kind: 'group', name: d.group }, budget: groupBudget });
  return out;
}

export function createAdmission(deps: AdmissionDeps): Admission {
  const now = deps.now ?? Date.now;
  return function admit(d: AllowedDecision, view: RequestView, config: Config): MaybePromise<Decision> {
    const m = config.meter;
    if (!m.enabled || d.route.kind !== 'protocol' || isTokenCount(view.path)) return d;
    // decide.ts allows a protocol request only with its model; one without is refused, never metered blind.
    if (!namesModel(d)) return deny(d, 'internal_error', HINTS.internal_error.failed);
    const style = d.route.style;
    const alt = style === 'generative' ? unreadableAlt(view.query) : undefined;
    if (alt !== undefined) return deny(d, 'response_format_unsupported', HINTS.response_format_unsupported.alt(printable(alt, 64)));
    // The Check located these fields with the model; a generative request (model in the path) was not scanned.
    const hasBody = view.body !== undefined && view.body.length > 0;
    // A body whose model is in the path (Gemini) was not read by the Check: one the meter cannot
    // read would be held at the plainest shape while the provider reads its answers and its video.
    if (!d.bodyFields && hasBody) {
      // Its media type is the provider's business; a charset other than UTF-8 is not (a provider
      // honouring utf-16 or utf-7 would read other fields than these).
      const type = view.headers['content-type'];
      const charset = type === undefined ? undefined : /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(type)?.[1].toLowerCase();
      if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') return deny(d, 'content_type_unsupported', HINTS.content_type_unsupported.notJson(printable(type as string, 48)));
      const encoding = view.headers['content-encoding'];
      if (encoding && encoding.toLowerCase() !== 'identity') return deny(d, 'body_invalid', HINTS.body_invalid.compressed(printable(encoding, 24)));
    }
    const fields = d.bodyFields ?? (hasBody ? extractFields(view.body as Uint8Array, config.routes.maxJsonDepth, REQUEST_FIELDS, REQUEST_MARKS) : undefined);
    if (hasBody && !fields) return deny(d, 'body_invalid', HINTS.body_invalid.unusable('it is not a JSON object in UTF-8 within the nesting limit'));
    const shape = requestShape(style, view.path, view.body, fields, config.routes.maxJsonDepth);
    if (shape.twice) return deny(d, 'body_invalid', HINTS.body_invalid.fieldTwice(shape.twice));
    if (shape.pricedTier && m.serviceTiers === 'deny') return deny(d, 'service_tier_unpriced', HINTS.service_tier_unpriced.tier(shape.pricedTier[0], printable(shape.pricedTier[1], 32)));
    // `"N": 128` is n to a case-insensitive binder (Go's encoding/json), and 1 to this reading: refused, as "MODEL" is.
    if (shape.caseVariant) return deny(d, 'body_invalid', HINTS.body_invalid.fieldCase(...shape.caseVariant));
    if (shape.background) return deny(d, 'background_unsupported', HINTS.background_unsupported.background);
    if (m.unmeteredStreams === 'deny' && style === 'chat' && shape.stream && !shape.includeUsage) {
      return deny(d, 'stream_usage_required', HINTS.stream_usage_required.includeUsage);
    }
    if (view.requestId === '') return deny(d, 'internal_error', HINTS.internal_error.noRequestId);
    const group = deps.groups.get(d.group);
    return group instanceof Promise ? group.then((g) => admitWith(d, view, config, style, shape, g)) : admitWith(d, view, config, style, shape, group);
  };

  function admitWith(d: AllowedWithModel, view: RequestView, config: Config, style: Protocol, shape: RequestShape, g: Lookup<GroupRecord>): MaybePromise<Decision> {
    const m = config.meter;
    if (g.status === 'unavailable') return deny(d, 'store_unavailable', HINTS.store_unavailable.keyStore);
    const model = g.status === 'found' ? g.value.models.get(d.model) : undefined;
    const price = model?.price ?? null;
    // Audio or image the model's price does not name: the provider bills it above the text price.
    if (price !== null && m.modalities === 'deny') {
      const unpriced = shape.modalities.find(([modality]) => typeof price[modality] !== 'number');
      if (unpriced) return deny(d, 'modality_unpriced', HINTS.modality_unpriced.modality(printable(unpriced[1], 80), unpriced[0]));
    }
    // Hosted tools: those the price names are served and debited per call; another is refused (deny).
    const pricedTools = shape.hostedTools.filter((t) => typeof price?.tools?.[t] === 'number');
    if (pricedTools.length < shape.hostedTools.length && m.hostedTools === 'deny') {
      const unpriced = shape.hostedTools.find((t) => !pricedTools.includes(t)) as HostedTool;
      return deny(d, 'hosted_tool_unpriced', HINTS.hosted_tool_unpriced.tool(unpriced, hostedToolSwitch(view.headers['user-agent'], unpriced)));
    }
    // A Gemini field mask may trim the groundingMetadata that shows a grounded prompt and keep the usage.
    const masked = style === 'generative' && fieldMask(view);
    const tools: DeclaredTools | undefined = pricedTools.length > 0 ? { names: pricedTools, maxCalls: shape.maxToolCalls ?? m.maxHostedToolCalls, ...(masked ? { unreported: true as const } : {}) } : undefined;
    const bodyBytes = view.body?.length ?? 0;
    // Its bytes as tokens, what it references and the provider's own prompts, times what a cache
    // write costs (Anthropic writes its tool prompts with the tools, and a breakpoint may cache them all).
    const maxInputTokens = Math.ceil((bodyBytes + shape.referencedCount * m.referencedInputTokens + shape.providerInput) * shape.inputFactor);
    // An Anthropic beta can raise a model's output cap at the provider (output-128k-...): with any
    // beta the request's own max_tokens is not held to the configured cap.
    const capRaised = style === 'messages' && (view.headers['anthropic-beta'] ?? '') !== '';
    const maxOutput = maxOutputTokens(shape, capRaised && shape.maxOutput !== undefined ? null : model?.maxOutputTokens, m.maxOutputTokens);
    // The output cap soft mode's bound counts (M): a raised maximum above it must fit the balance.
    const usualCap = model?.maxOutputTokens ?? m.maxOutputTokens;
    // A Gemini thinking budget counts on top, up to the cap: a larger one must fit too (the client names it).
    const beyondCap = shape.maxOutput !== undefined && shape.maxOutput > usualCap && (capRaised || model?.maxOutputTokens == null) ? shape.maxOutput
      : shape.extraOutput > usualCap ? shape.extraOutput : undefined;
    // At the highest price of each direction: audio and image tokens may cost more than text.
    const maxCost = price ? maximumCost(maxInputTokens, maxOutput, price) + maximumToolsCost(tools, price) : 0;
    const limited = d.balance !== null && d.balance !== undefined;
    const since = now();
    // Output the meter cannot see (a reasoning model or request, a Gemini field mask): an estimate of it is its maximum.
    const hidden = shape.reasoning || mayReason(m.reasoningModels, d.model) || masked;
    // What an input estimate counts beyond the body (Anthropic's prompts, a cache write's price), in
    // the entry here and in the Check's metadata for a report that finds no entry.
    const inputMarks = shape.providerInput > 0 || shape.inputFactor !== 1
      ? { ...(shape.providerInput > 0 ? { inputExtra: shape.providerInput } : {}), ...(shape.inputFactor !== 1 ? { inputFactor: shape.inputFactor } : {}) }
      : undefined;
    const entry = (reserved: InFlightRequest['reserved']): InFlightRequest => ({
      requestId: view.requestId, keyId: d.keyId, keySha256: d.keySha256, group: d.group, model: d.model, protocol: style,
      price, limited, maxInputTokens, maxOutputTokens: maxOutput, maxCost, reserved, bodyBytes,
      sample: sampleOf(view.body),
      stream: shape.stream, referencedInput: shape.referencedInput,
      ...(tools ? { tools } : {}),
      ...(hidden ? { outputHidden: true } : {}),
      ...inputMarks,
      since, deadline: since + m.reservationSeconds * 1000,
      ...(budgetHold ? { budgetHold } : {}),
    });
    const dryRun = view.requestId.startsWith(DRY_RUN_REQUEST_ID_PREFIX);
    // Carried in Envoy's metadata too, for a report that finds no entry here (late, or at another
    // replica): its maxima bound an estimate there as the entry does here.
    // And its price: a report that finds no entry pays what the request was admitted at, not the price
    // of the moment (removed meanwhile, it had been nothing).
    const priceMarks = price ? { price: priceMark(price) } : undefined;
    const marks: MeterMarks = { maxInput: maxInputTokens, maxOutput, ...(hidden ? { hiddenOutput: maxOutput } : {}), ...(shape.referencedInput ? { referencedInput: true as const } : {}), ...inputMarks, ...priceMarks, ...(tools ? { tools: toolsMark(tools) } : {}) };
    const marked: Decision = { ...d, meterMarks: marks };
    let budgetHold: BudgetHold | undefined;
    const track = (reserved: InFlightRequest['reserved']): Decision => {
      if (dryRun) return marked;
      // A request id seen twice replaces its first entry, whose budget hold goes with it.
      const before = deps.inFlight.get(view.requestId)?.budgetHold;
      if (!deps.inFlight.add(entry(reserved))) return deny(d, 'store_unavailable', HINTS.store_unavailable.meterFull);
      if (before) deps.budgets?.release(before);
      // Not held (it ended before this answer: InFlight.add's `gone`): nothing will settle its hold.
      if (budgetHold && deps.inFlight.get(view.requestId) === undefined) deps.budgets?.release(budgetHold);
      return marked;
    };
    const wanted = price === null || maxCost === 0 ? [] : budgetsOf(d, g.status === 'found' ? g.value.budget : undefined);
    if (wanted.length === 0) return balanceAdmit(d, view, config, shape, maxCost, limited, price, beyondCap, usualCap, dryRun, marked, style, maxInputTokens, maxOutput, track, tools);
    // A budget with no ledger to count it against (a store without spentIn) is never waved through.
    if (!deps.budgets) return deny(d, 'store_unavailable', HINTS.store_unavailable.budgetLedger);
    const book = deps.budgets;
    // Both hold: the key's and its group's budgets per window, then the lifetime balance. A request
    // the balance refuses (or a dry run) gives its budget hold back at once.
    // With R replicas on one store each holds a budget's window to its share (budgets.ts).
    return book.admit(wanted, maxCost, m.mode, deps.replicas?.() ?? 1).then((v) => {
      if (!v.ok) {
        if (v.why === 'unavailable') return deny(d, 'store_unavailable', HINTS.store_unavailable.budgetLedger);
        if (v.why === 'uncounted') return deny(d, 'store_unavailable', HINTS.store_unavailable.budgetUncounted);
        const st = v.status;
        const whose = st.subject.kind === 'key' ? "the key's" : `the group ${JSON.stringify(st.subject.name)}'s`;
        return deny(d, 'budget_exhausted', HINTS.budget_exhausted.exhausted(whose, st.budget.period === 'day' ? 'dai' : st.budget.period, round(st.budget.amount), round(st.spent), round(st.held), round(v.cost), new Date(st.window.resetsAt).toISOString()));
      }
      budgetHold = v.hold;
      const given = (dec: Decision): Decision => {
        if (!dec.allowed || dryRun) book.release(v.hold);
        return dec;
      };
      const out = balanceAdmit(d, view, config, shape, maxCost, limited, price, beyondCap, usualCap, dryRun, marked, style, maxInputTokens, maxOutput, track, tools);
      return out instanceof Promise ? out.then(given) : given(out);
    });
  }

  /** The lifetime balance's word (soft: holds in flight here; strict: a reservation), once the budgets allowed the request. */
  function balanceAdmit(
    d: AllowedWithModel, view: RequestView, config: Config, shape: RequestShape, maxCost: number, limited: boolean, price: ModelPrice | null,
    beyondCap: number | undefined, usualCap: number, dryRun: boolean, marked: Decision, style: Protocol, maxInputTokens: number, maxOutput: number,
    track: (reserved: InFlightRequest['reserved']) => Decision, tools: DeclaredTools | undefined,
  ): MaybePromise<Decision> {
    const m = config.meter;
    if (!limited || price === null || maxCost === 0) return track(false);

    const balance = d.balance as number;
    if (m.mode === 'soft') {
      const keyId = d.keyId;
      const count = deps.inFlight.count(keyId);
      // With R replicas on one store each holds a key's requests to its share of the balance, so
      // together they hold no more than the balance (plus each one's lone request: the bound R x M).
      // 0: the others may not count this replica (it started less than 6 s ago, its LISTEN connection
      // has been down too long, or its counts fail: Store.replicas), so it holds none of the balance: one
      // request at a time here while the others hold to their shares.
      const counted = deps.replicas?.() ?? 1;
      const blind = counted === 0;
      const replicas = blind ? 1 : Math.max(1, Math.floor(counted) || 1);
      const share = blind ? 0 : balance / replicas;
      const held = deps.inFlight.held(keyId);
      const left = share - held;
      // The balance as a refusal's hint names it (only then: formatting a number costs more than the rest).
      const seen = (): string => (replicas > 1 ? `${round(balance)}; ${round(share)} of it on this replica, one of ${replicas}` : round(balance));
      // Blind, what it refuses is the store connection's doing, not the balance's: retryable.
      const refuse = (hint: string): Decision => (blind ? deny(d, 'store_unavailable', HINTS.store_unavailable.replicasUncounted) : deny(d, 'balance_insufficient', hint));
      if (count > 0 && left < maxCost) {
        return refuse(HINTS.balance_insufficient.inFlightSoft(seen(), count, round(held), round(maxCost)));
      }
      // The lone request the balance does not cover is one answer's worth: a request for many
      // (`n`, `candidateCount`) must fit, or one request could spend the balance many times over.
      if (left < maxCost && shape.answers > 1) {
        return refuse(HINTS.balance_insufficient.manyAnswers(seen(), shape.answers, round(maxCost)));
      }
      if (left < maxCost && beyondCap !== undefined) {
        return refuse(HINTS.balance_insufficient.beyondCap(seen(), beyondCap, usualCap, round(maxCost)));
      }
      // Likewise more hosted tool calls than meter.maxHostedToolCalls (a max_tool_calls or max_uses the
      // client names): M counts the usual most calls, not a number the client picks.
      if (left < maxCost && tools !== undefined && tools.maxCalls > m.maxHostedToolCalls) {
        return refuse(HINTS.balance_insufficient.manyToolCalls(seen(), tools.maxCalls, m.maxHostedToolCalls, round(maxCost)));
      }
      // Likewise input from elsewhere: images, files, URLs, a previous response (their count is the client's).
      if (left < maxCost && shape.referencedCount > 0) {
        return refuse(HINTS.balance_insufficient.referenced(seen(), shape.referencedCount, round(maxCost)));
      }
      return track(false);
    }
    // A dry run (explain) shows what the request would be held at, and reserves nothing.
    if (dryRun) return marked;
    if (deps.leases && config.meter.leases) return fromLease(d, deps.leases, maxCost, track);
    return reserve(d, view, config, maxCost, { group: d.group, model: d.model, protocol: style, inputTokens: maxInputTokens, outputTokens: maxOutput }, track);
  }

  async function fromLease(d: AllowedWithModel, leases: LeaseBook, amount: number, track: (reserved: InFlightRequest['reserved']) => Decision): Promise<Decision> {
    let r;
    try {
      r = await leases.reserve(d.keyId, amount, d.keySha256);
    } catch {
      return deny(d, 'store_unavailable', HINTS.store_unavailable.balanceStore);
    }
    if (!r.ok) return deny(d, 'balance_insufficient', insufficient(r.available, amount));
    const tracked = track('lease');
    if (!tracked.allowed) leases.settle(d.keyId, amount, 0);
    return tracked;
  }

  async function reserve(d: AllowedWithModel, view: RequestView, config: Config, amount: number, held: ReservedRequest, track: (reserved: InFlightRequest['reserved']) => Decision): Promise<Decision> {
    if (!deps.store) return deny(d, 'store_unavailable', HINTS.store_unavailable.balanceStore);
    let r;
    try {
      r = await deps.store.reserve(view.requestId, d.keyId, amount, config.meter.reservationSeconds, held);
    } catch {
      return deny(d, 'store_unavailable', HINTS.store_unavailable.balanceStore);
    }
    if (!r.ok) return deny(d, 'balance_insufficient', insufficient(r.available ?? 0, amount));
    const tracked = track('store');
    if (!tracked.allowed) await deps.store.release(view.requestId).catch(() => {});
    return tracked;
  }
}

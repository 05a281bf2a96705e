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
 *   json or sse, providers/gemini-generative.ts) is refused (400 response_format_unsupported).
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
 *   each further one, and one asking for several answers, holding such input or allowing more calls, must fit what the
 * balance has left once the requests in flight are counted at their
 *   maximum. So one key can overspend by at most one single-answer request's maximum per replica,
 *   however many it sends at once.
 * - strict mode: the maximum is reserved in the store before the request goes upstream; a request
 *   that does not fit the balance minus open reservations is refused. Zero overspend while the
 *   upstream honours the request's maximum (or the model's cap).
 */
import type { Config } from '../config/load';
import { amountText, type MaybePromise } from '../check/decide';
import {
  denyAllowed as deny,
  namesModel,
  type AllowedDecision,
  type AllowedWithModel,
  type Decision,
} from '../check/decision';
import { isTokenCount } from '../providers/endpoints';
import { PROVIDERS } from '../providers/providers';
import { extractFields } from '../check/extract-model';
import { REQUEST_FIELDS, REQUEST_MARKS } from '../check/request-fields';
import { hostedToolSwitch } from '../check/client-switches';
import { printable } from '../contract/safe-text';
import type { Admission } from '../check/pipeline';
import { HINTS, type DenyReason } from '../contract/reasons';
import type { MeterMarks } from '../contract/meter-marks';
import type { RequestView } from '../check/request-view';
import type { Lookup } from '../store/cache';
import type { GroupRecord, MeterStore, ModelPrice, Protocol, ReservedRequest } from '../store/store';
import { INPUT_SAMPLE_BYTES } from './estimate';
import type { BudgetBook, BudgetHold, BudgetSubject } from './budgets';
import type { Budget } from '../store/budget-window';
import type { LeaseBook } from './leases';
import type { InFlight, InFlightRequest } from './in-flight';
import { priceMark, toolsMark } from './price-mark';
import { holdFor, softWord, type Hold, type SoftRefusal } from './policy/hold';
import { requestShape, type RequestShape } from './request-shape';

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

/**
 * Priced models with no output cap of their own (`maxOutputTokens`), as `group/model`: a request to
 * one that names no maximum is held at meter.maxOutputTokens, and a provider whose own cap is higher
 * may write past it, beyond soft mode's stated bound (docs/metering.md, "Overspend"). Logged at
 * start, on reload, and when the admin API's groups on the file store change the list.
 */
export function uncappedPricedModels(groups: ReadonlyMap<string, GroupRecord>): string[] {
  const out: string[] = [];
  for (const g of groups.values()) {
    for (const m of g.models.values()) {
      // An embeddings-only model writes no output tokens.
      const embeddingsOnly = m.protocols !== null && m.protocols.every((p) => PROVIDERS[p].shape.embedsOnly);
      if (m.price && m.maxOutputTokens == null && !embeddingsOnly) out.push(`${g.name}/${m.name}`);
    }
  }
  return out;
}

/**
 * A copy of the request body's first bytes, for an input estimate: never a view, since the
 * request's bytes are reused once the Check answers (server/grpc-server.ts checkMethod), and a view
 * would also keep the whole socket read it came in alive while the request is in flight.
 */
function sampleOf(body: Uint8Array | undefined): Uint8Array | undefined {
  if (!body) return undefined;
  return Uint8Array.prototype.slice.call(body, 0, Math.min(body.length, INPUT_SAMPLE_BYTES));
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

const insufficient = (available: number, amount: number): string =>
  HINTS.balance_insufficient.reserved(round(available), round(amount));

/** The budgets a request is held to: its key's, its key's on its model, and its group's, those that are set. */
function budgetsOf(
  d: AllowedWithModel,
  groupBudget: Budget | null | undefined,
): { subject: BudgetSubject; budget: Budget }[] {
  const out: { subject: BudgetSubject; budget: Budget }[] = [];
  if (d.budget) out.push({ subject: { kind: 'key', name: d.keyId }, budget: d.budget });
  if (d.modelBudget) out.push({ subject: { kind: 'model', name: d.keyId, model: d.model }, budget: d.modelBudget });
  if (groupBudget) out.push({ subject: { kind: 'group', name: d.group }, budget: groupBudget });
  return out;
}

/** What the lifetime balance's word reads of a request the budgets allowed. */
interface BalanceAdmission {
  readonly d: AllowedWithModel;
  readonly view: RequestView;
  readonly config: Config;
  readonly shape: RequestShape;
  readonly hold: Hold;
  /** The key has a balance (null or undefined: unlimited). */
  readonly limited: boolean;
  readonly price: ModelPrice | null;
  /** `modelgate explain`: nothing is held or reserved. */
  readonly dryRun: boolean;
  /** The Decision with the meter's marks, as allowed. */
  readonly marked: Decision;
  readonly style: Protocol;
  /** Records the request in flight (reserved: how) and answers the Decision. */
  readonly track: (reserved: InFlightRequest['reserved']) => Decision;
}

export function createAdmission(deps: AdmissionDeps): Admission {
  const now = deps.now ?? Date.now;
  return function admit(d: AllowedDecision, view: RequestView, config: Config): MaybePromise<Decision> {
    const m = config.meter;
    if (!m.enabled || d.route.kind !== 'protocol' || isTokenCount(view.path)) return d;
    // decide.ts allows a protocol request only with its model; one without is refused, never metered blind.
    if (!namesModel(d)) return deny(d, 'internal_error', HINTS.internal_error.failed);
    const style = d.route.style;
    const rules = PROVIDERS[style];
    const alt = rules.admission.unreadableFormat(view.query);
    if (alt !== undefined)
      return deny(d, 'response_format_unsupported', HINTS.response_format_unsupported.alt(printable(alt, 64)));
    // The Check located these fields with the model; a generative request (model in the path) was not scanned.
    const hasBody = view.body !== undefined && view.body.length > 0;
    // A body whose model is in the path (Gemini) was not read by the Check: one the meter cannot
    // read would be held at the plainest shape while the provider reads its answers and its video.
    if (!d.bodyFields && hasBody) {
      // Its media type is the provider's business; a charset other than UTF-8 is not (a provider
      // honouring utf-16 or utf-7 would read other fields than these).
      const type = view.headers['content-type'];
      const charset = type === undefined ? undefined : /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(type)?.[1].toLowerCase();
      if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')
        return deny(
          d,
          'content_type_unsupported',
          HINTS.content_type_unsupported.notJson(printable(type as string, 48)),
        );
      const encoding = view.headers['content-encoding'];
      if (encoding && encoding.toLowerCase() !== 'identity')
        return deny(d, 'body_invalid', HINTS.body_invalid.compressed(printable(encoding, 24)));
    }
    const fields =
      d.bodyFields ??
      (hasBody
        ? extractFields(view.body as Uint8Array, config.routes.maxJsonDepth, REQUEST_FIELDS, REQUEST_MARKS)
        : undefined);
    if (hasBody && !fields)
      return deny(
        d,
        'body_invalid',
        HINTS.body_invalid.unusable('it is not a JSON object in UTF-8 within the nesting limit'),
      );
    const shape = requestShape(style, view.path, view.body, fields, config.routes.maxJsonDepth);
    if (shape.twice) return deny(d, 'body_invalid', HINTS.body_invalid.fieldTwice(shape.twice));
    if (shape.pricedTier && m.serviceTiers === 'deny')
      return deny(
        d,
        'service_tier_unpriced',
        HINTS.service_tier_unpriced.tier(shape.pricedTier[0], printable(shape.pricedTier[1], 32)),
      );
    // `"N": 128` is n to a case-insensitive binder (Go's encoding/json), and 1 to this reading: refused, as "MODEL" is.
    if (shape.caseVariant) return deny(d, 'body_invalid', HINTS.body_invalid.fieldCase(...shape.caseVariant));
    if (shape.background) return deny(d, 'background_unsupported', HINTS.background_unsupported.background);
    if (m.unmeteredStreams === 'deny' && rules.usage.streamUsageOptIn && shape.stream && !shape.includeUsage) {
      return deny(d, 'stream_usage_required', HINTS.stream_usage_required.includeUsage);
    }
    if (view.requestId === '') return deny(d, 'internal_error', HINTS.internal_error.noRequestId);
    const group = deps.groups.get(d.group);
    return group instanceof Promise
      ? group.then((g) => admitWith(d, view, config, style, shape, g))
      : admitWith(d, view, config, style, shape, group);
  };

  function admitWith(
    d: AllowedWithModel,
    view: RequestView,
    config: Config,
    style: Protocol,
    shape: RequestShape,
    g: Lookup<GroupRecord>,
  ): MaybePromise<Decision> {
    const m = config.meter;
    if (g.status === 'unavailable') return deny(d, 'store_unavailable', HINTS.store_unavailable.keyStore);
    const model = g.status === 'found' ? g.value.models.get(d.model) : undefined;
    const price = model?.price ?? null;
    const word = holdFor(
      {
        style,
        shape,
        model: d.model,
        price,
        modelCap: model?.maxOutputTokens,
        bodyBytes: view.body?.length ?? 0,
        masked: PROVIDERS[style].admission.trimsAnswer(view),
        capRaised: PROVIDERS[style].admission.raisesOutputCap(view.headers),
      },
      m,
    );
    if (word.kind === 'refuse') {
      if (word.reason === 'modality_unpriced')
        return deny(
          d,
          'modality_unpriced',
          HINTS.modality_unpriced.modality(printable(word.spelled, 80), word.modality),
        );
      return deny(
        d,
        'hosted_tool_unpriced',
        HINTS.hosted_tool_unpriced.tool(word.tool, hostedToolSwitch(view.headers['user-agent'], word.tool)),
      );
    }
    const hold = word;
    const { maxInputTokens, maxCost, tools, hidden, inputMarks } = hold;
    const limited = d.balance !== null && d.balance !== undefined;
    const since = now();
    const entry = (reserved: InFlightRequest['reserved']): InFlightRequest => ({
      requestId: view.requestId,
      keyId: d.keyId,
      keySha256: d.keySha256,
      group: d.group,
      model: d.model,
      protocol: style,
      price,
      limited,
      maxInputTokens,
      maxOutputTokens: hold.maxOutputTokens,
      maxCost,
      reserved,
      bodyBytes: view.body?.length ?? 0,
      sample: sampleOf(view.body),
      stream: shape.stream,
      referencedInput: shape.referencedInput,
      ...(tools ? { tools } : {}),
      ...(hidden ? { outputHidden: true } : {}),
      ...inputMarks,
      since,
      deadline: since + m.reservationSeconds * 1000,
      ...(budgetHold ? { budgetHold } : {}),
    });
    const dryRun = view.requestId.startsWith(DRY_RUN_REQUEST_ID_PREFIX);
    // The Check's metadata carries the maxima and the admitted price for a report that finds no
    // entry here (late, or at another replica): it is bounded and priced as the entry would be.
    const priceMarks = price ? { price: priceMark(price) } : undefined;
    const marks: MeterMarks = {
      maxInput: maxInputTokens,
      maxOutput: hold.maxOutputTokens,
      ...(hidden ? { hiddenOutput: hold.maxOutputTokens } : {}),
      ...(shape.referencedInput ? { referencedInput: true as const } : {}),
      ...inputMarks,
      ...priceMarks,
      ...(tools ? { tools: toolsMark(tools) } : {}),
    };
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
    const balanceWord = (): MaybePromise<Decision> =>
      balanceAdmit({ d, view, config, shape, hold, limited, price, dryRun, marked, style, track });
    const wanted =
      price === null || maxCost === 0 ? [] : budgetsOf(d, g.status === 'found' ? g.value.budget : undefined);
    if (wanted.length === 0) return balanceWord();
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
        const period = st.budget.period === 'day' ? 'dai' : st.budget.period;
        // The model is one of the key's group (decide.ts sets modelBudget only then): safe to echo, printable as every
        // hint.
        if (st.subject.kind === 'model')
          return deny(
            d,
            'model_budget_exhausted',
            HINTS.model_budget_exhausted.exhausted(
              printable(st.subject.model, 128),
              period,
              round(st.budget.amount),
              round(st.spent),
              round(st.held),
              round(v.cost),
              new Date(st.window.resetsAt).toISOString(),
            ),
          );
        const whose = st.subject.kind === 'key' ? "the key's" : `the group ${JSON.stringify(st.subject.name)}'s`;
        return deny(
          d,
          'budget_exhausted',
          HINTS.budget_exhausted.exhausted(
            whose,
            period,
            round(st.budget.amount),
            round(st.spent),
            round(st.held),
            round(v.cost),
            new Date(st.window.resetsAt).toISOString(),
          ),
        );
      }
      budgetHold = v.hold;
      const given = (dec: Decision): Decision => {
        if (!dec.allowed || dryRun) book.release(v.hold);
        return dec;
      };
      const out = balanceWord();
      return out instanceof Promise ? out.then(given) : given(out);
    });
  }

  /**
   * The lifetime balance's word (soft: holds in flight here; strict: a reservation), once the budgets allowed the
   * request.
   */
  function balanceAdmit(q: BalanceAdmission): MaybePromise<Decision> {
    const { d, config, hold, track } = q;
    const m = config.meter;
    const maxCost = hold.maxCost;
    if (!q.limited || q.price === null || maxCost === 0) return track(false);

    const balance = d.balance as number;
    if (m.mode === 'soft') {
      const keyId = d.keyId;
      const count = deps.inFlight.count(keyId);
      const replicas = deps.replicas?.() ?? 1;
      const held = deps.inFlight.held(keyId);
      const word = softWord({
        balance,
        replicas,
        inFlight: count,
        held,
        maxCost,
        answers: q.shape.answers,
        beyondCap: hold.beyondCap,
        toolCalls: hold.tools?.maxCalls,
        maxHostedToolCalls: m.maxHostedToolCalls,
        referencedCount: q.shape.referencedCount,
      });
      if (word.kind === 'allow') return track(false);
      // Blind, what it refuses is the store connection's doing, not the balance's: retryable.
      if (word.blind) return deny(d, 'store_unavailable', HINTS.store_unavailable.replicasUncounted);
      // The balance as a refusal's hint names it (only then: formatting a number costs more than the rest).
      const seen =
        word.replicas > 1
          ? `${round(balance)}; ${round(word.share)} of it on this replica, one of ${word.replicas}`
          : round(balance);
      const hint = HINTS.balance_insufficient;
      const cost = round(maxCost);
      const hints: Record<SoftRefusal, () => string> = {
        in_flight: () => hint.inFlightSoft(seen, count, round(held), cost),
        many_answers: () => hint.manyAnswers(seen, q.shape.answers, cost),
        beyond_cap: () => hint.beyondCap(seen, hold.beyondCap as number, hold.usualCap, cost),
        many_tool_calls: () => hint.manyToolCalls(seen, hold.tools?.maxCalls as number, m.maxHostedToolCalls, cost),
        referenced: () => hint.referenced(seen, q.shape.referencedCount, cost),
      };
      return deny(d, 'balance_insufficient', hints[word.why]());
    }
    // A dry run (explain) shows what the request would be held at, and reserves nothing.
    if (q.dryRun) return q.marked;
    if (deps.leases && config.meter.leases) return fromLease(d, deps.leases, maxCost, track);
    return reserve(
      d,
      q.view,
      config,
      maxCost,
      {
        group: d.group,
        model: d.model,
        protocol: q.style,
        inputTokens: hold.maxInputTokens,
        outputTokens: hold.maxOutputTokens,
      },
      track,
    );
  }

  async function fromLease(
    d: AllowedWithModel,
    leases: LeaseBook,
    amount: number,
    track: (reserved: InFlightRequest['reserved']) => Decision,
  ): Promise<Decision> {
    let r;
    try {
      r = await leases.reserve(d.keyId, amount, d.keySha256);
    } catch {
      // The store failed: refused (fail closed), its reason counted and logged on the decision line.
      return deny(d, 'store_unavailable', HINTS.store_unavailable.balanceStore);
    }
    if (!r.ok) return deny(d, 'balance_insufficient', insufficient(r.available, amount));
    const tracked = track('lease');
    if (!tracked.allowed) leases.settle(d.keyId, amount, 0);
    return tracked;
  }

  async function reserve(
    d: AllowedWithModel,
    view: RequestView,
    config: Config,
    amount: number,
    held: ReservedRequest,
    track: (reserved: InFlightRequest['reserved']) => Decision,
  ): Promise<Decision> {
    if (!deps.store) return deny(d, 'store_unavailable', HINTS.store_unavailable.balanceStore);
    let r;
    try {
      r = await deps.store.reserve(view.requestId, d.keyId, amount, config.meter.reservationSeconds, held);
    } catch {
      // The store failed: refused (fail closed), its reason counted and logged on the decision line.
      return deny(d, 'store_unavailable', HINTS.store_unavailable.balanceStore);
    }
    if (!r.ok) return deny(d, 'balance_insufficient', insufficient(r.available ?? 0, amount));
    const tracked = track('store');
    // A reservation the store fails to release lapses at its expiry: the balance is held until then, never debited.
    if (!tracked.allowed) await deps.store.release(view.requestId).catch(() => {});
    return tracked;
  }
}

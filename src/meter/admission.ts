/**
 * The meter's word at Check time (issue 11), run by the Check pipeline on allowed requests only
 * (check/pipeline.ts `admit`):
 *
 * - `meter.unmeteredStreams: deny`: a streamed chat completion without
 *   `stream_options.include_usage` would report no usage, so it is refused with a hint that says
 *   how to fix it (400 stream_usage_required).
 * - `meter.mode: strict`: the request's maximum cost is reserved in the store before it goes
 *   upstream (input: one token per body byte, an upper bound for byte-level tokenizers; output:
 *   the request's own maximum, else the model's maxOutputTokens, else meter.maxOutputTokens). When
 *   the balance minus what requests in flight hold cannot cover it: 403 balance_insufficient. The
 *   reservation is settled by the debit at the response's end (or released, or it expires).
 *
 * Soft mode with streams allowed returns the decision untouched: no parse, no store round trip.
 */
import type { Config } from '../config/load';
import { amountText, type MaybePromise } from '../check/decide';
import type { Decision } from '../check/decision';
import type { Admission } from '../check/pipeline';
import type { DenyReason } from '../check/reasons';
import type { RequestView } from '../check/request-view';
import type { Lookup } from '../store/cache';
import type { GroupRecord, MeterStore, ModelPrice } from '../store/store';

export interface AdmissionDeps {
  readonly store: MeterStore | undefined;
  readonly groups: { get(name: string): Lookup<GroupRecord> | Promise<Lookup<GroupRecord>> };
}

function deny(d: Decision, reason: DenyReason, hint: string): Decision {
  return { allowed: false, reason, hint, route: d.route, keyId: d.keyId, group: d.group, model: d.model, modelKnown: d.modelKnown, stale: d.stale };
}

function parseBody(view: RequestView): Record<string, unknown> | undefined {
  if (!view.body || view.body.length === 0) return undefined;
  try {
    const v = JSON.parse(Buffer.from(view.body.buffer, view.body.byteOffset, view.body.byteLength).toString('utf8')) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A chat completion that streams without asking for the final usage chunk. */
export function streamsWithoutUsage(body: Record<string, unknown> | undefined): boolean {
  if (!body || body.stream !== true) return false;
  const o = body.stream_options;
  return !(o && typeof o === 'object' && (o as Record<string, unknown>).include_usage === true);
}

const positiveInt = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined);

/** The output tokens a request may produce at most, as it says itself (undefined: it names none). */
export function requestedMaxOutput(body: Record<string, unknown> | undefined): number | undefined {
  if (!body) return undefined;
  const gen = body.generationConfig;
  return positiveInt(body.max_completion_tokens) ?? positiveInt(body.max_tokens) ?? positiveInt(body.max_output_tokens)
    ?? (gen && typeof gen === 'object' ? positiveInt((gen as Record<string, unknown>).maxOutputTokens) : undefined);
}

/** The most a request can cost: its body bytes as input tokens, its maximum output at the output price. */
export function maxCost(bodyBytes: number, maxOutput: number, price: ModelPrice): number {
  return (bodyBytes * price.input + maxOutput * price.output) / 1e6;
}

/** Six significant digits, written as a decimal (the same form as the Check's balance hints). */
const round = (n: number): string => amountText(Number(n.toPrecision(6)));

export function createAdmission(deps: AdmissionDeps): Admission {
  return function admit(d: Decision, view: RequestView, config: Config): MaybePromise<Decision> {
    const m = config.meter;
    if (!m.enabled || d.route.kind !== 'protocol') return d;
    const strict = m.mode === 'strict' && d.balance !== null && d.balance !== undefined;
    const checkStream = m.unmeteredStreams === 'deny' && d.route.style === 'chat';
    if (!strict && !checkStream) return d;
    const body = parseBody(view);
    if (checkStream && streamsWithoutUsage(body)) {
      return deny(d, 'stream_usage_required', 'this gateway meters usage and a stream reports it only when asked: set "stream_options": {"include_usage": true} in the request');
    }
    if (!strict || view.path.endsWith('/count_tokens') || view.path.endsWith(':countTokens')) return d;
    const group = deps.groups.get(d.group as string);
    return group instanceof Promise ? group.then((g) => reserve(d, view, config, body, g)) : reserve(d, view, config, body, group);
  };

  async function reserve(d: Decision, view: RequestView, config: Config, body: Record<string, unknown> | undefined, g: Lookup<GroupRecord>): Promise<Decision> {
    if (g.status === 'unavailable' || !deps.store) return deny(d, 'store_unavailable', 'the balance store cannot answer right now; retry shortly');
    const model = g.status === 'found' ? g.value.models.get(d.model as string) : undefined;
    const price = model?.price ?? null;
    // A model without a price costs nothing: nothing to reserve.
    if (price === null) return d;
    if (view.requestId === '') return deny(d, 'internal_error', 'the request has no x-request-id, so its reservation could not be settled: the gateway must generate request ids');
    const output = d.route.kind === 'protocol' && d.route.style === 'embeddings' ? 0 : requestedMaxOutput(body) ?? model?.maxOutputTokens ?? config.meter.maxOutputTokens;
    const amount = maxCost(view.body?.length ?? 0, output, price);
    let r;
    try {
      r = await deps.store.reserve(view.requestId, d.keyId as string, amount, config.meter.reservationSeconds);
    } catch {
      return deny(d, 'store_unavailable', 'the balance store cannot answer right now; retry shortly');
    }
    if (r.ok) return d;
    return deny(d, 'balance_insufficient', `the key's balance minus requests in flight (${round(r.available ?? 0)}) cannot cover this request's maximum cost (${round(amount)}): top it up, lower max_tokens, or wait for requests in flight to finish`);
  }
}

/**
 * How a report of a request's end is settled, as pure functions of what Envoy reported, what the
 * meter read from the answer and the request's maxima (docs/metering.md). Meter#settleReport runs
 * them in order: routeReport, classifyReport, reportBounds, outputPlan, boundEstimate.
 */
import type { Config } from '../../config/load';
import { PROVIDERS } from '../../providers/providers';
import type { EstimateReason, PendingRequest, Protocol } from '../../store/store';
import { mayReason } from '../request-shape';
import type { Usage } from '../usage-reader';

/** What the meter read from an answer's captured bytes (tail-usage.ts TailUsage). */
export interface ReadUsage {
  readonly usage: Usage | undefined;
  /** An encoding or framing the meter cannot read. */
  readonly undecodable: boolean;
}

/** Nothing read: no answer came, or there was none to read. */
export const NOTHING_READ: ReadUsage = Object.freeze({ usage: undefined, undecodable: false });

/** What Envoy reported of a request's end (access-log.ts MeterReport). */
export interface ReportEnd {
  /** The HTTP status of the answer; 0: none reached the client. */
  readonly status: number;
  /** The stream ended cleanly (not reset, not left by the client). */
  readonly ended: boolean;
  /** The request went upstream. */
  readonly upstreamSent: boolean;
  /** At least a byte of an answer came back from upstream. */
  readonly upstreamAnswered: boolean;
}

export type ReportRoute =
  | { readonly kind: 'release'; readonly reason: 'meter_disabled' | 'upstream_error' }
  | {
      readonly kind: 'settle';
      /** It went upstream and no byte of an answer came back: the provider may have produced and billed it all. */
      readonly unanswered: boolean;
      /** An answer came whose captured bytes may hold usage. */
      readonly readAnswer: boolean;
    };

/**
 * Whether a report costs anything. The provider's own error (4xx/5xx), or a request that ended with
 * nothing upstream, is released: providers do not charge for those. A request that went upstream and
 * got no answer is not: the provider may have billed the whole answer.
 */
export function routeReport(meterEnabled: boolean, r: ReportEnd): ReportRoute {
  if (!meterEnabled) return { kind: 'release', reason: 'meter_disabled' };
  const unanswered = r.upstreamSent && !r.upstreamAnswered;
  if (!unanswered && (r.status >= 400 || (r.status === 0 && r.ended)))
    return { kind: 'release', reason: 'upstream_error' };
  return { kind: 'settle', unanswered, readAnswer: r.status !== 0 && !unanswered };
}

/** Counts the provider reported that are safe integers >= 0 and within the ceilings. */
export function plausible(u: Usage | undefined, ceiling: Config['meter']['usageCeiling']): u is Usage {
  if (!u || u.implausible) return false;
  const ok = (n: number, max: number): boolean => Number.isSafeInteger(n) && n >= 0 && n <= max;
  return (
    ok(u.inputTokens, ceiling.inputTokens) &&
    ok(u.outputTokens, ceiling.outputTokens) &&
    ok(u.cachedInputTokens, ceiling.inputTokens)
  );
}

export interface ClassifyFacts {
  readonly status: number;
  readonly ended: boolean;
  /** routeReport's `unanswered`. */
  readonly unanswered: boolean;
  /** The answer is an event stream (text/event-stream). */
  readonly sse: boolean;
  readonly protocol: Protocol;
}

export type Classification =
  /** A complete answer with plausible usage: debited exactly that. */
  | { readonly kind: 'exact'; readonly usage: Usage }
  /**
   * Estimated, marked with why; `trusted`: the provider's plausible (partial) usage, which stands
   * as a floor of the estimate.
   */
  | { readonly kind: 'estimate'; readonly reason: EstimateReason; readonly trusted: Usage | undefined };

/** Exact when the answer is complete, read and its usage plausible; else the reason it is estimated. */
export function classifyReport(
  f: ClassifyFacts,
  read: ReadUsage,
  ceiling: Config['meter']['usageCeiling'],
): Classification {
  const provider = read.usage;
  const trusted = plausible(provider, ceiling) ? provider : undefined;
  if (f.ended && f.status !== 0 && trusted && !read.undecodable) return { kind: 'exact', usage: trusted };
  const reason: EstimateReason = read.undecodable
    ? 'undecodable'
    : provider !== undefined && !trusted
      ? 'implausible'
      : f.unanswered || !f.ended || f.status === 0
        ? 'incomplete'
        : f.sse && PROVIDERS[f.protocol].usage.streamUsageOptIn
          ? 'stream_without_usage'
          : 'no_usage';
  return { kind: 'estimate', reason, trusted };
}

/** A token count from the Check's metadata: a finite number >= 0, else undefined. */
export const tokenCount = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;

/** What an estimate of a request is bounded by and counts beyond its body. */
export interface ReportBounds {
  /** The request's most input tokens; undefined: unknown. */
  readonly maxInput: number | undefined;
  /** The request's most output tokens; undefined: unknown. */
  readonly maxOutput: number | undefined;
  /** Output the answer may not show (reasoning, a field mask): estimated at its maximum. */
  readonly hidden: boolean;
  /** Input tokens the provider adds (Anthropic's tool prompts). */
  readonly inputExtra: number;
  /** What an input token costs in tokens (a cache write: request-shape.ts inputFactor), >= 1. */
  readonly inputFactor: number;
}

/**
 * The request's bounds from its entry in flight, else from the Check's metadata (a report after its
 * deadline, after a restart or at another replica), else the model's name for hidden output.
 */
export function reportBounds(
  entry:
    | Pick<PendingRequest, 'maxInputTokens' | 'maxOutputTokens' | 'outputHidden' | 'inputExtra' | 'inputFactor'>
    | undefined,
  authz: Readonly<Record<string, unknown>>,
  reasoningModels: readonly string[],
  model: string,
): ReportBounds {
  const hiddenMax = tokenCount(authz.hiddenOutput);
  return {
    maxInput: entry ? entry.maxInputTokens : tokenCount(authz.maxInput),
    maxOutput: entry ? entry.maxOutputTokens : (tokenCount(authz.maxOutput) ?? hiddenMax),
    hidden: entry ? entry.outputHidden === true : hiddenMax !== undefined || mayReason(reasoningModels, model),
    inputExtra: entry ? (entry.inputExtra ?? 0) : (tokenCount(authz.inputExtra) ?? 0),
    inputFactor: Math.max(1, entry ? (entry.inputFactor ?? 1) : (tokenCount(authz.inputFactor) ?? 1)),
  };
}

export interface OutputFacts {
  /** An embedding request: no output tokens. */
  readonly embeds: boolean;
  /** routeReport's `unanswered`. */
  readonly unanswered: boolean;
  readonly ended: boolean;
  readonly upstreamAnswered: boolean;
  /** The answer streams (an event stream, or a request that asked for a stream). */
  readonly streamed: boolean;
  /** ReportBounds `hidden`. */
  readonly hidden: boolean;
  /** Bytes of answer the client received. */
  readonly responseBodyBytes: number;
}

export type OutputPlan =
  | { readonly kind: 'none' }
  /** The request's most output: what it may have been billed, unseen. */
  | { readonly kind: 'maximum'; readonly tokens: number }
  /** Estimated from the answer's text and bytes (estimate.ts Estimator.output). */
  | { readonly kind: 'from_answer' };

/**
 * How an estimate counts output. A non-streaming answer is whole at the provider before its first
 * byte leaves, so one cut after its headers is billed whole: its maximum, as an unanswered
 * request's and a hidden one's.
 * @param maximum the request's most output tokens (ReportBounds maxOutput, else meter.maxOutputTokens)
 */
export function outputPlan(f: OutputFacts, maximum: number): OutputPlan {
  if (f.embeds) return { kind: 'none' };
  const cutAnswer = !f.ended && f.upstreamAnswered && !f.streamed;
  if (f.unanswered || cutAnswer || f.hidden) return { kind: 'maximum', tokens: maximum };
  return f.responseBodyBytes > 0 ? { kind: 'from_answer' } : { kind: 'none' };
}

/**
 * An estimate within what the request could cost at most (the provider cannot have produced more
 * than the request allowed), over what the provider itself reported (a cut stream's partial count),
 * and output within meter.usageCeiling.
 */
export function boundEstimate(
  estimated: { readonly input: number; readonly output: number },
  bounds: Pick<ReportBounds, 'maxInput' | 'maxOutput'>,
  trusted: Usage | undefined,
  ceiling: Config['meter']['usageCeiling'],
): Usage {
  const input =
    trusted && trusted.inputTokens > 0
      ? trusted.inputTokens
      : bounds.maxInput !== undefined
        ? Math.min(estimated.input, bounds.maxInput)
        : estimated.input;
  const output = Math.max(
    bounds.maxOutput !== undefined ? Math.min(estimated.output, bounds.maxOutput) : estimated.output,
    trusted ? trusted.outputTokens : 0,
  );
  return {
    inputTokens: input,
    outputTokens: Math.min(output, ceiling.outputTokens),
    cachedInputTokens: trusted ? Math.min(trusted.cachedInputTokens, input) : 0,
  };
}

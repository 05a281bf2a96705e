/**
 * The Check path: read CheckRequest -> decide -> write CheckResponse, then one log line and the
 * metrics. Always resolves to a CheckResponse: an unexpected failure becomes a 503 internal_error
 * denial (fail closed), never a failed RPC.
 */
import type { Logger } from 'pino';
import type { CheckRequest__Output } from '../proto/types/envoy/service/auth/v3/CheckRequest';
import type { Config } from './config';
import { decide, type Lookups } from './decide';
import type { Decision } from './decision';
import { decisionLine } from './decision-log';
import type { Metrics } from './metrics';
import { statusOf } from './reasons';
import { readCheckRequest, type RequestView } from './request-view';
import type { ResponseEncoder } from './response-encoder';
import { classify } from './routes';

export interface PipelineDeps {
  /** The current config (swapped atomically on reload). */
  readonly config: () => Config;
  readonly lookups: Lookups;
  readonly logger: Logger;
  readonly metrics?: Metrics;
  /** Epoch milliseconds. */
  readonly now?: () => number;
  readonly encoder: ResponseEncoder;
}

export interface CheckResult {
  /** The serialised CheckResponse, as gRPC sends it. */
  readonly bytes: Buffer;
  readonly decision: Decision;
}

/** Decides a view, never throwing: a failure inside becomes a fail-closed internal_error. */
export async function decideSafely(view: RequestView, config: Config, lookups: Lookups, now: number, logger: Logger): Promise<Decision> {
  try {
    return await decide(view, config, lookups, now);
  } catch (err) {
    logger.error({ err: err instanceof Error ? err.message : String(err) }, 'decision failed; denying (fail closed)');
    const route = classify(view.method, view.path, config.routes.altPrefix, false);
    return { allowed: false, reason: 'internal_error', status: statusOf('internal_error'), hint: 'the authorization service failed to decide; retry shortly', route };
  }
}

export function createPipeline(deps: PipelineDeps): (req: CheckRequest__Output) => Promise<CheckResult> {
  const now = deps.now ?? Date.now;
  return async function check(req) {
    const started = process.hrtime.bigint();
    const config = deps.config();
    const view = readCheckRequest(req);
    const decision = await decideSafely(view, config, deps.lookups, now(), deps.logger);
    const bytes = deps.encoder.encode(decision, config);
    const durNs = Number(process.hrtime.bigint() - started);
    if (!decision.allowed || config.log.allows) deps.logger.info(decisionLine(decision, view, Math.round(durNs / 1000)), 'decision');
    deps.metrics?.countDecision(decision.status, decision.reason);
    deps.metrics?.checkSeconds.observe(durNs / 1e9);
    return { bytes, decision };
  };
}

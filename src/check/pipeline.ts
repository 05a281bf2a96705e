/**
 * The Check path, whole: the bytes of a CheckRequest -> read (read-request.ts) -> decide
 * (decide.ts, then the meter's admission) -> write the CheckResponse (response-encoder.ts) -> one
 * log line and the metrics. Always answers with a CheckResponse: bytes that are not a CheckRequest,
 * a call without the gRPC port's secret, and any unexpected failure, become a 503 denial (fail
 * closed), never a failed RPC. This module is
 * the only emitter of decision lines, the model lists' included (`logServed`).
 *
 * It knows no logging or metrics library: CheckLogger and CheckMetrics below are all it needs
 * (pino's Logger and server/metrics.ts's Metrics satisfy them as they are).
 */
import type { Config } from '../config/load';
import { decide, type Lookups, type MaybePromise } from './decide';
import type { AllowedDecision, Decision } from './decision';
import {
  clientAddress,
  decisionLine,
  decisionShape,
  lineFromShape,
  loggedClient,
  loggedUserAgent,
  shapeText,
} from './decision-log';
import { decodeCheckRequest, requestHeaderFilter, type HeaderFilter } from './read-request';
import { printableRequestId } from '../contract/safe-text';
import { HINTS, statusOf } from '../contract/reasons';
import type { RequestView } from './request-view';
import type { ResponseEncoder } from './response-encoder';
import { classify } from './routes';

/** What the Check path logs through: pino's `logger.info(obj, msg)` shape. */
export interface CheckLogger {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** What the Check path counts: one decision and its duration. */
export interface CheckMetrics {
  countDecision(status: number, reason: string): void;
  observeCheckSeconds(seconds: number): void;
}

/** Where decision lines go: the logger's own destination, in pino's line format. */
export interface DecisionLog {
  enabled(): boolean;
  write(line: string): void;
  readonly bindings: string;
}

export interface PipelineDeps {
  /** The current config (swapped atomically on reload). */
  readonly config: () => Config;
  readonly lookups: Lookups;
  readonly logger: CheckLogger;
  readonly metrics?: CheckMetrics;
  /** Epoch milliseconds. */
  readonly now?: () => number;
  readonly encoder: ResponseEncoder;
  /** Decision lines bypass pino's generic serialiser (decision-log.ts lineFromShape); default: through pino. */
  readonly decisionLog?: DecisionLog;
  /**
   * A last word on allowed requests (the meter's strict mode and unmetered-stream rule,
   * meter/admission.ts): returns the decision as is, a denial, or a promise of either. Called only
   * for allowed decisions; a throw or rejection denies (fail closed).
   */
  readonly admit?: Admission;
  /**
   * True while the process shuts down: the gRPC port stays open for the meter's reports, and a
   * Check arriving meanwhile is denied (authz_unavailable; another replica answers the retry).
   */
  readonly draining?: () => boolean;
}

/** See PipelineDeps.admit. */
export type Admission = (decision: AllowedDecision, view: RequestView, config: Config) => MaybePromise<Decision>;

/** The fail-closed answer when deciding threw. */
function failedDecision(err: unknown, view: RequestView, config: Config, logger: CheckLogger): Decision {
  logger.error({ err: err instanceof Error ? err.message : String(err) }, 'decision failed; denying (fail closed)');
  const route = classify(view.method, view.path, config.routes.altPrefix, false);
  return { allowed: false, reason: 'internal_error', hint: HINTS.internal_error.failed, route };
}

/** Decides a view, never throwing: a failure inside (sync or async) becomes a fail-closed internal_error. */
export function decideSafely(
  view: RequestView,
  config: Config,
  lookups: Lookups,
  now: number,
  logger: CheckLogger,
): MaybePromise<Decision> {
  try {
    const d = decide(view, config, lookups, now);
    return d instanceof Promise ? d.catch((err: unknown) => failedDecision(err, view, config, logger)) : d;
  } catch (err) {
    return failedDecision(err, view, config, logger);
  }
}

/** Runs the admission on an allowed decision, never throwing. */
function admitSafely(
  admit: Admission,
  d: Decision,
  view: RequestView,
  config: Config,
  logger: CheckLogger,
): MaybePromise<Decision> {
  if (!d.allowed) return d;
  try {
    const a = admit(d, view, config);
    return a instanceof Promise ? a.catch((err: unknown) => failedDecision(err, view, config, logger)) : a;
  } catch (err) {
    return failedDecision(err, view, config, logger);
  }
}

/**
 * The text of a decision's shape (decision-log.ts shapeText), by the answer's cached bytes (the
 * encoder's `base`: without a request's own meter marks) and the method:
 * the bytes stand for everything of the shape but the method, a stale answer and a model outside
 * the group (those are not cached). Weakly held: it goes when the encoder drops the answer.
 */
const SHAPES = new WeakMap<Buffer, Map<string, string>>();
/** Methods remembered per answer (a client may send any method to an unknown path). */
const SHAPE_METHODS = 4;

function shapeFor(bytes: Buffer, decision: Decision, view: RequestView, bindings: string): string {
  if (decision.stale || (decision.model !== undefined && !decision.modelKnown))
    return shapeText(decisionShape(decision, view), bindings);
  let byMethod = SHAPES.get(bytes);
  if (!byMethod) SHAPES.set(bytes, (byMethod = new Map()));
  let text = byMethod.get(view.method);
  if (text === undefined) {
    text = shapeText(decisionShape(decision, view), bindings);
    if (byMethod.size < SHAPE_METHODS) byMethod.set(view.method, text);
  }
  return text;
}

/** Encodes, logs and counts a decision: the end of every Check. */
function finish(deps: PipelineDeps, config: Config, view: RequestView, started: number, decision: Decision): Buffer {
  const bytes = deps.encoder.encode(decision, config, view.path);
  const durUs = Math.round((performance.now() - started) * 1000);
  if (!decision.allowed || config.log.allows) {
    const log = deps.decisionLog;
    if (!log) deps.logger.info(decisionLine(decision, view, durUs, config.gateway.trustedProxyHops), 'decision');
    else if (log.enabled()) {
      const shape = shapeFor(deps.encoder.base, decision, view, log.bindings);
      log.write(
        lineFromShape(
          shape,
          Date.now(),
          loggedClient(clientAddress(view, config.gateway.trustedProxyHops)),
          loggedUserAgent(view.headers['user-agent']),
          printableRequestId(view.requestId),
          durUs,
        ),
      );
    }
  }
  deps.metrics?.countDecision(statusOf(decision.reason), decision.reason);
  deps.metrics?.observeCheckSeconds(durUs / 1e6);
  return bytes;
}

/**
 * A Check call whose bytes are not one CheckRequest message (@modelgate/grpc-server reads the framing and names
 * the problem: its RequestProblem, which server/grpc-server.ts checks is this same list).
 */
export type UnreadableRequest = 'too_large' | 'compressed' | 'truncated' | 'no_message' | 'extra_message';

/** The Check path as the gRPC handler and the model lists use it. */
export interface CheckPipeline {
  /**
   * The bytes of one CheckRequest (undecodable ones too: a denial) to the serialised
   * CheckResponse: the bytes themselves when the decision needed no store round trip (cached key
   * and group: no promise, no microtask, no closure), a promise otherwise. Never throws by design;
   * `failClosed` is the answer if it does.
   */
  check(request: Buffer): MaybePromise<Buffer>;
  /** The answer when `check` threw or rejected after all: deny (internal_error). */
  failClosed(err: unknown): Buffer;
  /** The answer to a call whose bytes are not one CheckRequest (cut, compressed, too large): deny. */
  unreadable(problem: UnreadableRequest): Buffer;
  /**
   * The answer to a Check without the gRPC port's secret (server/grpc-server.ts checks it before
   * any of the request is read): deny (authz_unauthenticated). Nothing of the request exists, so
   * its denial is in the generic error shape, and no key is looked up.
   */
  unauthenticated(): Buffer;
  /** Builds what a config needs (the header filter) before it is swapped in: a reload fails here, not in a Check. */
  prepare(config: Config): void;
  /** Decides a request read elsewhere (the model lists on the HTTP listener), never throwing. */
  decide(view: RequestView): MaybePromise<Decision>;
  /**
   * Logs the decision of a request answered elsewhere (the model lists: msg `catalog`). `started`
   * is `performance.now()` when the request came in.
   */
  logServed(decision: Decision, view: RequestView, started: number): void;
}

/** The reasons of a Check that could not be read, authenticated or decided (or came while shutting down). */
type UndecidedReason = 'internal_error' | 'check_request_malformed' | 'authz_unauthenticated' | 'authz_unavailable';

/** The decision of a Check that could not be read, authenticated or decided: no request, so no route of its own. */
function undecided(reason: UndecidedReason, hint: string, config: Config): Decision {
  return { allowed: false, reason, hint, route: classify('', '', config.routes.altPrefix, false) };
}

export function createPipeline(deps: PipelineDeps): CheckPipeline {
  const now = deps.now ?? Date.now;
  const admit = deps.admit;
  const draining = deps.draining;
  const filters = new WeakMap<Config, HeaderFilter>();
  const filterOf = (config: Config): HeaderFilter => {
    let f = filters.get(config);
    if (f === undefined) filters.set(config, (f = requestHeaderFilter(config.routes)));
    return f;
  };
  // The last config's filter, without a map lookup per Check.
  let lastConfig: Config | undefined;
  let lastFilter: HeaderFilter | undefined;

  /**
   * Bytes that could not be read, a Check without the port's secret, or one that failed outside the decision: one error
   * line.
   */
  const denyUndecided = (reason: UndecidedReason, hint: string): Buffer => {
    const config = deps.config();
    const status = statusOf(reason);
    deps.logger.error({ decision: 'deny', status, reason, hint }, 'decision');
    deps.metrics?.countDecision(status, reason);
    return deps.encoder.encode(undecided(reason, hint, config), config);
  };

  const decideView = (view: RequestView, config: Config): MaybePromise<Decision> => {
    let decided = decideSafely(view, config, deps.lookups, now(), deps.logger);
    if (admit !== undefined) {
      decided =
        decided instanceof Promise
          ? decided.then((d) => admitSafely(admit, d, view, config, deps.logger))
          : admitSafely(admit, decided, view, config, deps.logger);
    }
    return decided;
  };

  return {
    check(request) {
      if (draining?.()) return denyUndecided('authz_unavailable', HINTS.authz_unavailable.shuttingDown);
      const started = performance.now();
      const config = deps.config();
      if (config !== lastConfig) {
        lastFilter = filterOf(config);
        lastConfig = config;
      }
      const view = decodeCheckRequest(request, lastFilter!);
      if (view === undefined)
        return denyUndecided('check_request_malformed', HINTS.check_request_malformed.undecodable);
      const decided = decideView(view, config);
      return decided instanceof Promise
        ? decided.then((d) => finish(deps, config, view, started, d))
        : finish(deps, config, view, started, decided);
    },
    failClosed: () => denyUndecided('internal_error', HINTS.internal_error.failed),
    unreadable(problem) {
      const hints = HINTS.check_request_malformed;
      return denyUndecided(
        'check_request_malformed',
        problem === 'too_large' ? hints.too_large(deps.config().grpc.maxReceiveMessageBytes) : hints[problem],
      );
    },
    unauthenticated: () => denyUndecided('authz_unauthenticated', HINTS.authz_unauthenticated.noSecret),
    prepare(config) {
      filterOf(config);
    },
    decide: (view) => decideSafely(view, deps.config(), deps.lookups, now(), deps.logger),
    logServed(decision, view, started) {
      deps.logger.info(
        decisionLine(
          decision,
          view,
          Math.round((performance.now() - started) * 1000),
          deps.config().gateway.trustedProxyHops,
        ),
        'catalog',
      );
    },
  };
}

/**
 * Stage 2 of the pipeline: decides one request, in the spec's order of checks (docs/spec.md §4.1 rule 4,
 * §7): the path (404/405), then the key (401), then the group, the body and model (400/403), then
 * the balance (403). Knows nothing of gRPC, PostgreSQL or logging; time and the store come in as
 * parameters. Every outcome is a Decision, never an exception.
 */
import type { Config } from '../config/load';
import { consoleHints } from './console-address';
import type { AllowedDecision, Decision, DeniedDecision } from './decision';
import { emptyKeyParams, extractKey, findKeyInUrl, keyHeaders } from './extract-key';
import { lenientDecode, printable } from '../contract/safe-text';
import { extractModel } from './extract-model';
import type { TopLevelFields } from '../contract/body-fields';
import { REQUEST_FIELDS, REQUEST_MARKS } from './request-fields';
import { KEY_PREFIX, hashKey, isKeyBody } from '../contract/key-format';
import { modelNotInGroupHint } from './model-hints';
import { HINTS, type DenyReason } from '../contract/reasons';
import type { RequestView } from './request-view';
import { classify, endpointFor, type Route } from './routes';
import type { Lookup } from '../store/cache';
import type { GroupRecord, KeyRecord, ModelRecord } from '../store/store';
import type { Budget } from '../store/budget-window';
import { effectiveLimits } from '../ratelimit/limits';
import { rateLimitMetadata } from '../ratelimit/metadata';

/** Cached store access, as the decision needs it (StoreCache fits). */
export interface Lookups {
  readonly keys: { get(sha256: string): Lookup<KeyRecord> | Promise<Lookup<KeyRecord>> };
  readonly groups: { get(name: string): Lookup<GroupRecord> | Promise<Lookup<GroupRecord>> };
}

function deny(route: Route, reason: DenyReason, hint: string, extra?: Partial<DeniedDecision>): DeniedDecision {
  return { allowed: false, reason, hint, route, ...extra };
}

/** Where a client lists its group's models, for hints. */
function listPath(route: Route, alt: string): string {
  const prefix = route.alt ? alt : '';
  return route.family === 'gemini' ? `${prefix}/v1beta/models` : `${prefix}/v1/models`;
}

/** A route that names an endpoint: only these reach the key lookup. */
type EndpointRoute = Extract<Route, { kind: 'protocol' | 'models' }>;

/** A value, or a promise of it: cached lookups answer synchronously, so most Checks never wait. */
export type MaybePromise<T> = T | Promise<T>;

/** Runs `next` on a lookup's answer, synchronously when the answer is already there. */
function then<T, R>(v: MaybePromise<T>, next: (v: T) => MaybePromise<R>): MaybePromise<R> {
  return v instanceof Promise ? v.then(next) : next(v);
}

/**
 * Decides a request. `now` is epoch milliseconds. Returns the Decision itself when every lookup is
 * answered from the cache (no promise, no microtask), a promise only when the store is asked.
 */
export function decide(view: RequestView, config: Config, lookups: Lookups, now: number): MaybePromise<Decision> {
  const routes = config.routes;
  const route = classify(
    view.method,
    view.path,
    routes.altPrefix,
    typeof view.headers['anthropic-version'] === 'string',
  );

  if (route.kind === 'unknown') {
    const why = route.detail ?? (view.path === '' ? HINTS.path_unknown.noPath : HINTS.path_unknown.noEndpoint);
    return deny(route, 'path_unknown', HINTS.path_unknown.check(why, routes.altPrefix));
  }
  if (route.kind === 'wrong_method')
    return deny(route, 'method_not_allowed', HINTS.method_not_allowed.check(route.allow, printable(view.method, 16)));

  const inUrl = findKeyInUrl(view, routes);
  if (inUrl) return deny(route, 'key_in_url', inUrl);

  const names = keyHeaders(routes, route.keys);
  const others = route.keys === 'bearer' ? routes.vendorHeaders : route.keys === 'vendor' ? routes.bearerHeaders : [];
  const extracted = extractKey(view, names, others);
  if (!extracted.ok) return deny(route, extracted.reason, extracted.hint);

  return then(lookups.keys.get(hashKey(extracted.key)), (keyLookup) =>
    decideForKey(view, config, lookups, now, route, keyLookup),
  );
}

/** The key's own checks (docs/spec.md §7: 401s), then the group. */
function decideForKey(
  view: RequestView,
  config: Config,
  lookups: Lookups,
  now: number,
  route: EndpointRoute,
  keyLookup: Lookup<KeyRecord>,
): MaybePromise<Decision> {
  if (keyLookup.status === 'unavailable') return deny(route, 'store_unavailable', HINTS.store_unavailable.keyStore);
  if (keyLookup.status === 'not_found') {
    return deny(route, 'key_unknown', consoleHints(config).keyUnknown, { stale: keyLookup.stale });
  }
  const key = keyLookup.value;
  const who = { keyId: key.id, group: key.group, stale: keyLookup.stale };
  if (key.disabled) return deny(route, 'key_disabled', HINTS.key_disabled.disabled(key.id), who);
  if (key.expiresAt !== null && key.expiresAt <= now) {
    return deny(route, 'key_expired', HINTS.key_expired.expired(key.id, key.expiresAt), who);
  }
  return then(lookups.groups.get(key.group), (groupLookup) =>
    decideForGroup(view, config, lookups, route, key, who, groupLookup, now),
  );
}

/** The group, the body and model, the protocol, availability, the balance (docs/spec.md §7: 403s, in order). */
function decideForGroup(
  view: RequestView,
  config: Config,
  lookups: Lookups,
  route: EndpointRoute,
  key: KeyRecord,
  who: { keyId: string; group: string; stale: boolean },
  groupLookup: Lookup<GroupRecord>,
  now: number,
): MaybePromise<Decision> {
  const routes = config.routes;
  if (groupLookup.status === 'unavailable')
    return deny(route, 'store_unavailable', HINTS.store_unavailable.keyStore, who);
  if (groupLookup.status === 'not_found')
    return deny(route, 'group_unavailable', HINTS.group_unavailable.gone(key.group), who);
  const group = groupLookup.value;
  if (!group.available)
    return deny(
      route,
      'group_unavailable',
      HINTS.group_unavailable.marked(group.name, consoleHints(config).address),
      who,
    );

  if (route.kind === 'models' && route.model === undefined)
    return allowUnlessKeyInQuery(view, routes, lookups, route, key, who, undefined, undefined);

  let model = route.model;
  let fields: TopLevelFields | undefined;
  if (model === undefined) {
    const read = readModel(view, routes.maxJsonDepth, config);
    if ('reason' in read) return deny(route, read.reason, read.hint, who);
    model = read.model;
    fields = read.fields;
  } else if (view.partialBody) {
    // The model is in the path, but a cut body is still refused: over HTTP/2 Envoy checks a body a
    // little over max_request_bytes cut to the limit (x-envoy-auth-partial-body: true) instead of
    // answering 413, and would then forward it whole (seen on Envoy 1.36 and 1.40).
    return deny(route, 'body_too_large', tooLarge(config), who);
  }

  const m = group.models.get(model);
  if (!m) {
    const requested = model;
    // A key pasted into the model field must not come back in the hint or reach the log: a known
    // key, an issued key without its prefix, or anything holding the prefix.
    if (isKeyBody(requested) || requested.includes(KEY_PREFIX)) {
      return deny(route, 'model_not_in_group', HINTS.model_not_in_group.holdsKey, {
        ...who,
        model: requested,
        modelIsKey: true,
      });
    }
    return then(lookups.keys.get(hashKey(requested)), (asKey) =>
      asKey.status === 'found'
        ? deny(route, 'model_not_in_group', HINTS.model_not_in_group.holdsKey, {
            ...who,
            model: requested,
            modelIsKey: true,
          })
        : deny(route, 'model_not_in_group', modelNotInGroupHint(requested, group, listPath(route, routes.altPrefix)), {
            ...who,
            model: requested,
          }),
    );
  }
  if (route.kind === 'protocol' && m.protocols !== null && !m.protocols.includes(route.style)) {
    const alt = route.alt ? routes.altPrefix : '';
    const where = m.protocols.map((p) => endpointFor(p, m.name, alt)).join(' or ');
    return deny(route, 'model_wrong_protocol', HINTS.model_wrong_protocol.otherStyle(model, route.style, where), {
      ...who,
      model,
      modelKnown: true,
    });
  }
  if (!m.available)
    return deny(route, 'model_unavailable', HINTS.model_unavailable.channelDown(model), {
      ...who,
      model,
      modelKnown: true,
    });
  // Finite and positive, or denied: a NaN balance (PostgreSQL numeric accepts 'NaN') fails `<= 0` too
  // (docs/security.md).
  if (route.kind === 'protocol' && key.balance !== null && !(key.balance > 0 && key.balance < Infinity)) {
    return deny(route, 'balance_insufficient', HINTS.balance_insufficient.notPositive(amountText(key.balance)), {
      ...who,
      model,
      modelKnown: true,
    });
  }
  return allowUnlessKeyInQuery(
    view,
    routes,
    lookups,
    route,
    key,
    who,
    model,
    route.kind === 'protocol' ? limitsPart(key, group, m, model, now) : undefined,
    fields,
  );
}

/** What the rate limits add to an allowed protocol request. */
type LimitsPart = Pick<AllowedDecision, 'rateLimit' | 'inFlightLimit'>;

/** The rate limits of an allowed protocol request (docs/rate-limits.md): what Envoy counts, and the in-flight cap. */
function limitsPart(
  key: KeyRecord,
  group: GroupRecord,
  m: ModelRecord,
  model: string,
  now: number,
): LimitsPart | undefined {
  if (!key.limits && !group.limits && !m.limits) return undefined;
  const limits = effectiveLimits(key, group, m);
  const rateLimit = rateLimitMetadata(limits, key.id, model, now);
  const inFlight = limits.key.inFlight;
  if (!rateLimit && !inFlight) return undefined;
  return { ...(rateLimit ? { rateLimit } : {}), ...(inFlight ? { inFlightLimit: inFlight } : {}) };
}

/** Runs of 16 to 512 characters a key may hold, in a query value or name: each could be a key of the store. */
const QUERY_KEY_CANDIDATE = /[A-Za-z0-9\-._~+/:=]{16,512}/g;
const MAX_QUERY_KEY_CANDIDATES = 16;

/**
 * The last check before an allow: a query parameter (name or value, or a run of key characters in
 * one, once decoded) that is a key of the store, whatever its shape (an imported key has no prefix
 * to recognise it by), is a key in the URL. Only requests with a long query value pay for it (one
 * cached lookup each; most requests have no query).
 */
function allowUnlessKeyInQuery(
  view: RequestView,
  routes: Config['routes'],
  lookups: Lookups,
  route: EndpointRoute,
  key: KeyRecord,
  who: { keyId: string; group: string; stale: boolean },
  model: string | undefined,
  limits: LimitsPart | undefined,
  fields?: TopLevelFields,
): MaybePromise<Decision> {
  if (view.query === '') return allow(view, routes, route, key, who.stale, model, limits, fields);
  const candidates: string[] = [];
  for (const part of view.query.split('&')) {
    const eq = part.indexOf('=');
    for (const s of eq === -1 ? [part] : [part.slice(0, eq), part.slice(eq + 1)]) {
      // Whole runs between characters no key holds (an invalid escape, a space, a quote).
      for (const run of lenientDecode(s, true).match(QUERY_KEY_CANDIDATE) ?? []) candidates.push(run);
    }
  }
  // Each is one lookup: a query cannot make a Check cost more than a few.
  if (candidates.length > MAX_QUERY_KEY_CANDIDATES) {
    return deny(route, 'key_in_url', HINTS.key_in_url.tooManyValues(candidates.length, MAX_QUERY_KEY_CANDIDATES), who);
  }
  const next = (i: number): MaybePromise<Decision> => {
    if (i === candidates.length) return allow(view, routes, route, key, who.stale, model, limits, fields);
    return then(lookups.keys.get(hashKey(candidates[i])), (found) => {
      if (found.status === 'found') return deny(route, 'key_in_url', HINTS.key_in_url.query, who);
      if (found.status === 'unavailable')
        return deny(route, 'store_unavailable', HINTS.store_unavailable.keyStore, who);
      return next(i + 1);
    });
  };
  return next(0);
}

/** The key's budget on `model`, if it has one (an own property only: a model may be named `__proto__`). */
function modelBudgetOf(key: KeyRecord, model: string): { modelBudget?: Budget } {
  const m = key.modelBudgets;
  return m && Object.hasOwn(m, model) ? { modelBudget: m[model] } : {};
}

function allow(
  view: RequestView,
  routes: Config['routes'],
  route: EndpointRoute,
  key: KeyRecord,
  stale: boolean,
  model: string | undefined,
  limits: LimitsPart | undefined,
  fields?: TopLevelFields,
): AllowedDecision {
  const plain: AllowedDecision =
    model === undefined
      ? {
          allowed: true,
          reason: 'allowed',
          hint: '',
          route,
          keyId: key.id,
          keySha256: key.sha256,
          group: key.group,
          stale,
          balance: key.balance,
          ...(key.budget ? { budget: key.budget } : {}),
        }
      : {
          allowed: true,
          reason: 'allowed',
          hint: '',
          route,
          keyId: key.id,
          keySha256: key.sha256,
          group: key.group,
          model,
          modelKnown: true,
          stale,
          balance: key.balance,
          ...(key.budget ? { budget: key.budget } : {}),
          ...modelBudgetOf(key, model),
        };
  let d: AllowedDecision = limits ? { ...plain, ...limits } : plain;
  if (fields) d = { ...d, bodyFields: fields };
  // Parameters named like a key with an empty value: Envoy removes them (only then: a removal
  // makes Envoy re-serialise the whole query).
  const removeQuery = view.query === '' ? undefined : emptyKeyParams(view.query, routes);
  return removeQuery ? { ...d, removeQuery } : d;
}

/**
 * An amount (a balance, a cost) as a decimal in a hint, never in exponent form (-6e-7 reads as
 * -0.0000006), at most 12 decimals; NaN and Infinity as they are. The shortest form when it is one
 * already (most amounts: Intl's formatting takes about 15 µs, a refusal formats several).
 */
export function amountText(n: number): string {
  if (Number.isFinite(n) && n !== 0) {
    const s = String(n);
    const dot = s.indexOf('.');
    if (!s.includes('e') && (dot < 0 || s.length - dot - 1 <= 12)) return s;
  }
  return Number.isFinite(n)
    ? (n === 0 ? 0 : n).toLocaleString('en-US', { maximumFractionDigits: 12, useGrouping: false })
    : String(n);
}

const tooLarge = (config: Config): string => HINTS.body_too_large.overLimit(config.gateway.maxRequestBytes);

/** The model from the JSON body (docs/spec.md §4.2: `model` is a required string of the body). */
function readModel(
  view: RequestView,
  maxDepth: number,
  config: Config,
): { model: string; fields?: TopLevelFields } | { reason: DenyReason; hint: string } {
  const type = view.headers['content-type'];
  if (type !== undefined && type !== 'application/json' && !isJsonUtf8(type)) {
    return { reason: 'content_type_unsupported', hint: HINTS.content_type_unsupported.notJson(printable(type, 48)) };
  }
  const encoding = view.headers['content-encoding'];
  if (encoding && encoding.toLowerCase() !== 'identity') {
    return { reason: 'body_invalid', hint: HINTS.body_invalid.compressed(printable(encoding, 24)) };
  }
  if (view.partialBody) return { reason: 'body_too_large', hint: tooLarge(config) };
  if (!view.body || view.body.length === 0) return { reason: 'body_invalid', hint: HINTS.body_invalid.empty };
  // The watched fields and marked strings are the meter's (meter/admission.ts): without it, the scan
  // validates and finds the model only.
  const r = config.meter.enabled
    ? extractModel(view.body, maxDepth, REQUEST_FIELDS, REQUEST_MARKS)
    : extractModel(view.body, maxDepth);
  if (r.ok) {
    return r.model === ''
      ? { reason: 'model_missing', hint: HINTS.model_missing.empty }
      : { model: r.model, fields: r.fields };
  }
  switch (r.problem) {
    case 'model_absent':
      return { reason: 'model_missing', hint: HINTS.model_missing.absent };
    case 'model_not_string':
      return { reason: 'model_missing', hint: HINTS.model_missing.notString(r.detail) };
    case 'model_case':
      return { reason: 'body_invalid', hint: HINTS.body_invalid.modelCase(r.detail) };
    default:
      return { reason: 'body_invalid', hint: HINTS.body_invalid.unusable(r.detail) };
  }
}

/**
 * `application/json`, with at most a `charset=utf-8` parameter (RFC 8259 §8.1: JSON is UTF-8; a
 * charset-honouring provider would decode `utf-7` or `utf-16` into other text than the one checked).
 */
function isJsonUtf8(value: string): boolean {
  const parts = value.split(';');
  if (parts[0].trim().toLowerCase() !== 'application/json') return false;
  for (let i = 1; i < parts.length; i++) {
    const p = parts[i].trim();
    if (p === '') continue;
    const eq = p.indexOf('=');
    if (eq === -1 || p.slice(0, eq).trim().toLowerCase() !== 'charset') return false;
    const charset = p
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
    if (charset !== 'utf-8' && charset !== 'utf8') return false;
  }
  return true;
}

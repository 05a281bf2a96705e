/**
 * Stage 2 of the pipeline: decides one request, in the spec's order of checks (seed §4.1 rule 4,
 * §7): the path (404/405), then the key (401), then the group, the body and model (400/403), then
 * the balance (403). Knows nothing of gRPC, PostgreSQL or logging; time and the store come in as
 * parameters. Every outcome is a Decision, never an exception.
 */
import type { Config } from '../config/load';
import { consoleHints } from './console-address';
import type { Decision } from './decision';
import { emptyKeyParams, extractKey, findKeyInUrl, keyHeaders } from './extract-key';
import { lenientDecode, printable } from './safe-text';
import { extractModel } from './extract-model';
import { KEY_PREFIX, hashKey, isKeyBody } from './key-format';
import { modelNotInGroupHint } from './model-hints';
import { statusOf, type DenyReason } from './reasons';
import type { RequestView } from './request-view';
import { classify, endpointFor, type Route } from './routes';
import type { Lookup } from '../store/cache';
import type { GroupRecord, KeyRecord, ModelRecord } from '../store/store';
import { effectiveLimits } from '../ratelimit/limits';
import { rateLimitMetadata } from '../ratelimit/metadata';

/** Cached store access, as the decision needs it (StoreCache fits). */
export interface Lookups {
  readonly keys: { get(sha256: string): Lookup<KeyRecord> | Promise<Lookup<KeyRecord>> };
  readonly groups: { get(name: string): Lookup<GroupRecord> | Promise<Lookup<GroupRecord>> };
}

function deny(route: Route, reason: DenyReason, hint: string, extra?: Partial<Decision>): Decision {
  return { allowed: false, reason, status: statusOf(reason), hint, route, ...extra };
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
  const route = classify(view.method, view.path, routes.altPrefix, typeof view.headers['anthropic-version'] === 'string');

  if (route.kind === 'unknown') {
    const why = route.detail ?? (view.path === '' ? 'the request has no path' : 'no endpoint has this path');
    return deny(route, 'path_unknown', `${why}: check the Base URL (no endpoint path in it, no repeated segment) and the prefix: /v1, /v1beta, ${routes.altPrefix}/v1 or ${routes.altPrefix}/v1beta`);
  }
  if (route.kind === 'wrong_method') return deny(route, 'method_not_allowed', `this endpoint takes ${route.allow}, not ${printable(view.method, 16) || 'no method'}`);

  const inUrl = findKeyInUrl(view, routes);
  if (inUrl) return deny(route, 'key_in_url', inUrl);

  const names = keyHeaders(routes, route.keys);
  const others = route.keys === 'bearer' ? routes.vendorHeaders : route.keys === 'vendor' ? routes.bearerHeaders : [];
  const extracted = extractKey(view, names, others);
  if (!extracted.ok) return deny(route, extracted.reason, extracted.hint);

  return then(lookups.keys.get(hashKey(extracted.key)), (keyLookup) => decideForKey(view, config, lookups, now, route, keyLookup));
}

/** The key's own checks (seed §7: 401s), then the group. */
function decideForKey(view: RequestView, config: Config, lookups: Lookups, now: number, route: EndpointRoute, keyLookup: Lookup<KeyRecord>): MaybePromise<Decision> {
  if (keyLookup.status === 'unavailable') return deny(route, 'store_unavailable', 'the key store cannot answer right now; retry shortly');
  if (keyLookup.status === 'not_found') {
    return deny(route, 'key_unknown', consoleHints(config).keyUnknown, { stale: keyLookup.stale });
  }
  const key = keyLookup.value;
  const who = { keyId: key.id, group: key.group, stale: keyLookup.stale };
  if (key.disabled) return deny(route, 'key_disabled', `the key ${JSON.stringify(key.id)} is disabled: ask for it to be enabled or use another key`, who);
  if (key.expiresAt !== null && key.expiresAt <= now) {
    return deny(route, 'key_expired', `the key ${JSON.stringify(key.id)} expired at ${new Date(key.expiresAt).toISOString()}: use a current key`, who);
  }
  return then(lookups.groups.get(key.group), (groupLookup) => decideForGroup(view, config, lookups, route, key, who, groupLookup, now));
}

/** The group, the body and model, the protocol, availability, the balance (seed §7: 403s, in order). */
function decideForGroup(
  view: RequestView, config: Config, lookups: Lookups, route: EndpointRoute, key: KeyRecord,
  who: { keyId: string; group: string; stale: boolean }, groupLookup: Lookup<GroupRecord>, now: number,
): MaybePromise<Decision> {
  const routes = config.routes;
  if (groupLookup.status === 'unavailable') return deny(route, 'store_unavailable', 'the key store cannot answer right now; retry shortly', who);
  if (groupLookup.status === 'not_found') return deny(route, 'group_unavailable', `the key's group ${JSON.stringify(key.group)} no longer exists: bind the key to an existing group`, who);
  const group = groupLookup.value;
  if (!group.available) return deny(route, 'group_unavailable', `the key's group ${JSON.stringify(group.name)} is marked unavailable in the console (${consoleHints(config).address})`, who);

  if (route.kind === 'models' && route.model === undefined) return allowUnlessKeyInQuery(view, routes, lookups, route, key, who, undefined, undefined);

  let model = route.model;
  if (model === undefined) {
    const read = readModel(view, routes.maxJsonDepth, config);
    if ('reason' in read) return deny(route, read.reason, read.hint, who);
    model = read.model;
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
      return deny(route, 'model_not_in_group', 'the model field holds an API key: send the key in its header and a model name as the model', { ...who, model: requested, modelIsKey: true });
    }
    return then(lookups.keys.get(hashKey(requested)), (asKey) => asKey.status === 'found'
      ? deny(route, 'model_not_in_group', 'the model field holds an API key: send the key in its header and a model name as the model', { ...who, model: requested, modelIsKey: true })
      : deny(route, 'model_not_in_group', modelNotInGroupHint(requested, group, listPath(route, routes.altPrefix)), { ...who, model: requested }));
  }
  if (route.kind === 'protocol' && m.protocols !== null && !m.protocols.includes(route.style)) {
    const alt = route.alt ? routes.altPrefix : '';
    const where = m.protocols.map((p) => endpointFor(p, m.name, alt)).join(' or ');
    return deny(route, 'model_wrong_protocol', `model ${JSON.stringify(model)} is not served on ${route.style}; use ${where}`, { ...who, model, modelKnown: true });
  }
  if (!m.available) return deny(route, 'model_unavailable', `model ${JSON.stringify(model)} is unavailable right now (its channel is down): retry later or use another model of the group`, { ...who, model, modelKnown: true });
  // Finite and positive, or denied: a NaN balance (PostgreSQL numeric accepts 'NaN') fails `<= 0` too (issue 14).
  if (route.kind === 'protocol' && key.balance !== null && !(key.balance > 0 && key.balance < Infinity)) {
    return deny(route, 'balance_insufficient', `the key's balance is ${amountText(key.balance)}: top it up before using models`, { ...who, model, modelKnown: true });
  }
  return allowUnlessKeyInQuery(view, routes, lookups, route, key, who, model, route.kind === 'protocol' ? limitsPart(key, group, m, model, now) : undefined);
}

/** The rate limits of an allowed protocol request (issue 25): what Envoy counts, and the in-flight cap. */
function limitsPart(key: KeyRecord, group: GroupRecord, m: ModelRecord, model: string, now: number): Partial<Decision> | undefined {
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
function allowUnlessKeyInQuery(view: RequestView, routes: Config['routes'], lookups: Lookups, route: EndpointRoute, key: KeyRecord, who: { keyId: string; group: string; stale: boolean }, model: string | undefined, limits: Partial<Decision> | undefined): MaybePromise<Decision> {
  if (view.query === '') return allow(view, routes, route, key, who.stale, model, limits);
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
    return deny(route, 'key_in_url', `the query has ${candidates.length} long values that could each be a key (at most ${MAX_QUERY_KEY_CANDIDATES} are checked); keys never go in the URL: shorten the query`, who);
  }
  const next = (i: number): MaybePromise<Decision> => {
    if (i === candidates.length) return allow(view, routes, route, key, who.stale, model, limits);
    return then(lookups.keys.get(hashKey(candidates[i])), (found) => {
      if (found.status === 'found') return deny(route, 'key_in_url', 'a key is in the URL query string; keys never go in the URL: remove it and send the key in a header', who);
      if (found.status === 'unavailable') return deny(route, 'store_unavailable', 'the key store cannot answer right now; retry shortly', who);
      return next(i + 1);
    });
  };
  return next(0);
}

function allow(view: RequestView, routes: Config['routes'], route: EndpointRoute, key: KeyRecord, stale: boolean, model: string | undefined, limits: Partial<Decision> | undefined): Decision {
  const plain: Decision = model === undefined
    ? { allowed: true, reason: 'allowed', status: 200, hint: '', route, keyId: key.id, group: key.group, stale, balance: key.balance }
    : { allowed: true, reason: 'allowed', status: 200, hint: '', route, keyId: key.id, group: key.group, model, modelKnown: true, stale, balance: key.balance };
  const d = limits ? { ...plain, ...limits } : plain;
  // Parameters named like a key with an empty value: Envoy removes them (only then: a removal
  // makes Envoy re-serialise the whole query).
  const removeQuery = view.query === '' ? undefined : emptyKeyParams(view.query, routes);
  return removeQuery ? { ...d, removeQuery } : d;
}

/** The same words as Envoy's own 413 (src/envoy/render.ts local replies): the client cannot tell which answered. */
/** An amount (a balance, a cost) as a decimal in a hint, never in exponent form (-6e-7 reads as -0.0000006); NaN and Infinity as they are. */
export const amountText = (n: number): string => (Number.isFinite(n) ? (n === 0 ? 0 : n).toLocaleString('en-US', { maximumFractionDigits: 12, useGrouping: false }) : String(n));

const tooLarge = (config: Config): string => `the request body is over the gateway's limit of ${config.gateway.maxRequestBytes} bytes: send a smaller body`;

/** The model from the JSON body (seed §4.2: `model` is a required string of the body). */
function readModel(view: RequestView, maxDepth: number, config: Config): { model: string } | { reason: DenyReason; hint: string } {
  const type = view.headers['content-type'];
  if (type !== undefined && type !== 'application/json' && !isJsonUtf8(type)) {
    return { reason: 'content_type_unsupported', hint: `the body must be JSON in UTF-8: send Content-Type: application/json (not ${JSON.stringify(printable(type, 48))}), as other content types or charsets can make the provider read another model` };
  }
  const encoding = view.headers['content-encoding'];
  if (encoding && encoding.toLowerCase() !== 'identity') {
    return { reason: 'body_invalid', hint: `the body is compressed (content-encoding ${JSON.stringify(printable(encoding, 24))}): send plain JSON` };
  }
  if (view.partialBody) return { reason: 'body_too_large', hint: tooLarge(config) };
  if (!view.body || view.body.length === 0) return { reason: 'body_invalid', hint: 'the request body is empty: send a JSON object with a "model" field' };
  const r = extractModel(view.body, maxDepth);
  if (r.ok) {
    return r.model === '' ? { reason: 'model_missing', hint: 'the "model" field is empty: name a model of the key\'s group' } : { model: r.model };
  }
  switch (r.problem) {
    case 'model_absent': return { reason: 'model_missing', hint: 'the JSON body has no "model" field: add "model": "<model name>"' };
    case 'model_not_string': return { reason: 'model_missing', hint: `the "model" field must be a string: ${r.detail}` };
    case 'model_case': return { reason: 'body_invalid', hint: `${r.detail}: send the model only as "model"` };
    default: return { reason: 'body_invalid', hint: `the body is not a usable JSON object: ${r.detail}` };
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
    const charset = p.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1').toLowerCase();
    if (charset !== 'utf-8' && charset !== 'utf8') return false;
  }
  return true;
}

/**
 * Finds the client's key in the headers this route expects and checks its shape, without any
 * lookup (docs/spec.md §5: Bearer header for chat/messages/alt routes, the vendor header on /v1beta, never
 * the URL, pasted whole without quotes or extra characters). Pure. Hints never contain the key.
 */
import type { Config } from '../config/load';
import {
  KEY_LENGTH,
  KEY_PREFIX,
  MANAGEMENT_TOKEN_PREFIX,
  checksumMatches,
  containsKeyBody,
  hasIssuedShape,
  isCompleteKey,
} from '../contract/key-format';
import type { RequestView } from './request-view';
import { HINTS, type DenyReason } from '../contract/reasons';
import type { KeySource } from './routes';
import { lenientDecode, printable } from '../contract/safe-text';

export type KeyExtraction =
  | { readonly ok: true; readonly key: string; readonly header: string }
  | { readonly ok: false; readonly reason: DenyReason; readonly hint: string };

/** Longest key accepted; anything longer is not a key (and is never hashed or echoed). */
export const MAX_KEY_LENGTH = 512;
/** RFC 6750 b64token characters, plus ':' for imported keys of the `id:secret` kind. */
const KEY_CHARS = /^[A-Za-z0-9\-._~+/:]+=*$/;
const BASE62 = /^[A-Za-z0-9]*$/;
const QUOTES = /["'`\u2018\u2019\u201c\u201d]/;
/**
 * Authorization schemes safe to name in a hint (the IANA registry plus common mistakes). Anything
 * else before a space may be part of a key (`<key> extra`), so it is never echoed.
 */
const KNOWN_SCHEMES = new Set([
  'basic',
  'digest',
  'negotiate',
  'ntlm',
  'hoba',
  'mutual',
  'oauth',
  'dpop',
  'gnap',
  'privatetoken',
  'concealed',
  'vapid',
  'token',
  'key',
  'apikey',
  'api-key',
  'jwt',
  'bearer:',
  'aws4-hmac-sha256',
]);

/** HTTP optional whitespace (RFC 9110 §5.6.3: SP and HTAB) only; any other space is a stray character of the key. */
function trimOws(s: string): string {
  const first = s.charCodeAt(0);
  const last = s.charCodeAt(s.length - 1);
  if (first !== 0x20 && first !== 0x09 && last !== 0x20 && last !== 0x09) return s; // the usual case: nothing to trim
  return s.replace(/^[ \t]+|[ \t]+$/g, '');
}

/** The header names a route reads, in order of preference. */
export function keyHeaders(routes: Config['routes'], source: KeySource): readonly string[] {
  return source === 'bearer'
    ? routes.bearerHeaders
    : source === 'vendor'
      ? routes.vendorHeaders
      : [...routes.bearerHeaders, ...routes.vendorHeaders];
}

function describe(header: string): string {
  return header === 'authorization' ? 'Authorization: Bearer <key>' : `${header}: <key>`;
}

/**
 * 401 key_in_url when the query string or the path carries a key (docs/spec.md §5.4): the `sk-mg-` prefix,
 * or the 40 characters of an issued key without it, in the raw text or once percent-decoded
 * (escape by escape, so an invalid escape elsewhere hides nothing), or any value of a parameter
 * named like a key (`routes.queryKeyParams`).
 */
export function findKeyInUrl(view: RequestView, routes: Config['routes']): string | undefined {
  if (hasKey(view.path) || hasKey(lenientDecode(view.path))) return HINTS.key_in_url.path;
  if (view.query === '') return undefined;
  for (const part of view.query.split('&')) {
    const eq = part.indexOf('=');
    const name = lenientDecode(eq === -1 ? part : part.slice(0, eq), true).toLowerCase();
    const value = eq === -1 ? '' : lenientDecode(part.slice(eq + 1), true);
    // A key pasted as the parameter's name (`?sk-mg-...`) is never echoed, not even in part.
    if (hasKey(name)) return HINTS.key_in_url.query;
    if ((routes.queryKeyParams.includes(name) && value !== '') || hasKey(value)) {
      return HINTS.key_in_url.queryParameter(printable(name, 32));
    }
  }
  // Split over several parameters, or hidden by '&' or '=' inside an escape.
  if (hasKey(lenientDecode(view.query, true))) return HINTS.key_in_url.query;
  return undefined;
}

function hasKey(s: string): boolean {
  return s.includes(KEY_PREFIX) || containsKeyBody(s);
}

/**
 * The names of the query parameters an allowed request still carries that are named like a key
 * (they have an empty value, or none): the names exactly as sent, for Envoy to remove. Usually none.
 */
export function emptyKeyParams(query: string, routes: Config['routes']): string[] | undefined {
  let out: string[] | undefined;
  for (const part of query.split('&')) {
    const eq = part.indexOf('=');
    const raw = eq === -1 ? part : part.slice(0, eq);
    if (routes.queryKeyParams.includes(lenientDecode(raw, true).toLowerCase())) (out ??= []).push(raw);
  }
  return out;
}

/** Extracts and shape-checks the key for a route whose accepted headers are `names`. */
export function extractKey(view: RequestView, names: readonly string[], otherNames: readonly string[]): KeyExtraction {
  let found: { key: string; header: string } | undefined;
  // An empty accepted header is reported only when no other accepted header carries the key.
  let empty: KeyExtraction | undefined;
  for (const header of names) {
    const raw = view.headers[header];
    if (typeof raw !== 'string') continue;
    const r = header === 'authorization' ? fromAuthorization(raw) : fromRawHeader(raw, header);
    if (!r.ok && r.reason === 'key_missing') {
      empty ??= r;
      continue;
    }
    if (!r.ok) return r;
    if (found && found.key !== r.key) {
      return { ok: false, reason: 'key_conflict', hint: HINTS.key_conflict.twoKeys(found.header, header) };
    }
    found ??= { key: r.key, header };
  }
  // A management token is never looked up as a key: refused as unknown, saying what it is.
  if (found?.key.startsWith(MANAGEMENT_TOKEN_PREFIX))
    return { ok: false, reason: 'key_unknown', hint: HINTS.key_unknown.managementToken };
  if (found) return { ok: true, ...found };
  if (empty) return empty;
  const elsewhere = otherNames.find((h) => typeof view.headers[h] === 'string' && view.headers[h] !== '');
  const want = names.map(describe).join(' or ');
  return {
    ok: false,
    reason: 'key_missing',
    hint: elsewhere ? HINTS.key_missing.elsewhere(want, elsewhere) : HINTS.key_missing.none(want),
  };
}

function fromAuthorization(raw: string): KeyExtraction | { ok: true; key: string } {
  const value = trimOws(raw);
  if (value === '') return { ok: false, reason: 'key_missing', hint: HINTS.key_missing.authorizationEmpty };
  if (value.includes(',')) return repeated('authorization');
  const space = value.indexOf(' ');
  const scheme = space === -1 ? value : value.slice(0, space);
  if (!(space === 6 && value.startsWith('Bearer')) && scheme.toLowerCase() !== 'bearer') {
    if (space === -1) return { ok: false, reason: 'key_malformed', hint: HINTS.key_malformed.noBearer };
    // The word before the space may be the key itself (`<key> extra`): name only known schemes.
    const named = KNOWN_SCHEMES.has(scheme.toLowerCase()) ? `, not ${JSON.stringify(scheme)}` : '';
    return { ok: false, reason: 'key_malformed', hint: HINTS.key_malformed.scheme(named) };
  }
  if (space === -1) return { ok: false, reason: 'key_missing', hint: HINTS.key_missing.bearerWithoutKey };
  const token =
    value.charCodeAt(space + 1) === 0x20 ? value.slice(space + 1).replace(/^ +/, '') : value.slice(space + 1);
  if (token === '') return { ok: false, reason: 'key_missing', hint: HINTS.key_missing.bearerWithoutKey };
  return checkToken(token, 'authorization');
}

function fromRawHeader(raw: string, header: string): KeyExtraction | { ok: true; key: string } {
  const value = trimOws(raw);
  if (value === '') return { ok: false, reason: 'key_missing', hint: HINTS.key_missing.headerEmpty(header) };
  if (value.includes(',')) return repeated(header);
  if (/^bearer\s/i.test(value)) {
    return { ok: false, reason: 'key_malformed', hint: HINTS.key_malformed.bearerInHeader(header) };
  }
  return checkToken(value, header);
}

function repeated(header: string): KeyExtraction {
  return { ok: false, reason: 'key_malformed', hint: HINTS.key_malformed.repeated(header) };
}

/**
 * The token's shape: length, quotes, pasted Bearer, spaces, stray characters, then the modelgate
 * checksum. `whereText` replaces "in <header>" in hints (the console's key field); it is built only
 * after the fast path, so a Check with a good key allocates no hint text.
 */
function checkToken(token: string, header: string, whereText?: string): KeyExtraction | { ok: true; key: string } {
  // The usual case first: exactly an issued key, which passes every shape check below but the checksum.
  if (hasIssuedShape(token) && checksumMatches(token)) return { ok: true, key: token };
  const where = whereText ?? `in ${header}`;
  if (token.length > MAX_KEY_LENGTH)
    return {
      ok: false,
      reason: 'key_malformed',
      hint: HINTS.key_malformed.tooLong(where, token.length, MAX_KEY_LENGTH),
    };
  if (QUOTES.test(token)) return { ok: false, reason: 'key_malformed', hint: HINTS.key_malformed.quotes(where) };
  if (/^bearer([\s:=_-]|$)/i.test(token))
    return { ok: false, reason: 'key_malformed', hint: HINTS.key_malformed.bearerInKey(where) };
  if (/\s/.test(token)) return { ok: false, reason: 'key_malformed', hint: HINTS.key_malformed.space(where) };
  if (!KEY_CHARS.test(token)) {
    const at = [...token].findIndex((ch) => !/[A-Za-z0-9\-._~+/:=]/.test(ch));
    return { ok: false, reason: 'key_malformed', hint: HINTS.key_malformed.character(where, at + 1) };
  }
  if (token.startsWith(KEY_PREFIX)) {
    if (!BASE62.test(token.slice(KEY_PREFIX.length))) {
      return { ok: false, reason: 'key_malformed', hint: HINTS.key_malformed.prefixedCharacter(where) };
    }
    if (token.length !== KEY_LENGTH)
      return { ok: false, reason: 'key_incomplete', hint: HINTS.key_incomplete.length(where, token.length) };
    if (!isCompleteKey(token))
      return { ok: false, reason: 'key_incomplete', hint: HINTS.key_incomplete.checksum(where) };
  }
  return { ok: true, key: token };
}

/**
 * The same shape checks for a key pasted into a key box (the console's sign-in field, `modelgate
 * doctor`'s key): what a client's API Key box must hold (docs/spec.md §5.5: the whole key, no quotes, no
 * `Bearer `, no extra characters). Hints speak of "the key you pasted" and never contain it.
 */
export function checkPastedKey(value: string): KeyExtraction {
  const token = trimOws(value);
  if (token === '') return { ok: false, reason: 'key_missing', hint: HINTS.key_missing.pastedNone };
  if (/^bearer([\s:=_-]|$)/i.test(token) && !QUOTES.test(token)) {
    return { ok: false, reason: 'key_malformed', hint: HINTS.key_malformed.pastedBearer };
  }
  const r = checkToken(token, 'key', 'you pasted');
  return r.ok ? { ok: true, key: r.key, header: 'key' } : r;
}

/**
 * extractKey / findKeyInUrl / keyHeaders over a table of what clients really send (docs/spec.md §5: the
 * key whole, in the header of its route, never in the URL). Every denial is also checked for the
 * one thing a hint must never do: contain the key, or any 12-character piece of it.
 */
import { describe, expect, test } from 'vitest';
import { parseConfig } from '../../src/config/load';
import { MAX_KEY_LENGTH, extractKey, findKeyInUrl, keyHeaders, type KeyExtraction } from '../../src/check/extract-key';
import { KEY_LENGTH } from '../../src/contract/key-format';
import type { RequestView } from '../../src/check/request-view';
import { DEMO_KEYS } from '../support/demo-keys';

const routes = parseConfig('').routes;
const BEARER = keyHeaders(routes, 'bearer');
const VENDOR = keyHeaders(routes, 'vendor');
const BOTH = keyHeaders(routes, 'both');

const K = DEMO_KEYS.alice;
const K2 = DEMO_KEYS.bob;
const IMPORTED = 'imp0rtedKeyAbcdefGhijkl9876543210';

function view(headers: Record<string, string>, path = '/v1/chat/completions', query = ''): RequestView {
  return { method: 'POST', path, query, headers, body: undefined, partialBody: false, requestId: '' };
}

/** Every 12-character piece of `secret` (a hint may mention the key's length, never its text). */
function pieces(secret: string): string[] {
  const out = new Set<string>();
  for (let i = 0; i + 12 <= secret.length; i++) out.add(secret.slice(i, i + 12));
  return [...out];
}

/** Case-insensitive: a lowercased key is recoverable (each letter has two cases, the checksum confirms). */
function expectNoSecret(hint: string, secrets: readonly string[]): void {
  const lower = hint.toLowerCase();
  for (const s of secrets) {
    const leaked = pieces(s.toLowerCase()).find((p) => lower.includes(p));
    expect(leaked, `hint ${JSON.stringify(hint.slice(0, 200))} contains part of a key`).toBeUndefined();
  }
}

/** A hint is one header value: printable ASCII, bounded. */
function expectPrintableHint(hint: string): void {
  expect(hint).toMatch(/^[\x20-\x7e]+$/);
  expect(hint.length).toBeLessThan(400);
}

const QUOTES: readonly [string, string][] = [
  ['straight double', '"'],
  ['straight single', "'"],
  ['backtick', '`'],
  ['curly left single', '\u2018'],
  ['curly right single', '\u2019'],
  ['curly left double', '\u201c'],
  ['curly right double', '\u201d'],
];
const quoteRows: Row[] = QUOTES.flatMap(([name, q]): Row[] => [
  {
    name: `${name} quotes around the key in Authorization`,
    headers: { authorization: `Bearer ${q}${K}${q}` },
    reason: 'key_malformed',
    hint: /quotes/,
  },
  {
    name: `a trailing ${name} quote in Authorization`,
    headers: { authorization: `Bearer ${K}${q}` },
    reason: 'key_malformed',
    hint: /quotes/,
  },
  {
    name: `a ${name} quote inside the key in x-api-key`,
    headers: { 'x-api-key': `${K.slice(0, 20)}${q}${K.slice(20)}` },
    reason: 'key_malformed',
    hint: /quotes/,
  },
  {
    name: `${name} quotes around the key in x-api-key`,
    headers: { 'x-api-key': `${q}${K}${q}` },
    reason: 'key_malformed',
    hint: /quotes/,
  },
]);
quoteRows.push({
  name: 'curly double quotes pasted as a pair (“key”)',
  headers: { authorization: `Bearer \u201c${K}\u201d` },
  reason: 'key_malformed',
  hint: /quotes/,
});

const CONTROL: readonly [string, string][] = [
  ['NUL', '\u0000'],
  ['SOH', '\u0001'],
  ['ESC', '\u001b'],
  ['DEL', '\u007f'],
  ['backspace', '\b'],
  ['form feed', '\f'],
  ['vertical tab', '\v'],
];
const controlRows: Row[] = CONTROL.flatMap(([name, ch]): Row[] => [
  { name: `a ${name} after the key`, headers: { authorization: `Bearer ${K}${ch}` }, reason: 'key_malformed' },
  {
    name: `a ${name} inside the key in x-api-key`,
    headers: { 'x-api-key': `${K.slice(0, 9)}${ch}${K.slice(9)}` },
    reason: 'key_malformed',
  },
]);

const NON_ASCII: readonly [string, string][] = [
  ['an e-acute', '\u00e9'],
  ['a Cyrillic a', '\u0430'],
  ['an emoji', '\u{1f511}'],
  ['a zero-width space', '\u200b'],
  ['a no-break space', '\u00a0'],
  ['a byte-order mark', '\ufeff'],
  ['an ideographic space', '\u3000'],
];
const nonAsciiRows: Row[] = NON_ASCII.flatMap(([name, ch]): Row[] => [
  {
    name: `${name} inside the key`,
    headers: { authorization: `Bearer ${K.slice(0, 30)}${ch}${K.slice(31)}` },
    reason: 'key_malformed',
  },
  { name: `${name} after the key`, headers: { 'x-api-key': `${K}${ch}` }, reason: 'key_malformed' },
  { name: `${name} before the key`, headers: { authorization: `Bearer ${ch}${K}` }, reason: 'key_malformed' },
]);

const mistyped = K.slice(0, 20) + (K[20] === 'A' ? 'B' : 'A') + K.slice(21);
const HUGE = K + 'x'.repeat(100 * 1024 - K.length);

interface Row {
  readonly name: string;
  readonly headers: Record<string, string>;
  /** The accepted header names (default: a bearer route). */
  readonly names?: readonly string[];
  readonly others?: readonly string[];
  readonly reason?: string;
  readonly key?: string;
  readonly header?: string;
  readonly hint?: RegExp;
  /** Extra secrets (beyond the demo keys) that must not appear in the hint. */
  readonly secrets?: readonly string[];
}

const ROWS: Row[] = [
  // Accepted
  { name: 'a valid Bearer key', headers: { authorization: `Bearer ${K}` }, key: K, header: 'authorization' },
  { name: 'a lowercase bearer scheme', headers: { authorization: `bearer ${K}` }, key: K, header: 'authorization' },
  { name: 'an uppercase BEARER scheme', headers: { authorization: `BEARER ${K}` }, key: K, header: 'authorization' },
  { name: 'a mixed-case BeArEr scheme', headers: { authorization: `BeArEr ${K}` }, key: K, header: 'authorization' },
  {
    name: 'several spaces after Bearer',
    headers: { authorization: `Bearer    ${K}` },
    key: K,
    header: 'authorization',
  },
  {
    name: 'surrounding spaces and tabs (HTTP whitespace) in Authorization',
    headers: { authorization: ` \tBearer ${K}\t ` },
    key: K,
    header: 'authorization',
  },
  { name: 'the raw key in x-api-key', headers: { 'x-api-key': K }, key: K, header: 'x-api-key' },
  {
    name: 'the raw key with surrounding spaces in x-api-key',
    headers: { 'x-api-key': `  ${K} ` },
    key: K,
    header: 'x-api-key',
  },
  {
    name: 'an imported key without the sk-mg- prefix',
    headers: { authorization: `Bearer ${IMPORTED}` },
    key: IMPORTED,
    header: 'authorization',
  },
  {
    name: 'an imported id:secret key',
    headers: { 'x-api-key': 'tenant7:Zm9vYmFyYmF6cXV4' },
    key: 'tenant7:Zm9vYmFyYmF6cXV4',
    header: 'x-api-key',
  },
  {
    name: 'an imported base64 key with = padding',
    headers: { authorization: 'Bearer dGhpcyBpcyBhIGtleQ==' },
    key: 'dGhpcyBpcyBhIGtleQ==',
    header: 'authorization',
  },
  {
    name: 'an imported key with - _ . ~ + /',
    headers: { authorization: 'Bearer sk-ant-api03_a.b~c+d/e' },
    key: 'sk-ant-api03_a.b~c+d/e',
    header: 'authorization',
  },
  {
    name: 'an uppercase SK-MG- key (not ours: checked by lookup, not shape)',
    headers: { authorization: `Bearer ${K.toUpperCase()}` },
    key: K.toUpperCase(),
    header: 'authorization',
  },
  {
    name: 'the same key in Authorization and x-api-key',
    headers: { authorization: `Bearer ${K}`, 'x-api-key': K },
    key: K,
    header: 'authorization',
  },
  {
    name: 'the key only in the second accepted header',
    headers: { 'x-api-key': K, 'x-other': 'v' },
    key: K,
    header: 'x-api-key',
  },
  {
    name: 'an empty Authorization next to a valid x-api-key',
    headers: { authorization: '', 'x-api-key': K },
    key: K,
    header: 'x-api-key',
  },
  {
    name: 'the vendor header on a vendor route',
    names: VENDOR,
    others: BEARER,
    headers: { 'x-vendor-api-key': K },
    key: K,
    header: 'x-vendor-api-key',
  },
  {
    name: 'x-goog-api-key on a vendor route',
    names: VENDOR,
    others: BEARER,
    headers: { 'x-goog-api-key': K },
    key: K,
    header: 'x-goog-api-key',
  },
  {
    name: 'a Bearer header on a route that accepts both',
    names: BOTH,
    others: [],
    headers: { authorization: `Bearer ${K}` },
    key: K,
    header: 'authorization',
  },
  {
    name: 'the vendor header on a route that accepts both',
    names: BOTH,
    others: [],
    headers: { 'x-goog-api-key': K },
    key: K,
    header: 'x-goog-api-key',
  },

  // Missing
  {
    name: 'no header at all',
    headers: {},
    reason: 'key_missing',
    hint: /no key: send it in the header Authorization: Bearer <key> or x-api-key: <key>/,
  },
  {
    name: 'an empty Authorization header',
    headers: { authorization: '' },
    reason: 'key_missing',
    hint: /Authorization header is empty/,
  },
  {
    name: 'an Authorization header of spaces',
    headers: { authorization: '   ' },
    reason: 'key_missing',
    hint: /empty/,
  },
  {
    name: '"Bearer " with nothing after it',
    headers: { authorization: 'Bearer ' },
    reason: 'key_missing',
    hint: /no key after it/,
  },
  { name: '"Bearer" alone', headers: { authorization: 'Bearer' }, reason: 'key_missing', hint: /no key after it/ },
  {
    name: '"bearer" alone in lowercase',
    headers: { authorization: 'bearer' },
    reason: 'key_missing',
    hint: /no key after it/,
  },
  {
    name: 'an empty x-api-key',
    headers: { 'x-api-key': '' },
    reason: 'key_missing',
    hint: /x-api-key header is empty/,
  },
  {
    name: 'the key in the vendor header on a bearer route',
    headers: { 'x-vendor-api-key': K },
    reason: 'key_missing',
    hint: /sent in x-vendor-api-key, which this route does not read/,
  },
  {
    name: 'the key in x-goog-api-key on a bearer route',
    headers: { 'x-goog-api-key': K },
    reason: 'key_missing',
    hint: /sent in x-goog-api-key/,
  },
  {
    name: 'the key in Authorization on a vendor route',
    names: VENDOR,
    others: BEARER,
    headers: { authorization: `Bearer ${K}` },
    reason: 'key_missing',
    hint: /x-vendor-api-key: <key> or x-goog-api-key: <key>; it was sent in authorization/,
  },
  { name: 'the key in a header no route reads', headers: { 'x-key': K }, reason: 'key_missing', hint: /^no key/ },

  // Malformed
  {
    name: 'a pasted "Bearer Bearer <key>"',
    headers: { authorization: `Bearer Bearer ${K}` },
    reason: 'key_malformed',
    hint: /"Bearer" was pasted into the key/,
  },
  {
    name: 'a pasted "Bearer bearer:<key>"',
    headers: { authorization: `Bearer bearer:${K}` },
    reason: 'key_malformed',
    hint: /"Bearer" was pasted/,
  },
  {
    name: '"Bearer <key>" in x-api-key',
    headers: { 'x-api-key': `Bearer ${K}` },
    reason: 'key_malformed',
    hint: /belongs only in the Authorization header/,
  },
  {
    name: '"bearer <key>" in the vendor header',
    names: VENDOR,
    others: BEARER,
    headers: { 'x-vendor-api-key': `bearer ${K}` },
    reason: 'key_malformed',
    hint: /belongs only in the Authorization header: put the key alone in x-vendor-api-key/,
  },
  {
    name: '"Bearer" alone in x-api-key',
    headers: { 'x-api-key': 'Bearer' },
    reason: 'key_malformed',
    hint: /"Bearer" was pasted/,
  },
  {
    name: 'the key without a scheme in Authorization',
    headers: { authorization: K },
    reason: 'key_malformed',
    hint: /no "Bearer " before the key/,
  },
  {
    name: 'an imported key without a scheme in Authorization',
    headers: { authorization: IMPORTED },
    reason: 'key_malformed',
    hint: /no "Bearer " before the key/,
    secrets: [IMPORTED],
  },
  {
    name: 'a Basic scheme',
    headers: { authorization: 'Basic dXNlcjpzdXBlcnNlY3JldHBhc3N3b3Jk' },
    reason: 'key_malformed',
    hint: /scheme must be Bearer, not "Basic"/,
    secrets: ['dXNlcjpzdXBlcnNlY3JldHBhc3N3b3Jk'],
  },
  { name: 'a Token scheme', headers: { authorization: `Token ${K}` }, reason: 'key_malformed', hint: /not "Token"/ },
  {
    name: 'a "Bearer:" scheme with a colon',
    headers: { authorization: `Bearer: ${K}` },
    reason: 'key_malformed',
    hint: /Bearer/,
  },
  { name: 'a tab between Bearer and the key', headers: { authorization: `Bearer\t${K}` }, reason: 'key_malformed' },
  {
    name: 'an imported key followed by a space and more text',
    headers: { authorization: `${IMPORTED} extra` },
    reason: 'key_malformed',
    secrets: [IMPORTED],
  },
  {
    name: 'an sk-mg- key as the scheme, then text',
    headers: { authorization: `${K} please` },
    reason: 'key_malformed',
  },
  {
    name: 'a space inside the key',
    headers: { authorization: `Bearer ${K.slice(0, 23)} ${K.slice(23)}` },
    reason: 'key_malformed',
    hint: /contains a space or line break/,
  },
  {
    name: 'a tab inside the key',
    headers: { 'x-api-key': `${K.slice(0, 23)}\t${K.slice(23)}` },
    reason: 'key_malformed',
    hint: /space or line break/,
  },
  {
    name: 'a line break inside the key',
    headers: { authorization: `Bearer ${K.slice(0, 23)}\n${K.slice(23)}` },
    reason: 'key_malformed',
    hint: /space or line break/,
  },
  { name: 'a trailing line break', headers: { 'x-api-key': `${K}\n` }, reason: 'key_malformed' },
  {
    name: 'a semicolon after the key',
    headers: { authorization: `Bearer ${K};` },
    reason: 'key_malformed',
    hint: /at position 47/,
  },
  {
    name: 'angle brackets around the key',
    headers: { authorization: `Bearer <${K}>` },
    reason: 'key_malformed',
    hint: /at position 1\b/,
  },
  {
    name: 'the key repeated in a repeated Authorization header (Envoy joins with ",")',
    headers: { authorization: `Bearer ${K},Bearer ${K2}` },
    reason: 'key_malformed',
    hint: /sent more than once/,
  },
  {
    name: 'the same key twice in a repeated x-api-key header',
    headers: { 'x-api-key': `${K},${K}` },
    reason: 'key_malformed',
    hint: /x-api-key header was sent more than once/,
  },
  {
    name: 'a 100 KB value in Authorization',
    headers: { authorization: `Bearer ${HUGE}` },
    reason: 'key_malformed',
    hint: new RegExp(`${HUGE.length} characters long; a key has at most ${MAX_KEY_LENGTH}`),
    secrets: [HUGE],
  },
  {
    name: 'a 100 KB value in x-api-key',
    headers: { 'x-api-key': HUGE },
    reason: 'key_malformed',
    hint: new RegExp(`${HUGE.length} characters`),
    secrets: [HUGE],
  },
  {
    name: `a value of ${MAX_KEY_LENGTH + 1} characters`,
    headers: { 'x-api-key': 'a'.repeat(MAX_KEY_LENGTH + 1) },
    reason: 'key_malformed',
    hint: new RegExp(`${MAX_KEY_LENGTH + 1} characters`),
  },
  {
    name: 'an sk-mg- key with an underscore',
    headers: { authorization: `Bearer ${K.slice(0, 10)}_${K.slice(11)}` },
    reason: 'key_malformed',
    hint: /no sk-mg- key contains/,
  },
  {
    name: 'an sk-mg- key with a dot',
    headers: { authorization: `Bearer ${K.slice(0, 40)}.${K.slice(41)}` },
    reason: 'key_malformed',
    hint: /no sk-mg- key contains/,
  },
  {
    name: 'an sk-mg- key with a plus',
    headers: { 'x-api-key': `${K.slice(0, 12)}+${K.slice(13)}` },
    reason: 'key_malformed',
    hint: /no sk-mg- key contains/,
  },
  {
    name: 'an sk-mg- key with base64 padding',
    headers: { 'x-api-key': `${K}=` },
    reason: 'key_malformed',
    hint: /no sk-mg- key contains/,
  },
  ...quoteRows,
  ...controlRows,
  ...nonAsciiRows,

  // Incomplete (our prefix, wrong length or checksum)
  {
    name: 'an sk-mg- key one character short',
    headers: { authorization: `Bearer ${K.slice(0, -1)}` },
    reason: 'key_incomplete',
    hint: new RegExp(`has ${KEY_LENGTH - 1} characters; a sk-mg- key has ${KEY_LENGTH}: it was cut`),
  },
  {
    name: 'an sk-mg- key cut in half',
    headers: { 'x-api-key': K.slice(0, 23) },
    reason: 'key_incomplete',
    hint: /has 23 characters; a sk-mg- key has 46/,
  },
  {
    name: 'the bare sk-mg- prefix',
    headers: { authorization: 'Bearer sk-mg-' },
    reason: 'key_incomplete',
    hint: /has 6 characters/,
  },
  {
    name: 'an sk-mg- key one character long',
    headers: { authorization: `Bearer ${K}Q` },
    reason: 'key_incomplete',
    hint: new RegExp(`has ${KEY_LENGTH + 1} characters; a sk-mg- key has ${KEY_LENGTH}: extra characters`),
  },
  {
    name: 'an sk-mg- key pasted twice',
    headers: { authorization: `Bearer ${K}${K}` },
    reason: 'key_malformed',
    hint: /no sk-mg- key contains/,
  },
  {
    name: 'an sk-mg- key with one character mistyped',
    headers: { authorization: `Bearer ${mistyped}` },
    reason: 'key_incomplete',
    hint: /fails its checksum/,
    secrets: [mistyped],
  },
  {
    name: 'an sk-mg- key with two characters swapped',
    headers: { 'x-api-key': K.slice(0, 30) + K[31] + K[30] + K.slice(32) },
    reason: 'key_incomplete',
    hint: /checksum/,
  },

  // Conflict
  {
    name: 'two different keys in Authorization and x-api-key',
    headers: { authorization: `Bearer ${K}`, 'x-api-key': K2 },
    reason: 'key_conflict',
    hint: /in authorization and x-api-key/,
  },
  {
    name: 'two different keys in the two vendor headers',
    names: VENDOR,
    others: BEARER,
    headers: { 'x-vendor-api-key': K, 'x-goog-api-key': K2 },
    reason: 'key_conflict',
    hint: /x-vendor-api-key and x-goog-api-key/,
  },
  {
    name: 'a Bearer key and a different vendor key on a route that accepts both',
    names: BOTH,
    others: [],
    headers: { authorization: `Bearer ${K}`, 'x-goog-api-key': IMPORTED },
    reason: 'key_conflict',
    secrets: [IMPORTED],
  },
];

describe('extractKey', () => {
  test.each(ROWS.filter((r) => r.reason === undefined))('accepts $name', (row) => {
    const r = extractKey(view(row.headers), row.names ?? BEARER, row.others ?? VENDOR);
    expect(r).toEqual({ ok: true, key: row.key, header: row.header });
  });

  test.each(ROWS.filter((r) => r.reason !== undefined))('denies $name with $reason', (row) => {
    const r: KeyExtraction = extractKey(view(row.headers), row.names ?? BEARER, row.others ?? VENDOR);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.reason).toBe(row.reason);
    if (row.hint) expect(r.hint).toMatch(row.hint);
    expectPrintableHint(r.hint);
    expectNoSecret(r.hint, [...Object.values(DEMO_KEYS), IMPORTED, ...(row.secrets ?? [])]);
  });

  test('the table covers every key reason extractKey can give', () => {
    const reasons = new Set(ROWS.map((r) => r.reason ?? 'ok'));
    expect([...reasons].sort()).toEqual(['key_conflict', 'key_incomplete', 'key_malformed', 'key_missing', 'ok']);
  });

  test('reads only the headers it is given, in order of preference', () => {
    const r = extractKey(view({ 'x-api-key': K, authorization: `Bearer ${K}` }), ['x-api-key', 'authorization'], []);
    expect(r).toEqual({ ok: true, key: K, header: 'x-api-key' });
  });

  test('does not mention another header when no other header carries a value', () => {
    const r = extractKey(view({ 'x-vendor-api-key': '' }), BEARER, VENDOR);
    expect(r).toMatchObject({
      ok: false,
      reason: 'key_missing',
      hint: 'no key: send it in the header Authorization: Bearer <key> or x-api-key: <key>',
    });
  });
});

describe('keyHeaders', () => {
  test.each([
    ['bearer', ['authorization', 'x-api-key']],
    ['vendor', ['x-vendor-api-key', 'x-goog-api-key']],
    ['both', ['authorization', 'x-api-key', 'x-vendor-api-key', 'x-goog-api-key']],
  ] as const)('lists the %s headers in order of preference', (source, expected) => {
    expect(keyHeaders(routes, source)).toEqual(expected);
  });

  test('follows the configured header lists', () => {
    const custom = parseConfig('routes: { bearerHeaders: [X-Key], vendorHeaders: [x-vendor] }').routes;
    expect(keyHeaders(custom, 'both')).toEqual(['x-key', 'x-vendor']);
  });
});

interface UrlRow {
  readonly name: string;
  readonly path?: string;
  readonly query: string;
  /** undefined: no key in the URL. */
  readonly hint?: RegExp;
  readonly secrets?: readonly string[];
}

const URL_ROWS: UrlRow[] = [
  { name: 'no query string', query: '' },
  { name: '?alt=sse alone', path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent', query: 'alt=sse' },
  { name: 'an empty ?key=', query: 'key=' },
  { name: 'a bare ?key without a value', query: 'key' },
  { name: 'unrelated parameters', query: 'a=1&b=2&stream=true' },
  { name: 'a parameter merely named like a key (?keyword=x)', query: 'keyword=abc' },
  { name: 'invalid percent-encoding in a harmless parameter', query: '%ZZ=1&x=%E0%A4%A' },
  { name: 'a value mentioning sk-mg without the dash', query: 'q=sk-mg' },
  { name: 'a key in ?key=', query: `key=${K}`, hint: /query parameter "key"/ },
  { name: 'an imported key in ?key=', query: `key=${IMPORTED}`, hint: /"key"/, secrets: [IMPORTED] },
  { name: 'any value in ?key= (an API key name means a key)', query: 'key=abc', hint: /"key"/ },
  {
    name: 'a key in ?API_KEY= (names are case-insensitive)',
    query: `API_KEY=${IMPORTED}`,
    hint: /"api_key"/,
    secrets: [IMPORTED],
  },
  { name: 'a key in ?%6Bey= (a percent-encoded name)', query: `%6Bey=${IMPORTED}`, hint: /"key"/, secrets: [IMPORTED] },
  { name: 'a key in ?access_token=', query: `stream=true&access_token=${K}`, hint: /"access_token"/ },
  {
    name: 'a key in ?x-goog-api-key=',
    query: `x-goog-api-key=${IMPORTED}`,
    hint: /"x-goog-api-key"/,
    secrets: [IMPORTED],
  },
  { name: 'an sk-mg- key in an unrelated parameter (?foo=sk-mg-...)', query: `foo=${K}`, hint: /"foo"/ },
  { name: 'an sk-mg- key after ?alt=sse', query: `alt=sse&foo=${K}`, hint: /"foo"/ },
  { name: 'a percent-encoded sk-mg- key in a parameter', query: `foo=sk%2Dmg%2D${K.slice(6)}`, hint: /"foo"/ },
  { name: 'a "Bearer <key>" in a parameter', query: `auth=Bearer%20${K}`, hint: /"auth"/ },
  { name: 'an sk-mg- key as a bare parameter (?sk-mg-...)', query: K, hint: /key/ },
  { name: 'an sk-mg- key as a parameter name with a value', query: `${K}=1`, hint: /key/ },
  { name: 'an sk-mg- key as name and value', query: `${K}=${K}`, hint: /key/ },
  { name: 'a key in the path', path: `/v1beta/models/${K}:generateContent`, query: '', hint: /URL path/ },
  { name: 'a key as a path segment', path: `/v1/${K}/chat/completions`, query: '', hint: /URL path/ },
  { name: 'a percent-encoded key in the path', path: `/v1/models/sk%2Dmg-${K.slice(6)}`, query: '', hint: /URL path/ },
];

describe('findKeyInUrl', () => {
  test.each(URL_ROWS.filter((r) => !r.hint))('finds no key with $name', (row) => {
    expect(findKeyInUrl(view({}, row.path ?? '/v1/models', row.query), routes)).toBeUndefined();
  });

  test.each(URL_ROWS.filter((r) => r.hint))('denies $name', (row) => {
    const hint = findKeyInUrl(view({}, row.path ?? '/v1/models', row.query), routes);
    expect(hint).toBeDefined();
    expect(hint).toMatch(row.hint!);
    expectPrintableHint(hint!);
    expectNoSecret(hint!, [K, IMPORTED, ...(row.secrets ?? [])]);
  });

  test('names a non-ASCII parameter name printably', () => {
    const routesWithNonAscii = parseConfig('routes: { queryKeyParams: ["ключ"] }').routes;
    const hint = findKeyInUrl(view({}, '/v1/models', `${encodeURIComponent('ключ')}=abc`), routesWithNonAscii);
    expect(hint).toBeDefined();
    expectPrintableHint(hint!);
  });

  test('uses the configured parameter names', () => {
    const custom = parseConfig('routes: { queryKeyParams: [Token] }').routes;
    expect(findKeyInUrl(view({}, '/v1/models', 'key=abc'), custom)).toBeUndefined();
    expect(findKeyInUrl(view({}, '/v1/models', 'TOKEN=abc'), custom)).toMatch(/"token"/);
  });
});

/**
 * The gateway's invariant (docs/security.md, "Security model"), checked on what an upstream received and on
 * what the client got, independently of modelgate's own code (its own readings of paths, headers
 * and bodies, written here again the way upstream servers read them):
 *
 *   Every request that reaches an upstream carries none of the client's key material, carries the
 *   x-modelgate-key-id of an existing, enabled, unexpired key with a positive balance whose group
 *   is available (the key the client presented in a header its route reads), and asks for a model
 *   (the path's model for generative calls, the body's `model` for the others, read as the upstream
 *   reads it: decoded before or after routing, first and last occurrence, case-insensitively) that
 *   is in that group, available, and declared for that protocol. Every request that does not reach
 *   an upstream got a clear answer: a status, a reason, a hint.
 *
 * And (docs/security.md): an upstream receives the operator's credential of that upstream, exactly once in
 * its header, and nothing of any other upstream's credential; of modelgate's own x-modelgate-*
 * headers only the identity modelgate sets (key id, group, model) reaches it; no credential comes
 * back in an answer.
 *
 * Key material: 8 characters in a row of a key's secret part, as sent or percent-decoded, anywhere
 * in the request line, a header (name or value) or a trailer. The body is the client's content: a
 * key the client writes in a message is forwarded as text (the spec forbids keys in URLs only); a
 * key as the model is never a model of a group, so it is refused by the model rule.
 */
import { createHash } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { isUtf8 } from 'node:buffer';
import { REASONS } from '../../src/contract/reasons';
import type { Config } from '../../src/config/load';
import type { Protocol } from '../../src/store/store';
import { FUZZ_CREDENTIALS, FUZZ_KEYS, type FuzzCase } from './fuzz-grammar';

/** What one upstream received. */
export interface UpstreamRecord {
  readonly family: string;
  readonly method: string;
  readonly url: string;
  /** Names and values as received, in order. */
  readonly rawHeaders: readonly string[];
  readonly trailers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/** What happened to one case. */
export interface Outcome {
  /** The client could not get an HTTP answer (a reset, a closed connection): why. */
  readonly error?: string;
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Buffer;
  readonly upstream: readonly UpstreamRecord[];
}

const GEN_METHODS = 'generateContent|streamGenerateContent|countTokens|embedContent|batchEmbedContents';
const GENERATIVE = new RegExp(`^(/alt)?/v1beta/models/([^/]+):(${GEN_METHODS})$`);
const BODY_ROUTES: Readonly<Record<string, Protocol>> = {
  '/v1/chat/completions': 'chat',
  '/v1/responses': 'responses',
  '/v1/embeddings': 'embeddings',
  '/v1/messages': 'messages',
  '/v1/messages/count_tokens': 'messages',
};
const FAMILY_OF: Readonly<Record<Protocol, string>> = {
  chat: 'chat',
  responses: 'chat',
  embeddings: 'chat',
  messages: 'messages',
  generative: 'generative',
};

/** The x-modelgate-* headers modelgate sets on an allowed request; any other of its own never leaves. */
const IDENTITY_HEADERS = ['x-modelgate-key-id', 'x-modelgate-group', 'x-modelgate-model'];

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

/** Percent-decoding as a lenient server does it (each valid escape; invalid ones kept). */
function decodeLeniently(s: string): string {
  let out = s;
  for (let i = 0; i < 4 && /%[0-9a-f]{2}/i.test(out); i++)
    out = out.replace(/(?:%[0-9a-f]{2})+/gi, (run) => Buffer.from(run.replace(/%/g, ''), 'hex').toString('utf8'));
  return out;
}

/**
 * The path as Envoy routes it (merge_slashes, normalize_path): slashes merged, dot segments removed
 * (Envoy also takes `..;x` and `.;x` for dot segments, as seen on 1.40), unreserved escapes decoded.
 */
function envoyPath(path: string): string {
  const out: string[] = [];
  for (const seg of path
    .replace(/\/{2,}/g, '/')
    .split('/')
    .slice(1)) {
    const dots = seg.replace(/%2e/gi, '.');
    if (dots === '..' || /^\.\.;/.test(seg)) out.pop();
    else if (dots !== '.' && !/^\.;/.test(seg)) out.push(seg);
  }
  return `/${out.join('/')}`.replace(/%([0-9a-f]{2})/gi, (e, hex: string) => {
    const ch = String.fromCharCode(parseInt(hex, 16));
    return /[A-Za-z0-9\-._~]/.test(ch) ? ch : e;
  });
}

/** RFC 3986 §5.2.4 dot-segment removal, as a server that normalises its paths does it. */
function removeDots(path: string): string {
  const out: string[] = [];
  for (const seg of path.split('/').slice(1)) {
    if (seg === '..') out.pop();
    else if (seg !== '.') out.push(seg);
  }
  return `/${out.join('/')}`;
}

/** The secret part of every key the fuzzer sends (what must never reach an upstream). */
const SECRETS = Object.entries(FUZZ_KEYS).map(([name, k]) => [name, k.replace(/^sk-mg-/, '')] as const);

function keyMaterialIn(text: string): string | undefined {
  const decoded = decodeLeniently(text);
  for (const [name, secret] of SECRETS) {
    for (let i = 0; i + 8 <= secret.length; i++) {
      const piece = secret.slice(i, i + 8);
      if (text.includes(piece) || decoded.includes(piece)) return name;
    }
  }
  return undefined;
}

/**
 * The top-level members of a JSON object text, in order, duplicates included (JSON.parse keeps
 * only the last): what a first-occurrence parser and a case-insensitive binder see.
 */
function topLevelMembers(text: string): Array<[string, unknown]> {
  const members: Array<[string, unknown]> = [];
  let depth = 0;
  let i = 0;
  const skipString = (): number => {
    let j = i + 1;
    while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
    return j + 1;
  };
  let pendingKey: string | undefined;
  let valueStart = -1;
  while (i < text.length) {
    const ch = text[i];
    if (ch === '"') {
      const end = skipString();
      if (depth === 1 && pendingKey === undefined && valueStart === -1) {
        pendingKey = JSON.parse(text.slice(i, end)) as string;
        i = end;
        while (text[i] !== ':') i++;
        valueStart = i + 1;
        i++;
        continue;
      }
      i = end;
      continue;
    }
    if (ch === '{' || ch === '[') depth++;
    else if (ch === '}' || ch === ']') depth--;
    if (depth === 1 && ch === ',' && pendingKey !== undefined) {
      members.push([pendingKey, JSON.parse(text.slice(valueStart, i))]);
      pendingKey = undefined;
      valueStart = -1;
    } else if (depth === 0 && ch === '}' && pendingKey !== undefined) {
      members.push([pendingKey, JSON.parse(text.slice(valueStart, i))]);
      pendingKey = undefined;
      valueStart = -1;
    }
    i++;
  }
  return members;
}

/** The key headers a route reads (docs/spec.md §5): Bearer ones, the vendor ones on /v1beta, both on /alt/v1beta. */
function acceptedHeaders(path: string): string[] {
  const bearer = ['authorization', 'x-api-key'];
  const vendor = ['x-vendor-api-key', 'x-goog-api-key'];
  if (/^\/alt\/v1beta(\/|$)/.test(path)) return [...bearer, ...vendor];
  if (/^\/v1beta(\/|$)/.test(path)) return vendor;
  return bearer;
}

/** The one key the client presented in the headers its route reads, or why there is none. */
function presentedKey(c: FuzzCase, path: string): { key: string } | { why: string } {
  const accepted = acceptedHeaders(path);
  const values: string[] = [];
  for (const [name, value] of c.headers) {
    const n = name.toLowerCase();
    if (!accepted.includes(n)) continue;
    if (n === 'authorization') {
      const m = /^[ \t]*bearer +([^\s,]+)[ \t]*$/i.exec(value);
      if (!m) return { why: `authorization ${JSON.stringify(value.slice(0, 12))}... is not "Bearer <key>"` };
      values.push(m[1]);
    } else values.push(value.trim());
  }
  if (values.length === 0) return { why: 'no key in the headers the route reads' };
  if (values.some((v) => v !== values[0])) return { why: 'different keys in the headers the route reads' };
  return { key: values[0] };
}

/** The store and groups the fuzzed gateway runs on. */
export interface World {
  readonly config: Config;
  readonly now: number;
}

function header(rec: UpstreamRecord, name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < rec.rawHeaders.length; i += 2)
    if (rec.rawHeaders[i].toLowerCase() === name) out.push(rec.rawHeaders[i + 1]);
  return out;
}

/** The violations of the invariant in one case (empty: it holds). */
export function violations(c: FuzzCase, o: Outcome, world: World): string[] {
  const v: string[] = [];
  if (o.upstream.length > 1) v.push(`reached an upstream ${o.upstream.length} times`);
  if (o.upstream.length >= 1) {
    for (const u of o.upstream) checkForwarded(c, u, world, v);
    return v;
  }
  checkAnswered(c, o, world, v);
  return v;
}

function checkForwarded(c: FuzzCase, u: UpstreamRecord, world: World, v: string[]): void {
  // No key material anywhere but the body.
  const where: Array<[string, string]> = [['request line', `${u.method} ${u.url}`]];
  for (let i = 0; i < u.rawHeaders.length; i += 2)
    where.push([`header ${u.rawHeaders[i]}`, `${u.rawHeaders[i]}: ${u.rawHeaders[i + 1]}`]);
  for (const [n, t] of Object.entries(u.trailers)) where.push([`trailer ${n}`, `${n}: ${t}`]);
  for (const [what, text] of where) {
    const k = keyMaterialIn(text);
    if (k) v.push(`key material of ${k} reached the upstream in the ${what}`);
  }

  // Operator credentials: this upstream's own, once, in its header; nothing of any other's.
  for (const [family, cred] of Object.entries(FUZZ_CREDENTIALS)) {
    if (family === u.family) {
      const got = header(u, cred.header);
      if (got.length !== 1 || got[0] !== `${cred.prefix ?? ''}${cred.secret}`)
        v.push(
          `the ${family} upstream got ${cred.header} ${JSON.stringify(got.map((x) => x.slice(0, 24)))}, not its own credential once`,
        );
      continue;
    }
    const at = where.find(([, text]) => text.includes(cred.secret));
    if (at) v.push(`the ${family} upstream's credential reached the ${u.family} upstream in the ${at[0]}`);
  }
  // modelgate's own headers: only the identity it sets leaves the gateway.
  for (let i = 0; i < u.rawHeaders.length; i += 2) {
    const name = u.rawHeaders[i].toLowerCase();
    if (name.startsWith('x-modelgate-') && !IDENTITY_HEADERS.includes(name))
      v.push(`modelgate's own header ${name} reached the upstream`);
  }

  // Which endpoint the upstream reads, decoding after routing and before it.
  const q = u.url.indexOf('?');
  const path = q === -1 ? u.url : u.url.slice(0, q);
  const query = q === -1 ? '' : u.url.slice(q + 1);
  const decodedFirst = removeDots(decodeLeniently(path));
  const unprefixed = path.replace(/^\/alt(?=\/)/, '');
  let style: Protocol | undefined = BODY_ROUTES[unprefixed];
  let pathModel: string | undefined;
  if (style) {
    if (decodedFirst !== path)
      v.push(`the upstream path ${JSON.stringify(path)} reads as ${JSON.stringify(decodedFirst)} once decoded`);
  } else {
    const g = GENERATIVE.exec(path);
    if (!g) {
      v.push(`the upstream got a path that is no endpoint: ${JSON.stringify(path)}`);
      return;
    }
    style = 'generative';
    try {
      pathModel = decodeURIComponent(g[2]);
    } catch {
      v.push(`the model segment ${JSON.stringify(g[2])} cannot be decoded`);
      return;
    }
    const g2 = GENERATIVE.exec(decodedFirst);
    if (!g2 || g2[2] !== pathModel || g2[3] !== g[3])
      v.push(
        `a server that decodes before routing reads ${JSON.stringify(decodedFirst)}, not model ${JSON.stringify(pathModel)}`,
      );
  }
  const wantFamily = path.startsWith('/alt/') ? 'alt' : FAMILY_OF[style];
  if (u.family !== wantFamily) v.push(`a ${style} request went to the ${u.family} upstream`);

  // The query as sent, unless a key parameter had to go.
  const sentQuery = c.path.includes('?') ? c.path.slice(c.path.indexOf('?') + 1) : '';
  const keyParams = world.config.routes.queryKeyParams;
  const hadKeyParam = sentQuery
    .split('&')
    .some((p) => keyParams.includes(decodeLeniently(p.split('=')[0].replace(/\+/g, ' ')).toLowerCase()));
  if (!hadKeyParam && query !== sentQuery)
    v.push(`the query changed on the way: ${JSON.stringify(sentQuery)} -> ${JSON.stringify(query)}`);

  // The key: the one presented, valid now.
  const ids = header(u, 'x-modelgate-key-id');
  if (ids.length !== 1) {
    v.push(`x-modelgate-key-id appears ${ids.length} times`);
    return;
  }
  const record = world.config.keys.find((k) => k.id === ids[0]);
  if (!record) {
    v.push(`x-modelgate-key-id ${JSON.stringify(ids[0])} is no key of the store`);
    return;
  }
  const groups = header(u, 'x-modelgate-group');
  if (groups.length !== 1 || groups[0] !== record.group)
    v.push(`x-modelgate-group is ${JSON.stringify(groups)}, key ${record.id}'s group is ${record.group}`);
  const presented = presentedKey(c, path);
  if ('why' in presented) v.push(`allowed as ${record.id} but ${presented.why}`);
  else if (sha256(presented.key) !== record.sha256)
    v.push(`allowed as ${record.id} but the client presented another key`);
  if (record.disabled) v.push(`key ${record.id} is disabled`);
  if (record.expiresAt !== null && record.expiresAt <= world.now) v.push(`key ${record.id} expired`);
  if (record.balance !== null && !(record.balance > 0)) v.push(`key ${record.id} has balance ${record.balance}`);
  const group = world.config.groups.get(record.group);
  if (!group || !group.available) {
    v.push(`key ${record.id}'s group ${record.group} is not available`);
    return;
  }

  // The model, as the upstream reads it.
  let model = pathModel;
  if (style !== 'generative') {
    const read = bodyModel(u);
    if ('why' in read) {
      v.push(read.why);
      return;
    }
    model = read.model;
  }
  const m = group.models.get(model!);
  if (!m) v.push(`model ${JSON.stringify(model)} is not in group ${group.name}`);
  else {
    if (!m.available) v.push(`model ${m.name} is unavailable`);
    if (m.protocols !== null && !m.protocols.includes(style)) v.push(`model ${m.name} is not declared for ${style}`);
  }
  const named = header(u, 'x-modelgate-model');
  if (named.length !== 1 || named[0] !== model)
    v.push(`x-modelgate-model is ${JSON.stringify(named)}, the upstream reads ${JSON.stringify(model)}`);
}

/** The body's model as every reader sees it; they must agree. */
function bodyModel(u: UpstreamRecord): { model: string } | { why: string } {
  const encoding = header(u, 'content-encoding').join(',').trim().toLowerCase();
  let body = u.body;
  if (encoding !== '' && encoding !== 'identity') {
    try {
      body = encoding === 'gzip' ? gunzipSync(body) : body;
    } catch {
      /* read as sent */
    }
    return {
      why: `a body with content-encoding ${JSON.stringify(encoding)} was forwarded: its model was never read as the provider reads it`,
    };
  }
  const type = header(u, 'content-type');
  if (
    type.length > 1 ||
    (type.length === 1 && !/^\s*application\/json\s*(;\s*charset\s*=\s*"?utf-?8"?\s*)?$/i.test(type[0]))
  ) {
    return {
      why: `a body of content type ${JSON.stringify(type.join(', '))} was forwarded: a provider may decode it otherwise`,
    };
  }
  if (!isUtf8(body)) return { why: 'a body that is not UTF-8 was forwarded' };
  const text = body.toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { why: 'a body that JSON.parse refuses was forwarded' };
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    return { why: 'a body that is no JSON object was forwarded' };
  const last = (parsed as { model?: unknown }).model;
  const members = topLevelMembers(text);
  const first = members.find(([k]) => k === 'model')?.[1];
  const folded = members.filter(([k]) => k.toLowerCase() === 'model').pop()?.[1];
  if (typeof last !== 'string') return { why: `the body's model is ${JSON.stringify(last)}, not a string` };
  if (first !== last || folded !== last) {
    return {
      why: `readers disagree on the body's model: first ${JSON.stringify(first)}, last ${JSON.stringify(last)}, case-insensitive ${JSON.stringify(folded)}`,
    };
  }
  return { model: last };
}

function checkAnswered(c: FuzzCase, o: Outcome, world: World, v: string[]): void {
  if (o.error !== undefined) {
    v.push(`no answer: ${o.error}`);
    return;
  }
  const reason = o.headers['x-modelgate-reason'];
  const hint = o.headers['x-modelgate-hint'];
  if (o.status >= 200 && o.status < 300) {
    // Only modelgate's own model lists answer 2xx without an upstream, and only to a valid key.
    const path = envoyPath(c.path.split('?')[0]);
    if (c.method !== 'GET' || !/^(\/alt)?\/v1(beta)?\/models(\/[^/:]+)?$/.test(path))
      v.push(`status ${o.status} without an upstream for ${c.method} ${path}, which is no model list`);
    const presented = presentedKey(c, path);
    if ('why' in presented) v.push(`the catalog answered ${o.status} but ${presented.why}`);
    else {
      const record = world.config.keys.find((k) => k.sha256 === sha256(presented.key));
      if (
        !record ||
        record.disabled ||
        (record.expiresAt !== null && record.expiresAt <= world.now) ||
        !world.config.groups.get(record.group)?.available
      ) {
        v.push(`the catalog answered ${o.status} to a key that is not valid (${record?.id ?? 'unknown'})`);
      }
    }
  } else {
    if (typeof reason !== 'string' || !(reason in REASONS))
      v.push(`status ${o.status} without a reason from the catalogue (${JSON.stringify(reason)})`);
    if (typeof hint !== 'string' || hint.length < 10) v.push(`status ${o.status} without a hint`);
    if (c.method !== 'HEAD') {
      try {
        const body = JSON.parse(o.body.toString('utf8')) as { error?: unknown };
        if (typeof body !== 'object' || body === null || !('error' in body))
          v.push(`status ${o.status} with a body that is no error object`);
      } catch {
        v.push(
          `status ${o.status} with a body that is not JSON: ${JSON.stringify(o.body.toString('utf8').slice(0, 60))}`,
        );
      }
    }
  }
  // Nothing of a key or an operator credential comes back in an answer.
  const answer = `${JSON.stringify(o.headers)}\n${o.body.toString('utf8')}`;
  const k = keyMaterialIn(answer);
  if (k) v.push(`key material of ${k} came back in the answer`);
  for (const [family, cred] of Object.entries(FUZZ_CREDENTIALS))
    if (answer.includes(cred.secret)) v.push(`the ${family} upstream's credential came back in the answer`);
}

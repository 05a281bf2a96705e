/**
 * The request grammar of the gateway fuzzer (docs/security.md): fast-check arbitraries that build HTTP
 * requests the way attackers and confused clients do. Every part is a small structured choice
 * (not a random string), so that fast-check shrinks a counter-example to the few choices that
 * matter, and `renderCase` turns the choices into the request that is sent.
 *
 * What it knows: the spec's endpoints under the root and the alternate prefix; paths with
 * percent-encodings (`%2F`, `%2f`, `%3A`, `%2e`, any character), dot segments, `//`, a trailing
 * `/`, `;params`, upper-case segments, `:` and `%` inside `{model}`, extra segments, long paths,
 * invalid escapes; query strings (`?alt=sse`, `?key=`, keys encoded with an invalid escape beside
 * them); every method; keys of every state of the store in every header a provider or server
 * reads, repeated, with mixed-case schemes and tabs, several at once, with underscores, as HTTP/2
 * trailers; bodies with duplicate, escaped or re-cased `model` keys, a BOM, whitespace, non-string
 * models, a key as the model or in a message, a content type or charset other than JSON in UTF-8,
 * gzip, and sizes around the body limit.
 */
import fc from 'fast-check';
import { DEMO_KEYS } from './demo-keys';
import type { TestCredential } from './upstream-credentials';

/** The body limit of the fuzzed gateway (gateway.maxRequestBytes): small, so sizes around it are cheap. */
export const FUZZ_BODY_LIMIT = 4096;

/** A key no store knows, of the issued shape with a valid checksum. */
export const UNKNOWN_KEY = 'sk-mg-ef5sAY7BcoDYnpOLYuNoJgHQUQDHBO8GKd0R6uiC';
/** An imported key (no prefix), known to the fuzzed store as `imported-1` in group basic. */
export const IMPORTED_KEY = 'legacyKey0123456789abcdefXYZ';

/** Every key the fuzzer sends, by a short name (the name is what a counter-example shows). */
export const FUZZ_KEYS: Readonly<Record<string, string>> = {
  ...DEMO_KEYS,
  unknown: UNKNOWN_KEY,
  imported: IMPORTED_KEY,
};

/**
 * The operator's credential of each upstream in the fuzzed gateway (docs/security.md): each must reach its
 * own upstream only. The alt upstream's is in the same header as the chat upstream's.
 */
export const FUZZ_CREDENTIALS: Readonly<Record<'chat' | 'messages' | 'generative' | 'alt', TestCredential>> = {
  chat: { header: 'authorization', prefix: 'Bearer ', env: 'FUZZ_CRED_CHAT', secret: 'opcred-chat-Q7w2x' },
  messages: { header: 'x-api-key', env: 'FUZZ_CRED_MESSAGES', secret: 'opcred-messages-R8e3c' },
  generative: { header: 'x-goog-api-key', env: 'FUZZ_CRED_GENERATIVE', secret: 'opcred-generative-T9y4v' },
  alt: { header: 'authorization', prefix: 'Bearer ', env: 'FUZZ_CRED_ALT', secret: 'opcred-alt-U1i5b' },
};

/** How a key is written into a header value. */
export type KeyForm = 'whole' | 'cut' | 'quoted' | 'bare' | 'doubled' | 'trailing-space';

/** One header carrying a key. `scheme` only for authorization-like headers ('' = no scheme). */
export interface KeyHeader {
  readonly name: string;
  readonly key: string;
  readonly form: KeyForm;
  readonly scheme: string;
}

export type Endpoint =
  | 'chat'
  | 'responses'
  | 'embeddings'
  | 'messages'
  | 'count_tokens'
  | 'generate'
  | 'stream'
  | 'countTokens'
  | 'embedContent'
  | 'batchEmbed'
  | 'openai_models'
  | 'gemini_models'
  | 'openai_model'
  | 'gemini_model'
  | 'junk';

export type PathMutation =
  | { readonly kind: 'escape'; readonly at: number; readonly upper: boolean }
  | { readonly kind: 'escape-slash'; readonly at: number; readonly upper: boolean; readonly backslash: boolean }
  | { readonly kind: 'dot-segment'; readonly at: number; readonly parent: boolean; readonly encoded: boolean }
  | { readonly kind: 'double-slash'; readonly at: number }
  | { readonly kind: 'trailing-slash' }
  | { readonly kind: 'params'; readonly at: number }
  | { readonly kind: 'upper-segment'; readonly at: number }
  | { readonly kind: 'extra-segment'; readonly front: boolean; readonly segment: string }
  | { readonly kind: 'invalid-escape'; readonly at: number; readonly text: string }
  | { readonly kind: 'long'; readonly length: number };

export type ModelEncoding = 'plain' | 'raw' | 'component' | 'every-char' | 'lower-hex' | 'double';

/** How the body's JSON holds the model. */
export interface BodyShape {
  /** The top-level members that name a model, in order: the key as written, and the value. */
  readonly models: ReadonlyArray<{ readonly key: string; readonly value: string | number | null | boolean | object }>;
  /** Whether the members come before the messages. */
  readonly modelFirst: boolean;
  /** A key of the store in a message's text (a user asking about it: forwarded as content). */
  readonly keyInContent: string | null;
  readonly bom: boolean;
  readonly whitespace: boolean;
  /** Cut the JSON text here (invalid JSON), or keep it whole. */
  readonly truncate: boolean;
  /** Pad the body to this size around the limit (bytes), or not. */
  readonly padTo: number | null;
}

export interface FuzzSpec {
  readonly http2: boolean;
  readonly method: string | null;
  readonly alt: boolean;
  readonly endpoint: Endpoint;
  readonly model: string;
  readonly modelEncoding: ModelEncoding;
  readonly mutations: readonly PathMutation[];
  readonly query: readonly string[];
  readonly keys: readonly KeyHeader[];
  readonly body: BodyShape;
  readonly contentType: string | null;
  readonly contentEncoding: string | null;
  readonly extraHeaders: ReadonlyArray<readonly [string, string]>;
  readonly trailers: ReadonlyArray<readonly [string, string]>;
}

/** A request as sent: what a counter-example prints and a regression row holds. */
export interface FuzzCase {
  readonly http2: boolean;
  readonly method: string;
  /** Path and query, as written on the request line. */
  readonly path: string;
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** The body text (before gzip), or undefined for none. */
  readonly body?: string;
  /** Send the body gzip-compressed (the case's headers say so, or not). */
  readonly gzip?: boolean;
  /** HTTP/2 request trailers. */
  readonly trailers?: ReadonlyArray<readonly [string, string]>;
}

const MODELS = [
  'gpt-4o-mini',
  'gpt-4o',
  'o3',
  'text-embedding-3-small',
  'text-embedding-3-large',
  'claude-3-5-haiku-latest',
  'claude-sonnet-4-5',
  'gemini-2.5-flash',
  'gemini-2.5-pro',
  'gemini-2.0-flash',
  'gpt-4.1-nano',
  'llama3:8b',
  '50%off',
  'my model',
  'GPT-4O-MINI',
  'Gemini-2.5-Flash',
  ' gpt-4o-mini',
  'gemini-2.5-flash ',
  'nope',
  '',
  '.',
  '..',
  'a/b',
  'gemini-2.5-pro/../gemini-2.5-flash',
  'tuned/gemini',
  'tuned/../gemini-2.5-flash',
  'gemini-2.5-flash;x=1',
  'gemini-2.5-flash:generateContent',
  'gemini-2.5-flash?x',
  'gemini-2.5-flash#x',
  'models/gemini-2.5-flash',
];
const KEY_NAMES = Object.keys(FUZZ_KEYS);
const KEY_HEADER_NAMES = [
  'authorization',
  'Authorization',
  'AUTHORIZATION',
  'x-api-key',
  'X-Api-Key',
  'x-goog-api-key',
  'x-vendor-api-key',
  'api-key',
  'anthropic-api-key',
  'proxy-authorization',
  'cookie',
  'x_api_key',
  'x-api_key',
  'x_goog_api_key',
  'x-amz-security-token',
];
const SCHEMES = [
  'Bearer ',
  'Bearer ',
  'Bearer ',
  'bearer ',
  'BEARER ',
  'Bearer\t',
  'Bearer  ',
  '',
  'Basic ',
  'Bearer Bearer ',
];

/** Names that read differently once decoded, normalised or split: where path parsers disagree. */
const PATH_TRAPS = [
  'tuned/gemini',
  'tuned/../gemini-2.5-flash',
  'llama3:8b',
  '50%off',
  'my model',
  'a\\b',
  '..',
  'gemini-2.5-flash;x=1',
  'gemini-2.5-flash:generateContent',
];

/** A model name, usually a plausible one, sometimes a key of the store (whole or without its prefix). */
const model = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...MODELS) },
  { weight: 3, arbitrary: fc.constantFrom(...PATH_TRAPS) },
  { weight: 1, arbitrary: fc.constantFrom(...KEY_NAMES).map((k) => `key:${k}`) },
  { weight: 1, arbitrary: fc.constantFrom(...KEY_NAMES).map((k) => `bare:${k}`) },
);

const keyHeader: fc.Arbitrary<KeyHeader> = fc.record({
  name: fc.constantFrom(...KEY_HEADER_NAMES),
  key: fc.constantFrom(...KEY_NAMES),
  form: fc.oneof(
    { weight: 12, arbitrary: fc.constant<KeyForm>('whole') },
    { weight: 1, arbitrary: fc.constantFrom<KeyForm>('cut', 'quoted', 'bare', 'doubled', 'trailing-space') },
  ),
  scheme: fc.constantFrom(...SCHEMES),
});

const at = fc.nat({ max: 200 });
const mutation: fc.Arbitrary<PathMutation> = fc.oneof(
  fc.record({ kind: fc.constant('escape' as const), at, upper: fc.boolean() }),
  fc.record({ kind: fc.constant('escape-slash' as const), at, upper: fc.boolean(), backslash: fc.boolean() }),
  fc.record({ kind: fc.constant('dot-segment' as const), at, parent: fc.boolean(), encoded: fc.boolean() }),
  fc.record({ kind: fc.constant('double-slash' as const), at }),
  fc.record({ kind: fc.constant('trailing-slash' as const) }),
  fc.record({ kind: fc.constant('params' as const), at }),
  fc.record({ kind: fc.constant('upper-segment' as const), at }),
  fc.record({
    kind: fc.constant('extra-segment' as const),
    front: fc.boolean(),
    segment: fc.constantFrom('v1', 'v1beta', 'alt', 'models', 'x', 'chat', '..', '.'),
  }),
  fc.record({
    kind: fc.constant('invalid-escape' as const),
    at,
    text: fc.constantFrom('%', '%zz', '%4', '%%', '%u0041', '%G1'),
  }),
  fc.record({ kind: fc.constant('long' as const), length: fc.constantFrom(300, 2000, 9000) }),
);

const queryPart = fc.oneof(
  fc.constantFrom(
    'alt=sse',
    'key=',
    'key',
    'KEY=',
    'flag',
    'b=2',
    'a=1',
    'api-version=2024-10-21',
    'x=%zz',
    'x=%2F',
    'api_key=',
    'access_token=',
  ),
  fc
    .tuple(
      fc.constantFrom('key', 'api_key', 'x', 'KEY', 'token', '%6bey', 'q'),
      fc.constantFrom(...KEY_NAMES),
      fc.constantFrom<'whole' | 'bare' | 'encoded' | 'encoded-invalid' | 'double'>(
        'whole',
        'bare',
        'encoded',
        'encoded-invalid',
        'double',
      ),
    )
    .map(([name, key, how]) => `${name}=@${key}@${how}`),
);

function bodyShape(hostile: boolean): fc.Arbitrary<BodyShape> {
  const u = <T>(sane: fc.Arbitrary<T>, wild: fc.Arbitrary<T>) => usually(hostile, sane, wild);
  return fc.record({
    models: u<BodyShape['models']>(
      fc.constant([{ key: 'model', value: 'auto' }]),
      fc.oneof(
        model.map((m) => [{ key: 'model', value: m }]),
        fc.array(
          fc.record({
            key: fc.constantFrom(
              'model',
              'model',
              'MODEL',
              'Model',
              'mod\\u0065l',
              '\\u006dodel',
              'model ',
              'models',
              'mOdEl',
            ),
            value: fc.oneof(
              { weight: 6, arbitrary: fc.oneof(fc.constant('auto'), model) },
              {
                weight: 1,
                arbitrary: fc.constantFrom<BodyShape['models'][number]['value']>(42, null, true, ['gpt-4o-mini'], {
                  name: 'gpt-4o-mini',
                }),
              },
            ),
          }),
          { minLength: 0, maxLength: 3 },
        ),
      ),
    ),
    modelFirst: fc.boolean(),
    keyInContent: u<string | null>(fc.constant(null), fc.constantFrom(...KEY_NAMES)),
    bom: u(fc.constant(false), fc.constant(true)),
    whitespace: fc.boolean(),
    truncate: u(fc.constant(false), fc.constant(true)),
    padTo: u<number | null>(
      fc.constant(null),
      fc.constantFrom(
        FUZZ_BODY_LIMIT - 40,
        FUZZ_BODY_LIMIT - 1,
        FUZZ_BODY_LIMIT,
        FUZZ_BODY_LIMIT + 1,
        FUZZ_BODY_LIMIT + 200,
      ),
    ),
  });
}

const ENDPOINTS: readonly Endpoint[] = [
  'chat',
  'responses',
  'embeddings',
  'messages',
  'count_tokens',
  'generate',
  'stream',
  'countTokens',
  'embedContent',
  'batchEmbed',
  'openai_models',
  'gemini_models',
  'openai_model',
  'gemini_model',
  'junk',
];

/** Keys as the grammar picks them: the valid ones (alice, bob) most often, so that allows are common. */
const KEY_POOL = ['alice', 'alice', 'alice', 'bob', 'bob', 'bob', 'imported', ...KEY_NAMES];

/** A choice that is usually the sane one; `wild` more often when the case is hostile. */
function usually<T>(hostile: boolean, sane: fc.Arbitrary<T>, wild: fc.Arbitrary<T>): fc.Arbitrary<T> {
  // Cross-shrinking: a counter-example shrinks towards the sane choice wherever that still fails.
  return fc.oneof(
    { withCrossShrink: true },
    { weight: hostile ? 3 : 24, arbitrary: sane },
    { weight: 1, arbitrary: wild },
  );
}

function specArbitrary(hostile: boolean): fc.Arbitrary<FuzzSpec> {
  const u = <T>(sane: fc.Arbitrary<T>, wild: fc.Arbitrary<T>) => usually(hostile, sane, wild);
  return fc.record({
    http2: fc.boolean(),
    method: u<string | null>(
      fc.constant(null),
      fc.constantFrom('GET', 'POST', 'HEAD', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'post', 'CONNECTX'),
    ),
    alt: fc.boolean(),
    endpoint: fc.constantFrom(...ENDPOINTS),
    model: u(fc.constant('auto'), model),
    modelEncoding: u(
      fc.constant<ModelEncoding>('plain'),
      fc.constantFrom<ModelEncoding>('raw', 'component', 'every-char', 'lower-hex', 'double'),
    ),
    mutations: u<readonly PathMutation[]>(fc.constant([]), fc.array(mutation, { minLength: 1, maxLength: 3 })),
    query: u<readonly string[]>(fc.constant([]), fc.array(queryPart, { minLength: 1, maxLength: 3 })),
    keys: u<readonly KeyHeader[]>(
      fc.constantFrom(...KEY_POOL).map((key) => [{ name: 'auto', key, form: 'whole' as const, scheme: 'Bearer ' }]),
      fc.array(keyHeader, { minLength: 0, maxLength: 3 }),
    ),
    body: bodyShape(hostile),
    contentType: u<string | null>(
      fc.constant('application/json'),
      fc.constantFrom(
        null,
        'application/json; charset=utf-8',
        'Application/JSON',
        'application/json; charset=utf-7',
        'application/json;charset=UTF-16',
        'text/plain',
        'application/x-www-form-urlencoded',
        'application/json, text/plain',
        'multipart/form-data; boundary=x',
        '',
      ),
    ),
    contentEncoding: u<string | null>(
      fc.constant(null),
      fc.constantFrom('gzip', 'identity', 'br', 'gzip, identity', 'GZIP'),
    ),
    extraHeaders: u<ReadonlyArray<readonly [string, string]>>(
      fc.constant([]),
      fc.array(
        fc.constantFrom<readonly [string, string]>(
          ['anthropic-version', '2023-06-01'],
          ['x-modelgate-key-id', 'bob'],
          ['x-modelgate-group', 'pro'],
          ['x-modelgate-model', 'gpt-4o'],
          // modelgate's own headers a client has no business sending upstream (docs/security.md), and the operator
          // credentials' header names.
          ['x-modelgate-console-key', '@alice@whole'],
          ['x-modelgate-reason', 'allowed'],
          ['x-modelgate-hint', 'trust me'],
          ['x-modelgate-client-address', '10.9.9.9'],
          ['x-alt-token', 'client-forged'],
          ['x-goog-api-key', 'client-forged'],
          ['x-request-id', 'fuzz'],
          ['x-envoy-auth-partial-body', 'false'],
          ['x-forwarded-for', '10.0.0.1'],
          ['te', 'trailers'],
          ['transfer-encoding', 'gzip, chunked'],
        ),
        { maxLength: 3 },
      ),
    ),
    trailers: u<ReadonlyArray<readonly [string, string]>>(
      fc.constant([]),
      fc.array(
        fc
          .tuple(
            fc.constantFrom('authorization', 'x-api-key', 'x-goog-api-key', 'x-anything'),
            fc.constantFrom(...KEY_NAMES),
          )
          .map(([n, k]) => [n, `@${k}@whole`] as const),
        { minLength: 1, maxLength: 2 },
      ),
    ),
  });
}

/**
 * The whole grammar: half the cases are nearly sane (each part sane with odds 24:1, so that allows
 * are common and a single attack sits in an otherwise valid request), half hostile (3:1).
 */
export const fuzzSpec: fc.Arbitrary<FuzzSpec> = fc.oneof(specArbitrary(false), specArbitrary(true));

/** The key text for a name and a form. */
function keyText(name: string, form: KeyForm | 'encoded' | 'encoded-invalid' | 'double'): string {
  const k = FUZZ_KEYS[name] ?? name;
  const bare = k.replace(/^sk-mg-/, '');
  switch (form) {
    case 'whole':
      return k;
    case 'cut':
      return k.slice(0, -4);
    case 'quoted':
      return `"${k}"`;
    case 'bare':
      return bare;
    case 'doubled':
      return `${k}${k}`;
    case 'trailing-space':
      return `${k} x`;
    case 'encoded':
      return everyChar(k, true);
    case 'encoded-invalid':
      return `${everyChar(k, true)}%zz`;
    case 'double':
      return k.replace(/-/g, '%252D');
  }
}

/** Replaces `@name@form` placeholders with key text. */
function withKeys(s: string): string {
  return s.replace(/@([a-z]+)@([a-z-]+)/g, (_, name: string, form: string) => keyText(name, form as KeyForm));
}

function everyChar(s: string, upper: boolean): string {
  return [...Buffer.from(s, 'utf8')]
    .map((b) => `%${b.toString(16).padStart(2, '0')}`)
    .map((e) => (upper ? e.toUpperCase() : e))
    .join('');
}

/** A model alice's group (basic) and bob's (pro) both have, for each endpoint; others get basic's. */
function autoModel(endpoint: Endpoint, key: string | undefined): string {
  const pro = key === 'bob' || key === 'erin';
  switch (endpoint) {
    case 'embeddings':
      return pro ? 'text-embedding-3-large' : 'text-embedding-3-small';
    case 'messages':
    case 'count_tokens':
      return pro ? 'claude-sonnet-4-5' : 'claude-3-5-haiku-latest';
    case 'generate':
    case 'stream':
    case 'countTokens':
    case 'embedContent':
    case 'batchEmbed':
    case 'gemini_model':
      return 'gemini-2.5-flash';
    default:
      return 'gpt-4o-mini';
  }
}

/** A model name as it appears in a body or path (key placeholders resolved). */
export function modelText(m: string): string {
  if (m.startsWith('key:')) return FUZZ_KEYS[m.slice(4)];
  if (m.startsWith('bare:')) return FUZZ_KEYS[m.slice(5)].replace(/^sk-mg-/, '');
  return m;
}

function encodeModel(m: string, how: ModelEncoding): string {
  switch (how) {
    // As SDKs build the path: the name escaped as a URI component (a ':' kept).
    case 'plain':
      return encodeURIComponent(m).replace(/%3A/g, ':');
    // As a hand-written request: printable characters as they are.
    case 'raw':
      return /^[\x21-\x7e]*$/.test(m) && !/[?#%]/.test(m) ? m : encodeURIComponent(m);
    case 'component':
      return encodeURIComponent(m);
    case 'every-char':
      return everyChar(m, true);
    case 'lower-hex':
      return everyChar(m, false);
    case 'double':
      return encodeURIComponent(encodeURIComponent(m));
  }
}

function basePath(spec: FuzzSpec, m: string): string {
  const model = encodeModel(m, spec.modelEncoding);
  const p = spec.alt ? '/alt' : '';
  switch (spec.endpoint) {
    case 'chat':
      return `${p}/v1/chat/completions`;
    case 'responses':
      return `${p}/v1/responses`;
    case 'embeddings':
      return `${p}/v1/embeddings`;
    case 'messages':
      return `${p}/v1/messages`;
    case 'count_tokens':
      return `${p}/v1/messages/count_tokens`;
    case 'generate':
      return `${p}/v1beta/models/${model}:generateContent`;
    case 'stream':
      return `${p}/v1beta/models/${model}:streamGenerateContent`;
    case 'countTokens':
      return `${p}/v1beta/models/${model}:countTokens`;
    case 'embedContent':
      return `${p}/v1beta/models/${model}:embedContent`;
    case 'batchEmbed':
      return `${p}/v1beta/models/${model}:batchEmbedContents`;
    case 'openai_models':
      return `${p}/v1/models`;
    case 'gemini_models':
      return `${p}/v1beta/models`;
    case 'openai_model':
      return `${p}/v1/models/${model}`;
    case 'gemini_model':
      return `${p}/v1beta/models/${model}`;
    case 'junk':
      return `${p}/v1/${model}`;
  }
}

/** The positions of '/' in a path, for mutations that act at a segment boundary. */
function slashes(path: string): number[] {
  const out: number[] = [];
  for (let i = 0; i < path.length; i++) if (path[i] === '/') out.push(i);
  return out;
}

function mutate(path: string, m: PathMutation): string {
  const pick = (n: number, len: number) => (len === 0 ? 0 : n % len);
  switch (m.kind) {
    case 'escape': {
      const i = 1 + pick(m.at, path.length - 1);
      const e = `%${path.charCodeAt(i).toString(16).padStart(2, '0')}`;
      return path.slice(0, i) + (m.upper ? e.toUpperCase() : e) + path.slice(i + 1);
    }
    case 'escape-slash': {
      const s = slashes(path).filter((i) => i > 0);
      if (s.length === 0) return path;
      const i = s[pick(m.at, s.length)];
      const e = m.backslash ? (m.upper ? '%5C' : '%5c') : m.upper ? '%2F' : '%2f';
      return path.slice(0, i) + e + path.slice(i + 1);
    }
    case 'dot-segment': {
      const s = slashes(path);
      const i = s[pick(m.at, s.length)];
      const dot = m.encoded ? '%2e' : '.';
      return path.slice(0, i) + (m.parent ? `/x/${dot}${dot}` : `/${dot}`) + path.slice(i);
    }
    case 'double-slash': {
      const s = slashes(path);
      const i = s[pick(m.at, s.length)];
      return `${path.slice(0, i)}/${path.slice(i)}`;
    }
    case 'trailing-slash':
      return `${path}/`;
    case 'params': {
      const s = [...slashes(path).filter((i) => i > 0), path.length];
      const i = s[pick(m.at, s.length)];
      return `${path.slice(0, i)};x=1${path.slice(i)}`;
    }
    case 'upper-segment': {
      const segs = path.split('/');
      const i = 1 + pick(m.at, segs.length - 1);
      segs[i] = segs[i].toUpperCase();
      return segs.join('/');
    }
    case 'extra-segment':
      return m.front ? `/${m.segment}${path}` : `${path}/${m.segment}`;
    case 'invalid-escape': {
      const i = 1 + pick(m.at, path.length - 1);
      return path.slice(0, i) + m.text + path.slice(i);
    }
    case 'long':
      return `${path}/${'a'.repeat(m.length)}`;
  }
}

/** The endpoint's own method. */
function methodOf(e: Endpoint): string {
  return e.endsWith('models') || e.endsWith('_model') ? 'GET' : 'POST';
}

/** The header a route reads the key from: the vendor one on /v1beta, else Authorization. */
function autoHeader(spec: FuzzSpec): string {
  return spec.endpoint === 'gemini_models' ||
    spec.endpoint === 'gemini_model' ||
    ['generate', 'stream', 'countTokens', 'embedContent', 'batchEmbed'].includes(spec.endpoint)
    ? spec.alt
      ? 'authorization'
      : 'x-goog-api-key'
    : 'authorization';
}

function headerValue(h: KeyHeader): string {
  const k = keyText(h.key, h.form);
  const name = h.name.toLowerCase();
  return name === 'authorization' || name === 'proxy-authorization'
    ? `${h.scheme}${k}`
    : name === 'cookie'
      ? `session=${k}`
      : k;
}

function bodyText(spec: FuzzSpec): string | undefined {
  const gen = ['generate', 'stream', 'countTokens', 'embedContent', 'batchEmbed'].includes(spec.endpoint);
  const isGet = (spec.method ?? methodOf(spec.endpoint)).toUpperCase() === 'GET' || spec.method === 'HEAD';
  if (isGet && spec.body.padTo === null) return undefined;
  const b = spec.body;
  const sp = b.whitespace ? ' \n\t ' : '';
  const auto = autoModel(spec.endpoint, spec.keys[0]?.key);
  const members = b.models.map(
    (m) =>
      `"${m.key}":${sp}${JSON.stringify(m.value === 'auto' ? auto : typeof m.value === 'string' ? modelText(m.value) : m.value)}`,
  );
  const content = `hello${b.keyInContent ? ` my key is ${FUZZ_KEYS[b.keyInContent]}` : ''}`;
  const rest = gen
    ? [`"contents":[{"role":"user","parts":[{"text":${JSON.stringify(content)}}]}]`]
    : [`"messages":[{"role":"user","content":${JSON.stringify(content)}}]`, '"max_tokens":8'];
  const all = b.modelFirst ? [...members, ...rest] : [...rest, ...members];
  let text = `${sp}{${sp}${all.join(`,${sp}`)}${sp}}${sp}`;
  if (b.padTo !== null) {
    const pad = b.padTo - Buffer.byteLength(text) - 10;
    if (pad > 0) text = text.replace(/}\s*$/, `,"pad":"${'x'.repeat(pad)}"}`);
  }
  if (b.truncate) text = text.slice(0, Math.max(1, Math.floor(text.length / 2)));
  if (b.bom) text = `\ufeff${text}`;
  return text;
}

/** The request a spec describes. */
export function renderCase(spec: FuzzSpec): FuzzCase {
  const m = spec.model === 'auto' ? autoModel(spec.endpoint, spec.keys[0]?.key) : modelText(spec.model);
  let path = basePath(spec, m);
  for (const mu of spec.mutations) path = mutate(path, mu);
  if (spec.query.length > 0) path += `?${spec.query.map(withKeys).join('&')}`;
  const headers: Array<readonly [string, string]> = spec.keys
    .map((h) => (h.name === 'auto' ? { ...h, name: autoHeader(spec) } : h))
    .map((h) => [h.name, headerValue(h)] as const);
  if (spec.contentType !== null) headers.push(['content-type', spec.contentType]);
  if (spec.contentEncoding !== null) headers.push(['content-encoding', spec.contentEncoding]);
  const body = bodyText(spec);
  // A transfer coding on a request without a body (a HEAD) makes Envoy answer its 400 with a body,
  // which node's client (rightly strict for HEAD) cannot read: not a request a client sends.
  headers.push(
    ...spec.extraHeaders
      .filter(([n]) => n !== 'transfer-encoding' || body !== undefined)
      .map(([n, v]) => [n, withKeys(v)] as const),
  );
  const c: FuzzCase = { http2: spec.http2, method: spec.method ?? methodOf(spec.endpoint), path, headers };
  return {
    ...c,
    ...(body !== undefined ? { body } : {}),
    ...(body !== undefined && spec.contentEncoding !== null && /gzip/i.test(spec.contentEncoding)
      ? { gzip: true }
      : {}),
    ...(spec.http2 && spec.trailers.length > 0 && body !== undefined
      ? { trailers: spec.trailers.map(([n, v]) => [n, withKeys(v)] as const) }
      : {}),
  };
}

/** The grammar as sendable requests. */
export const fuzzCase: fc.Arbitrary<FuzzCase> = fuzzSpec.map(renderCase);

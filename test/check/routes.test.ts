/**
 * classify: every endpoint of docs/spec.md §4.2 (and the extensions the service knows) under the root, the
 * alternate prefix `/alt` and a custom one, with their protocol style, error-body family and key
 * headers (docs/spec.md §5.2, §5.3); wrong methods; percent-encoded models; paths no endpoint has.
 */
import { describe, expect, test } from 'vitest';
import { GENERATIVE_METHODS } from '../../src/providers/endpoints';
import type { Family } from '../../src/contract/error-body';
import { classify, endpointFor, type Route } from '../../src/check/routes';
import { PROTOCOLS } from '../../src/store/store';

const PREFIXES = [
  { name: 'the root', prefix: '', altPrefix: '/alt', alt: false },
  { name: '/alt', prefix: '/alt', altPrefix: '/alt', alt: true },
  { name: 'a custom alternate prefix /vendor', prefix: '/vendor', altPrefix: '/vendor', alt: true },
] as const;

interface Endpoint {
  readonly method: string;
  readonly path: string;
  readonly route: { kind: 'protocol' | 'models'; style: string; family: Family; model?: string };
  /** The key source on /v1beta changes under an alternate prefix. */
  readonly v1beta?: boolean;
  readonly anthropicVersion?: boolean;
}

const ENDPOINTS: Endpoint[] = [
  { method: 'GET', path: '/v1/models', route: { kind: 'models', style: 'models', family: 'openai' } },
  {
    method: 'GET',
    path: '/v1/models',
    anthropicVersion: true,
    route: { kind: 'models', style: 'models', family: 'anthropic' },
  },
  { method: 'GET', path: '/v1beta/models', v1beta: true, route: { kind: 'models', style: 'models', family: 'gemini' } },
  { method: 'POST', path: '/v1/chat/completions', route: { kind: 'protocol', style: 'chat', family: 'openai' } },
  {
    method: 'POST',
    path: '/v1/chat/completions',
    anthropicVersion: true,
    route: { kind: 'protocol', style: 'chat', family: 'anthropic' },
  },
  { method: 'POST', path: '/v1/responses', route: { kind: 'protocol', style: 'responses', family: 'openai' } },
  { method: 'POST', path: '/v1/embeddings', route: { kind: 'protocol', style: 'embeddings', family: 'openai' } },
  { method: 'POST', path: '/v1/messages', route: { kind: 'protocol', style: 'messages', family: 'anthropic' } },
  {
    method: 'POST',
    path: '/v1/messages/count_tokens',
    route: { kind: 'protocol', style: 'messages', family: 'anthropic' },
  },
  // The coding agents' paths: their Base URL is {base_url} itself (docs/spec.md §4.1 row 1; Codex CLI sends POST
  // /responses).
  { method: 'POST', path: '/responses', route: { kind: 'protocol', style: 'responses', family: 'openai' } },
  { method: 'POST', path: '/chat/completions', route: { kind: 'protocol', style: 'chat', family: 'openai' } },
  ...[...GENERATIVE_METHODS].map((m): Endpoint => ({
    method: 'POST',
    path: `/v1beta/models/gemini-2.5-flash:${m}`,
    v1beta: true,
    route: { kind: 'protocol', style: 'generative', family: 'gemini', model: 'gemini-2.5-flash' },
  })),
  {
    method: 'POST',
    path: '/v1beta/models/gemini-2.5-flash:generateContent',
    v1beta: true,
    anthropicVersion: true,
    route: { kind: 'protocol', style: 'generative', family: 'gemini', model: 'gemini-2.5-flash' },
  },
  {
    method: 'GET',
    path: '/v1/models/gpt-4o-mini',
    route: { kind: 'models', style: 'models', family: 'openai', model: 'gpt-4o-mini' },
  },
  {
    method: 'GET',
    path: '/v1/models/claude-sonnet-4-5',
    anthropicVersion: true,
    route: { kind: 'models', style: 'models', family: 'anthropic', model: 'claude-sonnet-4-5' },
  },
  {
    method: 'GET',
    path: '/v1beta/models/gemini-2.5-pro',
    v1beta: true,
    route: { kind: 'models', style: 'models', family: 'gemini', model: 'gemini-2.5-pro' },
  },
];

function expectedKeys(e: Endpoint, alt: boolean): Route['keys'] {
  return e.v1beta ? (alt ? 'both' : 'vendor') : 'bearer';
}

describe('classify known endpoints', () => {
  const rows = PREFIXES.flatMap((p) =>
    ENDPOINTS.map((e) => ({ ...e, under: p.name, fullPath: p.prefix + e.path, altPrefix: p.altPrefix, alt: p.alt })),
  );

  test.each(rows)('classifies $method $fullPath ($under, anthropic-version: $anthropicVersion)', (row) => {
    const route = classify(row.method, row.fullPath, row.altPrefix, row.anthropicVersion === true);
    // A fixed endpoint's route also carries its number (fixedId: the response cache keys by it).
    expect({ ...route, fixedId: undefined }).toEqual({
      model: undefined,
      ...row.route,
      alt: row.alt,
      keys: expectedKeys(row, row.alt),
    });
    if ((route.kind === 'protocol' || route.kind === 'models') && route.model === undefined)
      expect(route.fixedId).toEqual(expect.any(Number));
    if (row.route.model === undefined) expect(route).not.toHaveProperty('model');
  });

  test('knows every generative method the spec family uses', () => {
    expect([...GENERATIVE_METHODS].sort()).toEqual([
      'batchEmbedContents',
      'countTokens',
      'embedContent',
      'generateContent',
      'streamGenerateContent',
    ]);
  });
});

describe('classify wrong methods', () => {
  const rows: [string, string, string][] = [
    ['GET', '/v1/chat/completions', 'POST'],
    ['PUT', '/v1/responses', 'POST'],
    ['DELETE', '/v1/embeddings', 'POST'],
    ['GET', '/v1/messages', 'POST'],
    ['OPTIONS', '/v1/messages/count_tokens', 'POST'],
    ['POST', '/v1/models', 'GET'],
    ['HEAD', '/v1/models', 'GET'],
    ['DELETE', '/v1beta/models', 'GET'],
    ['GET', '/v1beta/models/gemini-2.5-flash:generateContent', 'POST'],
    ['GET', '/v1beta/models/gemini-2.5-flash:streamGenerateContent', 'POST'],
    ['POST', '/v1/models/gpt-4o', 'GET'],
    ['DELETE', '/v1beta/models/gemini-2.5-pro', 'GET'],
    ['post', '/v1/chat/completions', 'POST'],
    ['', '/v1/models', 'GET'],
  ];
  const all = PREFIXES.flatMap((p) =>
    rows.map(([method, path, allow]) => ({ method, path: p.prefix + path, allow, altPrefix: p.altPrefix, alt: p.alt })),
  );

  test.each(all)('answers $method $path with wrong_method, allow $allow', (row) => {
    const route = classify(row.method, row.path, row.altPrefix, false);
    expect(route).toMatchObject({ kind: 'wrong_method', style: 'unknown', allow: row.allow, alt: row.alt });
  });

  test('keeps the family and key source of the endpoint on a wrong method', () => {
    expect(classify('GET', '/alt/v1beta/models/m:generateContent', '/alt', false)).toEqual({
      kind: 'wrong_method',
      style: 'unknown',
      allow: 'POST',
      family: 'gemini',
      keys: 'both',
      alt: true,
    });
    expect(classify('GET', '/v1/messages', '/alt', false)).toEqual({
      kind: 'wrong_method',
      style: 'unknown',
      allow: 'POST',
      family: 'anthropic',
      keys: 'bearer',
      alt: false,
    });
  });
});

describe('classify models in the path', () => {
  test.each([
    ['a percent-encoded dash', '/v1beta/models/gemini%2D2.5-flash:generateContent', 'gemini-2.5-flash'],
    ['a percent-encoded space', '/v1beta/models/gemini-2.5-flash%20:generateContent', 'gemini-2.5-flash '],
    ['a percent-encoded slash', '/v1beta/models/tunedModels%2Fmine:generateContent', 'tunedModels/mine'],
    ['a percent-encoded colon', '/v1beta/models/a%3Ab:generateContent', 'a:b'],
    ['a percent-encoded non-ASCII name', '/v1beta/models/mod%C3%A8le:countTokens', 'mod\u00e8le'],
    [
      'a dotted name',
      '/v1beta/models/gemini-2.5-flash-preview-05.20:generateContent',
      'gemini-2.5-flash-preview-05.20',
    ],
  ])('decodes %s', (_name, path, model) => {
    expect(classify('POST', path, '/alt', false)).toMatchObject({ kind: 'protocol', style: 'generative', model });
  });

  test('decodes a percent-encoded model of a model lookup', () => {
    expect(classify('GET', '/v1/models/gpt%2D4o', '/alt', false)).toMatchObject({ kind: 'models', model: 'gpt-4o' });
  });

  test.each([
    ['a truncated escape', '/v1beta/models/gemini%2:generateContent', 'POST'],
    ['a non-hex escape', '/v1beta/models/gem%ZZini:generateContent', 'POST'],
    ['invalid UTF-8', '/v1beta/models/%C3%28:generateContent', 'POST'],
    ['a lone % in a model lookup', '/v1/models/gpt%', 'GET'],
  ])('denies %s as unknown with a detail', (_name, path, method) => {
    expect(classify(method, path, '/alt', false)).toMatchObject({
      kind: 'unknown',
      style: 'unknown',
      detail: 'the model name in the path is not valid percent-encoding',
    });
  });
});

describe('classify families and key sources', () => {
  test.each([
    ['/v1/messages', false, 'anthropic', 'bearer'],
    ['/v1/chat/completions', false, 'openai', 'bearer'],
    ['/v1/chat/completions', true, 'anthropic', 'bearer'],
    ['/v1beta/models', false, 'gemini', 'vendor'],
    ['/v1beta/models', true, 'gemini', 'vendor'],
    ['/alt/v1beta/models', false, 'gemini', 'both'],
    ['/alt/v1/messages', false, 'anthropic', 'bearer'],
    ['/alt/v1/models', false, 'openai', 'bearer'],
    ['/alt/v1/models', true, 'anthropic', 'bearer'],
    ['/nowhere', false, 'openai', 'bearer'],
    ['/v1beta/nowhere', false, 'gemini', 'vendor'],
  ] as const)('gives %s (anthropic-version: %s) the %s family and %s keys', (path, anthropicVersion, family, keys) => {
    const method = path.endsWith('models') ? 'GET' : 'POST';
    expect(classify(method, path, '/alt', anthropicVersion)).toMatchObject({ family, keys });
  });
});

describe('classify unknown paths', () => {
  const rows: [string, string][] = [
    ['POST', ''],
    ['GET', '/'],
    ['POST', '/v1'],
    ['POST', '/v1/'],
    ['POST', '/v1beta'],
    ['POST', '/v1/chat/completions/'],
    ['POST', '/v1/chat/completions/chat/completions'],
    ['POST', '/v1/v1/chat/completions'],
    ['GET', '/models'],
    ['POST', '/embeddings'],
    ['POST', '/responses/responses'],
    ['POST', '/v1/chat'],
    ['POST', '/v1/Chat/Completions'],
    ['POST', '/v1/messages/'],
    ['POST', '/v1/messagesx'],
    ['GET', '/v1/models/'],
    ['GET', '/v1/models/a/b'],
    ['GET', '/v1beta/models/'],
    ['POST', '/v1beta/models/gemini-2.5-flash:fooBar'],
    ['POST', '/v1beta/models/gemini-2.5-flash:generatecontent'],
    ['POST', '/v1beta/models/:generateContent'],
    ['POST', '/v1beta/models/gemini-2.5-flash:generateContent/'],
    ['POST', '/v1beta/models/a/b:generateContent'],
    ['POST', '/v1/models/gemini-2.5-flash:generateContent'],
    ['POST', '/v1beta/chat/completions'],
    ['POST', '/v1beta/v1beta/models/gemini-2.5-flash:generateContent'],
    ['GET', '/alt'],
    ['GET', '/alt/'],
    ['GET', '/altx/v1/models'],
    ['GET', '/alt/alt/v1/models'],
    ['GET', '/v1/alt/models'],
    ['GET', '//v1/models'],
    ['GET', '/v1//models'],
    ['GET', '/vendor/v1/models'],
  ];

  test.each(rows)('answers %s %j with unknown', (method, path) => {
    const route = classify(method, path, '/alt', false);
    expect(route.kind).toBe('unknown');
    expect(route.style).toBe('unknown');
    expect(route).not.toHaveProperty('detail');
  });

  test.each([
    ['/alt/v1/models', '/alt2'],
    ['/vendorx/v1/models', '/vendor'],
    ['/vendor', '/vendor'],
  ])('answers %s with unknown when the alternate prefix is %s', (path, altPrefix) => {
    expect(classify('GET', path, altPrefix, false).kind).toBe('unknown');
  });

  test('marks an unknown path under the alternate prefix as alt', () => {
    expect(classify('POST', '/alt/v1/nothing', '/alt', false)).toMatchObject({ kind: 'unknown', alt: true });
  });
});

describe('endpointFor', () => {
  test.each([
    ['chat', '', 'POST /v1/chat/completions'],
    ['responses', '', 'POST /v1/responses'],
    ['embeddings', '/alt', 'POST /alt/v1/embeddings'],
    ['messages', '', 'POST /v1/messages'],
    ['generative', '', 'POST /v1beta/models/gemini-2.5-flash:generateContent'],
    ['generative', '/vendor', 'POST /vendor/v1beta/models/gemini-2.5-flash:generateContent'],
  ] as const)('names the %s endpoint under %j', (style, alt, expected) => {
    expect(endpointFor(style, 'gemini-2.5-flash', alt)).toBe(expected);
  });

  test('gives an endpoint that classify maps back to the same style, for every protocol', () => {
    for (const style of PROTOCOLS) {
      for (const alt of ['', '/alt']) {
        const [method, path] = endpointFor(style, 'm', alt).split(' ');
        expect(classify(method, path, '/alt', false)).toMatchObject({ kind: 'protocol', style, alt: alt !== '' });
      }
    }
  });
});

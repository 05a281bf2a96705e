/**
 * parseConfig: read once, every problem listed with its path in one ConfigError, then frozen.
 * (test/config/watch.test.ts: reloading a file.)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { ConfigError, parseConfig, type Config } from '../../src/config/load';
import { BROKEN, EXPECTED, SECRET, SHA_A } from '../support/broken-config';

const DEMO_PATH = join(__dirname, '..', '..', 'envoy', 'modelgate.yaml');
const DEMO = readFileSync(DEMO_PATH, 'utf8');

function problemsOf(text: string, env: NodeJS.ProcessEnv = {}): readonly string[] {
  try {
    parseConfig(text, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('parseConfig accepted the text');
}

describe('parseConfig on the demo file', () => {
  const config = parseConfig(DEMO);

  test('reads the three demo groups with their models', () => {
    expect([...config.groups.keys()]).toEqual(['basic', 'pro', 'paused']);
    const basic = config.groups.get('basic')!;
    expect(basic.available).toBe(true);
    expect(basic.models.get('gpt-4o-mini')).toEqual({
      name: 'gpt-4o-mini',
      protocols: null,
      available: true,
      price: { input: 0.15, output: 0.6, cachedInput: 0.075, tools: { web_search: 0.01, file_search: 0.0025 } },
      maxOutputTokens: 16384,
    });
    expect(basic.models.get('text-embedding-3-small')).toEqual({
      name: 'text-embedding-3-small',
      protocols: ['embeddings'],
      available: true,
      price: { input: 0.02, output: 0, cachedInput: null },
      maxOutputTokens: null,
    });
    expect(basic.models.get('gemini-2.0-flash')).toEqual({
      name: 'gemini-2.0-flash',
      protocols: ['generative'],
      available: false,
      price: null,
      maxOutputTokens: null,
    });
    expect(config.groups.get('pro')!.models.get('gpt-4o')).toEqual({
      name: 'gpt-4o',
      protocols: null,
      available: true,
      price: null,
      maxOutputTokens: null,
    });
    expect(config.groups.get('pro')!.models.get('o3')!.protocols).toEqual(['chat', 'responses']);
    expect(config.groups.get('paused')).toMatchObject({ available: false });
  });

  test('reads the eight demo keys with balance, disabled, expiresAt and limits', () => {
    const byId = Object.fromEntries(config.keys.map((k) => [k.id, k]));
    expect(Object.keys(byId)).toEqual(['alice', 'bob', 'carol', 'dave', 'erin', 'frank', 'trial', 'grace']);
    expect(byId.grace.limits).toEqual({ rpm: 3, tpm: 2000, inFlight: 2 });
    expect(byId.trial.balance).toBe(0.00006);
    expect(byId.alice).toEqual({
      id: 'alice',
      sha256: '4787fb0e1aae0693be94be74ad11456fbd0771f21f84d8153cbee4f7b893af4c',
      group: 'basic',
      balance: 12.5,
      disabled: false,
      expiresAt: null,
    });
    expect(byId.bob.balance).toBeNull();
    expect(byId.carol.balance).toBe(0);
    expect(byId.dave.disabled).toBe(true);
    expect(byId.erin.expiresAt).toBe(Date.UTC(2025, 0, 1));
    expect(byId.frank.group).toBe('paused');
  });

  test('states the same settings as the defaults of an empty file', () => {
    const empty = parseConfig('');
    for (const section of ['routes', 'log', 'cache', 'grpc', 'upstream', 'store', 'meter'] as const)
      expect(config[section]).toEqual(empty[section]);
  });
});

describe('parseConfig defaults', () => {
  test.each([
    ['an empty file', ''],
    ['an empty mapping', '{}'],
    ['a comment only', '# nothing\n'],
    ['null sections', 'routes:\nlog:\ncache:\ngrpc:\nupstream:\nstore:\ngroups:\nkeys:\n'],
  ])('fills every default for %s', (_name, text) => {
    const c = parseConfig(text);
    expect(c.routes).toEqual({
      altPrefix: '/alt',
      bearerHeaders: ['authorization', 'x-api-key'],
      vendorHeaders: ['x-vendor-api-key', 'x-goog-api-key'],
      queryKeyParams: [
        'key',
        'api_key',
        'apikey',
        'api-key',
        'access_token',
        'x-api-key',
        'x-goog-api-key',
        'x-vendor-api-key',
      ],
      maxJsonDepth: 256,
    });
    expect(c.log).toEqual({ level: 'info', allows: true });
    expect(c.cache).toEqual({ maxEntries: 100_000, maxNotFound: 20_000, ttlMs: 5000, staleMs: 300_000 });
    expect(c.grpc).toEqual({ maxReceiveMessageBytes: 40 * 1024 * 1024, transport: 'builtin' });
    expect(c.upstream).toEqual({ credentials: {} });
    expect(c.store).toEqual({ kind: 'file' });
    expect(c.groups.size).toBe(0);
    expect(c.keys).toEqual([]);
  });

  test('lowercases configured header and query parameter names', () => {
    const c = parseConfig(
      'routes: { bearerHeaders: [Authorization, X-My-Key], vendorHeaders: [X-Vendor], queryKeyParams: [Key, TOKEN] }',
    );
    expect(c.routes.bearerHeaders).toEqual(['authorization', 'x-my-key']);
    expect(c.routes.vendorHeaders).toEqual(['x-vendor']);
    expect(c.routes.queryKeyParams).toEqual(['key', 'token']);
  });

  test('converts cache seconds to milliseconds', () => {
    expect(parseConfig('cache: { ttlSeconds: 0, staleSeconds: 60, maxEntries: 10 }').cache).toEqual({
      maxEntries: 10,
      maxNotFound: 20_000,
      ttlMs: 0,
      staleMs: 60_000,
    });
  });

  test('reads a postgres store URL', () => {
    expect(parseConfig('store: postgres://u:p@db/modelgate').store).toEqual({
      kind: 'postgres',
      url: 'postgres://u:p@db/modelgate',
    });
    expect(parseConfig('store: file').store).toEqual({ kind: 'file' });
  });

  test('lowercases a key sha256 given in uppercase hex', () => {
    const c = parseConfig(`groups: { g: { models: [m] } }\nkeys: [{ id: k, sha256: ${'AB'.repeat(32)}, group: g }]`);
    expect(c.keys[0].sha256).toBe('ab'.repeat(32));
  });

  test('accepts a key of an unknown group when the store is PostgreSQL (the file does not list its groups)', () => {
    const c = parseConfig(`store: postgres://db/x\nkeys: [{ id: k, sha256: ${SHA_A}, group: elsewhere }]`);
    expect(c.keys[0].group).toBe('elsewhere');
  });

  test.each([
    ['a date-time in UTC', '2027-01-01T00:00:00Z', Date.UTC(2027, 0, 1)],
    ['a date-time with an offset', '2027-01-01T02:00:00+02:00', Date.UTC(2027, 0, 1)],
    ['a date-time with fractional seconds', '2027-01-01T00:00:00.500Z', Date.UTC(2027, 0, 1) + 500],
    ['a bare date (midnight UTC)', '2027-01-01', Date.UTC(2027, 0, 1)],
  ])('reads expiresAt given as %s', (_name, text, expected) => {
    const c = parseConfig(
      `groups: { g: { models: [m] } }\nkeys: [{ id: k, sha256: ${SHA_A}, group: g, expiresAt: "${text}" }]`,
    );
    expect(c.keys[0].expiresAt).toBe(expected);
  });
});

describe('parseConfig upstream credentials', () => {
  const text = [
    'gateway:',
    '  upstreams:',
    '    chat: { url: "https://api.openai.com", credential: { header: Authorization, prefix: "Bearer ", env: UP_OPENAI } }',
    '    messages: { url: "https://api.anthropic.com", credential: { header: x-api-key, env: UP_ANTHROPIC } }',
    '    alt: "https://alt.example"',
  ].join('\n');

  test("resolves each upstream's credential from the env it is given, with its prefix; an upstream without one gets none", () => {
    const c = parseConfig(text, { UP_OPENAI: 'sk-upstream-1', UP_ANTHROPIC: 'sk-ant-upstream-2' });
    expect(c.upstream.credentials).toEqual({
      chat: { header: 'authorization', value: 'Bearer sk-upstream-1' },
      messages: { header: 'x-api-key', value: 'sk-ant-upstream-2' },
    });
    expect(c.gateway.upstreams.chat).toEqual({
      tls: true,
      host: 'api.openai.com',
      port: 443,
      caFile: '/etc/ssl/certs/ca-certificates.crt',
      cluster: null,
    });
  });

  test('gives the alt upstream only its own credential', () => {
    const alt = `${text.replace('    alt: "https://alt.example"', '    alt: { url: "https://alt.example", credential: { header: x-alt-token, env: UP_ALT } }')}`;
    const c = parseConfig(alt, { UP_OPENAI: 'a', UP_ANTHROPIC: 'b', UP_ALT: 'alt-secret' });
    expect(c.upstream.credentials.alt).toEqual({ header: 'x-alt-token', value: 'alt-secret' });
  });

  test('never reads process.env itself', () => {
    process.env.UP_OPENAI = 'from-process-env';
    process.env.UP_ANTHROPIC = 'from-process-env';
    try {
      expect(problemsOf(text, {})).toEqual([
        'gateway.upstreams.chat.credential.env: environment variable UP_OPENAI is not set or empty',
        'gateway.upstreams.messages.credential.env: environment variable UP_ANTHROPIC is not set or empty',
      ]);
    } finally {
      delete process.env.UP_OPENAI;
      delete process.env.UP_ANTHROPIC;
    }
  });

  test('treats an empty variable as missing', () => {
    expect(problemsOf(text, { UP_OPENAI: '', UP_ANTHROPIC: 'x' })).toEqual([
      'gateway.upstreams.chat.credential.env: environment variable UP_OPENAI is not set or empty',
    ]);
  });

  test('refuses the per-style form of of earlier versions, each entry with where it belongs now, all at once', () => {
    const old = [
      'upstream:',
      '  credentials:',
      '    chat: { header: authorization, prefix: "Bearer ", env: UP_OPENAI }',
      '    responses: { header: authorization, prefix: "Bearer ", env: UP_OPENAI }',
      '    messages: { header: x-api-key, env: UP_ANTHROPIC }',
      '    generative: { header: x-goog-api-key, env: UP_GEMINI }',
      'routes: { altPrefix: alt }',
    ].join('\n');
    const problems = problemsOf(old, { UP_OPENAI: 'a', UP_ANTHROPIC: 'b', UP_GEMINI: 'c' });
    expect(problems).toHaveLength(5);
    expect(problems).toContainEqual(
      expect.stringMatching(/^upstream\.credentials\.chat: .*move it to gateway\.upstreams\.chat\.credential/),
    );
    expect(problems).toContainEqual(
      expect.stringMatching(/^upstream\.credentials\.responses: .*gateway\.upstreams\.chat\.credential/),
    );
    expect(problems).toContainEqual(
      expect.stringMatching(/^upstream\.credentials\.messages: .*gateway\.upstreams\.messages\.credential/),
    );
    expect(problems).toContainEqual(
      expect.stringMatching(/^upstream\.credentials\.generative: .*gateway\.upstreams\.generative\.credential/),
    );
    expect(problems).toContainEqual(expect.stringMatching(/^routes\.altPrefix: /));
  });

  test('accepts an empty legacy section (nothing to move)', () => {
    expect(parseConfig('upstream:\n  credentials: {}\n').upstream.credentials).toEqual({});
    expect(parseConfig('upstream:\n  credentials:\n').upstream.credentials).toEqual({});
  });
});

describe('parseConfig on a broken file', () => {
  const env = { UP_MESSAGES: SECRET, UP_MIND: SECRET };
  let error: ConfigError;
  try {
    parseConfig(BROKEN, env);
  } catch (err) {
    error = err as ConfigError;
  }

  test('throws one ConfigError', () => {
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.name).toBe('ConfigError');
  });

  test.each(EXPECTED)('lists the problem at %s', (path, message) => {
    const found = error.problems.filter((p) => p.startsWith(`${path}: `));
    expect(found, error.message).toHaveLength(1);
    expect(found[0]).toMatch(message);
    expect(error.message).toContain(found[0]);
  });

  test('lists nothing but those problems, each once', () => {
    const paths = error.problems.map((p) => p.slice(0, p.indexOf(': ')));
    expect(paths.sort()).toEqual(EXPECTED.map(([path]) => path).sort());
  });

  test('never contains an upstream secret that is set', () => {
    expect(error.message).not.toContain(SECRET);
    expect(JSON.stringify(error.problems)).not.toContain(SECRET);
  });
});

describe('parseConfig on YAML it cannot read', () => {
  test.each([
    ['a duplicate key', 'log: { level: info }\nlog: { level: warn }\n'],
    ['a bad indentation', 'routes:\n  altPrefix: /alt\n bad: 1\n'],
    ['an unclosed flow sequence', 'routes: { bearerHeaders: [authorization }\n'],
  ])('reports %s with its line', (_name, text) => {
    const problems = problemsOf(text);
    expect(problems.length).toBeGreaterThan(0);
    for (const p of problems) expect(p).toMatch(/^line (\d+|\?): /);
  });

  test.each([
    ['a list', '- a\n- b\n'],
    ['a scalar', 'hello\n'],
  ])('reports a top level that is %s', (_name, text) => {
    expect(problemsOf(text)).toEqual(['$: must be a mapping']);
  });

  test('rejects an altPrefix equal to a version prefix', () => {
    expect(problemsOf('routes: { altPrefix: /v1beta }')).toEqual([
      'routes.altPrefix: must differ from /v1 and /v1beta',
    ]);
  });

  test('rejects a group list where a mapping is expected', () => {
    expect(problemsOf('groups: [a, b]')).toEqual(['groups: must be a mapping']);
  });

  test('rejects keys given as a mapping', () => {
    expect(problemsOf('keys: { a: 1 }')).toEqual(['keys: must be a list']);
  });
});

describe('parseConfig freezes its result', () => {
  const config = parseConfig(DEMO);
  const group = config.groups.get('basic')!;

  test.each<[string, unknown]>([
    ['the config', config],
    ['routes', config.routes],
    ['the bearer header list', config.routes.bearerHeaders],
    ['the cache settings', config.cache],
    ['the upstream credentials', config.upstream.credentials],
    ['the key list', config.keys],
    ['a key', config.keys[0]],
    ['the group map', config.groups],
    ['a group', group],
    ['a model map', group.models],
    ['a model', group.models.get('gemini-2.5-flash')],
    ['a model protocol list', group.models.get('gemini-2.5-flash')!.protocols],
  ])('freezes %s', (_name, value) => {
    expect(Object.isFrozen(value)).toBe(true);
  });

  test('refuses writes to its fields', () => {
    expect(() => {
      (config.routes as { altPrefix: string }).altPrefix = '/x';
    }).toThrow(TypeError);
    expect(() => {
      (config.keys as KeyList).push(config.keys[0]);
    }).toThrow(TypeError);
    expect(() => {
      (config.keys[0] as { balance: number }).balance = 1e9;
    }).toThrow(TypeError);
  });

  test.each([
    ['set a group', () => (config.groups as Map<string, unknown>).set('evil', group)],
    ['delete a group', () => (config.groups as Map<string, unknown>).delete('basic')],
    ['clear the groups', () => (config.groups as Map<string, unknown>).clear()],
    [
      'add a model to a group',
      () => (group.models as Map<string, unknown>).set('gpt-5', { name: 'gpt-5', protocols: null, available: true }),
    ],
    ['delete a model of a group', () => (group.models as Map<string, unknown>).delete('gpt-4o-mini')],
  ])('refuses to %s', (_name, write) => {
    expect(write).toThrow(TypeError);
    expect(config.groups.has('evil')).toBe(false);
    expect(config.groups.has('basic')).toBe(true);
    expect(group.models.has('gpt-5')).toBe(false);
    expect(group.models.has('gpt-4o-mini')).toBe(true);
  });

  test('still reads its maps normally', () => {
    expect([...config.groups.keys()]).toEqual(['basic', 'pro', 'paused']);
    expect(config.groups.get('pro')!.models.size).toBe(13);
  });
});

type KeyList = Config['keys'][number][];

describe('names that become upstream header values', () => {
  test.each([
    ['a model name with a leading space', 'groups:\n  g:\n    models: [" gpt-4o"]\n', 'groups.g.models[0]'],
    ['a model name with a control character', 'groups:\n  g:\n    models: ["gpt\\u00074o"]\n', 'groups.g.models[0]'],
    ['a non-ASCII model name', 'groups:\n  g:\n    models: [{name: "gpt-4o-é"}]\n', 'groups.g.models[0].name'],
    ['a group name with a space', 'groups:\n  "my group":\n    models: [gpt-4o]\n', 'groups.my group'],
  ])('refuses %s', (_what, yaml, path) => {
    expect(() => parseConfig(yaml)).toThrow(ConfigError);
    try {
      parseConfig(yaml);
    } catch (err) {
      expect((err as ConfigError).problems.some((p) => p.startsWith(`${path}:`))).toBe(true);
    }
  });

  test('accepts names with inner spaces, colons and slashes', () => {
    const c = parseConfig('groups:\n  team-1:\n    models: ["llama3:8b", "meta/llama 3"]\n');
    expect([...c.groups.get('team-1')!.models.keys()]).toEqual(['llama3:8b', 'meta/llama 3']);
  });
});

describe('prices and the meter', () => {
  test('reads a model price per million tokens and refuses one that is negative, not a number, or incomplete', () => {
    const model = (price: string) => `groups:\n  g:\n    models:\n      - name: m\n        price: ${price}\n`;
    expect(parseConfig(model('{ input: 0.15, output: 0.6 }')).groups.get('g')!.models.get('m')!.price).toEqual({
      input: 0.15,
      output: 0.6,
      cachedInput: null,
    });
    expect(() => parseConfig(model('{ input: -1, output: 1 }'))).toThrow(
      /groups\.g\.models\[0\]\.price\.input: must be a number >= 0/,
    );
    expect(() => parseConfig(model('{ input: .nan, output: 1 }'))).toThrow(/price\.input: must be a number >= 0/);
    expect(() => parseConfig(model('{ input: .inf, output: 1 }'))).toThrow(/price\.input/);
    expect(() => parseConfig(model('{ input: 1 }'))).toThrow(/price\.output/);
  });

  test('reads a long-context price and refuses one without its threshold, with a threshold that is not a whole number, or with an unknown field', () => {
    const model = (price: string) => `groups:\n  g:\n    models:\n      - name: m\n        price: ${price}\n`;
    const read = (price: string) => parseConfig(model(price)).groups.get('g')!.models.get('m')!.price;
    expect(read('{ input: 2, output: 12, longContext: { above: 200000, input: 4, output: 18 } }')).toEqual({
      input: 2,
      output: 12,
      cachedInput: null,
      longContext: { above: 200_000, input: 4, output: 18, cachedInput: null },
    });
    expect(
      read(
        '{ input: 3, output: 15, cachedInput: 0.3, longContext: { above: 200000, input: 6, output: 22.5, cachedInput: 0.6 } }',
      ),
    ).toEqual({
      input: 3,
      output: 15,
      cachedInput: 0.3,
      longContext: { above: 200_000, input: 6, output: 22.5, cachedInput: 0.6 },
    });
    // Absent or null: one price at any length (no field at all, as before).
    expect(read('{ input: 2, output: 12, longContext: null }')).toEqual({ input: 2, output: 12, cachedInput: null });
    expect(() => parseConfig(model('{ input: 2, output: 12, longContext: { input: 4, output: 18 } }'))).toThrow(
      /price\.longContext\.above: must be an integer from 1 to 100000000/,
    );
    expect(() =>
      parseConfig(model('{ input: 2, output: 12, longContext: { above: 200000.5, input: 4, output: 18 } }')),
    ).toThrow(/longContext\.above: must be an integer/);
    expect(() => parseConfig(model('{ input: 2, output: 12, longContext: { above: 200000, input: 4 } }'))).toThrow(
      /longContext\.output: must be a number >= 0/,
    );
    expect(() =>
      parseConfig(model('{ input: 2, output: 12, longContext: { above: 200000, input: -4, output: 18 } }')),
    ).toThrow(/longContext\.input: must be a number >= 0/);
    expect(() =>
      parseConfig(model('{ input: 2, output: 12, longContext: { above: 200000, input: 4, output: 18, tokens: 1 } }')),
    ).toThrow(/longContext\.tokens: unknown field \(expected one of: above, input, output, cachedInput\)/);
    expect(() => parseConfig(model('{ input: 2, output: 12, longContext: 4 }'))).toThrow(
      /longContext: must be a mapping \{above, input, output, cachedInput\}/,
    );
  });

  test('the demo prices its long-context model (gemini-3.1-pro-preview) over 200,000 input tokens', () => {
    const demo = parseConfig(DEMO);
    expect(demo.groups.get('basic')!.models.get('gemini-3.1-pro-preview')!.price!.longContext).toEqual({
      above: 200_000,
      input: 4,
      output: 18,
      cachedInput: null,
    });
  });

  test('refuses a NaN or infinite key balance (any number read from any store)', () => {
    const key = (balance: string) =>
      `groups:\n  g:\n    models: [m]\nkeys:\n  - id: k\n    sha256: ${'a'.repeat(64)}\n    group: g\n    balance: ${balance}\n`;
    expect(() => parseConfig(key('.nan'))).toThrow(/keys\[0\]\.balance: must be a number/);
    expect(() => parseConfig(key('.inf'))).toThrow(/keys\[0\]\.balance: must be a number/);
  });

  test('reads prices of audio and image tokens, and refuses one no text price can carry', () => {
    const cfg = (price: string) => `groups:\n  g:\n    models:\n      - name: m\n        price: ${price}\n`;
    const loaded = parseConfig(cfg('{ input: 0.3, output: 2.5, audioInput: 1, imageOutput: 30 }'));
    expect(loaded.groups.get('g')!.models.get('m')!.price).toEqual({
      input: 0.3,
      output: 2.5,
      cachedInput: null,
      audioInput: 1,
      imageOutput: 30,
    });
    expect(() => parseConfig(cfg('{ input: 0, output: 0, audioInput: 1 }'))).toThrow(
      /audio or image tokens needs an input or output price above 0/,
    );
    expect(() => parseConfig(cfg('{ input: 1, output: 1, audioInput: -1 }'))).toThrow(
      /audioInput: must be a number >= 0/,
    );
    expect(parseConfig('meter: { modalities: allow }').meter.modalities).toBe('allow');
  });

  test('defaults the meter to on, soft, streams without usage estimated', () => {
    expect(parseConfig('').meter).toEqual({
      enabled: true,
      mode: 'soft',
      unmeteredStreams: 'estimate',
      hostedTools: 'deny',
      maxHostedToolCalls: 10,
      serviceTiers: 'deny',
      modalities: 'deny',
      maxOutputTokens: 32768,
      referencedInputTokens: 200_000,
      reasoningModels: [
        'o1*',
        'o3*',
        'o4*',
        'gpt-5*',
        'gpt-6*',
        'gpt-oss*',
        'codex*',
        'gemini-2.5*',
        'gemini-3*',
        'gemini-*latest',
        '*thinking*',
        '*reasoner*',
        'deepseek-r*',
        'qwq*',
        'qwen3*',
        'magistral*',
        'grok-3-mini*',
        'grok-4*',
      ],
      usageCeiling: { inputTokens: 10_000_000, outputTokens: 1_000_000 },
      leases: true,
      reservationSeconds: 900,
      drainSeconds: 25,
    });
    // `allow`, the older name of estimate, is still read.
    expect(parseConfig('meter: { unmeteredStreams: allow }').meter.unmeteredStreams).toBe('allow');
    expect(() => parseConfig('meter: { mode: hard }')).toThrow(/meter\.mode: must be soft or strict/);
    expect(parseConfig('meter: { hostedTools: allow }').meter.hostedTools).toBe('allow');
    expect(() => parseConfig('meter: { hostedTools: maybe }')).toThrow(/meter\.hostedTools: must be deny or allow/);
    expect(parseConfig('meter: { serviceTiers: allow }').meter.serviceTiers).toBe('allow');
    expect(() => parseConfig('meter: { serviceTiers: sometimes }')).toThrow(
      /meter\.serviceTiers: must be deny or allow/,
    );
    expect(parseConfig('meter: { reasoningModels: [] }').meter.reasoningModels).toEqual([]);
    expect(() => parseConfig('meter: { reasoningModels: [1] }')).toThrow(/meter\.reasoningModels/);
  });
});

describe('parseConfig on names JavaScript reserves', () => {
  test.each(['__proto__', 'constructor', 'prototype'])(
    "refuses a key's modelBudgets naming %s, with its path, instead of dropping it",
    (name) => {
      const text = DEMO.replace(
        '    group: basic\n    balance: 12.5\n',
        `    group: basic\n    balance: 12.5\n    modelBudgets:\n      ${name}: { amount: 1, period: day }\n      gpt-4o-mini: { amount: 2, period: day }\n`,
      );
      expect(text).toContain(`      ${name}: { amount: 1`);
      expect(problemsOf(text)).toEqual([
        `keys[0].modelBudgets: a model cannot be named ${name} (JavaScript reserves the name); rename it`,
      ]);
    },
  );

  test.each(['__proto__', 'constructor', 'prototype'])('refuses a group named %s', (name) => {
    const text = DEMO.replace(/\ngroups:\n/, `\ngroups:\n  ${name}:\n    models: [gpt-4o-mini]\n`);
    expect(problemsOf(text)).toContain(
      `groups: a group cannot be named ${name} (JavaScript reserves the name); rename it`,
    );
  });

  test('the same budgets under other model names load', () => {
    const text = DEMO.replace(
      '    group: basic\n    balance: 12.5\n',
      '    group: basic\n    balance: 12.5\n    modelBudgets:\n      gpt-4o-mini: { amount: 2, period: day }\n',
    );
    expect(parseConfig(text).keys[0].modelBudgets).toEqual({
      'gpt-4o-mini': { amount: 2, period: 'day', timeZone: 'UTC' },
    });
  });
});

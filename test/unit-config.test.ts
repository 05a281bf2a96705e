/**
 * parseConfig (read once, every problem listed with its path in one ConfigError, then frozen) and
 * reloadConfig (a valid file swaps in; an invalid one keeps the old config and logs every problem).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { ConfigError, parseConfig, type Config } from '../src/config/load';
import { reloadConfig } from '../src/config/watch';
import { LogSink } from './support/service-harness';

const DEMO_PATH = join(__dirname, '..', 'envoy', 'modelgate.yaml');
const DEMO = readFileSync(DEMO_PATH, 'utf8');
const SHA_A = 'a'.repeat(64);
const SHA_B = 'b'.repeat(64);
const SECRET = 'upstream-secret-value-9f8e7d6c5b4a';

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
    expect(basic.models.get('gpt-4o-mini')).toEqual({ name: 'gpt-4o-mini', protocols: null, available: true });
    expect(basic.models.get('text-embedding-3-small')).toEqual({ name: 'text-embedding-3-small', protocols: ['embeddings'], available: true });
    expect(basic.models.get('gemini-2.0-flash')).toEqual({ name: 'gemini-2.0-flash', protocols: ['generative'], available: false });
    expect(config.groups.get('pro')!.models.get('o3')!.protocols).toEqual(['chat', 'responses']);
    expect(config.groups.get('paused')).toMatchObject({ available: false });
  });

  test('reads the six demo keys with balance, disabled and expiresAt', () => {
    const byId = Object.fromEntries(config.keys.map((k) => [k.id, k]));
    expect(Object.keys(byId)).toEqual(['alice', 'bob', 'carol', 'dave', 'erin', 'frank']);
    expect(byId.alice).toEqual({ id: 'alice', sha256: '4787fb0e1aae0693be94be74ad11456fbd0771f21f84d8153cbee4f7b893af4c', group: 'basic', balance: 12.5, disabled: false, expiresAt: null });
    expect(byId.bob.balance).toBeNull();
    expect(byId.carol.balance).toBe(0);
    expect(byId.dave.disabled).toBe(true);
    expect(byId.erin.expiresAt).toBe(Date.UTC(2025, 0, 1));
    expect(byId.frank.group).toBe('paused');
  });

  test('states the same settings as the defaults of an empty file', () => {
    const empty = parseConfig('');
    for (const section of ['routes', 'log', 'cache', 'grpc', 'upstream', 'store'] as const) expect(config[section]).toEqual(empty[section]);
  });
});

describe('parseConfig defaults', () => {
  test.each([['an empty file', ''], ['an empty mapping', '{}'], ['a comment only', '# nothing\n'], ['null sections', 'routes:\nlog:\ncache:\ngrpc:\nupstream:\nstore:\ngroups:\nkeys:\n']])('fills every default for %s', (_name, text) => {
    const c = parseConfig(text);
    expect(c.routes).toEqual({
      altPrefix: '/alt',
      bearerHeaders: ['authorization', 'x-api-key'],
      vendorHeaders: ['x-vendor-api-key', 'x-goog-api-key'],
      queryKeyParams: ['key', 'api_key', 'apikey', 'api-key', 'access_token', 'x-api-key', 'x-goog-api-key', 'x-vendor-api-key'],
      maxJsonDepth: 256,
    });
    expect(c.log).toEqual({ level: 'info', allows: true });
    expect(c.cache).toEqual({ maxEntries: 100_000, maxNotFound: 20_000, ttlMs: 5000, staleMs: 300_000 });
    expect(c.grpc).toEqual({ maxReceiveMessageBytes: 40 * 1024 * 1024 });
    expect(c.upstream).toEqual({ credentials: {} });
    expect(c.store).toEqual({ kind: 'file' });
    expect(c.groups.size).toBe(0);
    expect(c.keys).toEqual([]);
  });

  test('lowercases configured header and query parameter names', () => {
    const c = parseConfig('routes: { bearerHeaders: [Authorization, X-My-Key], vendorHeaders: [X-Vendor], queryKeyParams: [Key, TOKEN] }');
    expect(c.routes.bearerHeaders).toEqual(['authorization', 'x-my-key']);
    expect(c.routes.vendorHeaders).toEqual(['x-vendor']);
    expect(c.routes.queryKeyParams).toEqual(['key', 'token']);
  });

  test('converts cache seconds to milliseconds', () => {
    expect(parseConfig('cache: { ttlSeconds: 0, staleSeconds: 60, maxEntries: 10 }').cache).toEqual({ maxEntries: 10, maxNotFound: 20_000, ttlMs: 0, staleMs: 60_000 });
  });

  test('reads a postgres store URL', () => {
    expect(parseConfig('store: postgres://u:p@db/modelgate').store).toEqual({ kind: 'postgres', url: 'postgres://u:p@db/modelgate' });
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
    const c = parseConfig(`groups: { g: { models: [m] } }\nkeys: [{ id: k, sha256: ${SHA_A}, group: g, expiresAt: "${text}" }]`);
    expect(c.keys[0].expiresAt).toBe(expected);
  });
});

describe('parseConfig upstream credentials', () => {
  const text = [
    'upstream:',
    '  credentials:',
    '    chat: { header: Authorization, prefix: "Bearer ", env: UP_OPENAI }',
    '    messages: { header: x-api-key, env: UP_ANTHROPIC }',
  ].join('\n');

  test('resolves each credential from the env it is given, with its prefix', () => {
    const c = parseConfig(text, { UP_OPENAI: 'sk-upstream-1', UP_ANTHROPIC: 'sk-ant-upstream-2' });
    expect(c.upstream.credentials).toEqual({
      chat: { header: 'authorization', value: 'Bearer sk-upstream-1' },
      messages: { header: 'x-api-key', value: 'sk-ant-upstream-2' },
    });
  });

  test('never reads process.env itself', () => {
    process.env.UP_OPENAI = 'from-process-env';
    process.env.UP_ANTHROPIC = 'from-process-env';
    try {
      expect(problemsOf(text, {})).toEqual([
        'upstream.credentials.chat.env: environment variable UP_OPENAI is not set or empty',
        'upstream.credentials.messages.env: environment variable UP_ANTHROPIC is not set or empty',
      ]);
    } finally {
      delete process.env.UP_OPENAI;
      delete process.env.UP_ANTHROPIC;
    }
  });

  test('treats an empty variable as missing', () => {
    expect(problemsOf(text, { UP_OPENAI: '', UP_ANTHROPIC: 'x' })).toEqual(['upstream.credentials.chat.env: environment variable UP_OPENAI is not set or empty']);
  });
});

/** A file with one or more problems at every level; each row names a problem the error must list. */
const BROKEN = `
surprise: 1
routes:
  altPrefix: alt/
  bearerHeaders: [authorization, "bad header"]
  vendorHeaders: []
  queryKeyParams: key
  maxJsonDepth: 1
  colour: blue
log:
  level: loud
  allows: "yes"
  extra: 1
cache:
  maxEntries: -1
  ttlSeconds: "5"
  staleSeconds: 1.5
  size: 3
grpc:
  maxReceiveMessageBytes: 10
  port: 1
upstream:
  credentials:
    chat: { header: authorization, prefix: "Bearer ", env: UP_CHAT }
    messages: { header: "x api key", env: UP_MESSAGES, extra: 1 }
    embeddings: { header: authorization, prefix: 7, env: "not a name" }
    telepathy: { header: x-mind, env: UP_MIND }
  timeout: 5
store: mysql://db
groups:
  basic:
    available: maybe
    colour: red
    models:
      - gpt-4o
      - gpt-4o
      - name: o3
        protocols: [chat, smoke]
        colour: red
      - name: ""
      - name: x
        protocols: []
      - 5
      - ""
  broken: 5
  nomodels: { available: true }
keys:
  - id: a
    sha256: ${SHA_A}
    group: basic
  - id: a
    sha256: ${SHA_A.toUpperCase()}
    group: nosuch
  - id: "bad id!"
    sha256: xyz
    group: basic
    expiresAt: someday
    balance: lots
    disabled: 1
    owner: me
  - id: c
    sha256: ${SHA_B}
    group: basic
    expiresAt: "1"
  - id: d
    sha256: ${'c'.repeat(64)}
    group: basic
    expiresAt: "2027-02-30"
  - id: e
    group: basic
  - just a string
`;

const EXPECTED: readonly [string, RegExp][] = [
  ['$.surprise', /unknown field/],
  ['routes.altPrefix', /one path segment/],
  ['routes.bearerHeaders[1]', /HTTP header name/],
  ['routes.vendorHeaders', /non-empty list/],
  ['routes.queryKeyParams', /list of query parameter names/],
  ['routes.maxJsonDepth', /integer from 2/],
  ['routes.colour', /unknown field/],
  ['log.level', /must be one of/],
  ['log.allows', /true or false/],
  ['log.extra', /unknown field/],
  ['cache.maxEntries', /integer/],
  ['cache.ttlSeconds', /integer/],
  ['cache.staleSeconds', /integer/],
  ['cache.size', /unknown field/],
  ['grpc.maxReceiveMessageBytes', /integer/],
  ['grpc.port', /unknown field/],
  ['upstream.timeout', /unknown field/],
  ['upstream.credentials.chat.env', /UP_CHAT is not set/],
  ['upstream.credentials.messages.header', /HTTP header name/],
  ['upstream.credentials.messages.extra', /unknown field/],
  ['upstream.credentials.embeddings.prefix', /must be a string/],
  ['upstream.credentials.embeddings.env', /environment variable name/],
  ['upstream.credentials.telepathy', /unknown field \(expected one of: chat, responses, embeddings, messages, generative\)/],
  ['store', /"file" or a postgres/],
  ['groups.basic.available', /true or false/],
  ['groups.basic.colour', /unknown field/],
  ['groups.basic.models[1]', /duplicate model "gpt-4o"/],
  ['groups.basic.models[2].protocols[1]', /must be one of/],
  ['groups.basic.models[2].colour', /unknown field/],
  ['groups.basic.models[3].name', /non-empty string/],
  ['groups.basic.models[4].protocols', /non-empty list/],
  ['groups.basic.models[5]', /model name or/],
  ['groups.basic.models[6]', /must be a model name: printable ASCII/],
  ['groups.broken', /mapping/],
  ['groups.nomodels.models', /must be a list/],
  ['keys[1].id', /duplicate id "a"/],
  ['keys[1].sha256', /duplicate sha256/],
  ['keys[1].group', /unknown group "nosuch"/],
  ['keys[2].id', /an id of 1-128 characters/],
  ['keys[2].sha256', /64-hex-digit/],
  ['keys[2].expiresAt', /ISO 8601/],
  ['keys[2].balance', /must be a number/],
  ['keys[2].disabled', /true or false/],
  ['keys[2].owner', /unknown field/],
  ['keys[3].expiresAt', /ISO 8601/],
  ['keys[4].expiresAt', /ISO 8601/],
  ['keys[5].sha256', /non-empty string/],
  ['keys[6]', /mapping/],
];

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

  test.each([['a list', '- a\n- b\n'], ['a scalar', 'hello\n']])('reports a top level that is %s', (_name, text) => {
    expect(problemsOf(text)).toEqual(['$: must be a mapping']);
  });

  test('rejects an altPrefix equal to a version prefix', () => {
    expect(problemsOf('routes: { altPrefix: /v1beta }')).toEqual(['routes.altPrefix: must differ from /v1 and /v1beta']);
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
    expect(() => { (config.routes as { altPrefix: string }).altPrefix = '/x'; }).toThrow(TypeError);
    expect(() => { (config.keys as KeyList).push(config.keys[0]); }).toThrow(TypeError);
    expect(() => { (config.keys[0] as { balance: number }).balance = 1e9; }).toThrow(TypeError);
  });

  test.each([
    ['set a group', () => (config.groups as Map<string, unknown>).set('evil', group)],
    ['delete a group', () => (config.groups as Map<string, unknown>).delete('basic')],
    ['clear the groups', () => (config.groups as Map<string, unknown>).clear()],
    ['add a model to a group', () => (group.models as Map<string, unknown>).set('gpt-5', { name: 'gpt-5', protocols: null, available: true })],
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
    expect(config.groups.get('pro')!.models.size).toBe(7);
  });
});

type KeyList = Config['keys'][number][];

describe('reloadConfig', () => {
  let dir: string;
  let path: string;
  let lines: LogSink;
  let logger: pino.Logger;
  let current: Config;
  let applied: { next: Config; previous: Config }[];
  const apply = (next: Config, previous: Config): void => {
    applied.push({ next, previous });
    current = next;
  };
  const reload = (env: NodeJS.ProcessEnv = {}): boolean => reloadConfig(path, env, logger, apply, () => current);

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'modelgate-unit-config-'));
    path = join(dir, 'modelgate.yaml');
    writeFileSync(path, DEMO);
    current = parseConfig(DEMO);
    applied = [];
    lines = new LogSink();
    logger = pino({ level: 'trace' }, lines);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  test('applies a valid change and logs that it did', () => {
    const before = current;
    writeFileSync(path, DEMO.replace('  paused:\n', '  extra:\n    models: [gpt-4o]\n  paused:\n'));
    expect(reload()).toBe(true);
    expect(applied).toHaveLength(1);
    expect(applied[0].previous).toBe(before);
    expect(current.groups.get('extra')!.models.has('gpt-4o')).toBe(true);
    const info = lines.lines.filter((l) => l.level === 30);
    expect(info).toEqual([expect.objectContaining({ msg: 'config reloaded', file: path, groups: 4, keys: 6 })]);
    expect(lines.lines.filter((l) => (l.level as number) >= 40)).toEqual([]);
  });

  test('keeps the old config on an invalid file and logs every problem', () => {
    const before = current;
    writeFileSync(path, BROKEN);
    expect(reload({ UP_MESSAGES: SECRET, UP_MIND: SECRET })).toBe(false);
    expect(applied).toEqual([]);
    expect(current).toBe(before);
    const errors = lines.lines.filter((l) => l.level === 50);
    expect(errors).toHaveLength(1);
    expect(errors[0].msg).toMatch(/rejected; the previous config keeps serving/);
    expect(errors[0].file).toBe(path);
    const problems = errors[0].problems as string[];
    for (const [p] of EXPECTED) expect(problems.some((line) => line.startsWith(`${p}: `)), p).toBe(true);
    expect(lines.raw.join('\n')).not.toContain(SECRET);
  });

  test('keeps the old config when the file cannot be read', () => {
    rmSync(path);
    expect(reload()).toBe(false);
    expect(applied).toEqual([]);
    const errors = lines.lines.filter((l) => l.level === 50);
    expect(errors).toHaveLength(1);
    expect((errors[0].problems as string[])[0]).toMatch(/ENOENT/);
  });

  test('keeps the old config on a YAML syntax error and logs its line', () => {
    writeFileSync(path, 'routes:\n  altPrefix: /alt\n bad: 1\n');
    expect(reload()).toBe(false);
    expect((lines.lines.find((l) => l.level === 50)!.problems as string[])[0]).toMatch(/^line \d+: /);
  });

  test.each([
    ['cache', (t: string) => t.replace('ttlSeconds: 5', 'ttlSeconds: 7')],
    ['grpc', (t: string) => t.replace('maxReceiveMessageBytes: 41943040', 'maxReceiveMessageBytes: 2097152')],
    ['store', (t: string) => t.replace('# store: file', 'store: postgres://db/modelgate')],
  ])('warns that a change of %s takes effect only after a restart', (section, edit) => {
    const text = edit(DEMO);
    expect(text).not.toBe(DEMO);
    writeFileSync(path, text);
    expect(reload()).toBe(true);
    const warnings = lines.lines.filter((l) => l.level === 40);
    expect(warnings).toEqual([expect.objectContaining({ msg: 'config reload: these sections take effect only after a restart', sections: [section] })]);
    expect(applied).toHaveLength(1);
  });

  test('does not warn when only groups, keys, routes or log change', () => {
    writeFileSync(path, DEMO.replace('level: info', 'level: debug').replace('maxJsonDepth: 256', 'maxJsonDepth: 64').replace('balance: 12.5', 'balance: 1'));
    expect(reload()).toBe(true);
    expect(lines.lines.filter((l) => l.level === 40)).toEqual([]);
    expect(current.log.level).toBe('debug');
    expect(current.routes.maxJsonDepth).toBe(64);
  });

  test('applies the same file twice without a warning', () => {
    expect(reload()).toBe(true);
    expect(reload()).toBe(true);
    expect(applied).toHaveLength(2);
    expect(lines.lines.filter((l) => l.level === 40)).toEqual([]);
  });
});

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

/**
 * Every store command (keys, groups, balance, migrate) through runCli, as an operator would type
 * it, against a real PostgreSQL: human and --json output, exit codes, one-line errors, and keys
 * shown only once.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main';
import { formatModelSpec, parseModelSpec } from '../../src/cli/groups';
import { hashKey, isCompleteKey } from '../../src/contract/key-format';
import { SCHEMA_VERSION } from '../../src/store/pg/schema';
import { openPgStore } from '../../src/store/pg/store';
import type { AdminDb } from '../../src/store/pg/admin';
import { openPool, startPgServer } from '../support/pg-server';
import type { PgServer } from '../support/pg-server';
import { adminStatePath } from '../../src/admin/file-backend';
import { DEMO_CONFIG, reasonOf, startHarness, tempConfig } from '../support/service-harness';

let server: PgServer;
let sql: AdminDb;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(argv: string[], env: NodeJS.ProcessEnv = { DATABASE_URL: server.url }): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s), env });
  return { code, stdout, stderr };
}

/** Runs a command expected to succeed and to print no key. */
async function ok(...argv: string[]): Promise<string> {
  const r = await run(argv);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  expect(r.stdout).not.toContain('sk-mg-');
  return r.stdout;
}

async function json<T = Record<string, unknown>>(...argv: string[]): Promise<T> {
  return JSON.parse(await ok(...argv, '--json')) as T;
}

/** The key printed by keys new/rotate: on a line of its own. */
function printedKey(stdout: string): string {
  const lines = stdout.split('\n').filter((l) => l.startsWith('sk-mg-'));
  expect(lines).toHaveLength(1);
  return lines[0];
}

beforeAll(async () => {
  server = await startPgServer();
  sql = openPool(server.url, 2);
});

afterAll(async () => {
  await sql?.end();
  await server?.close();
});

describe('without a store (file mode)', () => {
  it('with --yaml prints a fresh key once and the YAML entry to paste into keys:, and writes nothing', async () => {
    const r = await run(
      ['keys', 'new', '--group', 'basic', '--id', 'zoe', '--balance', '12.5', '--expires', '2027-01-01', '--yaml'],
      {},
    );
    expect(r.code).toBe(0);
    const key = printedKey(r.stdout);
    expect(isCompleteKey(key)).toBe(true);
    expect(r.stdout).toContain('file mode: nothing was written');
    const yaml = r.stdout.slice(r.stdout.indexOf('  - id: zoe'));
    expect(YAML.parse(`keys:\n${yaml}`)).toEqual({
      keys: [{ id: 'zoe', sha256: hashKey(key), group: 'basic', balance: 12.5, expiresAt: '2027-01-01T00:00:00Z' }],
    });
  });

  it('prints one JSON document with the key, the entry and the YAML with --json', async () => {
    const r = await run(['keys', 'new', '--group', 'pro', '--json', '--yaml'], { DATABASE_URL: '' });
    const doc = JSON.parse(r.stdout);
    expect(doc).toMatchObject({ mode: 'file', entry: { group: 'pro', sha256: hashKey(doc.key) } });
    expect(doc.entry.id).toMatch(/^key-[0-9a-f]{8}$/);
    expect(doc.entry).not.toHaveProperty('balance');
    expect(YAML.parse(doc.yaml)).toEqual([doc.entry]);
  });

  it("without --yaml keeps the key in modelgate's own state beside the config, through the admin API's backend: served by a running modelgate, audited as cli", async () => {
    const configPath = tempConfig(readFileSync(DEMO_CONFIG, 'utf8'));
    const h = await startHarness({ configPath });
    try {
      const r = await run(
        ['keys', 'new', '--group', 'basic', '--id', 'zoe', '--balance', '3', '--config', configPath, '--json'],
        {},
      );
      expect(r.code, r.stderr).toBe(0);
      const doc = JSON.parse(r.stdout) as {
        mode: string;
        key: string;
        where: string;
        record: { id: string; balance: number; source: string };
      };
      expect(doc).toMatchObject({
        mode: 'file',
        where: adminStatePath(configPath),
        record: { id: 'zoe', group: 'basic', balance: 3, source: 'api' },
      });
      expect(readFileSync(configPath, 'utf8')).not.toContain('zoe');
      const state = JSON.parse(readFileSync(adminStatePath(configPath), 'utf8')) as {
        keys: { id: string; sha256: string }[];
        audit: { actor: string; action: string; target: string }[];
      };
      expect(state.keys).toEqual([expect.objectContaining({ id: 'zoe', sha256: hashKey(doc.key) })]);
      expect(state.audit.at(-1)).toMatchObject({ actor: 'cli', action: 'key.create', target: 'zoe' });
      expect(JSON.stringify(state)).not.toContain(doc.key);
      // The running service reads the file within a second (no restart).
      const chat = () =>
        h.check({
          method: 'POST',
          path: '/v1/chat/completions',
          headers: [['authorization', `Bearer ${doc.key}`]],
          body: '{"model":"gpt-4o-mini"}',
        });
      const end = Date.now() + 5000;
      while (reasonOf(await chat()) !== 'allowed' && Date.now() < end) await new Promise((res) => setTimeout(res, 50));
      expect(reasonOf(await chat())).toBe('allowed');
      // A key of the YAML, an id taken, a group the config lacks: refused, naming why.
      expect(await run(['keys', 'new', '--group', 'basic', '--id', 'alice', '--config', configPath], {})).toMatchObject(
        { code: 1, stderr: expect.stringContaining(`key "alice" is defined in ${configPath}`) },
      );
      expect(await run(['keys', 'new', '--group', 'basic', '--id', 'zoe', '--config', configPath], {})).toMatchObject({
        code: 1,
        stderr: expect.stringContaining('a key with id "zoe" already exists'),
      });
      expect(await run(['keys', 'new', '--group', 'nope', '--config', configPath], {})).toMatchObject({
        code: 1,
        stderr: expect.stringContaining('no group named "nope"'),
      });
    } finally {
      await h.close();
    }
  });

  it("keys model-budget on the file store sets, shows and removes a budget per model through the admin API's backend: held by a running modelgate, audited as cli", async () => {
    const configPath = tempConfig(readFileSync(DEMO_CONFIG, 'utf8').replace('  mode: soft ', '  mode: strict '));
    const h = await startHarness({ configPath });
    try {
      const made = await run(
        ['keys', 'new', '--group', 'basic', '--id', 'mb', '--balance', '3', '--config', configPath, '--json'],
        {},
      );
      expect(made.code, made.stderr).toBe(0);
      const key = (JSON.parse(made.stdout) as { key: string }).key;
      const chat = async () =>
        reasonOf(
          await h.check({
            method: 'POST',
            path: '/v1/chat/completions',
            headers: [['authorization', `Bearer ${key}`]],
            body: '{"model":"gpt-4o-mini","max_tokens":100}',
          }),
        );
      const until = async (reason: string) => {
        const end = Date.now() + 5000;
        while ((await chat()) !== reason && Date.now() < end) await new Promise((res) => setTimeout(res, 50));
        expect(await chat()).toBe(reason);
      };
      await until('allowed');
      const set = await run(
        [
          'keys',
          'model-budget',
          'mb',
          'gpt-4o-mini',
          '--amount',
          '0.00001',
          '--period',
          'day',
          '--config',
          configPath,
          '--json',
        ],
        {},
      );
      expect(set.code, set.stderr).toBe(0);
      expect(JSON.parse(set.stdout)).toEqual({
        id: 'mb',
        modelBudgets: { 'gpt-4o-mini': { amount: 0.00001, period: 'day', timeZone: 'UTC' } },
        where: adminStatePath(configPath),
      });
      // The running service reads the state file within a second.
      await until('model_budget_exhausted');
      const shown = await run(['keys', 'model-budget', 'mb', '--config', configPath], {});
      expect(shown.stdout).toBe('Budgets per model of key mb:\n  gpt-4o-mini: 0.00001 per day (UTC)\n');
      const removed = await run(['keys', 'model-budget', 'mb', 'gpt-4o-mini', '--remove', '--config', configPath], {});
      expect(removed).toMatchObject({ code: 0, stdout: 'Key mb has no budgets per model.\n' });
      await until('allowed');
      const state = JSON.parse(readFileSync(adminStatePath(configPath), 'utf8')) as {
        audit: { actor: string; action: string; target: string }[];
      };
      expect(state.audit.slice(-2).map((a) => [a.actor, a.action, a.target])).toEqual([
        ['cli', 'key.update', 'mb'],
        ['cli', 'key.update', 'mb'],
      ]);
      expect(readFileSync(configPath, 'utf8')).not.toContain('model_budgets');
      // A key of the YAML, a model its group lacks, an unknown key: refused, naming why.
      expect(
        await run(
          ['keys', 'model-budget', 'alice', 'gpt-4o-mini', '--amount', '1', '--period', 'day', '--config', configPath],
          {},
        ),
      ).toMatchObject({ code: 1, stderr: expect.stringContaining(`key "alice" is defined in ${configPath}`) });
      expect(
        await run(
          ['keys', 'model-budget', 'mb', 'no-such-model', '--amount', '1', '--period', 'day', '--config', configPath],
          {},
        ),
      ).toMatchObject({ code: 1, stderr: expect.stringContaining('has no model "no-such-model"') });
      expect(await run(['keys', 'model-budget', 'nobody', '--config', configPath], {})).toMatchObject({
        code: 1,
        stderr: expect.stringContaining('no key with id "nobody"'),
      });
    } finally {
      await h.close();
    }
  });

  it('refuses commands that need a database with a usage error', async () => {
    expect(await run(['keys', 'list'], {})).toMatchObject({
      code: 2,
      stdout: '',
      stderr: expect.stringMatching(/^modelgate: `keys list` needs a PostgreSQL store.*\n$/),
    });
  });
});

const NO_PRICE = 'no price: metered, costs nothing';

describe('with PostgreSQL', () => {
  it('migrates a fresh database once', async () => {
    expect(await ok('migrate')).toBe(`Schema migrated from version 0 to ${SCHEMA_VERSION}.\n`);
    expect(await json('migrate')).toEqual({ from: SCHEMA_VERSION, to: SCHEMA_VERSION, applied: [] });
    expect(await ok('migrate')).toBe(`Schema already at version ${SCHEMA_VERSION}; nothing to do.\n`);
  });

  it('creates, updates and lists groups; --model replaces the list, other flags leave it alone', async () => {
    expect(
      await ok(
        'groups',
        'set',
        'basic',
        '--model',
        'gpt-4o-mini',
        '--model',
        'text-embedding-3-small:embeddings',
        '--model',
        'gemini-2.0-flash:generative:unavailable',
      ),
    ).toBe(
      'Created group basic (available): gpt-4o-mini text-embedding-3-small:embeddings gemini-2.0-flash:generative:unavailable.\n',
    );
    expect(await ok('groups', 'set', 'basic', '--available', 'false')).toBe(
      'Updated group basic (unavailable): gpt-4o-mini text-embedding-3-small:embeddings gemini-2.0-flash:generative:unavailable.\n',
    );
    const pro = await json<{ created: boolean; group: unknown }>(
      'groups',
      'set',
      'pro',
      '--model',
      'o3:chat,responses',
      '--model',
      'llama3:8b',
    );
    expect(pro).toEqual({
      created: true,
      group: {
        name: 'pro',
        available: true,
        keys: 0,
        models: [
          { name: 'o3', protocols: ['chat', 'responses'], available: true, price: null, maxOutputTokens: null },
          { name: 'llama3:8b', protocols: null, available: true, price: null, maxOutputTokens: null },
        ],
      },
    });
    expect(await ok('groups', 'set', 'basic', '--available', 'true', '--model', 'gpt-4o-mini')).toBe(
      'Updated group basic (available): gpt-4o-mini.\n',
    );
    await ok('groups', 'set', 'empty', '--model', 'x');
    expect(await ok('groups', 'set', 'empty', '--no-models')).toBe('Updated group empty (available): no models.\n');

    expect(await ok('groups', 'list')).toBe(
      `basic (available, 0 keys)\n  gpt-4o-mini  any protocol  available  ${NO_PRICE}\n\nempty (available, 0 keys)\n  (no models)\n\n` +
        `pro (available, 0 keys)\n  o3         chat,responses  available  ${NO_PRICE}\n  llama3:8b  any protocol    available  ${NO_PRICE}\n`,
    );
    const listed = await json<{ groups: { name: string }[] }>('groups', 'list');
    expect(listed.groups.map((g) => g.name)).toEqual(['basic', 'empty', 'pro']);
    expect(await ok('groups', 'show', 'pro')).toBe(
      `pro (available, 0 keys)\n  o3         chat,responses  available  ${NO_PRICE}\n  llama3:8b  any protocol    available  ${NO_PRICE}\n`,
    );
  });

  it('prices a model per million tokens, keeps the price when the model list is replaced, and removes it with --none', async () => {
    expect(await ok('groups', 'price', 'pro', 'o3', '--input', '2', '--output', '8', '--cached-input', '0.5')).toBe(
      'pro o3: 2 in / 8 out / 0.5 cached per 1M tokens.\n',
    );
    expect(await ok('groups', 'set', 'pro', '--model', 'o3:chat,responses', '--model', 'llama3:8b')).toBe(
      'Updated group pro (available): o3:chat,responses llama3:8b.\n',
    );
    expect(await ok('groups', 'show', 'pro')).toBe(
      `pro (available, 0 keys)\n  o3         chat,responses  available  2 in / 8 out / 0.5 cached per 1M tokens\n  llama3:8b  any protocol    available  ${NO_PRICE}\n`,
    );
    const shown = await json<{ group: { models: unknown[] } }>('groups', 'show', 'pro');
    expect(shown.group.models[0]).toEqual({
      name: 'o3',
      protocols: ['chat', 'responses'],
      available: true,
      price: { input: 2, output: 8, cachedInput: 0.5 },
      maxOutputTokens: null,
    });
    const store = await openPgStore(server.url);
    try {
      expect((await store.findGroup('pro'))!.models.get('o3')!.price).toEqual({
        input: 2,
        output: 8,
        cachedInput: 0.5,
      });
    } finally {
      await store.close();
    }
    expect(await run(['groups', 'price', 'pro', 'o3', '--input', 'NaN', '--output', '1'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--input must be a decimal number >= 0'),
    });
    expect(await run(['groups', 'price', 'pro', 'nope', '--input', '1', '--output', '1'])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('group "pro" has no model "nope"'),
    });
    // Audio and image prices (migration 6), read back by the store.
    expect(
      await ok(
        'groups',
        'price',
        'pro',
        'o3',
        '--input',
        '2',
        '--output',
        '8',
        '--audio-input',
        '40',
        '--image-output',
        '30',
      ),
    ).toBe('pro o3: 2 in / 8 out / 40 audio in / 30 image out per 1M tokens.\n');
    const priced = await openPgStore(server.url);
    try {
      expect((await priced.findGroup('pro'))!.models.get('o3')!.price).toEqual({
        input: 2,
        output: 8,
        cachedInput: null,
        audioInput: 40,
        imageOutput: 30,
      });
    } finally {
      await priced.close();
    }
    // Hosted tools per call (migration 9), read back by the store; a name it does not know, or a tool twice, is a usage
    // error.
    expect(
      await ok(
        'groups',
        'price',
        'pro',
        'o3',
        '--input',
        '2',
        '--output',
        '8',
        '--tool',
        'web_search=0.01',
        '--tool',
        'file_search=0.0025',
      ),
    ).toBe('pro o3: 2 in / 8 out per 1M tokens; web_search 0.01, file_search 0.0025 per call.\n');
    const tooled = await openPgStore(server.url);
    try {
      expect((await tooled.findGroup('pro'))!.models.get('o3')!.price).toEqual({
        input: 2,
        output: 8,
        cachedInput: null,
        tools: { web_search: 0.01, file_search: 0.0025 },
      });
    } finally {
      await tooled.close();
    }
    expect(
      await run(['groups', 'price', 'pro', 'o3', '--input', '2', '--output', '8', '--tool', 'teleport=1']),
    ).toMatchObject({ code: 2, stderr: expect.stringContaining('--tool must be NAME=PRICE') });
    expect(
      await run([
        'groups',
        'price',
        'pro',
        'o3',
        '--input',
        '2',
        '--output',
        '8',
        '--tool',
        'web_search=1',
        '--tool',
        'web_search=2',
      ]),
    ).toMatchObject({ code: 2, stderr: expect.stringContaining('given twice') });
    expect(
      await run(['groups', 'price', 'pro', 'o3', '--input', '2', '--output', '8', '--tool', 'web_search=-1']),
    ).toMatchObject({ code: 2, stderr: expect.stringContaining('must be a decimal number >= 0 (per call)') });
    expect(await ok('groups', 'price', 'pro', 'o3', '--none')).toBe(`pro o3: ${NO_PRICE}.\n`);
  });

  it("prices a model's long prompts (--long-context-*), shows and prints the price, and refuses one without its threshold or prices", async () => {
    const args = [
      'groups',
      'price',
      'pro',
      'o3',
      '--input',
      '2',
      '--output',
      '12',
      '--long-context-above',
      '200000',
      '--long-context-input',
      '4',
      '--long-context-output',
      '18',
    ];
    expect(await ok(...args, '--long-context-cached-input', '0.4')).toBe(
      'pro o3: 2 in / 12 out; over 200000 input tokens 4 in / 18 out / 0.4 cached per 1M tokens.\n',
    );
    const shown = await json<{ group: { models: { price: unknown }[] } }>('groups', 'show', 'pro');
    expect(shown.group.models[0].price).toEqual({
      input: 2,
      output: 12,
      cachedInput: null,
      longContext: { above: 200000, input: 4, output: 18, cachedInput: 0.4 },
    });
    expect(
      await run([
        'groups',
        'price',
        'pro',
        'o3',
        '--input',
        '2',
        '--output',
        '12',
        '--long-context-above',
        '200000',
        '--long-context-input',
        '4',
      ]),
    ).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('needs --long-context-above, --long-context-input and --long-context-output'),
    });
    expect(await run([...args.slice(0, 9), '0', ...args.slice(10)])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--long-context-above must be a whole number'),
    });
    expect(await run(['groups', 'price', 'pro', 'o3', '--none', '--long-context-above', '200000'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('give either --none or prices'),
    });
    // A price given without them has none.
    expect(await ok('groups', 'price', 'pro', 'o3', '--input', '2', '--output', '12')).toBe(
      'pro o3: 2 in / 12 out per 1M tokens.\n',
    );
    // Hosted tools per call (migration 9), read back by the store; a name it does not know, or a tool twice, is a usage
    // error.
    expect(
      await ok(
        'groups',
        'price',
        'pro',
        'o3',
        '--input',
        '2',
        '--output',
        '8',
        '--tool',
        'web_search=0.01',
        '--tool',
        'file_search=0.0025',
      ),
    ).toBe('pro o3: 2 in / 8 out per 1M tokens; web_search 0.01, file_search 0.0025 per call.\n');
    const tooled = await openPgStore(server.url);
    try {
      expect((await tooled.findGroup('pro'))!.models.get('o3')!.price).toEqual({
        input: 2,
        output: 8,
        cachedInput: null,
        tools: { web_search: 0.01, file_search: 0.0025 },
      });
    } finally {
      await tooled.close();
    }
    expect(
      await run(['groups', 'price', 'pro', 'o3', '--input', '2', '--output', '8', '--tool', 'teleport=1']),
    ).toMatchObject({ code: 2, stderr: expect.stringContaining('--tool must be NAME=PRICE') });
    expect(
      await run([
        'groups',
        'price',
        'pro',
        'o3',
        '--input',
        '2',
        '--output',
        '8',
        '--tool',
        'web_search=1',
        '--tool',
        'web_search=2',
      ]),
    ).toMatchObject({ code: 2, stderr: expect.stringContaining('given twice') });
    expect(
      await run(['groups', 'price', 'pro', 'o3', '--input', '2', '--output', '8', '--tool', 'web_search=-1']),
    ).toMatchObject({ code: 2, stderr: expect.stringContaining('must be a decimal number >= 0 (per call)') });
    expect(await ok('groups', 'price', 'pro', 'o3', '--none')).toBe(`pro o3: ${NO_PRICE}.\n`);
  });

  it('issues a key that the store finds by its hash, printing the key once', async () => {
    const r = await run(['keys', 'new', '--group', 'basic', '--id', 'alice', '--balance', '12.5']);
    expect(r.code).toBe(0);
    const key = printedKey(r.stdout);
    expect(r.stdout).toBe(
      `Created key alice (group basic, balance 12.5, expires never).\nThe key is shown only this once; store it now:\n\n${key}\n`,
    );
    const store = await openPgStore(server.url);
    try {
      expect(await store.findKey(hashKey(key))).toMatchObject({ id: 'alice', group: 'basic', balance: 12.5 });
    } finally {
      await store.close();
    }
    const doc = JSON.parse(
      (await run(['keys', 'new', '--group', 'pro', '--id', 'bob', '--expires', '2030-06-01T12:00:00Z', '--json']))
        .stdout,
    );
    expect(doc).toMatchObject({
      mode: 'postgres',
      record: { id: 'bob', group: 'pro', balance: null, disabled: false, expiresAt: '2030-06-01T12:00:00Z' },
    });
    expect(doc.record.sha256).toBe(hashKey(doc.key));
  });

  it('sets, shows and removes rate limits of a group, a group model and a key; the store reads them; the table refuses nonsense', async () => {
    expect(await ok('groups', 'limits', 'basic', '--rpm', '60', '--tpm', '100000', '--in-flight', '4')).toBe(
      'Group basic: 60 rpm, 100,000 tpm, 4 in flight.\n',
    );
    expect(await ok('groups', 'limits', 'basic', '--model', 'gpt-4o-mini', '--rpm', '5')).toBe(
      'Group basic, model gpt-4o-mini: 5 rpm.\n',
    );
    expect(await run(['groups', 'limits', 'basic', '--model', 'gpt-4o-mini', '--in-flight', '2'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--in-flight is a limit of keys and groups'),
    });
    expect(await ok('keys', 'limits', 'alice', '--rpm', '3')).toBe(
      "Key alice (group basic): its own limits 3 rpm; its group's 60 rpm, 100,000 tpm, 4 in flight; in force 3 rpm, 100,000 tpm, 4 in flight.\n",
    );
    const store = await openPgStore(server.url);
    try {
      expect((await store.findKeyById('alice'))!.limits).toEqual({ rpm: 3 });
      const group = (await store.findGroup('basic'))!;
      expect(group.limits).toEqual({ rpm: 60, tpm: 100000, inFlight: 4 });
      expect(group.models.get('gpt-4o-mini')!.limits).toEqual({ rpm: 5 });
    } finally {
      await store.close();
    }
    expect(await ok('keys', 'limits', 'alice', '--rpm', 'none')).toContain('its own limits none;');
    expect(await run(['keys', 'limits', 'alice', '--rpm', '0'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--rpm must be a whole number from 1 to 4294967295, or none'),
    });
    expect(await run(['keys', 'limits', 'nobody', '--rpm', '1'])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('no key with id "nobody"'),
    });
    expect(await ok('groups', 'limits', 'basic', '--clear')).toBe('Group basic: none.\n');
    expect(await ok('groups', 'limits', 'basic', '--model', 'gpt-4o-mini', '--clear')).toBe(
      'Group basic, model gpt-4o-mini: none.\n',
    );
    // The table's own check, for writers other than this CLI.
    await expect(sql.query(`UPDATE modelgate.keys SET limits = '{"rpm": -1}' WHERE id = 'alice'`)).rejects.toThrow(
      /keys_limits_valid/,
    );
    await expect(
      sql.query(`UPDATE modelgate.group_models SET limits = '{"inFlight": 2}' WHERE group_name = 'basic'`),
    ).rejects.toThrow(/group_models_limits_valid/);
    await expect(sql.query(`UPDATE modelgate.groups SET limits = '{"rps": 2}' WHERE name = 'basic'`)).rejects.toThrow(
      /groups_limits_valid/,
    );
  });

  it('lists keys without ever showing them', async () => {
    const text = await ok('keys', 'list');
    // The CREATED column is now; everything else is exact.
    expect(text.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/gm, '<now>')).toBe(
      'ID     GROUP  BALANCE    STATE   EXPIRES               CREATED\n' +
        'alice  basic  12.5       active  -                     <now>\n' +
        'bob    pro    unlimited  active  2030-06-01T12:00:00Z  <now>\n',
    );
    const { keys } = await json<{ keys: { id: string }[] }>('keys', 'list', '--group', 'pro');
    expect(keys.map((k) => k.id)).toEqual(['bob']);
  });

  it('disables, enables, rotates and deletes a key', async () => {
    expect(await ok('keys', 'disable', 'bob')).toBe(
      'Disabled key bob (group pro, balance unlimited, expires 2030-06-01T12:00:00Z).\n',
    );
    expect(await json('keys', 'enable', 'bob')).toMatchObject({ record: { id: 'bob', disabled: false } });
    const { rows: before } = await sql.query("SELECT sha256 FROM modelgate.keys WHERE id = 'bob'");

    const r = await run(['keys', 'rotate', 'bob']);
    const key = printedKey(r.stdout);
    expect(r.stdout.split('\n')[0]).toBe(
      'Rotated key bob (group pro, balance unlimited, expires 2030-06-01T12:00:00Z); the old key no longer works.',
    );
    const { rows: after } = await sql.query("SELECT sha256, group_name FROM modelgate.keys WHERE id = 'bob'");
    expect(after).toEqual([{ sha256: hashKey(key), group_name: 'pro' }]);
    expect(after[0].sha256).not.toBe(before[0].sha256);
    const { rows: old } = await sql.query('SELECT 1 FROM modelgate.keys WHERE sha256 = $1', [before[0].sha256]);
    expect(old).toHaveLength(0);

    expect(await ok('keys', 'delete', 'bob')).toBe('Deleted key bob (group pro).\n');
    expect(await run(['keys', 'delete', 'bob'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'modelgate: no key with id "bob"\n',
    });
  });

  it('shows, sets, credits and debits balances, negative amounts included', async () => {
    expect(await ok('balance', 'show', 'alice')).toBe('alice: 12.5\n');
    expect(await ok('balance', 'add', 'alice', '-0.25')).toBe('alice: 12.25 (was 12.5)\n');
    expect(await ok('balance', 'add', 'alice', '10')).toBe('alice: 22.25 (was 12.25)\n');
    expect(await json('balance', 'add', 'alice', '-30')).toEqual({ id: 'alice', balance: -7.75, previous: 22.25 });
    expect(await ok('balance', 'set', 'alice', 'unlimited')).toBe('alice: unlimited\n');
    expect(await ok('balance', 'add', 'alice', '-1')).toBe(
      'alice: unlimited (unchanged: the key has no balance limit)\n',
    );
    expect(await json('balance', 'set', 'alice', '100')).toEqual({ id: 'alice', balance: 100 });
    expect(await json('balance', 'show', 'alice')).toEqual({ id: 'alice', balance: 100 });
  });

  it('applies 50 concurrent debits exactly, none lost', async () => {
    const runs = await Promise.all(Array.from({ length: 50 }, () => run(['balance', 'add', 'alice', '-1'])));
    expect(runs.every((r) => r.code === 0)).toBe(true);
    expect(await json('balance', 'show', 'alice')).toEqual({ id: 'alice', balance: 50 });
  });

  it('refuses to remove a group that keys still use, and removes it once they are gone', async () => {
    expect(await run(['groups', 'remove', 'basic'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'modelgate: group "basic" still has keys (alice); delete them first\n',
    });
    expect(await ok('groups', 'remove', 'empty')).toBe('Removed group empty.\n');
    expect(await json('groups', 'remove', 'pro')).toEqual({ removed: 'pro' });
    expect((await run(['groups', 'remove', 'pro'])).stderr).toBe('modelgate: no group named "pro"\n');
  });

  it('reports mistakes as one line on stderr: exit 2 for the command line (with where to get help), 1 for the operation', async () => {
    const usage = (command: string, message: string): string => `${message} (see 'modelgate ${command} --help')`;
    const cases: [string[], number, string][] = [
      [
        ['keys', 'new', '--group', 'nope', '--id', 'x'],
        1,
        'group "nope" does not exist; create it with `modelgate groups set nope`',
      ],
      [['keys', 'new', '--group', 'basic', '--id', 'alice'], 1, 'a key with id "alice" already exists'],
      [['balance', 'add', 'alice', 'ten'], 2, usage('balance add', 'amount "ten" is not a decimal number')],
      [
        ['balance', 'set', 'alice', '1e3'],
        2,
        usage('balance set', 'amount "1e3" is not a decimal number or "unlimited"'),
      ],
      [['balance', 'add', 'alice'], 2, usage('balance add', "missing required argument 'amount'")],
      [
        ['keys', 'new', '--group', 'basic', '--expires', 'tomorrow'],
        2,
        usage('keys new', '--expires "tomorrow" is not an ISO 8601 date such as 2026-12-31 or 2026-12-31T23:59:59Z'),
      ],
      [
        ['keys', 'new', '--group', 'basic', '--expires', '2027-02-30'],
        2,
        usage('keys new', '--expires "2027-02-30" is not an ISO 8601 date such as 2026-12-31 or 2026-12-31T23:59:59Z'),
      ],
      [
        ['keys', 'new', '--group', 'basic', '--id', ' alice'],
        2,
        usage('keys new', 'key id " alice" has leading or trailing spaces'),
      ],
      [['keys', 'new'], 2, usage('keys new', 'keys new needs --group G')],
      [
        ['keys', 'new', '--group', 'basic', '--id', 'a', '--id', 'b'],
        2,
        usage('keys new', 'option --id is given twice'),
      ],
      [['keys', 'list', '--bogus'], 2, usage('keys list', "unknown option '--bogus'")],
      [['groups', 'set', 'g', '--model', 'a', '--model', 'a'], 2, usage('groups set', 'model "a" is given twice')],
      [
        ['groups', 'set', 'g', '--available', 'yes'],
        2,
        usage('groups set', '--available must be true or false, not "yes"'),
      ],
      [['keys', 'frobnicate'], 2, usage('keys', "unknown command 'frobnicate'")],
    ];
    for (const [argv, code, message] of cases) {
      expect(await run(argv), argv.join(' ')).toEqual({ code, stdout: '', stderr: `modelgate: ${message}\n` });
    }
  });

  it('takes the store from --store first, then MODELGATE_STORE, then DATABASE_URL, and never prints its password', async () => {
    const dead = 'postgres://modelgate:hunter2@127.0.0.1:1/modelgate';
    const viaFlag = await run(['keys', 'list', '--store', dead]);
    expect(viaFlag.code).toBe(1);
    expect(viaFlag.stderr).toMatch(
      /^modelgate: cannot reach PostgreSQL at postgres:\/\/modelgate:\*\*\*@127\.0\.0\.1:1\/modelgate \(from --store\): .*ECONNREFUSED.*\n$/,
    );
    expect(viaFlag.stderr).not.toContain('hunter2');
    // A password in the query (libpq's ?password=, ?sslpassword=) is hidden too (docs/security.md).
    const inQuery = await run([
      'keys',
      'list',
      '--store',
      'postgres://modelgate@127.0.0.1:1/modelgate?sslmode=disable&password=hunter2&sslpassword=hunter3',
    ]);
    expect(inQuery.code).toBe(1);
    expect(inQuery.stderr).toMatch(
      /^modelgate: cannot reach PostgreSQL at postgres:\/\/modelgate@127\.0\.0\.1:1\/modelgate\?sslmode=disable&password=\*\*\*&sslpassword=\*\*\* \(from --store\): /,
    );
    expect(inQuery.stderr).not.toMatch(/hunter[23]/);
    expect((await run(['keys', 'list'], { MODELGATE_STORE: dead, DATABASE_URL: server.url })).code).toBe(1);
    expect((await run(['keys', 'list'], { MODELGATE_STORE: server.url, DATABASE_URL: dead })).code).toBe(0);
    expect((await run(['keys', 'list', '--store', 'file'])).code).toBe(2);
    expect(await run(['keys', 'list', '--store', 'mysql://u:pw@h/db'])).toMatchObject({
      code: 2,
      stderr: `modelgate: --store (mysql://u:***@h/db) is neither "file" nor a postgres:// URL (see 'modelgate keys list --help')\n`,
    });
  });

  it('prints usage on request', async () => {
    const help = await run(['help']);
    expect(help).toMatchObject({
      code: 0,
      stderr: '',
      stdout: expect.stringContaining('Usage: modelgate [options] [command]'),
    });
    for (const group of ['keys', 'groups', 'balance', 'migrate'])
      expect(help.stdout).toMatch(new RegExp(`^  ${group} `, 'm'));
    expect(await run(['help', 'balance'])).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('add [options] <id> <amount>'),
    });
    expect(await run(['keys', '--help'])).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('rotate [options] <id>'),
    });
    const add = await run(['balance', 'add', '--help']);
    expect(add).toMatchObject({ code: 0, stderr: '' });
    expect(add.stdout).toMatch(/^Usage: modelgate balance add \[options\] <id> <amount>\n/);
    expect(add.stdout).toContain('a negative amount is a debit');
  });
});

describe('the --model syntax', () => {
  it.each([
    ['gpt-4o', { name: 'gpt-4o', protocols: null, available: true }],
    ['o3:chat,responses', { name: 'o3', protocols: ['chat', 'responses'], available: true }],
    [
      'gemini-2.0-flash:generative:unavailable',
      { name: 'gemini-2.0-flash', protocols: ['generative'], available: false },
    ],
    ['old-model:unavailable', { name: 'old-model', protocols: null, available: false }],
    ['llama3:8b', { name: 'llama3:8b', protocols: null, available: true }],
    ['foo:chat:*', { name: 'foo:chat', protocols: null, available: true }],
  ])('reads %s and writes it back the same way', (text, spec) => {
    expect(parseModelSpec(text)).toEqual(spec);
    expect(parseModelSpec(formatModelSpec(parseModelSpec(text)))).toEqual(spec);
  });
});

describe('usage and a database of another application', () => {
  it('shows the usage ledger newest first with totals, filtered by key, group and time', async () => {
    await sql.query(`INSERT INTO modelgate.usage (request_id, time, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens, cost, priced, estimated, provisional) VALUES
      ('r1', '2026-01-01T10:00:00Z', 'alice', 'basic', 'gpt-4o-mini', 'chat', 100, 20, 10, 0.36, true, NULL, false),
      ('r2', '2026-01-02T10:00:00Z', 'alice', 'basic', 'gpt-4o', 'responses', 50, 5, 0, 0, false, 'incomplete', false),
      ('r3', '2026-01-03T10:00:00Z', 'bob', 'pro', 'o3', 'chat', 7, 3, 0, 0.1, true, 'no_report', true)`);
    expect(await ok('usage', '--key', 'alice')).toBe(
      'TIME                  KEY    GROUP  MODEL        PROTOCOL   INPUT  CACHED  OUTPUT  COST          USAGE\n' +
        '2026-01-02T10:00:00Z  alice  basic  gpt-4o       responses  50     0       5       0 (no price)  estimated (incomplete)\n' +
        '2026-01-01T10:00:00Z  alice  basic  gpt-4o-mini  chat       100    10      20      0.36          provider\n' +
        '2 responses: 150 input (10 cached), 25 output tokens; cost 0.36\n',
    );
    expect(await ok('usage', '--key', 'bob')).toContain('maximum (no_report, provisional)');
    const all = await json<{ usage: { requestId: string }[]; totals: { responses: number; cost: number } }>(
      'usage',
      '--since',
      '2026-01-02',
    );
    expect(all.usage.map((u) => u.requestId)).toEqual(['r3', 'r2']);
    expect(all.totals).toMatchObject({ responses: 2, cost: 0.1 });
    expect((await json<{ usage: unknown[] }>('usage', '--group', 'pro')).usage).toHaveLength(1);
    expect(await run(['usage', '--since', 'yesterday'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--since "yesterday" is not a date'),
    });
  });

  it("usage --config reads the config's postgres store: when no --store, MODELGATE_STORE or DATABASE_URL names one", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'modelgate-usage-'));
    try {
      const config = join(dir, 'gw.yaml');
      writeFileSync(config, `store: ${server.url}\n`);
      const r = await run(['usage', '--config', config, '--key', 'bob'], {});
      expect(r.stderr).toBe('');
      expect(r.stdout).toContain('maximum (no_report, provisional)');
      // --store file wins over the config's store: the (empty) state file beside the config.
      expect((await run(['usage', '--config', config, '--store', 'file', '--key', 'bob'], {})).stdout).toBe(
        'No usage.\n',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses to migrate into a database with tables of another application, naming the variable; migrate --allow-foreign-tables does it', async () => {
    const url = await server.createDatabase();
    const other = openPool(url, 1);
    try {
      await other.query('CREATE TABLE public.orders (id int)');
      const refused = await run(['keys', 'list'], { DATABASE_URL: url });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /^modelgate: PostgreSQL at postgres:\/\/.*\(from DATABASE_URL\): the database already holds tables of another application \(public\.orders\).*--allow-foreign-tables/,
      );
      expect((await run(['migrate'], { DATABASE_URL: url })).code).toBe(1);
      expect((await run(['migrate', '--allow-foreign-tables'], { DATABASE_URL: url })).stdout).toBe(
        `Schema migrated from version 0 to ${SCHEMA_VERSION}.\n`,
      );
      expect((await run(['keys', 'list'], { DATABASE_URL: url })).code).toBe(0);
    } finally {
      await other.end();
    }
  });
});

/**
 * One command line: every command and subcommand answers --help the same way (exit 0, a
 * `Usage: modelgate <command>` line), every usage error is one line on stderr naming what was
 * wrong and where to get help, with exit code 2, and `modelgate --version` prints the package's
 * version. The commands are walked from the program itself, so a new command is covered at once.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { cliProgram, commandsOf, runCli } from '../../src/cli/main';
import { commandPath } from '../../src/cli/errors';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(...argv: string[]): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s), env: {} });
  return { code, stdout, stderr };
}

const VERSION = (JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string })
  .version;
/** Every command's words after `modelgate` ('' is the program itself). */
const COMMANDS = commandsOf(cliProgram({ stdout: () => {}, stderr: () => {}, env: {}, exitCode: 0 })).map(commandPath);
const words = (path: string): string[] => (path === '' ? [] : path.split(' '));
const USAGE_LINE = (path: string, message: string): string =>
  `modelgate: ${message} (see 'modelgate ${path === '' ? '' : `${path} `}--help')\n`;

test('the walk covers every command group and subcommand', () => {
  expect(COMMANDS).toEqual([
    '',
    'up',
    'serve',
    'explain',
    'doctor',
    'envoy-config',
    'envoy-check',
    'adopt',
    'keys',
    'keys new',
    'keys list',
    'keys disable',
    'keys enable',
    'keys limits',
    'keys model-budget',
    'keys rotate',
    'keys delete',
    'groups',
    'groups set',
    'groups list',
    'groups show',
    'groups price',
    'groups limits',
    'groups remove',
    'balance',
    'balance show',
    'balance set',
    'balance add',
    'migrate',
    'usage',
    'denials',
    'admin-tokens',
    'admin-tokens new',
  ]);
});

describe.each(COMMANDS)('modelgate %s', (path) => {
  test('--help prints its usage and exits 0', async () => {
    const r = await run(...words(path), '--help');
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(new RegExp(`^Usage: modelgate ${path === '' ? '' : `${path} `}\\S`));
    expect(r.stdout).toContain('-h, --help');
  });

  test('-h is --help', async () => {
    expect(await run(...words(path), '-h')).toEqual(await run(...words(path), '--help'));
  });

  test('an unknown option is one line on stderr and exit code 2', async () => {
    expect(await run(...words(path), '--no-such-option')).toEqual({
      code: 2,
      stdout: '',
      stderr: USAGE_LINE(path, "unknown option '--no-such-option'"),
    });
  });
});

test.each(COMMANDS.filter((p) => p !== '' && !p.includes(' ')))(
  'modelgate help %s prints the same as --help',
  async (path) => {
    expect(await run('help', path)).toEqual(await run(path, '--help'));
  },
);

test('modelgate --version and -V print the package version', async () => {
  expect(await run('--version')).toEqual({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
  expect(await run('-V')).toEqual({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
});

test('modelgate alone prints its help on stdout', async () => {
  expect(await run()).toEqual(await run('--help'));
});

describe('usage errors: one line saying what was wrong and where to get help, exit code 2', () => {
  const dead = 'postgres://nobody@127.0.0.1:1/modelgate';
  test.each<[string[], string, string]>([
    [['frobnicate'], '', "unknown command 'frobnicate'"],
    [['keys'], 'keys', "'keys' needs a command: new, list, disable, enable, limits, model-budget, rotate, delete"],
    [['keys', 'lst'], 'keys', "unknown command 'lst'; did you mean list?"],
    [['serve', '--workers', '0'], 'serve', '--workers must be an integer from 1 to 64'],
    [['serve', '--workers', 'two'], 'serve', '--workers must be an integer from 1 to 64'],
    [['serve', '--workers'], 'serve', "option '--workers <n>' argument missing"],
    [['serve', '--grpc', 'a:1', '--grpc', 'b:2'], 'serve', 'option --grpc is given twice'],
    [
      ['serve', '--store', 'mysql://u:pw@h/db'],
      'serve',
      '--store (mysql://u:***@h/db) is neither "file" nor a postgres:// URL',
    ],
    [['explain'], 'explain', "missing required argument 'method'"],
    [
      ['explain', 'GET', '/v1/models', '{}', 'extra'],
      'explain',
      "too many arguments for 'explain'. Expected 3 arguments but got 4",
    ],
    [['explain', '-H', 'no colon', 'GET', '/v1/models'], 'explain', `-H wants 'Name: value', got "no colon"`],
    [
      ['envoy-check', 'a.yaml', 'b.yaml'],
      'envoy-check',
      "too many arguments for 'envoy-check'. Expected 1 argument but got 2",
    ],
    [['balance', 'add', 'alice', 'ten', '--store', dead], 'balance add', 'amount "ten" is not a decimal number'],
    [['balance', 'add', 'alice'], 'balance add', "missing required argument 'amount'"],
    [['keys', 'new'], 'keys new', 'keys new needs --group G'],
    [
      ['keys', 'list'],
      'keys list',
      '`keys list` needs a PostgreSQL store: pass --store postgres://... or set DATABASE_URL',
    ],
  ])('modelgate %j', async (argv, path, message) => {
    expect(await run(...argv)).toEqual({ code: 2, stdout: '', stderr: USAGE_LINE(path, message) });
  });
});

test('a negative amount is an argument, not an option (it reaches the store)', async () => {
  const r = await run('balance', 'add', 'alice', '-0.25', '--store', 'postgres://nobody@127.0.0.1:1/modelgate');
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(
    /^modelgate: cannot reach PostgreSQL at postgres:\/\/nobody@127\.0\.0\.1:1\/modelgate \(from --store\): .*\n$/,
  );
});

test('a failed operation is one line without the help hint, exit code 1', async () => {
  const r = await run('envoy-check', join(__dirname, 'no-such-envoy.yaml'));
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(/^modelgate: ENOENT: no such file or directory, open '.*no-such-envoy\.yaml'\n$/);
});

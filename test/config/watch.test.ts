/**
 * reloadConfig (config/watch.ts): a valid file swaps in; an invalid one keeps the old config and
 * logs every problem.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { parseConfig, type Config } from '../../src/config/load';
import { reloadConfig } from '../../src/config/watch';
import { BROKEN, EXPECTED, SECRET } from '../support/broken-config';
import { LogSink } from '../support/service-harness';

const DEMO_PATH = join(__dirname, '..', '..', 'envoy', 'modelgate.yaml');
const DEMO = readFileSync(DEMO_PATH, 'utf8');

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
    dir = mkdtempSync(join(tmpdir(), 'modelgate-config-watch-'));
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
    expect(info).toEqual([expect.objectContaining({ msg: 'config reloaded', file: path, groups: 4, keys: 8 })]);
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
    for (const [p] of EXPECTED)
      expect(
        problems.some((line) => line.startsWith(`${p}: `)),
        p,
      ).toBe(true);
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
    expect(warnings).toEqual([
      expect.objectContaining({
        msg: 'config reload: these sections take effect only after a restart',
        sections: [section],
      }),
    ]);
    expect(applied).toHaveLength(1);
  });

  test('does not warn when only groups, keys, routes or log change', () => {
    writeFileSync(
      path,
      DEMO.replace('level: info', 'level: debug')
        .replace('maxJsonDepth: 256', 'maxJsonDepth: 64')
        .replace('balance: 12.5', 'balance: 1'),
    );
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

/**
 * modelgate's config watcher (config/watch.ts) on a ConfigMap volume, as the kubelet updates one
 * (kubernetes pkg/volume/util/atomic_writer.go): the files live in a timestamped folder
 * `..2026_11_28_01_02_03.000000001/`, `..data` links to it, and each file name links through
 * `..data/<name>`; an update writes a new timestamped folder, links `..data_tmp` to it, renames
 * `..data_tmp` over `..data` (atomic) and removes the old folder. The path modelgate watches never
 * changes and never goes missing; only what it reaches does.
 */
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unwatchFile,
  utimesSync,
  watchFile,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, expect, test } from 'vitest';
import { parseConfig, type Config } from '../../src/config/load';
import { watchConfig } from '../../src/config/watch';
import { LogSink } from '../support/service-harness';

const DEMO = readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8');
const stops: (() => void)[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const stop of stops.splice(0)) stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A ConfigMap volume holding modelgate.yaml, and its update as the kubelet performs it. */
function configMapVolume(text: string): { path: string; update(next: string, sameMtimeAs?: string): void } {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-configmap-'));
  dirs.push(dir);
  let generation = 1;
  const writeGeneration = (body: string): string => {
    const name = `..2026_11_28_01_02_03.00000000${generation++}`;
    mkdirSync(join(dir, name));
    writeFileSync(join(dir, name, 'modelgate.yaml'), body);
    return name;
  };
  let current = writeGeneration(text);
  symlinkSync(current, join(dir, '..data'));
  symlinkSync(join('..data', 'modelgate.yaml'), join(dir, 'modelgate.yaml'));
  return {
    path: join(dir, 'modelgate.yaml'),
    update(next, sameMtimeAs) {
      const name = writeGeneration(next);
      if (sameMtimeAs) {
        const { atime, mtime } = statSync(join(dir, current, 'modelgate.yaml'));
        utimesSync(join(dir, name, 'modelgate.yaml'), atime, mtime);
      }
      symlinkSync(name, join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
      rmSync(join(dir, current), { recursive: true });
      current = name;
    },
  };
}

/**
 * Resolves once the poller watching `path` (node shares one per path) has taken its first stat: an
 * update before that would be its starting point, never a change. Each try changes only the file's
 * mode (its ctime: a change for the poller, not for the config watcher, which compares inode, mtime
 * and size).
 */
async function watcherStarted(path: string): Promise<void> {
  let mode = 0o600;
  await new Promise<void>((resolve) => {
    const seen = (): void => {
      clearInterval(timer);
      unwatchFile(path, seen);
      resolve();
    };
    watchFile(path, { interval: 10, persistent: false }, seen);
    const timer = setInterval(() => chmodSync(path, (mode ^= 0o044)), 10);
  });
}

/** Watches `path` until `count` reloads applied; resolves with the configs applied, in order. */
function watchUntil(path: string, count: number, logs: LogSink): Promise<Config[]> {
  let current = parseConfig(readFileSync(path, 'utf8'));
  const applied: Config[] = [];
  return new Promise((resolve) => {
    stops.push(
      watchConfig(
        path,
        {},
        pino({ level: 'info' }, logs),
        (next) => {
          current = next;
          applied.push(next);
          if (applied.length === count) resolve(applied);
        },
        () => current,
        10,
      ),
    );
  });
}

test('a ConfigMap update (the ..data link swapped to a new folder) reloads the config', async () => {
  const volume = configMapVolume(DEMO);
  const logs = new LogSink();
  const applied = watchUntil(volume.path, 1, logs);
  await watcherStarted(volume.path);
  volume.update(DEMO.replace('  paused:\n', '  extra:\n    models: [gpt-4o]\n  paused:\n'));
  const [next] = await applied;
  expect(next.groups.get('extra')!.models.has('gpt-4o')).toBe(true);
  expect(logs.lines).toContainEqual(expect.objectContaining({ msg: 'config reloaded', groups: 4 }));
});

test('an update of the same size and mtime reloads too (the file reached is another inode)', async () => {
  const volume = configMapVolume(DEMO);
  const logs = new LogSink();
  const applied = watchUntil(volume.path, 2, logs);
  await watcherStarted(volume.path);
  // Same length: one log level for another; the second update also keeps the first's mtime.
  const warn = DEMO.replace(/^  level: info/m, '  level: warn');
  expect(warn).not.toBe(DEMO);
  expect(warn.length).toBe(DEMO.length);
  volume.update(warn, 'same mtime');
  // Wait for the first reload before the second update, so that each swap is seen on its own.
  await new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      if (logs.lines.some((l) => l.msg === 'config reloaded')) {
        clearInterval(poll);
        resolve();
      }
    }, 5);
  });
  volume.update(DEMO, 'same mtime');
  const [first, second] = await applied;
  expect(first.log.level).toBe('warn');
  expect(second.log.level).toBe('info');
});

test('a ConfigMap update with an invalid config keeps the previous one serving and says why', async () => {
  const volume = configMapVolume(DEMO);
  const logs = new LogSink();
  const rejected = new Promise<void>((resolve) => {
    let current = parseConfig(DEMO);
    stops.push(
      watchConfig(
        volume.path,
        {},
        pino({ level: 'info' }, logs),
        (next) => void (current = next),
        () => current,
        10,
        resolve,
      ),
    );
  });
  await watcherStarted(volume.path);
  volume.update(DEMO.replace('  paused:\n', '  paused:\n    bogus: 1\n'));
  await rejected;
  expect(logs.lines).toContainEqual(
    expect.objectContaining({ msg: 'config reload rejected; the previous config keeps serving' }),
  );
});

/**
 * Hot reload of the config file: a valid new file swaps in atomically; an invalid one keeps the old
 * config serving and logs exactly what is wrong (every problem with its path).
 */
import { readFileSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import type { Logger } from 'pino';
import { ConfigError, parseConfig, type Config } from './load';

/** Settings that only take effect at start; a reload that changes them says so. */
const RESTART_ONLY: readonly (keyof Config)[] = ['grpc', 'cache', 'store', 'postgres', 'rateLimits'];

export function watchConfig(
  path: string,
  env: NodeJS.ProcessEnv,
  logger: Logger,
  apply: (next: Config, previous: Config) => void,
  current: () => Config,
  intervalMs = 500,
  onRejected?: () => void,
): () => void {
  const onChange = (now: Stats, before: Stats): void => {
    // The inode too: a Kubernetes ConfigMap volume updates by swapping its ..data link to a new
    // folder, so the path reaches another file, whose mtime and size may equal the old one's.
    if (now.ino === before.ino && now.mtimeMs === before.mtimeMs && now.size === before.size) return;
    if (!reloadConfig(path, env, logger, apply, current)) onRejected?.();
  };
  watchFile(path, { interval: intervalMs, persistent: false }, onChange);
  return () => unwatchFile(path, onChange);
}

/** Reads and validates the file once; applies it only if it is wholly valid. Returns whether it applied. */
export function reloadConfig(
  path: string,
  env: NodeJS.ProcessEnv,
  logger: Logger,
  apply: (next: Config, previous: Config) => void,
  current: () => Config,
): boolean {
  let next: Config;
  try {
    next = parseConfig(readFileSync(path, 'utf8'), env);
  } catch (err) {
    const problems = err instanceof ConfigError ? err.problems : [err instanceof Error ? err.message : String(err)];
    logger.error({ file: path, problems }, 'config reload rejected; the previous config keeps serving');
    return false;
  }
  const previous = current();
  const needRestart = RESTART_ONLY.filter((k) => JSON.stringify(next[k]) !== JSON.stringify(previous[k]));
  if (needRestart.length > 0)
    logger.warn(
      { file: path, sections: needRestart },
      'config reload: these sections take effect only after a restart',
    );
  apply(next, previous);
  logger.info({ file: path, groups: next.groups.size, keys: next.keys.length }, 'config reloaded');
  return true;
}

/**
 * `modelgate usage`: the usage ledger (docs/metering.md), newest first, with totals: PostgreSQL's
 * modelgate.usage, or in file mode the meter's state file beside the config (what `npm start`
 * spent).
 */
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { meterStatePath } from '../server/service';
import { FileMeter } from '../store/file-meter';
import { PgMeterStore } from '../store/pg/meter-store';
import type { UsageEntry, UsageQuery } from '../store/store';
import { recentUsage, usageTotals } from '../meter/recent-usage';
import { configPathOf, readConfig } from './envoy';
import { once, usageError } from './errors';
import type { CliRun } from './io';
import { storeCommand, withStore, type StoreOptions, type StoreTarget } from './store-admin';
import { isoTime, table } from './text';
import { parseExpires } from './keys';

interface UsageOptions extends StoreOptions {
  readonly key?: string;
  readonly group?: string;
  readonly since?: string;
  readonly limit?: string;
  readonly config?: string;
  readonly by?: string;
}

export const USAGE_GROUPINGS = ['key', 'group', 'model'] as const;
export type UsageGrouping = (typeof USAGE_GROUPINGS)[number];

/** Totals per key, group or model, the largest cost first (then the most responses). */
export function usageBy(
  entries: readonly UsageEntry[],
  by: UsageGrouping,
): Array<{ value: string } & ReturnType<typeof usageTotals>> {
  const groups = new Map<string, UsageEntry[]>();
  for (const e of entries) {
    const v = by === 'key' ? e.keyId : by === 'group' ? e.group : e.model;
    const list = groups.get(v);
    if (list) list.push(e);
    else groups.set(v, [e]);
  }
  return [...groups]
    .map(([value, list]) => ({ value, ...usageTotals(list) }))
    .sort((a, b) => b.cost - a.cost || b.responses - a.responses || a.value.localeCompare(b.value));
}

export function usageByText(entries: readonly UsageEntry[], by: UsageGrouping, limit: number): string {
  if (entries.length === 0) return 'No usage.\n';
  const rows = [[by.toUpperCase(), 'RESPONSES', 'INPUT', 'CACHED', 'OUTPUT', 'COST']];
  for (const g of usageBy(entries, by))
    rows.push([
      g.value,
      String(g.responses),
      String(g.inputTokens),
      String(g.cachedInputTokens),
      String(g.outputTokens),
      num(g.cost),
    ]);
  const t = usageTotals(entries);
  const cut =
    entries.length >= limit ? ` (the newest ${limit} responses only: raise --limit, or narrow with --since)` : '';
  return `${table(rows)}\n${t.responses} response${t.responses === 1 ? '' : 's'}${cut}: ${t.inputTokens} input (${t.cachedInputTokens} cached), ${t.outputTokens} output tokens; cost ${num(t.cost)}\n`;
}

/** `2026-11-01`, `2026-11-01T12:00:00Z`, or a time ago: `30m`, `12h`, `7d`. */
export function parseSince(text: string, now: number): number {
  const ago = /^(\d{1,6})([smhd])$/.exec(text);
  if (ago) return now - Number(ago[1]) * { s: 1e3, m: 6e4, h: 3.6e6, d: 8.64e7 }[ago[2] as 's' | 'm' | 'h' | 'd'];
  try {
    return parseExpires(text).getTime();
  } catch {
    throw usageError(
      `--since ${JSON.stringify(text)} is not a date (2026-11-01, 2026-11-01T12:00:00Z) or a time ago (30m, 12h, 7d)`,
    );
  }
}

const num = (n: number): string => String(Number(n.toPrecision(12)));

export function usageText(entries: readonly UsageEntry[]): string {
  if (entries.length === 0) return 'No usage.\n';
  const rows = [['TIME', 'KEY', 'GROUP', 'MODEL', 'PROTOCOL', 'INPUT', 'CACHED', 'OUTPUT', 'COST', 'USAGE']];
  for (const e of entries) {
    rows.push([
      isoTime(new Date(Math.floor(e.time / 1000) * 1000)),
      e.keyId,
      e.group,
      e.model,
      e.protocol,
      String(e.inputTokens),
      String(e.cachedInputTokens),
      String(e.outputTokens),
      e.priced ? num(e.cost) : '0 (no price)',
      e.provisional
        ? `maximum (${e.estimated ?? 'no_report'}, provisional)`
        : e.estimated
          ? `estimated (${e.estimated})`
          : 'provider',
    ]);
  }
  const t = usageTotals(entries);
  return `${table(rows)}\n${t.responses} response${t.responses === 1 ? '' : 's'}: ${t.inputTokens} input (${t.cachedInputTokens} cached), ${t.outputTokens} output tokens; cost ${num(t.cost)}\n`;
}

/**
 * What `usage` reads in file mode, from the config: its `store:` (a postgres:// URL there counts
 * after --store, MODELGATE_STORE and DATABASE_URL) and the state file its meter writes
 * (`meter.stateFile`, else <config>.state.json). A config named (--config, $MODELGATE_CONFIG) must
 * load; the default one is read if it is there.
 */
export function usageSource(
  option: string | undefined,
  env: NodeJS.ProcessEnv,
): { readonly store: StoreTarget; readonly statePath: string } {
  const configPath = configPathOf(option, env);
  const named = option !== undefined || env.MODELGATE_CONFIG !== undefined;
  if (!named && !existsSync(configPath))
    return { store: { mode: 'file' }, statePath: meterStatePath(configPath, null) };
  // Upstream credentials are not needed here: their variables count as set (as for envoy-config).
  const config = readConfig(configPath, new Proxy(env, { get: (t, k: string) => t[k] || 'set' }));
  return {
    store:
      config.store.kind === 'postgres'
        ? { mode: 'postgres', url: config.store.url, source: `store: in ${configPath}` }
        : { mode: 'file' },
    statePath: meterStatePath(configPath, config.meter.stateFile),
  };
}

export function usageCommand(run: CliRun): Command {
  return storeCommand(
    'usage',
    "show metered usage from the ledger, newest first, with totals (file mode: the config's meter state file)",
  )
    .option('--key <id>', 'only this key', once('--key'))
    .option('--group <name>', 'only this group', once('--group'))
    .option(
      '--since <time>',
      'only since a date (2026-11-01, 2026-11-01T12:00:00Z) or a time ago (30m, 12h, 7d)',
      once('--since'),
    )
    .option(
      '--limit <n>',
      'at most this many responses (default 50, with --by 100000; at most 100000)',
      once('--limit'),
    )
    .option(
      '--by <what>',
      `totals per ${USAGE_GROUPINGS.join(', ')} instead of each response (e.g. --by key --since 1h: which key spent most)`,
      once('--by'),
    )
    .option(
      '--config <file>',
      'the config whose store (a postgres:// store:) or meter state file (meter.stateFile, else <config>.state.json) to read (default: $MODELGATE_CONFIG, else envoy/modelgate.yaml)',
      once('--config'),
    )
    .action((options: UsageOptions, cmd: Command) => {
      let source: ReturnType<typeof usageSource> | undefined;
      const sourceOf = (): ReturnType<typeof usageSource> => (source ??= usageSource(options.config, run.env));
      return withStore(
        run,
        cmd,
        options,
        false,
        async (store) => {
          const by = options.by as UsageGrouping | undefined;
          if (by !== undefined && !USAGE_GROUPINGS.includes(by))
            throw usageError(`--by must be one of ${USAGE_GROUPINGS.join(', ')}`);
          const limit = options.limit === undefined ? (by ? 100_000 : 50) : Number(options.limit);
          if (!Number.isInteger(limit) || limit < 1 || limit > 100_000)
            throw usageError('--limit must be a whole number from 1 to 100000');
          const q: UsageQuery = {
            keyId: options.key,
            group: options.group,
            since: options.since === undefined ? undefined : parseSince(options.since, Date.now()),
            limit,
          };
          let entries: UsageEntry[];
          if (store.hasDb) {
            const db = await store.db();
            const meter = new PgMeterStore(async (_what, text, values) => (await db.query(text, values)).rows);
            entries =
              q.keyId !== undefined && q.group === undefined && q.since === undefined
                ? await recentUsage(meter, q.keyId, limit)
                : await meter.usage(q);
          } else {
            const path = sourceOf().statePath;
            entries = await new FileMeter(() => undefined, { path, onSpent: () => {} }).usage(q);
          }
          if (by)
            store.print(usageByText(entries, by, limit), {
              by,
              groups: usageBy(entries, by),
              totals: usageTotals(entries),
              complete: entries.length < limit,
            });
          else store.print(usageText(entries), { usage: entries, totals: usageTotals(entries) });
        },
        () => sourceOf().store,
      );
    });
}

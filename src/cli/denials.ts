/**
 * `modelgate denials`: who was denied, and why, from the logs (denial-report.ts): modelgate's
 * decision lines and Envoy's access log, given as files or on stdin, one request counted once.
 * `kubectl logs deploy/modelgate --since=1h | modelgate denials` answers it in one command,
 * whatever the store.
 */
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { Command } from 'commander';
import { collectDenials, DENIAL_GROUPINGS, groupDenials, type DenialGrouping } from './denial-report';
import { once, usageError } from './errors';
import type { CliRun } from './io';
import { isoTime, table } from './text';
import { parseSince } from './usage';

interface DenialsOptions {
  readonly since?: string;
  readonly by?: string;
  readonly json?: boolean;
}

async function* linesOf(files: readonly string[]): AsyncGenerator<string> {
  for (const file of files.length === 0 ? ['-'] : files) {
    const input = file === '-' ? process.stdin : createReadStream(file);
    // A missing file is a clear error, not a stack trace.
    const opened = new Promise<void>((resolve, reject) => {
      if (file === '-') resolve();
      input.once('open', () => resolve());
      input.once('error', (err: NodeJS.ErrnoException) =>
        reject(usageError(`cannot read ${file} (${err.code ?? err.message})`)),
      );
    });
    await opened;
    for await (const line of createInterface({ input, crlfDelay: Infinity })) yield line;
  }
}

export function denialsCommand(run: CliRun): Command {
  return new Command('denials')
    .description(
      "who was denied and why: modelgate's decision lines and Envoy's access log (its own 503/404/405/413/429 answers), from files or stdin, each request once",
    )
    .argument('[logs...]', 'log files (JSON lines from modelgate and/or Envoy); - or none: stdin')
    .option(
      '--since <time>',
      'only since a date (2026-11-01T12:00:00Z) or a time ago (30m, 1h, 7d); default 1h',
      once('--since'),
    )
    .option('--by <what>', `group by ${DENIAL_GROUPINGS.join(', ')} (default reason)`, once('--by'))
    .option('--json', 'print one JSON document: the groups and every denial')
    .action(async (files: string[], options: DenialsOptions) => {
      const by = (options.by ?? 'reason') as DenialGrouping;
      if (!DENIAL_GROUPINGS.includes(by)) throw usageError(`--by must be one of ${DENIAL_GROUPINGS.join(', ')}`);
      const since = Math.floor(parseSince(options.since ?? '1h', Date.now()) / 1000) * 1000;
      const lines: string[] = [];
      for await (const line of linesOf(files)) lines.push(line);
      const denials = collectDenials(lines, since);
      const groups = groupDenials(denials, by);
      if (options.json) {
        run.stdout(`${JSON.stringify({ since: new Date(since).toISOString(), by, groups, denials }, null, 2)}\n`);
        return;
      }
      if (denials.length === 0) {
        run.stdout(`No denials since ${isoTime(new Date(since))}.\n`);
        return;
      }
      const rows = [
        [by.toUpperCase(), 'DENIED', by === 'reason' ? 'STATUS' : 'REASONS', 'KEYS', 'CLIENTS', 'TOP CLIENTS', 'LAST'],
      ];
      for (const g of groups) {
        const reasons = Object.entries(g.reasons).sort((a, b) => b[1] - a[1]);
        const status =
          by === 'reason'
            ? String(denials.find((d) => d.reason === g.value)?.status ?? '')
            : reasons.map(([r, n]) => `${r} ${n}`).join(', ');
        rows.push([
          g.value,
          String(g.denied),
          status,
          String(g.keys),
          String(g.clients),
          g.topClients.join(', ') || '-',
          isoTime(new Date(Math.floor(g.last / 1000) * 1000)),
        ]);
      }
      const both = denials.filter((d) => d.seenBy === 'both').length;
      const envoyOnly = denials.filter((d) => d.seenBy === 'envoy').length;
      run.stdout(
        `${table(rows)}\n${denials.length} denied request${denials.length === 1 ? '' : 's'} since ${isoTime(new Date(since))} (${envoyOnly} answered by Envoy itself, ${both} in both logs)\n`,
      );
    });
}

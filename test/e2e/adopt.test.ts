/**
 * `modelgate adopt` through the real Envoy (issue 37, "What it must show"): a team's hand-written
 * Envoy (test/envoy/fixtures/team-envoy.yaml: its own listener at Envoy's defaults, its own provider
 * clusters, its own route to its own service, its own JSON access log and local reply), adopted with
 * modelgate's config (fixtures/modelgate-adopt.yaml: the team's clusters for chat, messages and
 * generative), run beside modelgate. Then: each protocol's stock SDK is served; every provider route
 * refuses a request without a key; three requests reusing one x-request-id are three ledger rows;
 * a client's key in any key header, and a client's x-modelgate-* header, never reach the provider;
 * the team's route answers as before (its own 503 body, Envoy's own 503 of its dead cluster, its
 * own 404 body), with no decision line and no meter entry; with modelgate stopped the provider
 * routes answer 503 and the team's route still works.
 */
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type * as GenAI from '@google/genai' with { 'resolution-mode': 'import' };
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseConfig } from '../../src/config/load';
import { ENDPOINTS, MODEL } from '../../src/providers/endpoints';
import { adopt } from '../../src/envoy/adopt';
import { toYaml } from '../../src/envoy/render';
import type { FileStore } from '../../src/store/file-store';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { REFUSED_PORT } from '../support/refused-port';
import { waitFor } from '../support/meter-cases';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const FIXTURES = join(__dirname, '..', 'envoy', 'fixtures');
const CONFIG = readFileSync(join(FIXTURES, 'modelgate-adopt.yaml'), 'utf8');
const TEAM_503 = '{"team":"maintenance","retry":"later"}';

/** The team's own service behind its route: 200, or its own 503 body. */
function teamService(): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.url?.startsWith('/internal/health/fail')) {
      res.writeHead(503, { 'content-type': 'application/json' }).end(TEAM_503);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end('healthy');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const endpointOf = (b: Obj, name: string): { host: string; port: number } => {
  const c = (b.static_resources.clusters as Obj[]).find((x) => x.name === name)!;
  const sa = c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address;
  return { host: sa.address, port: sa.port_value };
};
const setEndpoint = (b: Obj, name: string, port: number): void => {
  const c = (b.static_resources.clusters as Obj[]).find((x) => x.name === name)!;
  c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address = {
    address: '127.0.0.1',
    port_value: port,
  };
};

describeE2E("modelgate adopt: a team's own Envoy with modelgate added, through the real Envoy", () => {
  let gw: Gateway;
  let team: http.Server;
  let store: FileStore;
  let genai: typeof GenAI;
  let adopted = '';
  const alice = DEMO_KEYS.alice;
  const ledger = () => store.meter!.usage({ limit: 10_000 });
  const decisions = (): Obj[] =>
    gw.modelgate
      .logLines()
      .filter((l) => l.includes('"msg":"decision"'))
      .map((l) => JSON.parse(l) as Obj);

  beforeAll(async () => {
    genai = await import('@google/genai');
    team = await teamService();
    const teamPort = (team.address() as AddressInfo).port;
    gw = await startGateway({
      config: CONFIG,
      // The bundle the rig rendered only tells where this test's modelgate and stand-in providers listen.
      envoyConfig: (bundleYaml) => {
        const bundle = parseYaml(bundleYaml) as Obj;
        const t = parseYaml(readFileSync(join(FIXTURES, 'team-envoy.yaml'), 'utf8')) as Obj;
        t.admin.address.socket_address = { address: '127.0.0.1', port_value: 0 };
        t.static_resources.listeners[0].address.socket_address = { address: '127.0.0.1', port_value: 0 };
        setEndpoint(t, 'openai', endpointOf(bundle, 'upstream_chat').port);
        setEndpoint(t, 'anthropic', endpointOf(bundle, 'upstream_messages').port);
        setEndpoint(t, 'gemini', endpointOf(bundle, 'upstream_generative').port);
        setEndpoint(t, 'health', teamPort);
        setEndpoint(t, 'legacy', REFUSED_PORT);
        const config = parseConfig(CONFIG, new Proxy({}, { get: () => 'set' }) as NodeJS.ProcessEnv);
        const alt = endpointOf(bundle, 'upstream_alt');
        const input = {
          ...config,
          gateway: {
            ...config.gateway,
            authz: endpointOf(bundle, 'modelgate_authz'),
            http: endpointOf(bundle, 'modelgate_http'),
            upstreams: {
              ...config.gateway.upstreams,
              alt: { ...config.gateway.upstreams.alt, tls: false, host: alt.host, port: alt.port },
            },
          },
        };
        adopted = toYaml(adopt(t, input).bootstrap, ' adopted');
        return adopted;
      },
    });
    store = gw.modelgate.service!.store as FileStore;
  }, 120_000);

  afterAll(async () => {
    await gw?.close().catch(() => {});
    team?.close();
  });

  it("runs the adopted config: the team's listener, its clusters for the three providers", () => {
    const b = parseYaml(adopted) as Obj;
    expect(b.static_resources.listeners[0].name).toBe('ingress');
    const routes = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config
      .virtual_hosts[0].routes as Obj[];
    expect(routes.find((r) => r.name === 'modelgate.chat_completions')?.route.cluster).toBe('openai');
  });

  it("serves each protocol's stock SDK (openai, @anthropic-ai/sdk, @google/genai) through the team's clusters", async () => {
    const before = gw.received.length;
    const c = await new OpenAI({ apiKey: alice, baseURL: `${gw.baseUrl}/v1` }).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(c.choices[0]?.message.content).toBeTruthy();
    const m = await new Anthropic({ apiKey: alice, baseURL: gw.baseUrl }).messages.create({
      model: 'claude-3-5-haiku-latest',
      max_tokens: 20,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(m.content.length).toBeGreaterThan(0);
    const g = await new genai.GoogleGenAI({
      apiKey: alice,
      httpOptions: { baseUrl: gw.baseUrl, apiVersion: 'v1beta' },
    }).models.generateContent({ model: 'gemini-2.5-flash', contents: 'hi' });
    expect(g.text).toBeTruthy();
    expect(gw.received.slice(before).map((r) => r.family)).toEqual(['chat', 'messages', 'generative']);
  });

  it("refuses a request without a key on every provider route (the team's Envoy defaults change nothing)", async () => {
    const before = gw.received.length;
    const paths = ENDPOINTS.filter((e) => e.style !== 'models').flatMap((e) => {
      const p = e.modelMethods ? `${e.path.replace(MODEL, 'gemini-2.5-flash')}:${e.modelMethods[0]}` : e.path;
      return [p, `/alt${p}`];
    });
    expect(paths.length).toBe(18);
    for (const p of paths) {
      const r = await gw.send('POST', p, {
        headers: [['content-type', 'application/json']],
        body: '{"model":"gpt-4o-mini","messages":[]}',
      });
      expect(r.status, p).toBe(401);
      expect(r.headers['x-modelgate-reason'], p).toBe('key_missing');
    }
    expect(gw.received.length).toBe(before);
  });

  it('settles three requests that reuse one client x-request-id as three ledger rows', async () => {
    await waitFor('earlier debits', async () => gw.modelgate.service!.meter.settledAll);
    const rows = (await ledger()).length;
    const sent = gw.received.length;
    for (let i = 0; i < 3; i++) {
      const r = await gw.send('POST', '/v1/chat/completions', {
        headers: [
          ['authorization', `Bearer ${alice}`],
          ['content-type', 'application/json'],
          ['x-request-id', 'chosen-by-the-client'],
        ],
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `reuse ${i}` }] }),
      });
      expect(r.status).toBe(200);
    }
    // The team's connection manager keeps a client's x-request-id (Envoy's defaults): the provider got it three times.
    expect(gw.received.slice(sent).map((r) => r.headers['x-request-id'])).toEqual(
      Array(3).fill('chosen-by-the-client'),
    );
    await waitFor('three debits', async () => (await ledger()).length === rows + 3);
    const three = (await ledger()).slice(0, 3);
    expect(new Set(three.map((e) => e.requestId)).size).toBe(3);
    for (const e of three) expect(e.requestId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-/);
  });

  it("never lets the client's key (in any key header) or its x-modelgate-* headers reach the provider", async () => {
    const before = gw.received.length;
    const r = await gw.send('POST', '/v1/chat/completions', {
      headers: [
        ['authorization', `Bearer ${alice}`],
        ['cookie', `session=${alice}`],
        ['proxy-authorization', `Bearer ${alice}`],
        ['api-key', alice],
        ['x-api-key', alice],
        ['x-goog-api-key', alice],
        ['x-modelgate-balance', '999'],
        ['x-modelgate-request', 'forged'],
        ['x-modelgate-key-id', 'bob'],
        ['content-type', 'application/json'],
      ],
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'keys' }] }),
    });
    expect(r.status).toBe(200);
    const got = gw.received.slice(before);
    expect(got).toHaveLength(1);
    const raw = got[0].rawHeaders.join('\n');
    expect(raw).not.toContain(alice);
    const names = got[0].rawHeaders.filter((_, i) => i % 2 === 0).map((h) => h.toLowerCase());
    for (const h of [
      'cookie',
      'proxy-authorization',
      'api-key',
      'x-api-key',
      'x-goog-api-key',
      'x-modelgate-balance',
      'x-modelgate-request',
    ])
      expect(names, h).not.toContain(h);
    // modelgate's own identity headers replace the client's.
    expect(got[0].headers['x-modelgate-key-id']).toBe('alice');
  });

  it("leaves the team's route as it was: its answers and bodies, its 503s and 404s, no decision line, no meter entry", async () => {
    await waitFor('earlier debits', async () => gw.modelgate.service!.meter.settledAll);
    const rows = (await ledger()).length;
    const checks = decisions().length;
    const ok = await gw.send('GET', '/internal/health');
    expect([ok.status, ok.text]).toEqual([200, 'healthy']);
    const down = await gw.send('GET', '/internal/health/fail', { headers: [['authorization', `Bearer ${alice}`]] });
    expect([down.status, down.text]).toEqual([503, TEAM_503]);
    expect(down.headers['x-modelgate-reason']).toBeUndefined();
    // Envoy's own 503 for the team's dead cluster: not rewritten into modelgate's upstream_unavailable.
    const dead = await gw.send('GET', '/internal/legacy');
    expect(dead.status).toBe(503);
    expect(dead.headers['x-modelgate-reason']).toBeUndefined();
    expect(dead.text).not.toContain('modelgate');
    // The team's own local reply for a path nobody routes.
    const lost = await gw.send('GET', '/nowhere');
    expect(lost.status).toBe(404);
    expect(lost.json()).toMatchObject({ team_error: 'no such page' });
    // The team's JSON access log still writes its lines.
    const log = await gw.accessLogWhen((lines) => lines.some((l) => l.path === '/nowhere'));
    expect(log.find((l) => l.path === '/internal/health/fail')).toMatchObject({
      team_log: true,
      status: 503,
      route: 'health',
    });
    expect(decisions().length).toBe(checks);
    await new Promise((r) => setTimeout(r, 200)); // a report, if any were sent, would have landed
    expect((await ledger()).length).toBe(rows);
    expect(gw.modelgate.service!.meter.settledAll).toBe(true);
  });

  it("answers 503 on the provider routes with modelgate stopped, while the team's route still works", async () => {
    await gw.modelgate.service!.close(1000, 0);
    const r = await gw.send('POST', '/v1/chat/completions', {
      headers: [
        ['authorization', `Bearer ${alice}`],
        ['content-type', 'application/json'],
      ],
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [] }),
    });
    expect(r.status).toBe(503);
    expect(r.headers['x-modelgate-reason']).toBe('authz_unavailable');
    const ok = await gw.send('GET', '/internal/health');
    expect([ok.status, ok.text]).toEqual([200, 'healthy']);
  });
});

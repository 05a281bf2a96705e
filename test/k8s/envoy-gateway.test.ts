/**
 * The chart's Envoy Gateway resources through Envoy Gateway's own translator, offline: `egctl x
 * translate` (v1.9.0, scripts/ensure-egctl) turns the Gateway API and Envoy Gateway objects into the
 * xDS Envoy Gateway would serve, validating each against its CRD schema and reporting each policy's
 * status. Asserted: every policy and route Accepted; the xDS holds the ext_authz filter pointing at
 * modelgate's cluster (mTLS, the body, failure_mode_allow false, the timeout, the decision headers),
 * the meter's Lua tail and gRPC access log, and each provider route's header removals. The
 * translated listeners, routes, clusters, endpoints and secrets are then made one static bootstrap
 * and checked by the pinned Envoy (`envoy --mode validate`).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { chartRoutes } from '../../src/envoy/chart-contract';
import { METER_LUA } from '../../src/envoy/meter-filters';
import { goTool } from '../support/go-tools';
import { makeTestCerts, SERVER_NAME } from '../support/test-certs';
import { translatedBootstrap, xdsDump, type XdsDump } from '../support/eg-bootstrap';
import { ensureEnvoy } from '../../src/envoy/ensure';

const ROOT = join(__dirname, '..', '..');
const CHART = join(ROOT, 'deploy', 'helm', 'modelgate');
const helm = goTool('helm');
const egctl = goTool('egctl');
const missing = 'missing' in helm ? helm.missing : 'missing' in egctl ? egctl.missing : undefined;
type Any = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const dir = mkdtempSync(join(tmpdir(), 'modelgate-eg-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const b64 = (file: string): string => readFileSync(file).toString('base64');

/** The cluster's side the chart does not render: the GatewayClass, the Gateway, modelgate's CA and Envoy's client certificate. */
function clusterObjects(): string {
  const certs = makeTestCerts();
  return [
    { apiVersion: 'gateway.networking.k8s.io/v1', kind: 'GatewayClass', metadata: { name: 'eg' }, spec: { controllerName: 'gateway.envoyproxy.io/gatewayclass-controller' } },
    {
      apiVersion: 'gateway.networking.k8s.io/v1', kind: 'Gateway', metadata: { name: 'eg', namespace: 'ai' },
      spec: { gatewayClassName: 'eg', infrastructure: { parametersRef: { group: 'gateway.envoyproxy.io', kind: 'EnvoyProxy', name: 'modelgate-proxy' } }, listeners: [{ name: 'http', protocol: 'HTTP', port: 10080 }] },
    },
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'mg-modelgate-ca', namespace: 'ai' }, data: { 'ca.crt': readFileSync(certs.serverCa, 'utf8') } },
    { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'mg-modelgate-envoy-client', namespace: 'ai' }, type: 'kubernetes.io/tls', data: { 'tls.crt': b64(certs.clientCert), 'tls.key': b64(certs.clientKey) } },
  ].map((o) => stringify(o)).join('---\n');
}

let out: Any;
let xds: XdsDump;
beforeAll(() => {
  if (missing) return;
  const chart = spawnSync((helm as { path: string }).path, ['template', 'mg', CHART, '--namespace', 'ai', '-f', join(ROOT, 'test', 'k8s', 'values', 'envoy-gateway.yaml'), '--set', `envoyGateway.modelgateTlsHostname=${SERVER_NAME}`], { encoding: 'utf8' });
  expect(chart.status, chart.stderr).toBe(0);
  const input = join(dir, 'in.yaml');
  writeFileSync(input, `${clusterObjects()}---\n${chart.stdout}`);
  const r = spawnSync((egctl as { path: string }).path, ['x', 'translate', '--from', 'gateway-api', '--to', 'gateway-api,xds', '-t', 'all', '--add-missing-resources', '-o', 'json', '-f', input], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  expect(r.status, r.stderr).toBe(0);
  out = JSON.parse(r.stdout);
  const dumps = Object.values(out.xds as Record<string, { configs: Any[] }>);
  expect(dumps).toHaveLength(1);
  xds = xdsDump(dumps[0]);
}, 120_000);

const conditions = (o: Any): string => JSON.stringify(o.status?.ancestors ?? o.status?.parents ?? o.status?.conditions ?? o.status);

describe.skipIf(missing !== undefined)(`egctl x translate (${missing ?? 'egctl ' + (egctl as { path: string }).path})`, () => {
  test('every policy, route and backend is Accepted', () => {
    const kinds: [string, number][] = [['httpRoutes', 1], ['securityPolicies', 1], ['envoyExtensionPolicies', 1], ['backendTLSPolicies', 1], ['backends', 3]];
    for (const [kind, count] of kinds) {
      expect(out[kind], kind).toHaveLength(count);
      for (const o of out[kind]) {
        const list = o.status?.ancestors ?? o.status?.parents ?? [{ conditions: o.status.conditions }];
        expect(list.length, `${kind} ${o.metadata.name}`).toBeGreaterThan(0);
        for (const a of list) expect(a.conditions.find((c: Any) => c.type === 'Accepted'), `${kind} ${o.metadata.name}: ${conditions(o)}`).toMatchObject({ status: 'True' });
      }
    }
    expect(out.gateways[0].status.conditions.find((c: Any) => c.type === 'Accepted'), conditions(out.gateways[0])).toMatchObject({ status: 'True' });
  });

  test('the listener\'s ext_authz: modelgate\'s cluster over mTLS, the body as bytes, fail closed, the timeout, the decision headers', () => {
    const filters = xds.listeners().flatMap((l: Any) => (l.default_filter_chain ? [l.default_filter_chain] : l.filter_chains ?? []).flatMap((c: Any) => c.filters)).filter((f: Any) => f.name === 'envoy.filters.network.http_connection_manager');
    const http = filters.flatMap((f: Any) => f.typed_config.http_filters);
    const authz = http.find((f: Any) => f.name.startsWith('envoy.filters.http.ext_authz'));
    expect(authz, http.map((f: Any) => f.name).join()).toBeDefined();
    const cfg = authz.typed_config;
    expect(cfg.failure_mode_allow ?? false).toBe(false);
    expect(cfg.with_request_body).toMatchObject({ max_request_bytes: 33554432 });
    expect(cfg.status_on_error).toEqual({ code: 'ServiceUnavailable' });
    expect(cfg.grpc_service.timeout).toBe('1s');
    const cluster = cfg.grpc_service.envoy_grpc.cluster_name;
    const c = xds.clusters().find((x: Any) => x.name === cluster);
    expect(c, cluster).toBeDefined();
    expect(JSON.stringify(c.transport_socket ?? c.transport_socket_matches)).toContain('UpstreamTlsContext');
    expect(xds.endpointsOf(cluster).map((e: Any) => e.endpoint.address.socket_address.port_value)).toContain(9191);
    expect(cfg.allowed_headers.patterns.map((p: Any) => p.exact)).toEqual(expect.arrayContaining(['authorization', 'x-api-key', 'x-goog-api-key', 'anthropic-version', 'content-type']));
    expect(http[http.length - 1].name).toBe('envoy.filters.http.router');
  });

  test('the meter: the Lua tail on the chain, and the gRPC access log to modelgate with the metered filter', () => {
    const hcm = xds.listeners().flatMap((l: Any) => (l.default_filter_chain ? [l.default_filter_chain] : l.filter_chains ?? []).flatMap((c: Any) => c.filters)).find((f: Any) => f.name === 'envoy.filters.network.http_connection_manager').typed_config;
    const lua = hcm.http_filters.find((f: Any) => f.name.includes('lua'));
    expect(lua).toBeDefined();
    expect(JSON.stringify(xds.raw)).toContain(JSON.stringify(METER_LUA).slice(1, 200));
    const logs = JSON.stringify(hcm.access_log ?? []);
    expect(logs).toContain('modelgate_meter');
    expect(logs).toContain("metadata.filter_metadata['envoy.filters.http.ext_authz']['metered'] == true");
    expect(logs).toContain('content-encoding');
  });

  test('each provider route removes every key header but its own credential\'s, and the model lists go to modelgate\'s HTTP port', () => {
    const routes = xds.routes().flatMap((rc: Any) => rc.virtual_hosts.flatMap((v: Any) => v.routes));
    expect(routes.length).toBe(chartRoutes().length);
    const chat = routes.find((r: Any) => r.match.path === '/v1/chat/completions');
    expect(chat.request_headers_to_remove).toEqual(expect.arrayContaining(['x-api-key', 'x-goog-api-key', 'cookie']));
    expect(chat.request_headers_to_remove).not.toContain('authorization');
    const messages = routes.find((r: Any) => r.match.path === '/v1/messages');
    expect(messages.request_headers_to_remove).toContain('authorization');
    expect(messages.request_headers_to_remove).not.toContain('x-api-key');
  });

  test('the translated xDS, made one static bootstrap, is valid for the pinned Envoy', () => {
    const file = join(dir, 'bootstrap.json');
    writeFileSync(file, JSON.stringify(translatedBootstrap(xds, { adminPort: 0 })));
    const r = spawnSync(ensureEnvoy({ install: false }).path, ['--mode', 'validate', '-c', file, '--disable-hot-restart'], { encoding: 'utf8' });
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });
});

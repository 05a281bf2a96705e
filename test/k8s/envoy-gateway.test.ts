/**
 * The chart's Envoy Gateway resources through Envoy Gateway's own translator, offline: `egctl x
 * translate` (v1.9.0, scripts/ensure-egctl) turns the Gateway API and Envoy Gateway objects into the
 * xDS Envoy Gateway would serve, validating each against its CRD schema and reporting each policy's
 * status. Asserted: every policy and route Accepted; the xDS holds the ext_authz filter pointing at
 * modelgate's cluster (mTLS, the body, failure_mode_allow false, the timeout, the decision headers),
 * the meter's Lua tail and gRPC access log, each provider route's header removals, and what the
 * chart's EnvoyPatchPolicy adds (the request mark, the rate limit filters, the trailer filter, the
 * local replies) on the chart's routes only, and the /alt routes. The
 * translated listeners, routes, clusters, endpoints and secrets are then made one static bootstrap
 * and checked by the pinned Envoy (`envoy --mode validate`).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { chartRoutes } from '../../src/envoy/chart-contract';
import { METER_LUA } from '../../src/envoy/meter-filters';
import { goTool, inNamespace } from '../support/go-tools';
import { makeTestCerts, SERVER_NAME } from '../support/test-certs';
import { gatewayObjects, translatedBootstrap, xdsDump, type XdsDump } from '../support/eg-bootstrap';
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

/**
 * The cluster's side the chart does not render: the GatewayClass, the Gateway, modelgate's CA and Envoy's client
 * certificate.
 */
function clusterObjects(): string {
  const certs = makeTestCerts();
  return [
    ...gatewayObjects(readFileSync(certs.serverCa, 'utf8')),
    // A team's route on the same Gateway: none of modelgate's filters may run on it.
    {
      apiVersion: 'gateway.envoyproxy.io/v1alpha1',
      kind: 'Backend',
      metadata: { name: 'team-app', namespace: 'ai' },
      spec: { endpoints: [{ ip: { address: '10.0.0.99', port: 8080 } }] },
    },
    {
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'HTTPRoute',
      metadata: { name: 'team-app', namespace: 'ai' },
      spec: {
        parentRefs: [{ name: 'eg', namespace: 'ai' }],
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: '/app' } }],
            backendRefs: [{ group: 'gateway.envoyproxy.io', kind: 'Backend', name: 'team-app' }],
          },
        ],
      },
    },
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
}

let out: Any;
let xds: XdsDump;
/**
 * The chart rendered with the test values (and `set`), translated by egctl: its status output and the one Gateway's
 * xDS.
 */
function translate(...set: string[]): { out: Any; xds: XdsDump } {
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
      ...set.flatMap((v) => ['--set', v]),
    ],
    { encoding: 'utf8' },
  );
  expect(chart.status, chart.stderr).toBe(0);
  const input = join(dir, 'in.yaml');
  writeFileSync(input, `${clusterObjects()}---\n${inNamespace(chart.stdout, 'ai')}`);
  const r = spawnSync(
    (egctl as { path: string }).path,
    [
      'x',
      'translate',
      '--from',
      'gateway-api',
      '--to',
      'gateway-api,xds',
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
  const o = JSON.parse(r.stdout);
  const dumps = Object.values(o.xds as Record<string, { configs: Any[] }>);
  expect(dumps).toHaveLength(1);
  return { out: o, xds: xdsDump(dumps[0]) };
}
beforeAll(() => {
  if (missing) return;
  ({ out, xds } = translate());
}, 120_000);

const conditions = (o: Any): string => JSON.stringify(o.status);

describe.skipIf(missing !== undefined)(
  `egctl x translate (${missing ?? 'egctl ' + (egctl as { path: string }).path})`,
  () => {
    test('every policy, route and backend is Accepted', () => {
      const kinds: [string, number][] = [
        ['httpRoutes', 3],
        ['securityPolicies', 1],
        ['envoyExtensionPolicies', 1],
        ['backendTLSPolicies', 1],
        ['backends', 5],
        ['envoyProxiesForGateways', 1],
        ['envoyPatchPolicies', 1],
      ];
      for (const [kind, count] of kinds) {
        expect(out[kind], kind).toHaveLength(count);
        for (const o of out[kind]) {
          const list = o.status?.ancestors ?? o.status?.parents ?? [{ conditions: o.status.conditions }];
          expect(list.length, `${kind} ${o.metadata.name}`).toBeGreaterThan(0);
          for (const a of list)
            expect(
              a.conditions.find((c: Any) => c.type === 'Accepted'),
              `${kind} ${o.metadata.name}: ${conditions(o)}`,
            ).toMatchObject({ status: 'True' });
        }
      }
      for (const l of out.gateways[0].status.listeners)
        expect(
          l.conditions.find((c: Any) => c.type === 'Accepted'),
          conditions(out.gateways[0]),
        ).toMatchObject({ status: 'True' });
      expect(out.gateways[0].status.listeners[0].attachedRoutes).toBe(3);
    });

    /** The Gateway's listener's HTTP connection manager (the other listener is Envoy Gateway's readiness one). */
    const hcm = (): Any => {
      const listener = xds.listeners().find((l: Any) => l.name === 'ai/eg/http');
      expect(
        listener,
        xds
          .listeners()
          .map((l: Any) => l.name)
          .join(),
      ).toBeDefined();
      return [...(listener.filterChains ?? []), listener.defaultFilterChain]
        .filter(Boolean)[0]
        .filters.find((f: Any) => f.name === 'envoy.filters.network.http_connection_manager').typedConfig;
    };
    /** The chart's routes (the team's left out). */
    const allRoutes = (): Any[] =>
      xds
        .routes()
        .flatMap((rc: Any) => rc.virtualHosts.flatMap((v: Any) => v.routes))
        .filter((r: Any) => !r.name.startsWith('httproute/ai/team-app/'));

    test("a team's route on the same Gateway runs none of modelgate's filters: no mark, no Check, no meter, no rate limit", () => {
      const team = xds
        .routes()
        .flatMap((rc: Any) => rc.virtualHosts.flatMap((v: Any) => v.routes))
        .filter((r: Any) => r.name.startsWith('httproute/ai/team-app/'));
      expect(team).toHaveLength(1);
      expect(Object.keys(team[0].typedPerFilterConfig ?? {})).toEqual([]);
      for (const f of hcm().httpFilters.filter((x: Any) => x.name !== 'envoy.filters.http.router'))
        expect(f.disabled, f.name).toBe(true);
    });

    test("the listener's ext_authz: modelgate's cluster over mTLS, the body, fail closed, the timeout, the decision headers, on every route", () => {
      const http = hcm().httpFilters;
      expect(http.map((f: Any) => f.name)).toEqual([
        'modelgate.request',
        'modelgate.request_metadata',
        'envoy.filters.http.ext_authz/securitypolicy/ai/mg-modelgate-ext-authz',
        'envoy.filters.http.lua/envoyextensionpolicy/ai/mg-modelgate-meter/lua/0',
        'modelgate.ratelimit_tokens',
        'modelgate.ratelimit_requests',
        'modelgate.drop_request_trailers',
        'envoy.filters.http.router',
      ]);
      const authz = http[2];
      const cfg = authz.typedConfig;
      expect(cfg.failureModeAllow ?? false).toBe(false);
      // packAsBytes from the chart's EnvoyPatchPolicy: Envoy Gateway's bodyToExtAuth has no field for it.
      expect(cfg.withRequestBody).toEqual({ maxRequestBytes: 33554432, packAsBytes: true });
      expect(cfg.statusOnError).toEqual({ code: 'ServiceUnavailable' });
      expect(cfg.grpcService.timeout).toBe('1s');
      expect(cfg.grpcService.initialMetadata).toBeUndefined();
      expect(cfg.allowedHeaders.patterns.map((p: Any) => p.exact)).toEqual(
        JSON.parse(readFileSync(join(CHART, 'files', 'contract.json'), 'utf8')).checkRequestHeaders,
      );
      const cluster = xds.clusters().find((c: Any) => c.name === cfg.grpcService.envoyGrpc.clusterName);
      const tls = cluster.transportSocketMatches[0].transportSocket.typedConfig;
      expect(tls.sni).toBe(SERVER_NAME);
      expect(tls.commonTlsContext.tlsCertificateSdsSecretConfigs).toEqual([
        expect.objectContaining({ name: 'ai/mg-modelgate-envoy-client' }),
      ]);
      expect(
        xds.loadAssignment(cluster.name).endpoints[0].lbEndpoints[0].endpoint.address.socketAddress.portValue,
      ).toBe(9191);
      // The filter is off on the listener and on for each of the route's rules.
      for (const r of allRoutes()) expect(Object.keys(r.typedPerFilterConfig), r.name).toContain(authz.name);
    });

    /** The route rules of the chart's routes that go to a provider (not to modelgate's model lists). */
    const providerRoute = (r: Any): boolean =>
      !r.route.cluster.startsWith('httproute/') ||
      xds.loadAssignment(r.route.cluster)?.endpoints[0].lbEndpoints[0].endpoint.address.socketAddress.portValue !==
        9192;

    test("the request mark first, off on the listener and on for every route of modelgate's: the client's x-modelgate-* removed, x-modelgate-request minted, copied to the meter's metadata", () => {
      const [mark, meta] = hcm().httpFilters;
      expect(mark).toMatchObject({ name: 'modelgate.request', disabled: true });
      expect(meta).toMatchObject({ name: 'modelgate.request_metadata', disabled: true });
      for (const r of allRoutes()) {
        expect(r.typedPerFilterConfig[mark.name].mutations.requestMutations, r.name).toEqual([
          { removeOnMatch: { keyMatcher: { prefix: 'x-modelgate-' } } },
          {
            append: {
              header: { key: 'x-modelgate-request', value: '%UNIQUE_ID%' },
              appendAction: 'OVERWRITE_IF_EXISTS_OR_ADD',
            },
          },
        ]);
        expect(r.typedPerFilterConfig[meta.name].requestRules, r.name).toEqual([
          { header: 'x-modelgate-request', onHeaderPresent: { metadataNamespace: 'modelgate', key: 'request' } },
        ]);
        // The mark never reaches a provider (the route removes it after the Check read it).
        if (providerRoute(r)) expect(r.requestHeadersToRemove, r.name).toContain('x-modelgate-request');
      }
    });

    test("the rate limit filters: to modelgate's embedded engine on the Check's cluster, the descriptors and limits from the Check's metadata, tokens looked at only, on provider routes only", () => {
      const filters = hcm().httpFilters;
      const tokens = filters.find((f: Any) => f.name === 'modelgate.ratelimit_tokens');
      const requests = filters.find((f: Any) => f.name === 'modelgate.ratelimit_requests');
      for (const f of [tokens, requests]) {
        expect(f.disabled).toBe(true);
        expect(f.typedConfig).toMatchObject({
          domain: 'modelgate',
          timeout: '0.100s',
          statusOnError: { code: 'ServiceUnavailable' },
          rateLimitService: {
            grpcService: { envoyGrpc: { clusterName: 'securitypolicy/ai/mg-modelgate-ext-authz/extauth/0' } },
          },
        });
        expect(f.typedConfig.failureModeDeny ?? false).toBe(false);
      }
      // tpm, tpd, tpm per model, tpd per model: each a descriptor read from ext_authz's metadata, its limit the
      // Check's, no hits.
      expect(tokens.typedConfig.rateLimits).toHaveLength(4);
      for (const rl of tokens.typedConfig.rateLimits) {
        expect(rl.hitsAddend).toEqual({ number: '0' });
        expect(rl.limit.dynamicMetadata.metadataKey.key).toBe('envoy.filters.http.ext_authz');
        expect(rl.actions[1].metadata.metadataKey.path[0]).toEqual({ key: 'rl' });
      }
      expect(requests.typedConfig.rateLimits.map((r: Any) => r.actions[0].genericKey.descriptorValue)).toEqual([
        'rpm',
        'rpd',
        'rpm_m',
        'rpd_m',
      ]);
      expect(requests.typedConfig.enableXRatelimitHeaders).toBe('DRAFT_VERSION_03');
      const routes = allRoutes();
      const upstream = routes.filter(providerRoute);
      expect(upstream.length).toBeGreaterThan(10);
      for (const r of upstream)
        expect(Object.keys(r.typedPerFilterConfig), r.name).toEqual(
          expect.arrayContaining([tokens.name, requests.name, 'modelgate.drop_request_trailers']),
        );
      for (const r of routes.filter((x) => !providerRoute(x)))
        expect(Object.keys(r.typedPerFilterConfig), r.name).not.toContain(requests.name);
    });

    test("the local replies: Envoy's own errors on modelgate's requests (the mark present) in the client's error shape", () => {
      const { mappers } = hcm().localReplyConfig;
      expect(mappers.length).toBeGreaterThan(10);
      for (const m of mappers) expect(JSON.stringify(m.filter)).toContain('"filter":"modelgate"');
      const text = JSON.stringify(mappers);
      for (const reason of [
        'authz_unavailable',
        'body_too_large',
        'upstream_unavailable',
        'upstream_timeout',
        'rate_limit_unavailable',
      ])
        expect(text).toContain(reason);
      expect(text).toContain('limit of 33554432 bytes');
    });

    test("with envoyproxy/ratelimit (rateLimits.engine global): the filters call a cluster of the patch's own at rateLimits.service, with the release's domain, timeout and failure mode; the 413's hint names the release's body limit", () => {
      const g = translate(
        'config.rateLimits.engine=global',
        'config.rateLimits.service=ratelimit.ai.svc:8081',
        'config.rateLimits.failureMode=deny',
        'config.rateLimits.timeoutMs=250',
        'config.rateLimits.domain=team-ai',
        'config.gateway.maxRequestBytes=1048576',
      );
      for (const a of g.out.envoyPatchPolicies[0].status.ancestors)
        expect(
          a.conditions.find((c: Any) => c.type === 'Accepted'),
          JSON.stringify(a),
        ).toMatchObject({ status: 'True' });
      const cluster = g.xds.clusters().find((c: Any) => c.name === 'mg-modelgate-ratelimit');
      expect(cluster.loadAssignment.endpoints[0].lbEndpoints[0].endpoint.address.socketAddress).toEqual({
        address: 'ratelimit.ai.svc',
        portValue: 8081,
      });
      const listener = g.xds.listeners().find((l: Any) => l.name === 'ai/eg/http');
      const manager = [...(listener.filterChains ?? []), listener.defaultFilterChain].filter(Boolean)[0].filters[0]
        .typedConfig;
      for (const name of ['modelgate.ratelimit_tokens', 'modelgate.ratelimit_requests']) {
        const f = manager.httpFilters.find((x: Any) => x.name === name).typedConfig;
        expect(f).toMatchObject({
          domain: 'team-ai',
          timeout: '0.250s',
          failureModeDeny: true,
          rateLimitService: { grpcService: { envoyGrpc: { clusterName: 'mg-modelgate-ratelimit' } } },
        });
      }
      const replies = JSON.stringify(manager.localReplyConfig);
      expect(replies).toContain('limit of 1048576 bytes');
      expect(replies).not.toContain('limit of 33554432 bytes');
    });

    test('the /alt routes: every endpoint under the alternate prefix to the alt upstream, path as sent', () => {
      const routes = allRoutes();
      const chat = routes.find((r: Any) => r.match.path === '/alt/v1/chat/completions');
      expect(chat.route.hostRewriteLiteral).toBe('alt.example.com');
      expect(
        xds.loadAssignment(chat.route.cluster).endpoints[0].lbEndpoints[0].endpoint.address.socketAddress.address,
      ).toBe('10.0.0.14');
      expect(chat.requestHeadersToRemove).toEqual(
        expect.arrayContaining(['authorization', 'x-api-key', 'x-goog-api-key', 'x-modelgate-request']),
      );
      expect(routes.find((r: Any) => r.match.path === '/alt/v1/models')).toBeDefined();
      expect(routes.filter((r: Any) => r.name.startsWith('httproute/ai/modelgate-providers-alt/'))).toHaveLength(
        chartRoutes().length,
      );
    });

    test('the meter: the Lua tail on every route, and the gRPC access log to modelgate with the metered filter', () => {
      const lua = hcm().httpFilters[3];
      expect(lua.typedConfig.defaultSourceCode?.inlineString ?? JSON.stringify(lua.typedConfig)).toContain(
        'modelgate meter',
      );
      expect(JSON.stringify(xds.raw)).toContain(JSON.stringify(METER_LUA).slice(1, 200));
      for (const r of allRoutes()) expect(Object.keys(r.typedPerFilterConfig), r.name).toContain(lua.name);
      const [log] = hcm().accessLog;
      expect(log.typedConfig.commonConfig).toMatchObject({
        logName: 'modelgate_meter',
        bufferSizeBytes: 0,
        bufferFlushInterval: '0.050s',
      });
      expect(log.typedConfig.additionalResponseHeadersToLog).toEqual(['content-type', 'content-encoding']);
      expect(log.filter.extensionFilter.typedConfig.expression).toContain(
        "metadata.filter_metadata['envoy.filters.http.ext_authz']['metered'] == true",
      );
      const als = xds
        .clusters()
        .find((c: Any) => c.name === log.typedConfig.commonConfig.grpcService.envoyGrpc.clusterName);
      expect(xds.loadAssignment(als.name).endpoints[0].lbEndpoints[0].endpoint.address.socketAddress.portValue).toBe(
        9191,
      );
      expect(JSON.stringify(als.transportSocketMatches)).toContain('ai/mg-modelgate-envoy-client');
    });

    test("each provider route removes every key header but its own credential's; the model lists go to modelgate's HTTP port", () => {
      const routes = allRoutes();
      expect(routes.length).toBe(chartRoutes().length * 2);
      const chat = routes.find((r: Any) => r.match.path === '/v1/chat/completions');
      expect(chat.requestHeadersToRemove).toEqual(expect.arrayContaining(['x-api-key', 'x-goog-api-key', 'cookie']));
      expect(chat.requestHeadersToRemove).not.toContain('authorization');
      expect(chat.route.hostRewriteLiteral).toBe('api.openai.com');
      const messages = routes.find((r: Any) => r.match.path === '/v1/messages');
      expect(messages.requestHeadersToRemove).toContain('authorization');
      expect(messages.requestHeadersToRemove).not.toContain('x-api-key');
      const list = routes.find((r: Any) => r.match.path === '/v1/models');
      expect(
        xds.loadAssignment(list.route.cluster).endpoints[0].lbEndpoints[0].endpoint.address.socketAddress.portValue,
      ).toBe(9192);
    });

    test('the translated xDS, made one static bootstrap, is valid for the pinned Envoy', () => {
      const file = join(dir, 'bootstrap.json');
      const names = xds.sdsNames();
      const certs = makeTestCerts();
      const secrets = [
        ...names.certificates.map((name) => ({
          name,
          tlsCertificate: {
            certificateChain: { filename: certs.clientCert },
            privateKey: { filename: certs.clientKey },
          },
        })),
        // The providers' Backends trust the system CAs (wellKnownCACertificates: System).
        ...names.validationContexts.map((name) => ({
          name,
          validationContext: {
            trustedCa: {
              filename: name === 'system_ca_certificates' ? '/etc/ssl/certs/ca-certificates.crt' : certs.serverCa,
            },
          },
        })),
      ];
      expect(names).toEqual({
        certificates: ['ai/mg-modelgate-envoy-client'],
        validationContexts: ['system_ca_certificates', 'mg-modelgate-grpc-tls/ai-ca'],
      });
      writeFileSync(file, JSON.stringify(translatedBootstrap(xds, { adminPort: 0, secrets })));
      const r = spawnSync(
        ensureEnvoy({ install: false }).path,
        ['--mode', 'validate', '-c', file, '--disable-hot-restart'],
        { encoding: 'utf8' },
      );
      expect(r.status, r.stdout + r.stderr).toBe(0);
    });
  },
);

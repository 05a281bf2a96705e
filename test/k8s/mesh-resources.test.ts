/**
 * The chart's Envoy Gateway and Istio resources, rendered by the pinned Helm: their contract files
 * are today's (files/: src/envoy/chart-contract.ts), the Envoy Gateway objects hold what the plain
 * bundle holds (checked here field by field; test/k8s/envoy-gateway.test.ts translates them with
 * egctl), and the Istio objects validate against Istio's own CRD schemas (istio.io/api, pinned:
 * package.json config.istioApi, from the Go module proxy) with ajv, unknown fields refused as the
 * API server's strict field validation does (the CRDs' CEL rules are not evaluated here).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { chartAltRoutes, chartFiles, chartRoutes } from '../../src/envoy/chart-contract';
import { METER_LUA } from '../../src/envoy/meter-filters';
import { requestPerRoute } from '../../src/envoy/request-mark';
import { ensureEnvoy } from '../../src/envoy/ensure';
import { crdSchemas, crdValidator, goModule } from '../support/crd-schemas';
import { goTool } from '../support/go-tools';

const ROOT = join(__dirname, '..', '..');
const CHART = join(ROOT, 'deploy', 'helm', 'modelgate');
const VALUES = join(ROOT, 'test', 'k8s', 'values');
const helm = goTool('helm');
type Any = any; // eslint-disable-line @typescript-eslint/no-explicit-any
type Obj = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; spec: any }; // eslint-disable-line @typescript-eslint/no-explicit-any

function render(values: string, ...args: string[]): { status: number | null; stderr: string; objects: Obj[] } {
  if ('missing' in helm) throw new Error(helm.missing);
  const r = spawnSync(helm.path, ['template', 'mg', CHART, '--namespace', 'ai', '-f', join(VALUES, values), ...args], {
    encoding: 'utf8',
  });
  return {
    status: r.status,
    stderr: r.stderr,
    objects:
      r.status === 0
        ? parseAllDocuments(r.stdout)
            .map((d) => d.toJS() as Obj)
            .filter(Boolean)
        : [],
  };
}
const ofKind = (objects: Obj[], kind: string): Obj[] => objects.filter((o) => o.kind === kind);

test("the chart's contract files are what src/envoy/chart-contract.ts derives today (npm run gen:chart)", () => {
  for (const [name, text] of Object.entries(chartFiles()))
    expect(
      readFileSync(join(CHART, 'files', name), 'utf8'),
      `deploy/helm/modelgate/files/${name}: run npm run gen:chart`,
    ).toBe(text);
});

describe.skipIf('missing' in helm)('Envoy Gateway resources', () => {
  const { objects } = render('envoy-gateway.yaml');

  test("SecurityPolicy: gRPC ext_authz to modelgate's Service with the body, the decision headers, fail closed, an explicit timeout", () => {
    const [sp] = ofKind(objects, 'SecurityPolicy');
    expect(sp.spec.targetRefs).toEqual([
      { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'modelgate-providers' },
      { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'modelgate-providers-alt' },
    ]);
    expect(sp.spec.extAuth).toEqual({
      grpc: { backendRefs: [{ name: 'mg-modelgate', port: 9191 }] },
      headersToExtAuth: chartFiles()['contract.json'] && JSON.parse(chartFiles()['contract.json']).checkRequestHeaders,
      bodyToExtAuth: { maxRequestBytes: 33554432 },
      failOpen: false,
      statusOnError: 503,
      timeout: '1000ms',
    });
  });

  test.each([
    ['modelgate-providers', false],
    ['modelgate-providers-alt', true],
  ])(
    "HTTPRoute %s: one rule per endpoint match, each provider's credential header kept on its own route only",
    (name, alt) => {
      const route = ofKind(objects, 'HTTPRoute').find((o) => o.metadata.name === name)!;
      const routes = alt ? chartAltRoutes('/alt') : chartRoutes();
      expect(route.spec.rules).toHaveLength(routes.length);
      routes.forEach((r, i) => {
        const rule = route.spec.rules[i];
        expect(rule.matches).toEqual([{ path: { type: r.match, value: r.path }, method: r.method }]);
        if (r.to === 'modelgate') {
          expect(rule.backendRefs).toEqual([{ name: 'mg-modelgate', port: 9192 }]);
          return;
        }
        expect(rule.backendRefs).toEqual([
          { group: 'gateway.envoyproxy.io', kind: 'Backend', name: `mg-modelgate-${r.to}` },
        ]);
        const removed: string[] = rule.filters[0].requestHeaderModifier.remove;
        // The values give the alt upstream no credential of its own: its route removes all three.
        const own = { chat: 'authorization', messages: 'x-api-key', generative: 'x-goog-api-key', alt: undefined }[
          r.to
        ];
        if (own) expect(removed).not.toContain(own);
        for (const other of Object.values({
          chat: 'authorization',
          messages: 'x-api-key',
          generative: 'x-goog-api-key',
        }).filter((h) => h !== own))
          expect(removed).toContain(other);
        if (alt) expect(r.path.startsWith('/alt/')).toBe(true);
        expect(removed).toEqual(expect.arrayContaining(['cookie', 'x-modelgate-console-key', 'proxy-authorization']));
        if (r.rewrite)
          expect(rule.filters[1].urlRewrite.path).toEqual({ type: 'ReplaceFullPath', replaceFullPath: r.rewrite });
      });
    },
  );

  test('the meter: the Lua tail of the plain bundle, and the access log to modelgate for metered and unanswered requests', () => {
    const [ext] = ofKind(objects, 'EnvoyExtensionPolicy');
    expect(ext.spec.lua).toEqual([{ type: 'Inline', inline: METER_LUA }]);
    const [proxy] = ofKind(objects, 'EnvoyProxy');
    const [setting] = proxy.spec.telemetry.accessLog.settings;
    expect(setting.sinks).toEqual([
      {
        type: 'ALS',
        als: {
          type: 'HTTP',
          logName: 'modelgate_meter',
          backendRefs: [{ name: 'mg-modelgate', namespace: 'ai', port: 9191 }],
          http: { responseHeaders: ['content-type', 'content-encoding'] },
        },
      },
    ]);
    expect(setting.matches[0]).toContain("metadata.filter_metadata['envoy.filters.http.ext_authz']['metered'] == true");
    expect(proxy.spec.backendTLS.clientCertificateRef).toEqual({
      kind: 'Secret',
      name: 'mg-modelgate-envoy-client',
      namespace: 'ai',
    });
  });

  test("refuses modelgate's embedded rate limit engine behind more than one replica (each would count alone)", () => {
    const r = render(
      'envoy-gateway.yaml',
      '--set',
      'replicaCount=2',
      '--set',
      'store.kind=postgres',
      '--set',
      'store.postgres.existingSecret=pg',
    );
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('each replica would count on its own');
    expect(
      render(
        'envoy-gateway.yaml',
        '--set',
        'replicaCount=2',
        '--set',
        'store.kind=postgres',
        '--set',
        'store.postgres.existingSecret=pg',
        '--set',
        'config.rateLimits.engine=global',
      ).status,
    ).toBe(0);
  });

  test('refuses Envoy Gateway with the shared secret (its ext_authz and access log cannot send it)', () => {
    const r = render(
      'envoy-gateway.yaml',
      '--set',
      'grpcAuth.mode=secret',
      '--set',
      'grpcAuth.secret.existingSecret=s',
    );
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('envoyGateway.enabled needs grpcAuth.mode mtls');
  });
});

/** Istio's CRD schemas (istio.io/api at the pinned version). */
function istioSchemas(): Map<string, object> {
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { config: { istioApi: string } })
    .config.istioApi;
  return crdSchemas([join(goModule('istio.io/api', version), 'kubernetes', 'customresourcedefinitions.gen.yaml')]);
}

describe.skipIf('missing' in helm)('Istio resources', () => {
  const { objects } = render('istio.yaml');
  const validate = crdValidator(istioSchemas());

  test('every Istio object validates against its CRD schema, and an unknown field is refused', () => {
    const istio = objects.filter((o) => o.apiVersion.includes('istio.io'));
    expect(istio.map((o) => o.kind).sort()).toEqual([
      'AuthorizationPolicy',
      'AuthorizationPolicy',
      'EnvoyFilter',
      'EnvoyFilter',
      'PeerAuthentication',
      'Telemetry',
    ]);
    for (const o of istio) expect(validate(o), `${o.kind} ${o.metadata.name}`).toEqual([]);
    const [authz] = ofKind(objects, 'AuthorizationPolicy');
    expect(validate({ ...authz, spec: { ...authz.spec, acton: 'CUSTOM' } }).join()).toContain('additionalProperty');
  });

  test("CUSTOM on the provider paths only, with the meter's Lua and access log on the gateway", () => {
    const custom = ofKind(objects, 'AuthorizationPolicy').find((o) => o.spec.action === 'CUSTOM')!;
    expect(custom.spec.provider).toEqual({ name: 'modelgate' });
    expect(custom.spec.rules).toEqual([
      {
        to: [
          {
            operation: { paths: [...new Set(chartRoutes().map((r) => (r.match === 'Exact' ? r.path : `${r.path}*`)))] },
          },
        ],
      },
    ]);
    const filter = ofKind(objects, 'EnvoyFilter').find((o) => o.metadata.name === 'mg-modelgate-meter')!;
    expect(filter.spec.configPatches[0].patch.value.typed_config.default_source_code.inline_string).toBe(METER_LUA);
    const [telemetry] = ofKind(objects, 'Telemetry');
    expect(telemetry.spec.accessLogging[0].providers).toEqual([{ name: 'modelgate-meter' }]);
  });

  test("the request mark before Istio's ext_authz: the plain bundle's mutations, a config the pinned Envoy accepts", () => {
    const mark = ofKind(objects, 'EnvoyFilter').find((o) => o.metadata.name === 'mg-modelgate-request-mark')!;
    const filters = mark.spec.configPatches.map((p: Any) => {
      expect(p.match.listener.filterChain.filter.subFilter).toEqual({ name: 'envoy.filters.http.ext_authz' });
      expect(p.patch.operation).toBe('INSERT_BEFORE');
      return p.patch.value;
    });
    const per = requestPerRoute() as Record<string, Any>;
    expect(filters.map((f: Any) => f.name)).toEqual(['modelgate.request', 'modelgate.request_metadata']);
    expect(filters[0].typed_config.mutations).toEqual(per['modelgate.request'].mutations);
    expect(filters[1].typed_config.request_rules).toEqual(per['modelgate.request_metadata'].request_rules);
    // The two filters, on in a listener's chain as the EnvoyFilter inserts them, through `envoy --mode validate`.
    const bootstrap = {
      static_resources: {
        listeners: [
          {
            name: 'l',
            address: { socket_address: { address: '127.0.0.1', port_value: 0 } },
            filter_chains: [
              {
                filters: [
                  {
                    name: 'envoy.filters.network.http_connection_manager',
                    typed_config: {
                      '@type':
                        'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
                      stat_prefix: 'l',
                      route_config: {
                        virtual_hosts: [
                          {
                            name: 'v',
                            domains: ['*'],
                            routes: [{ match: { prefix: '/' }, direct_response: { status: 200 } }],
                          },
                        ],
                      },
                      http_filters: [
                        ...filters,
                        {
                          name: 'envoy.filters.http.router',
                          typed_config: {
                            '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
                          },
                        },
                      ],
                    },
                  },
                ],
              },
            ],
          },
        ],
      },
    };
    const r = spawnSync(
      ensureEnvoy({ install: false }).path,
      ['--mode', 'validate', '--disable-hot-restart', '--config-yaml', JSON.stringify(bootstrap)],
      { encoding: 'utf8' },
    );
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });
});

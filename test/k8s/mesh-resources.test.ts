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
import Ajv from 'ajv';
import { describe, expect, test } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { chartFiles, chartRoutes } from '../../src/envoy/chart-contract';
import { METER_LUA } from '../../src/envoy/meter-filters';
import { goTool } from '../support/go-tools';

const ROOT = join(__dirname, '..', '..');
const CHART = join(ROOT, 'deploy', 'helm', 'modelgate');
const VALUES = join(ROOT, 'test', 'k8s', 'values');
const helm = goTool('helm');
type Obj = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; spec: any }; // eslint-disable-line @typescript-eslint/no-explicit-any

function render(values: string, ...args: string[]): { status: number | null; stderr: string; objects: Obj[] } {
  if ('missing' in helm) throw new Error(helm.missing);
  const r = spawnSync(helm.path, ['template', 'mg', CHART, '--namespace', 'ai', '-f', join(VALUES, values), ...args], { encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr, objects: r.status === 0 ? parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj).filter(Boolean) : [] };
}
const ofKind = (objects: Obj[], kind: string): Obj[] => objects.filter((o) => o.kind === kind);

test('the chart\'s contract files are what src/envoy/chart-contract.ts derives today (npm run gen:chart)', () => {
  for (const [name, text] of Object.entries(chartFiles())) expect(readFileSync(join(CHART, 'files', name), 'utf8'), `deploy/helm/modelgate/files/${name}: run npm run gen:chart`).toBe(text);
});

describe.skipIf('missing' in helm)('Envoy Gateway resources', () => {
  const { objects } = render('envoy-gateway.yaml');

  test('SecurityPolicy: gRPC ext_authz to modelgate\'s Service with the body, the decision headers, fail closed, an explicit timeout', () => {
    const [sp] = ofKind(objects, 'SecurityPolicy');
    expect(sp.spec.targetRefs).toEqual([{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'modelgate-providers' }]);
    expect(sp.spec.extAuth).toEqual({
      grpc: { backendRefs: [{ name: 'mg-modelgate', port: 9191 }] },
      headersToExtAuth: chartFiles()['contract.json'] && JSON.parse(chartFiles()['contract.json']).checkRequestHeaders,
      bodyToExtAuth: { maxRequestBytes: 33554432 },
      failOpen: false,
      statusOnError: 503,
      timeout: '1000ms',
    });
  });

  test('HTTPRoute: one rule per endpoint match, each provider\'s credential header kept on its own route only', () => {
    const [route] = ofKind(objects, 'HTTPRoute');
    const routes = chartRoutes();
    expect(route.spec.rules).toHaveLength(routes.length);
    routes.forEach((r, i) => {
      const rule = route.spec.rules[i];
      expect(rule.matches).toEqual([{ path: { type: r.match, value: r.path }, method: r.method }]);
      if (r.to === 'modelgate') {
        expect(rule.backendRefs).toEqual([{ name: 'mg-modelgate', port: 9192 }]);
        return;
      }
      expect(rule.backendRefs).toEqual([{ group: 'gateway.envoyproxy.io', kind: 'Backend', name: `mg-modelgate-${r.to}` }]);
      const removed: string[] = rule.filters[0].requestHeaderModifier.remove;
      const own = { chat: 'authorization', messages: 'x-api-key', generative: 'x-goog-api-key' }[r.to];
      expect(removed).not.toContain(own);
      for (const other of Object.values({ chat: 'authorization', messages: 'x-api-key', generative: 'x-goog-api-key' }).filter((h) => h !== own)) expect(removed).toContain(other);
      expect(removed).toEqual(expect.arrayContaining(['cookie', 'x-modelgate-console-key', 'proxy-authorization']));
      if (r.rewrite) expect(rule.filters[1].urlRewrite.path).toEqual({ type: 'ReplaceFullPath', replaceFullPath: r.rewrite });
    });
  });

  test('the meter: the Lua tail of the plain bundle, and the access log to modelgate for metered and unanswered requests', () => {
    const [ext] = ofKind(objects, 'EnvoyExtensionPolicy');
    expect(ext.spec.lua).toEqual([{ type: 'Inline', inline: METER_LUA }]);
    const [proxy] = ofKind(objects, 'EnvoyProxy');
    const [setting] = proxy.spec.telemetry.accessLog.settings;
    expect(setting.sinks).toEqual([{ type: 'ALS', als: { type: 'HTTP', logName: 'modelgate_meter', backendRefs: [{ name: 'mg-modelgate', namespace: 'ai', port: 9191 }], http: { responseHeaders: ['content-type', 'content-encoding'] } } }]);
    expect(setting.matches[0]).toContain("metadata.filter_metadata['envoy.filters.http.ext_authz']['metered'] == true");
    expect(proxy.spec.backendTLS.clientCertificateRef).toEqual({ kind: 'Secret', name: 'mg-modelgate-envoy-client', namespace: 'ai' });
  });

  test('refuses Envoy Gateway with the shared secret (its ext_authz and access log cannot send it)', () => {
    const r = render('envoy-gateway.yaml', '--set', 'grpcAuth.mode=secret', '--set', 'grpcAuth.secret.existingSecret=s');
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('envoyGateway.enabled needs grpcAuth.mode mtls');
  });
});

/** Istio's CRD schemas (istio.io/api at the pinned version), by apiVersion and kind. */
function istioSchemas(): Map<string, object> {
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { config: { istioApi: string } }).config.istioApi;
  const go = process.env.GO ?? '/usr/local/go/bin/go';
  const r = spawnSync(go, ['mod', 'download', '-json', `istio.io/api@${version}`], { encoding: 'utf8', cwd: ROOT, timeout: 300_000 });
  if (r.status !== 0) throw new Error(`go mod download istio.io/api@${version} failed: ${r.stdout}${r.stderr}`);
  const dir = (JSON.parse(r.stdout) as { Dir: string }).Dir;
  const out = new Map<string, object>();
  for (const doc of parseAllDocuments(readFileSync(join(dir, 'kubernetes', 'customresourcedefinitions.gen.yaml'), 'utf8'))) {
    const crd = doc.toJS() as { spec: { group: string; names: { kind: string }; versions: { name: string; schema: { openAPIV3Schema: object } }[] } } | null;
    if (!crd) continue;
    for (const v of crd.spec.versions) out.set(`${crd.spec.group}/${v.name} ${crd.spec.names.kind}`, strict(v.schema.openAPIV3Schema));
  }
  return out;
}

/** Unknown fields refused (the API server's strict field validation), except where the schema keeps them. */
function strict(schema: any): any { // eslint-disable-line @typescript-eslint/no-explicit-any
  if (Array.isArray(schema)) return schema.map(strict);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([p, s]) => [p, strict(s)])) : strict(v);
  if (out.properties && out.additionalProperties === undefined && !out['x-kubernetes-preserve-unknown-fields']) out.additionalProperties = false;
  return out;
}

describe.skipIf('missing' in helm)('Istio resources', () => {
  const { objects } = render('istio.yaml');
  const schemas = istioSchemas();
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  const validate = (o: Obj): string[] => {
    const schema = schemas.get(`${o.apiVersion} ${o.kind}`);
    if (!schema) return [`no schema for ${o.apiVersion} ${o.kind}`];
    const check = ajv.compile(schema);
    return check({ spec: o.spec }) ? [] : check.errors!.map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`);
  };

  test('every Istio object validates against its CRD schema, and an unknown field is refused', () => {
    const istio = objects.filter((o) => o.apiVersion.includes('istio.io'));
    expect(istio.map((o) => o.kind).sort()).toEqual(['AuthorizationPolicy', 'AuthorizationPolicy', 'EnvoyFilter', 'PeerAuthentication', 'Telemetry']);
    for (const o of istio) expect(validate(o), `${o.kind} ${o.metadata.name}`).toEqual([]);
    const [authz] = ofKind(objects, 'AuthorizationPolicy');
    expect(validate({ ...authz, spec: { ...authz.spec, acton: 'CUSTOM' } }).join()).toContain('additionalProperty');
  });

  test('CUSTOM on the provider paths only, with the meter\'s Lua and access log on the gateway', () => {
    const custom = ofKind(objects, 'AuthorizationPolicy').find((o) => o.spec.action === 'CUSTOM')!;
    expect(custom.spec.provider).toEqual({ name: 'modelgate' });
    expect(custom.spec.rules).toEqual([{ to: [{ operation: { paths: [...new Set(chartRoutes().map((r) => (r.match === 'Exact' ? r.path : `${r.path}*`)))] } }] }]);
    const [filter] = ofKind(objects, 'EnvoyFilter');
    expect(filter.spec.configPatches[0].patch.value.typed_config.default_source_code.inline_string).toBe(METER_LUA);
    const [telemetry] = ofKind(objects, 'Telemetry');
    expect(telemetry.spec.accessLogging[0].providers).toEqual([{ name: 'modelgate-meter' }]);
  });
});

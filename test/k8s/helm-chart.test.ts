/**
 * The Helm chart (deploy/helm/modelgate/), with the pinned Helm (scripts/ensure-helm): `helm lint
 * --strict` and `helm template` with several values sets, the rendered objects asserted, the config
 * it renders loaded by modelgate's own parser, the refusals (helm `fail`) it must make, and every
 * core object validated offline by kubernetes-validate (scripts/ensure-kubernetes-validate: the
 * Kubernetes 1.37 OpenAPI schemas it bundles, strict: unknown fields refused).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { parseConfig } from '../../src/config/load';
import { crdSchemas, crdValidator, goModule } from '../support/crd-schemas';
import { goTool } from '../support/go-tools';

const ROOT = join(__dirname, '..', '..');
const CHART = join(ROOT, 'deploy', 'helm', 'modelgate');
const VALUES = join(ROOT, 'test', 'k8s', 'values');
const helm = goTool('helm');
const dir = mkdtempSync(join(tmpdir(), 'modelgate-chart-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Obj = { apiVersion: string; kind: string; metadata: { name: string }; spec?: any; data?: Record<string, string> }; // eslint-disable-line @typescript-eslint/no-explicit-any
const PROVIDER_ENV = { OPENAI_API_KEY: 'sk-test', ANTHROPIC_API_KEY: 'sk-ant-test', GEMINI_API_KEY: 'g-test' };

function run(args: string[]): { status: number | null; stdout: string; stderr: string } {
  if ('missing' in helm) throw new Error(helm.missing);
  return spawnSync(helm.path, args, { encoding: 'utf8' });
}

/** `helm template` of the chart in namespace ai; the objects by kind. */
function render(...args: string[]): { text: string; byKind: Map<string, Obj[]> } {
  const r = run(['template', 'mg', CHART, '--namespace', 'ai', ...args]);
  expect(r.status, r.stderr).toBe(0);
  const byKind = new Map<string, Obj[]>();
  for (const doc of parseAllDocuments(r.stdout)) {
    const o = doc.toJS() as Obj | null;
    if (o) byKind.set(o.kind, [...(byKind.get(o.kind) ?? []), o]);
  }
  return { text: r.stdout, byKind };
}
const one = (m: Map<string, Obj[]>, kind: string): Obj => {
  expect(m.get(kind), kind).toHaveLength(1);
  return m.get(kind)![0];
};

function refusal(...args: string[]): string {
  const r = run(['template', 'mg', CHART, '--namespace', 'ai', ...args]);
  expect(r.status).not.toBe(0);
  return r.stderr;
}

/** kubernetes-validate's path (installed on first use); in CI a missing one fails. */
function validator(): string {
  const r = spawnSync(join(ROOT, 'scripts', 'ensure-kubernetes-validate'), { encoding: 'utf8', timeout: 600_000 });
  if (r.status !== 0) throw new Error(`kubernetes-validate is not available: ${r.stderr.trim()}`);
  return r.stdout.trim();
}
function validate(name: string, text: string): { status: number | null; out: string } {
  const file = join(dir, name);
  writeFileSync(file, text);
  const r = spawnSync(validator(), ['--strict', '-k', '1.37.0', file], { encoding: 'utf8' });
  return { status: r.status, out: r.stdout + r.stderr };
}

describe.skipIf('missing' in helm)(`the chart (${'missing' in helm ? helm.missing : 'helm ' + helm.path})`, () => {
  let fileSecret: ReturnType<typeof render>;
  let pgMtls: ReturnType<typeof render>;
  beforeAll(() => {
    fileSecret = render('-f', join(VALUES, 'file-secret.yaml'));
    pgMtls = render('-f', join(VALUES, 'postgres-mtls.yaml'));
  });

  test('helm lint --strict passes with each values set', () => {
    for (const values of ['file-secret.yaml', 'postgres-mtls.yaml', 'envoy-gateway.yaml', 'istio.yaml']) {
      const r = run(['lint', '--strict', CHART, '-f', join(VALUES, values)]);
      expect(r.status, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    }
  });

  test('one replica on the file store: probes, drain budget, non-root read-only pod, the secret and the credentials from Secrets', () => {
    const m = fileSecret.byKind;
    expect([...m.keys()].sort()).toEqual([
      'ConfigMap',
      'Deployment',
      'PersistentVolumeClaim',
      'PodDisruptionBudget',
      'Service',
      'ServiceAccount',
    ]);
    const d = one(m, 'Deployment').spec;
    expect(d.replicas).toBe(1);
    expect(d.strategy).toEqual({ type: 'Recreate' });
    const pod = d.template.spec;
    // preStop 5 + meter.drainSeconds 40 + ceil(2500 ms) 3 + margin 5
    expect(pod.terminationGracePeriodSeconds).toBe(53);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
    const c = pod.containers[0];
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(c.lifecycle.preStop).toEqual({ sleep: { seconds: 5 } });
    expect(c.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    expect(c.envFrom).toEqual([{ secretRef: { name: 'modelgate-providers' } }]);
    expect(c.env.find((e: { name: string }) => e.name === 'DATABASE_URL')).toBeUndefined();
    expect(pod.volumes.find((v: { name: string }) => v.name === 'grpc-secret').secret).toMatchObject({
      secretName: 'modelgate-grpc',
      items: [{ key: 'grpc-secret', path: 'secret' }],
    });
    expect(pod.volumes.find((v: { name: string }) => v.name === 'config').configMap).toEqual({ name: 'mg-modelgate' });
    // A directory mount: a subPath mount is never updated by the kubelet.
    expect(c.volumeMounts.filter((v: { subPath?: string }) => v.subPath)).toEqual([]);
    const svc = one(m, 'Service').spec;
    expect(svc.ports.map((p: { name: string; port: number }) => [p.name, p.port])).toEqual([
      ['grpc', 9191],
      ['http', 9192],
    ]);
  });

  test("the rendered modelgate.yaml loads with modelgate's parser and names the mounted secret and the state volume", () => {
    const text = one(fileSecret.byKind, 'ConfigMap').data!['modelgate.yaml'];
    const config = parseConfig(text, PROVIDER_ENV);
    expect(config.grpc.secret).toEqual({ file: '/etc/modelgate/grpc-secret/secret' });
    expect(config.meter.stateFile).toBe('/var/lib/modelgate/meter.state.json');
    expect(config.meter.drainSeconds).toBe(40);
    expect(config.store.kind).toBe('file');
    expect(config.keys.map((k) => k.id)).toEqual(['alice']);
    const mounts = one(fileSecret.byKind, 'Deployment').spec.template.spec.containers[0].volumeMounts.map(
      (v: { mountPath: string }) => v.mountPath,
    );
    expect(mounts).toEqual(
      expect.arrayContaining(['/etc/modelgate/grpc-secret', '/var/lib/modelgate', '/etc/modelgate/config']),
    );
  });

  test('three replicas on PostgreSQL with mTLS: the URL from a Secret, the TLS files mounted, ServiceMonitor and NetworkPolicy', () => {
    const m = pgMtls.byKind;
    expect(m.has('PersistentVolumeClaim')).toBe(false);
    const d = one(m, 'Deployment').spec;
    expect(d.replicas).toBe(3);
    expect(d.strategy).toBeUndefined();
    const c = d.template.spec.containers[0];
    expect(c.env.find((e: { name: string }) => e.name === 'DATABASE_URL').valueFrom).toEqual({
      secretKeyRef: { name: 'modelgate-pg', key: 'url' },
    });
    expect(d.template.spec.volumes.find((v: { name: string }) => v.name === 'grpc-tls').secret.secretName).toBe(
      'modelgate-grpc-tls',
    );
    const config = parseConfig(one(m, 'ConfigMap').data!['modelgate.yaml'], PROVIDER_ENV);
    expect(config.grpc.tls).toEqual({
      certFile: '/etc/modelgate/tls/tls.crt',
      keyFile: '/etc/modelgate/tls/tls.key',
      clientCaFile: '/etc/modelgate/tls/ca.crt',
    });
    expect(config.grpc.secret ?? undefined).toBeUndefined();
    expect(config.gateway.authzTls?.serverName).toBe('mg-modelgate.ai.svc');
    const monitor = one(m, 'ServiceMonitor');
    expect(monitor.spec.endpoints).toEqual([{ port: 'http', path: '/metrics', interval: '30s' }]);
    // Its CRD's schema: the Prometheus Operator's (pinned: package.json config.prometheusOperator).
    const version = (
      JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { config: { prometheusOperator: string } }
    ).config.prometheusOperator;
    const crd = join(
      goModule('github.com/prometheus-operator/prometheus-operator', version),
      'example',
      'prometheus-operator-crd',
      'monitoring.coreos.com_servicemonitors.yaml',
    );
    const validate = crdValidator(crdSchemas([crd]));
    expect(validate(monitor)).toEqual([]);
    expect(
      validate({ ...monitor, spec: { ...monitor.spec, endpoints: [{ port: 'http', intervall: '30s' }] } }).join(),
    ).toContain('additionalProperty');
    const np = one(m, 'NetworkPolicy').spec;
    expect(np.ingress[0]).toEqual({
      ports: [{ port: 'grpc', protocol: 'TCP' }],
      from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'envoy-gateway-system' } } }],
    });
    expect(np.ingress[1].from).toHaveLength(2);
    expect(one(m, 'PodDisruptionBudget').spec).toMatchObject({ maxUnavailable: 1 });
  });

  test('refuses more than one replica on the file store, an open gRPC port, a missing Secret and an open NetworkPolicy', () => {
    const f = join(VALUES, 'file-secret.yaml');
    expect(refusal('-f', f, '--set', 'replicaCount=2')).toContain(
      'replicaCount 2 on the file store: each replica would keep its own balances',
    );
    expect(refusal('-f', f, '--set', 'grpcAuth.mode=none')).toContain(
      "grpcAuth.mode none leaves modelgate's gRPC port",
    );
    expect(refusal('-f', f, '--set', 'grpcAuth.secret.existingSecret=')).toContain(
      'grpcAuth.mode secret needs grpcAuth.secret.existingSecret',
    );
    expect(refusal('-f', f, '--set', 'grpcAuth.mode=mtls')).toContain(
      'grpcAuth.mode mtls needs grpcAuth.tls.existingSecret',
    );
    expect(refusal('-f', f, '--set', 'store.kind=postgres')).toContain(
      'store.kind postgres needs store.postgres.existingSecret',
    );
    expect(refusal('-f', f, '--set', 'networkPolicy.enabled=true')).toContain(
      'networkPolicy.enabled needs networkPolicy.grpcFrom',
    );
    // Envoy in the same pod may leave the port without a secret, only when asked to.
    expect(
      run(['template', 'mg', CHART, '-f', f, '--set', 'grpcAuth.mode=none', '--set', 'grpcAuth.allowNone=true']).status,
    ).toBe(0);
  });

  test('every core object validates against the Kubernetes 1.37 schemas (strict), and the validator refuses an unknown field', () => {
    for (const [name, r] of [
      ['file-secret', fileSecret],
      ['postgres-mtls', pgMtls],
    ] as const) {
      const v = validate(`${name}.yaml`, r.text);
      expect(v.status, v.out).toBe(0);
      expect(v.out.match(/ passed for resource /g)?.length).toBe(
        [...r.byKind.entries()].filter(([k]) => k !== 'ServiceMonitor').reduce((n, [, list]) => n + list.length, 0),
      );
    }
    // The core objects beside the Envoy Gateway and Istio ones (those: test/k8s/envoy-gateway.test.ts,
    // mesh-resources.test.ts).
    for (const values of ['envoy-gateway.yaml', 'istio.yaml']) {
      const r = render('-f', join(VALUES, values));
      const core = [
        'ConfigMap',
        'Deployment',
        'PersistentVolumeClaim',
        'PodDisruptionBudget',
        'Service',
        'ServiceAccount',
      ].flatMap((k) => r.byKind.get(k) ?? []);
      const v = validate(values, core.map((o) => JSON.stringify(o)).join('\n---\n'));
      expect(v.status, v.out).toBe(0);
      expect(v.out.match(/ passed for resource /g)?.length).toBe(core.length);
    }
    const bad = validate(
      'bad.yaml',
      fileSecret.text.replace('terminationGracePeriodSeconds:', 'terminationGracePeriod:'),
    );
    expect(bad.status).not.toBe(0);
    expect(bad.out).toMatch(/terminationGracePeriod/);
  });
});

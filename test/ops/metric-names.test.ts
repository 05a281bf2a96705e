/**
 * Every metric the alert rules (deploy/prometheus/modelgate-rules.yaml) and the dashboard
 * (deploy/grafana/modelgate-dashboard.json) read is one a running gateway exports: a real Envoy in
 * front of a `modelgate serve` process (with grpc.tls, so the certificate gauges are there), the
 * global rate limit engine, and traffic that makes every counter they name: allowed, denied,
 * rate-limited by requests and by tokens, the engine stopped (errors), and modelgate killed
 * (Envoy's ext_authz errors). Names are read from the samples of modelgate's /metrics and Envoy's
 * /stats/prometheus, never from `# TYPE` lines alone.
 */
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DEMO_KEYS } from '../support/demo-keys';
import { startGateway, type Gateway } from '../support/gateway';
import { describeGlobal, startGlobalEngine, type GlobalEngine } from '../support/global-engine';
import { exportedNames, metricNames } from '../support/promql-names';
import { limitedKey, sendAs, until, withKeys } from '../support/rate-limit-cases';
import { makeTestCerts, SERVER_NAME } from '../support/test-certs';

const ROOT = join(__dirname, '..', '..');
const rules = parse(readFileSync(join(ROOT, 'deploy', 'prometheus', 'modelgate-rules.yaml'), 'utf8')) as {
  groups: Array<{ rules: Array<{ expr: string; record?: string; alert?: string }> }>;
};
const dashboard = JSON.parse(readFileSync(join(ROOT, 'deploy', 'grafana', 'modelgate-dashboard.json'), 'utf8')) as {
  panels: Array<{ title: string; targets?: Array<{ expr: string }> }>;
};

/** Each query the rules and the dashboard run, with where it is. */
export const QUERIES: Array<{ where: string; expr: string }> = [
  ...rules.groups.flatMap((g) => g.rules.map((r) => ({ where: `rule ${r.alert ?? r.record}`, expr: r.expr }))),
  ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: `panel "${p.title}"`, expr: t.expr }))),
];
const recorded = new Set(
  rules.groups.flatMap((g) => g.rules.map((r) => r.record).filter((r): r is string => r !== undefined)),
);

const rpm = limitedKey('ops-rpm', { rpm: 1 });
const tpm = limitedKey('ops-tpm', { tpm: 1 });

describeGlobal('the metric names of the alert rules and the dashboard, against a live scrape', () => {
  let engine: GlobalEngine;
  let gw: Gateway;
  const names = new Set<string>();
  let modelgateText = '';
  let envoyText = '';
  const scrapeEnvoy = async () => {
    const text = await (await fetch(`${gw.envoy.adminUrl}/stats/prometheus`)).text();
    envoyText += text;
    for (const n of exportedNames(text)) names.add(n);
  };

  // An OTLP receiver for the GenAI metrics modelgate exports (OTEL_EXPORTER_OTLP_ENDPOINT).
  const otlpBodies: Buffer[] = [];
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      otlpBodies.push(Buffer.concat(chunks));
      res.writeHead(200).end();
    });
  });

  beforeAll(async () => {
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    engine = await startGlobalEngine();
    const certs = makeTestCerts();
    gw = await startGateway({
      modelgate: 'process',
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`,
        OTEL_METRIC_EXPORT_INTERVAL: '200',
      },
      config: (demo) =>
        withKeys([rpm, tpm])(`${demo.replace(/\nrateLimits:\n(  .*\n)+/, '\n')}\n${engine.configYaml('deny')}`)
          .replace(
            /^grpc:\n/m,
            `grpc:\n  tls: { certFile: ${certs.serverCert}, keyFile: ${certs.serverKey}, clientCaFile: ${certs.clientCa} }\n`,
          )
          .replace(
            /^gateway:\n/m,
            `gateway:\n  authzTls: { certFile: ${certs.clientCert}, keyFile: ${certs.clientKey}, caFile: ${certs.serverCa}, serverName: ${SERVER_NAME} }\n`,
          ),
    });
    const metrics = async () => (await fetch(`http://${gw.modelgate.httpAddress}/metrics`)).text();
    expect((await sendAs(gw, 'openai', DEMO_KEYS.bob)).status).toBe(200);
    expect((await sendAs(gw, 'anthropic', DEMO_KEYS.bob)).status).toBe(200);
    expect((await sendAs(gw, 'openai', rpm.key)).status).toBe(200);
    expect((await sendAs(gw, 'openai', rpm.key)).headers['x-modelgate-reason']).toBe('rate_limited');
    expect((await sendAs(gw, 'openai', tpm.key)).status).toBe(200);
    await until('the token charge', async () =>
      /modelgate_rate_limit_token_charges_total\{result="charged"\} [1-9]/.test(await metrics()),
    );
    expect((await sendAs(gw, 'openai', tpm.key)).headers['x-modelgate-reason']).toBe('tokens_rate_limited');
    expect((await sendAs(gw, 'openai', 'sk-not-a-key')).status).toBe(401);
    expect((await gw.send('GET', '/nothing')).status).toBe(404);
    await until('the meter to settle', async () =>
      /gen_ai_client_token_usage_count\{[^}]*gen_ai_provider_name="anthropic"/.test(await metrics()),
    );
    await until('an OTLP export of the settled responses', () =>
      otlpBodies.some((b) => b.includes('claude-sonnet-4-5')),
    );
    await engine.stopRatelimit();
    expect((await sendAs(gw, 'openai', rpm.key)).headers['x-modelgate-reason']).toBe('rate_limit_unavailable');
    expect((await sendAs(gw, 'openai', tpm.key)).headers['x-modelgate-reason']).toBe('rate_limit_unavailable');
    modelgateText = await metrics();
    for (const n of exportedNames(modelgateText)) names.add(n);
    await scrapeEnvoy();
    gw.modelgate.kill('SIGKILL');
    const r = await sendAs(gw, 'openai', DEMO_KEYS.bob);
    expect([r.status, r.headers['x-modelgate-reason']]).toEqual([503, 'authz_unavailable']);
    await scrapeEnvoy();
  }, 120_000);
  afterAll(async () => {
    await gw?.close();
    await engine?.close();
    await new Promise<void>((r) => receiver.close(() => r()));
  });

  it('exports the GenAI metrics over OTLP from a running modelgate when OTEL_EXPORTER_OTLP_ENDPOINT is set', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const root = require('@opentelemetry/otlp-transformer/build/src/generated/root') as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    const decoded = otlpBodies.map((b) =>
      root.opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest.decode(b),
    );
    const metrics = decoded.flatMap((r: any) =>
      r.resourceMetrics.flatMap((rm: any) => rm.scopeMetrics.flatMap((sm: any) => sm.metrics)),
    ); // eslint-disable-line @typescript-eslint/no-explicit-any
    const usage = metrics.filter((m: { name: string }) => m.name === 'gen_ai.client.token.usage');
    expect(usage.length).toBeGreaterThan(0);
    const models = new Set(
      usage.flatMap((m: any) =>
        m.histogram.dataPoints.flatMap((p: any) =>
          p.attributes.filter((a: any) => a.key === 'gen_ai.request.model').map((a: any) => a.value.stringValue),
        ),
      ),
    ); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect([...models].sort()).toEqual(['claude-sonnet-4-5', 'gpt-4o']);
  });

  it.each(QUERIES)('$where reads only exported metrics', ({ expr }) => {
    const used = metricNames(expr);
    expect(used.length).toBeGreaterThan(0);
    for (const name of used) expect(names.has(name) || recorded.has(name), `${name} is exported`).toBe(true);
  });

  it("names Envoy's clusters and stat prefix as the rendered bundle does (a renamed cluster would leave an alert silent)", () => {
    const wanted = new Set(
      QUERIES.flatMap(({ expr }) =>
        [...expr.matchAll(/(envoy_cluster_name|envoy_http_conn_manager_prefix)="([^"]+)"/g)].map(
          (m) => `${m[1]}="${m[2]}"`,
        ),
      ),
    );
    expect(wanted.size).toBeGreaterThanOrEqual(2);
    for (const label of wanted) expect(envoyText, label).toContain(label);
  });

  it('exports the gRPC certificate expiry as the certificate says (the test certificates last 2 days)', () => {
    const m = /modelgate_grpc_tls_cert_expiry_timestamp_seconds\{file="cert"\} (\d+)/.exec(modelgateText);
    expect(Number(m?.[1]) * 1000 - Date.now()).toBeGreaterThan(86_400_000);
    expect(Number(m?.[1]) * 1000 - Date.now()).toBeLessThan(2 * 86_400_000 + 60_000);
  });

  it('exports GenAI token usage by provider, operation, model and token type, never by key', () => {
    expect(modelgateText).toMatch(
      /gen_ai_client_token_usage_count\{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o",gen_ai_token_type="input"\} [1-9]/,
    );
    expect(modelgateText).toMatch(
      /gen_ai_client_token_usage_count\{gen_ai_operation_name="chat",gen_ai_provider_name="anthropic",gen_ai_request_model="claude-sonnet-4-5",gen_ai_token_type="output"\} [1-9]/,
    );
    expect(modelgateText).toMatch(
      /gen_ai_server_request_duration_seconds_count\{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o"\} [1-9]/,
    );
    for (const id of ['bob', rpm.id, tpm.id]) expect(modelgateText).not.toContain(`"${id}"`);
  });
});

it('reads metric names out of PromQL (labels, functions, keywords and durations are not names)', () => {
  expect(
    metricNames(
      'sum by (reason) (rate(a_total{reason!="x",b=~"y|z"}[5m])) / on () group_left sum(rate(b_total[1h] offset 5m)) > 3 * c:rec:x',
    ),
  ).toEqual(['a_total', 'b_total', 'c:rec:x']);
  expect(metricNames('histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m]))) > 1e3 or vector(0)')).toEqual([
    'h_bucket',
  ]);
  expect(metricNames('m - time() < 14 * 86400')).toEqual(['m']);
});

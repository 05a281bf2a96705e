/**
 * Through the real Envoy: an authenticated gRPC port. The finding: a grpc-js
 * client sent one forged meter stream (x-modelgate-key-id: k5, usage 100k/100k) and the
 * key was debited with no key at all; anything reaching the port could run Checks without limit.
 * - grpc.secret: Envoy presents the secret with every call (the rendered initial_metadata of
 *   ext_authz, the meter's access log, the rate limit filters' calls to the embedded engine and the
 *   health check), so traffic through Envoy is decided, metered, rate limited and health-checked as
 *   before; a caller without it gets denials and UNAUTHENTICATED streams and calls, no key is
 *   debited and no key's rate limit window is counted.
 * - An Envoy whose bundle lacks the secret, even set to fail open (failure_mode_allow: true), lets
 *   nothing through: a Check without the secret is a normal denial (503 authz_unauthenticated).
 * - grpc.tls (mTLS): Envoy connects with its client certificate (the rendered transport socket),
 *   everything works through it, rate limits included; a caller without a certificate of the client
 *   CA gets no connection.
 * Both HTTP/2 transports of the port.
 */
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { check, forgedMeterStream, health, metadata, shouldRateLimit } from '../support/grpc-clients';
import { limitedKey, roomInMinute, sendAs, withKeys } from '../support/rate-limit-cases';
import { CODE, UNIT } from '../../src/ratelimit/rls-codec';
import { makeTestCerts, SERVER_NAME, type TestCerts } from '../support/test-certs';

const SECRET = 'e2e-grpc-secret-7Jq2Lm9Xv4Rt8Wz1Ks5Np3Dh6Fb0Gc';
const CHAT = {
  headers: [
    ['authorization', `Bearer ${DEMO_KEYS.alice}`],
    ['content-type', 'application/json'],
  ] as [string, string][],
  body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}',
};
const ALICE_CHECK = { method: 'POST', path: '/v1/chat/completions', headers: CHAT.headers, body: CHAT.body };

/** A key limited to 2 requests a minute (the embedded engine, which answers on the authenticated port). */
const LIMITED = limitedKey('rl-port-auth', { rpm: 2 });

const withGrpc =
  (section: string, transport: string) =>
  (demo: string): string =>
    withKeys([LIMITED])(
      demo.replace(/^grpc:\n/m, `grpc:\n${section}`).replace('transport: builtin', `transport: ${transport}`),
    );

/**
 * A ShouldRateLimit on a key's requests-per-minute window, as Envoy's requests filter sends it (hits: how many to
 * count).
 */
const rpmCall = (keyId: string, hits: number) => ({
  domain: 'modelgate',
  hitsAddend: 1,
  descriptors: [
    {
      entries: [
        { key: 'limit', value: 'rpm' },
        { key: 'key', value: keyId },
      ],
      limit: { requestsPerUnit: 2, unit: UNIT.MINUTE },
      hitsAddend: hits,
    },
  ],
});

/** Two requests of the limited key pass, the third is 429 rate_limited (all in one minute window). */
const expectRateLimited = async (gw: Gateway): Promise<void> => {
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await sendAs(gw, 'openai', LIMITED.key);
    statuses.push(r.status);
    if (r.status === 429) expect(r.headers['x-modelgate-reason']).toBe('rate_limited');
  }
  expect(statuses).toEqual([200, 200, 429]);
};

/** The `usage` lines the meter wrote for alice. */
const aliceUsage = (gw: Gateway) =>
  gw.modelgate.logLines().filter((l) => l.includes('"msg":"usage"') && l.includes('"keyId":"alice"'));

const healthStats = async (gw: Gateway): Promise<{ success: number; failure: number }> => {
  const text = await (await fetch(`${gw.envoy.adminUrl}/stats?filter=cluster.modelgate_authz.health_check`)).text();
  const n = (name: string): number => Number(new RegExp(`health_check\\.${name}: (\\d+)`).exec(text)?.[1] ?? -1);
  return { success: n('success'), failure: n('failure') };
};

for (const transport of ['builtin', 'node'] as const) {
  describeE2E(`grpc.secret on the ${transport} transport, through Envoy`, () => {
    let gw: Gateway;
    beforeAll(async () => {
      gw = await startGateway({
        config: withGrpc('  secret: { env: MG_GRPC_SECRET }\n', transport),
        env: { MG_GRPC_SECRET: SECRET },
      });
    });
    afterAll(async () => gw?.close());

    it('renders the secret into every gRPC call Envoy makes to modelgate', () => {
      const b = parseYaml(gw.envoyYaml) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
      const filters = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters;
      const metadataOf = (name: string) =>
        filters.find((f: { name: string }) => f.name === name).typed_config.grpc_service.initial_metadata;
      expect(metadataOf('envoy.filters.http.ext_authz')).toEqual([{ key: 'authorization', value: `Bearer ${SECRET}` }]);
      const als = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.access_log.find(
        (l: { name: string }) => l.name === 'envoy.access_loggers.http_grpc',
      );
      expect(als.typed_config.common_config.grpc_service.initial_metadata).toEqual([
        { key: 'authorization', value: `Bearer ${SECRET}` },
      ]);
      for (const name of ['modelgate.ratelimit_tokens', 'modelgate.ratelimit_requests']) {
        const f = filters.find((x: { name: string }) => x.name === name).typed_config.rate_limit_service.grpc_service;
        expect(f.envoy_grpc.cluster_name).toBe('modelgate_ratelimit');
        expect(f.initial_metadata, name).toEqual([{ key: 'authorization', value: `Bearer ${SECRET}` }]);
      }
      const authz = b.static_resources.clusters.find((c: { name: string }) => c.name === 'modelgate_authz');
      expect(authz.health_checks[0].grpc_health_check.initial_metadata[0].header).toEqual({
        key: 'authorization',
        value: `Bearer ${SECRET}`,
      });
    });

    it('decides, meters and health-checks traffic through Envoy as before', async () => {
      const before = aliceUsage(gw).length;
      const r = await gw.send('POST', '/v1/chat/completions', CHAT);
      expect(r.status, r.text).toBe(200);
      await vi.waitFor(() => expect(aliceUsage(gw).length).toBe(before + 1), { timeout: 15_000 });
      await vi.waitFor(async () => expect((await healthStats(gw)).success).toBeGreaterThan(0), { timeout: 15_000 });
      expect((await healthStats(gw)).failure).toBe(0);
    });

    it('denies a direct Check without the secret (503 authz_unauthenticated) and fails its health check', async () => {
      const res = await check(gw.modelgate.grpcAddress, grpc.credentials.createInsecure(), ALICE_CHECK);
      expect(res.status?.code).toBe(14);
      expect(res.denied_response?.headers?.find((h) => h.header?.key === 'x-modelgate-reason')?.header?.value).toBe(
        'authz_unauthenticated',
      );
      await expect(health(gw.modelgate.grpcAddress, grpc.credentials.createInsecure())).rejects.toMatchObject({
        code: grpc.status.UNAUTHENTICATED,
      });
    });

    it('rate limits through Envoy (the embedded engine on the authenticated port); a ShouldRateLimit without the secret is refused and counts nothing', async () => {
      await roomInMinute(20);
      // 100 hits on the key's window, without the secret: refused before it is read.
      await expect(shouldRateLimit(gw.modelgate.grpcAddress, rpmCall(LIMITED.id, 100))).rejects.toMatchObject({
        code: grpc.status.UNAUTHENTICATED,
      });
      await expect(
        shouldRateLimit(gw.modelgate.grpcAddress, rpmCall(LIMITED.id, 100), metadata('Bearer not-the-secret')),
      ).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
      // Had either counted, the first request would be refused.
      await expectRateLimited(gw);
      expect(gw.received.filter((r) => r.headers['x-modelgate-key-id'] === LIMITED.id)).toHaveLength(2);
      // With the secret the same service answers (another key's window, checked only).
      const answer = await shouldRateLimit(
        gw.modelgate.grpcAddress,
        rpmCall('someone-else', 0),
        metadata(`Bearer ${SECRET}`),
      );
      expect(answer.overallCode).toBe(CODE.OK);
    });

    it('debits nothing for a forged meter stream without the secret (the finding)', async () => {
      const status = await forgedMeterStream(gw.modelgate.grpcAddress, metadata(), `forged-e2e-${transport}`);
      expect(status.code).toBe(grpc.status.UNAUTHENTICATED);
      // A request through Envoy after it is metered; by then the forged stream would have been too.
      const before = aliceUsage(gw).length;
      expect((await gw.send('POST', '/v1/chat/completions', CHAT)).status).toBe(200);
      await vi.waitFor(() => expect(aliceUsage(gw).length).toBe(before + 1), { timeout: 15_000 });
      expect(gw.modelgate.logLines().filter((l) => l.includes(`forged-e2e-${transport}`))).toEqual([]);
    });

    it('never logs the secret', () => {
      expect(gw.modelgate.logLines().join('\n')).not.toContain(SECRET);
    });
  });
}

describeE2E('an Envoy without the secret, set to fail open, lets nothing through', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({
      config: withGrpc('  secret: { env: MG_GRPC_SECRET }\n', 'builtin'),
      env: { MG_GRPC_SECRET: SECRET },
      editEnvoy: (b) => {
        const hcm = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
        for (const f of hcm.http_filters)
          if (f.typed_config?.grpc_service) delete f.typed_config.grpc_service.initial_metadata;
        hcm.http_filters.find(
          (f: { name: string }) => f.name === 'envoy.filters.http.ext_authz',
        ).typed_config.failure_mode_allow = true;
        for (const c of b.static_resources.clusters)
          for (const h of c.health_checks ?? []) delete h.grpc_health_check.initial_metadata;
      },
    });
  });
  afterAll(async () => gw?.close());

  const BIG = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"${'x'.repeat(4 * 1024 * 1024)}"}]}`;
  it.each([
    [false, 'a small body'],
    [true, 'a small body'],
    [false, 'a 4 MiB body (answered before modelgate reads it)'],
    [true, 'a 4 MiB body (answered before modelgate reads it)'],
  ])(
    'answers 503 authz_unauthenticated with a hint (HTTP/2: %s, %s), and the upstream gets nothing',
    async (http2, what) => {
      const before = gw.received.length;
      const r = await gw.send('POST', '/v1/chat/completions', {
        ...CHAT,
        ...(what.startsWith('a 4') ? { body: BIG } : {}),
        http2,
      });
      expect(r.status).toBe(503);
      expect(r.headers['x-modelgate-reason']).toBe('authz_unauthenticated');
      expect(String(r.headers['x-modelgate-hint'])).toMatch(/grpc\.secret/);
      expect(r.json()).toMatchObject({ error: { code: 'authz_unauthenticated' } });
      expect(gw.received.length).toBe(before);
    },
  );
});

for (const transport of ['builtin', 'node'] as const) {
  describeE2E(`grpc.tls (mTLS) on the ${transport} transport, through Envoy`, () => {
    let gw: Gateway;
    let certs: TestCerts;
    beforeAll(async () => {
      certs = makeTestCerts();
      gw = await startGateway({
        config: (demo) =>
          withGrpc(
            `  tls: { certFile: ${certs.serverCert}, keyFile: ${certs.serverKey}, clientCaFile: ${certs.clientCa} }\n`,
            transport,
          )(demo).replace(
            /^gateway:\n/m,
            `gateway:\n  authzTls: { certFile: ${certs.clientCert}, keyFile: ${certs.clientKey}, caFile: ${certs.serverCa}, serverName: ${SERVER_NAME} }\n`,
          ),
      });
    });
    afterAll(async () => gw?.close());

    it('renders a TLS transport socket with the client certificate on every cluster to modelgate', () => {
      const b = parseYaml(gw.envoyYaml) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
      for (const name of ['modelgate_authz', 'modelgate_meter', 'modelgate_ratelimit']) {
        const ctx = b.static_resources.clusters.find((c: { name: string }) => c.name === name).transport_socket
          .typed_config;
        expect(ctx.sni).toBe(SERVER_NAME);
        expect(ctx.common_tls_context.tls_certificates[0].certificate_chain.filename).toBe(certs.clientCert);
        expect(ctx.common_tls_context.validation_context.match_typed_subject_alt_names).toEqual([
          { san_type: 'DNS', matcher: { exact: SERVER_NAME } },
        ]);
      }
    });

    it('decides, meters and health-checks traffic through Envoy over mTLS', async () => {
      const before = aliceUsage(gw).length;
      const r = await gw.send('POST', '/v1/chat/completions', CHAT);
      expect(r.status, r.text).toBe(200);
      await vi.waitFor(() => expect(aliceUsage(gw).length).toBe(before + 1), { timeout: 15_000 });
      await vi.waitFor(async () => expect((await healthStats(gw)).success).toBeGreaterThan(0), { timeout: 15_000 });
      expect((await healthStats(gw)).failure).toBe(0);
      // Over TLS indeed: Envoy's handshakes with modelgate, on both clusters.
      const ssl = await (
        await fetch(`${gw.envoy.adminUrl}/stats?filter=^cluster\\.modelgate_(authz|meter)\\.ssl\\.handshake$`)
      ).text();
      expect(ssl).toMatch(/cluster\.modelgate_authz\.ssl\.handshake: [1-9]/);
      expect(ssl).toMatch(/cluster\.modelgate_meter\.ssl\.handshake: [1-9]/);
    });

    it('rate limits through Envoy over mTLS (the embedded engine on modelgate_ratelimit)', async () => {
      await roomInMinute(20);
      await expectRateLimited(gw);
      const ssl = await (
        await fetch(`${gw.envoy.adminUrl}/stats?filter=^cluster\\.modelgate_ratelimit\\.ssl\\.handshake$`)
      ).text();
      expect(ssl).toMatch(/cluster\.modelgate_ratelimit\.ssl\.handshake: [1-9]/);
    });

    it('gives a caller without a client certificate no connection: no Check, no meter stream', async () => {
      await expect(
        check(gw.modelgate.grpcAddress, grpc.credentials.createInsecure(), ALICE_CHECK),
      ).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
      const ssl = grpc.credentials.createSsl(
        readFileSync(certs.serverCa),
        readFileSync(certs.strangerKey),
        readFileSync(certs.strangerCert),
      );
      await expect(
        check(gw.modelgate.grpcAddress, ssl, ALICE_CHECK, metadata(), { 'grpc.ssl_target_name_override': SERVER_NAME }),
      ).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
      expect((await forgedMeterStream(gw.modelgate.grpcAddress)).code).toBe(grpc.status.UNAVAILABLE);
    });
  });
}

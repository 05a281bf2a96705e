/**
 * A meter that is off or cannot be reached never stops traffic, and never makes it free: with the
 * meter switched off at run time modelgate counts what it did not debit (meter_disabled); when
 * Envoy's reports cannot reach it, every request it allowed settles at its maximum when its
 * deadline passes (provisional, no_report).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { PROTOCOL_CASES, sendProtocol, waitFor } from '../support/meter-cases';
import { REFUSED_PORT } from '../support/refused-port';

const metricsOf = async (gw: Gateway): Promise<string> =>
  (await fetch(`http://${gw.modelgate.httpAddress}/metrics`)).text();

describeE2E('the meter switched off at run time', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway();
  }, 60_000);
  afterAll(() => gw?.close());

  it('keeps every protocol serving and counts each response it did not debit (meter_disabled)', async () => {
    const text = readFileSync(gw.configPath, 'utf8');
    writeFileSync(gw.configPath, text.replace('meter:\n  enabled: true', 'meter:\n  enabled: false'));
    await waitFor('the reload', () => gw.modelgate.service!.config().meter.enabled === false);
    const store = gw.modelgate.service!.store;
    const before = (await store.meter!.usage({ limit: 1000 })).length;
    for (const c of PROTOCOL_CASES) {
      const reply = await sendProtocol(gw, c, DEMO_KEYS.alice);
      expect(reply.status, c.name).toBe(200);
    }
    await waitFor('the counts', async () =>
      new RegExp(`reason="meter_disabled"\\} ${PROTOCOL_CASES.length}\\b`).test(await metricsOf(gw)),
    );
    expect((await store.meter!.usage({ limit: 1000 })).length).toBe(before);
    expect(gw.modelgate.logLines().filter((l) => l.includes('"reason":"meter_disabled"'))).toHaveLength(
      PROTOCOL_CASES.length,
    );
  });
});

describeE2E('a meter that cannot be reached', () => {
  let gw: Gateway;
  beforeAll(async () => {
    const port = REFUSED_PORT;
    gw = await startGateway({
      // Requests never reported settle 2 s after they were allowed (the default is 15 minutes).
      config: (demo) => demo.replace('  reservationSeconds: 900 ', '  reservationSeconds: 2 '),
      envoyConfig: (yaml) => {
        // The meter's access log points at a cluster where nothing listens.
        const b = parse(yaml);
        const hcm = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
        const als = hcm.access_log.find((l: { name: string }) => l.name === 'envoy.access_loggers.http_grpc');
        als.typed_config.common_config.grpc_service.envoy_grpc.cluster_name = 'dead_meter';
        b.static_resources.clusters.push({
          name: 'dead_meter',
          type: 'STATIC',
          connect_timeout: '0.25s',
          typed_extension_protocol_options: {
            'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
              '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
              explicit_http_config: { http2_protocol_options: {} },
            },
          },
          load_assignment: {
            cluster_name: 'dead_meter',
            endpoints: [
              {
                lb_endpoints: [
                  { endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } },
                ],
              },
            ],
          },
        });
        return stringify(b);
      },
    });
  }, 60_000);
  afterAll(() => gw?.close());

  it('keeps every protocol serving, and settles each request at its maximum when its report never comes', async () => {
    const store = gw.modelgate.service!.store;
    for (const c of PROTOCOL_CASES) {
      const reply = await sendProtocol(gw, c, DEMO_KEYS.alice);
      expect(reply.status, c.name).toBe(200);
      expect(reply.text, c.name).toMatch(/Hello from the demo upstream|usage|embedding/);
    }
    await waitFor(
      'the provisional settlements',
      async () => (await store.meter!.usage({ limit: 100 })).length === PROTOCOL_CASES.length,
      15_000,
    );
    const rows = await store.meter!.usage({ limit: 100 });
    // Never free: each at its maximum, provisionally (a report arriving later would replace it).
    expect(rows.every((r) => r.estimated === 'no_report' && r.provisional === true && r.cost > 0)).toBe(true);
    expect(await metricsOf(gw)).toMatch(
      new RegExp(
        `modelgate_meter_responses_total\\{result="provisional",reason="no_report"\\} ${PROTOCOL_CASES.length}\\b`,
      ),
    );
  });
});

/**
 * A meter that is off or cannot be reached never stops traffic (issue 11): responses go on
 * unchanged, and they are counted as unmetered, by modelgate when it is running with the meter
 * switched off, by Envoy when the meter cannot be reached at all (failure_mode_allow).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { PROTOCOL_CASES, sendProtocol, waitFor } from '../support/meter-cases';

const metricsOf = async (gw: Gateway): Promise<string> => (await fetch(`http://${gw.modelgate.httpAddress}/metrics`)).text();

describeE2E('the meter switched off at run time', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway();
  }, 60_000);
  afterAll(() => gw?.close());

  it('keeps every protocol serving and counts each response unmetered (meter_disabled), debiting nothing', async () => {
    const text = readFileSync(gw.configPath, 'utf8');
    writeFileSync(gw.configPath, text.replace('meter:\n  enabled: true', 'meter:\n  enabled: false'));
    await waitFor('the reload', () => gw.modelgate.service!.config().meter.enabled === false);
    const store = gw.modelgate.service!.store;
    const before = (await store.meter!.usage({ limit: 1000 })).length;
    for (const c of PROTOCOL_CASES) {
      const reply = await sendProtocol(gw, c, DEMO_KEYS.alice);
      expect(reply.status, c.name).toBe(200);
    }
    await waitFor('the counts', async () => new RegExp(`reason="meter_disabled"\\} ${PROTOCOL_CASES.length}\\b`).test(await metricsOf(gw)));
    expect((await store.meter!.usage({ limit: 1000 })).length).toBe(before);
    expect(gw.modelgate.logLines().filter((l) => l.includes('"reason":"meter_disabled"'))).toHaveLength(PROTOCOL_CASES.length);
  });
});

async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

describeE2E('a meter that cannot be reached', () => {
  let gw: Gateway;
  beforeAll(async () => {
    const port = await closedPort();
    gw = await startGateway({
      envoyConfig: (yaml) => {
        // The meter's filter points at a cluster where nothing listens.
        const b = parse(yaml);
        const hcm = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
        const extProc = hcm.http_filters.find((f: { name: string }) => f.name === 'envoy.filters.http.ext_proc');
        extProc.typed_config.grpc_service.envoy_grpc.cluster_name = 'dead_meter';
        b.static_resources.clusters.push({
          name: 'dead_meter', type: 'STATIC', connect_timeout: '0.25s',
          typed_extension_protocol_options: { 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': { '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions', explicit_http_config: { http2_protocol_options: {} } } },
          load_assignment: { cluster_name: 'dead_meter', endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } }] }] },
        });
        return stringify(b);
      },
    });
  }, 60_000);
  afterAll(() => gw?.close());

  it('keeps every protocol serving complete answers, and Envoy counts the streams it could not meter', async () => {
    for (const c of PROTOCOL_CASES) {
      const reply = await sendProtocol(gw, c, DEMO_KEYS.alice);
      expect(reply.status, c.name).toBe(200);
      expect(reply.text, c.name).toMatch(/Hello from the demo upstream|usage|embedding/);
    }
    const stats = await (await fetch(`${gw.envoy.adminUrl}/stats?filter=ext_proc`)).text();
    // Envoy's own count of requests that went on without the meter (failure_mode_allow).
    expect(stats).toContain(`http.modelgate.ext_proc.modelgate_meter.failure_mode_allowed: ${PROTOCOL_CASES.length}\n`);
    expect((await gw.modelgate.service!.store.meter!.usage({ limit: 10 })).length).toBe(0);
  });
});

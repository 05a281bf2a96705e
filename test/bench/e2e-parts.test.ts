/**
 * The pieces of bench:e2e that decide what a run measures: the stand-in upstream answers every
 * request it is sent (Content-Length, chunked, pipelined, split across packets), the peers read the
 * same groups and keys as modelgate, the bundle of each setup changes only what it says, and the
 * load generator's body checks fail on a wrong answer.
 */
import * as net from 'node:net';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load';
import { hashKey } from '../../src/contract/key-format';
import { renderBundle } from '../../bench/e2e/envoy';
import { httpMixes } from '../../bench/e2e/mixes';
import { peerData } from '../../bench/e2e/peer-data';
import { litellmBudgetConfig } from '../../bench/e2e/setups';
import { startLeanUpstream, UPSTREAM_MARKERS, type LeanUpstream } from '../../bench/e2e/upstream';
import { DEMO_KEYS } from '../support/demo-keys';
import { parse as parseYaml } from 'yaml';

const demo = parseConfig(readFileSync('envoy/modelgate.yaml', 'utf8'));

/** Writes `parts` one by one (separate packets) and resolves with everything read until `count` responses. */
function exchange(port: number, parts: string[], count: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    s.on('data', (d) => {
      got += d.toString('latin1');
      if ((got.match(/HTTP\/1\.1 /g) ?? []).length === count && /\r\n\r\n[\s\S]*$/.test(got)) {
        const bodies = [...got.matchAll(/content-length: (\d+)\r\n\r\n/g)];
        const last = bodies.at(-1)!;
        if (got.length >= last.index! + last[0].length + Number(last[1])) {
          s.end();
          resolve(got);
        }
      }
    });
    s.on('error', reject);
    void (async () => {
      for (const p of parts) {
        s.write(p);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
  });
}

describe('the stand-in upstream', () => {
  let up: LeanUpstream;
  beforeAll(async () => {
    up = await startLeanUpstream();
  });
  afterAll(() => up.close());

  it('answers a chat request sent in pieces, with usage', async () => {
    const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [] });
    const head = `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const out = await exchange(up.port, [head.slice(0, 10), head.slice(10), body.slice(0, 5), body.slice(5)], 1);
    expect(out).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(out).toContain(UPSTREAM_MARKERS.chat);
    expect(out).toContain('"usage":{"prompt_tokens":9');
  });

  it('answers pipelined requests in order: a chunked generative request, then a streamed chat', async () => {
    const gen =
      'POST /v1beta/models/gemini-2.5-flash:generateContent HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{"con\r\n7\r\ntents":\r\n3\r\n[]}\r\n0\r\n\r\n';
    const body = '{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true}}';
    const chat = `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    const out = await exchange(up.port, [gen + chat], 2);
    const first = out.indexOf(UPSTREAM_MARKERS.generative);
    const second = out.indexOf('text/event-stream');
    expect(first).toBeGreaterThan(0);
    expect(second).toBeGreaterThan(first);
    expect(out).toContain('"usage":{"prompt_tokens":9');
    expect(out).toContain('data: [DONE]');
  });
});

describe("the peers' data", () => {
  it('has every key of the config by SHA-256, with its group, balance, state and expiry (ns)', () => {
    const d = peerData(demo).modelgate;
    expect(Object.keys(d.keys).length).toBe(demo.keys.length);
    expect(d.keys[hashKey(DEMO_KEYS.alice)]).toEqual({
      id: 'alice',
      group: 'basic',
      balance: 12.5,
      disabled: false,
      expires_at_ns: null,
    });
    expect(d.keys[hashKey(DEMO_KEYS.erin)].expires_at_ns).toBe(Date.parse('2025-01-01T00:00:00Z') * 1e6);
    expect(d.keys[hashKey(DEMO_KEYS.dave)].disabled).toBe(true);
  });

  it('has every group and model, protocols as a set', () => {
    const g = peerData(demo).modelgate.groups;
    expect(Object.keys(g).sort()).toEqual([...demo.groups.keys()].sort());
    expect(g.basic.models['gemini-2.5-flash']).toEqual({ available: true, protocols: { generative: true } });
    expect(g.basic.models['gpt-4o-mini'].protocols).toBeNull();
    expect(g.basic.models['gpt-4.1-nano'].available).toBe(false);
    expect(g.paused.available).toBe(false);
  });
});

describe('LiteLLM with its budget (setup litellm-budget)', () => {
  it("is the litellm setup's config with LiteLLM's own cost callback registered, and nothing else changed", () => {
    const base = readFileSync('bench/peers/litellm/config.yaml', 'utf8');
    const budget = parseYaml(litellmBudgetConfig(base));
    const plain = parseYaml(base);
    expect(budget.litellm_settings.callbacks).toEqual(['spend_tracking.proxy_db_logger']);
    delete budget.litellm_settings.callbacks;
    expect(budget).toEqual(plain);
    // The callback is LiteLLM's own class, only instantiated; custom auth turns the balance into max_budget.
    expect(readFileSync('bench/peers/litellm/spend_tracking.py', 'utf8')).toMatch(
      /^from litellm\.proxy\.hooks\.proxy_track_cost_callback import ProxyDBLogger\n\nproxy_db_logger = ProxyDBLogger\(\)$/m,
    );
    expect(readFileSync('bench/peers/litellm/custom_auth.py', 'utf8')).toContain('"max_budget": float(balance)');
  });
});

describe('the bundle of each setup', () => {
  type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  const hcm = (yaml: string): Obj =>
    parseYaml(yaml).static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const clusters = (yaml: string): Obj =>
    Object.fromEntries((parseYaml(yaml).static_resources.clusters as Obj[]).map((c) => [c.name, c]));

  it("modelgate's is the generated one, pointed at the setup's ports", () => {
    const { yaml, changes } = renderBundle(demo, {
      authz: { port: 4001, healthCheck: true, packAsBytes: true },
      httpPort: 4002,
      upstreamPort: 4003,
      meter: false,
    });
    expect(changes).toHaveLength(1);
    expect(hcm(yaml).http_filters.map((f: Obj) => f.name)).toEqual([
      'modelgate.request',
      'modelgate.request_metadata',
      'envoy.filters.http.ext_authz',
      'modelgate.drop_request_trailers',
      'envoy.filters.http.router',
    ]);
    const c = clusters(yaml);
    expect(c.modelgate_authz.health_checks).toHaveLength(1);
    expect(
      c.modelgate_authz.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value,
    ).toBe(4001);
    for (const u of ['upstream_chat', 'upstream_generative', 'upstream_messages', 'upstream_alt']) {
      expect(c[u].load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value).toBe(4003);
    }
  });

  it('the floor has no ext_authz; OPA has pack_as_bytes false and no health check; the meter rows have the meter', () => {
    expect(
      hcm(renderBundle(demo, { httpPort: 1, upstreamPort: 2, meter: false }).yaml).http_filters.map((f: Obj) => f.name),
    ).toEqual(['modelgate.drop_request_trailers', 'envoy.filters.http.router']);
    const opa = renderBundle(demo, {
      authz: { port: 3, healthCheck: false, packAsBytes: false },
      httpPort: 1,
      upstreamPort: 2,
      meter: false,
    });
    expect(
      hcm(opa.yaml).http_filters.find((f: Obj) => f.name === 'envoy.filters.http.ext_authz').typed_config
        .with_request_body.pack_as_bytes,
    ).toBe(false);
    expect(clusters(opa.yaml).modelgate_authz.health_checks).toBeUndefined();
    const metered = renderBundle(demo, {
      authz: { port: 3, healthCheck: true, packAsBytes: true },
      httpPort: 1,
      upstreamPort: 2,
      meter: true,
    });
    expect(hcm(metered.yaml).http_filters.map((f: Obj) => f.name)).toEqual([
      'modelgate.request',
      'modelgate.request_metadata',
      'envoy.filters.http.ext_authz',
      'modelgate.meter',
      'envoy.filters.http.decompressor',
      'modelgate.drop_request_trailers',
      'envoy.filters.http.router',
    ]);
    expect(clusters(metered.yaml).modelgate_meter).toBeDefined();
  });
});

describe('the fixed mixes', () => {
  it('are the sizes and shares the issue fixes', () => {
    const m = Object.fromEntries(httpMixes().map((x) => [x.id, x]));
    expect(m.body_256k_model_last.kinds[0].body.length).toBe(256 * 1024);
    expect(m.body_256k_model_last.kinds[0].body.toString().endsWith('"model":"gpt-4o-mini"}')).toBe(true);
    expect(m.mixed_90_10.sequence.filter((n) => n === 'denied')).toHaveLength(1);
    expect(m.mixed_90_10.sequence).toHaveLength(10);
    expect(m.generative_path.kinds[0].headers['x-vendor-api-key']).toBe(DEMO_KEYS.alice);
  });
});

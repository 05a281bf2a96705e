/** The rate limit parts of the rendered bundle (docs/rate-limits.md; src/envoy/render-ratelimit.ts). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load';
import { renderBootstrap } from '../../src/envoy/render';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const demo = readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8');
const hcmOf = (b: Obj): Obj => b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
const render = (text: string): Obj => renderBootstrap(parseConfig(text)) as Obj;

describe('rate limits in the bundle', () => {
  it('points the rate limit cluster at modelgate with the embedded engine and at rateLimits.service with the global one', () => {
    const embedded = render(demo).static_resources.clusters.find((c: Obj) => c.name === 'modelgate_ratelimit');
    expect(embedded.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({
      address: '127.0.0.1',
      port_value: 9191,
    });
    const global = render(
      demo
        .replace('  engine: embedded ', '  engine: global ')
        .replace('  failureMode: allow ', '  failureMode: deny ') + '\n',
    ).static_resources.clusters.find((c: Obj) => c.name === 'modelgate_ratelimit');
    expect(global.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({
      address: '127.0.0.1',
      port_value: 8081,
    });
  });

  it('fails open by default and closed with failureMode deny, waiting timeoutMs', () => {
    const filters = (b: Obj) =>
      hcmOf(b)
        .http_filters.filter((f: Obj) => f.name.startsWith('modelgate.ratelimit_'))
        .map((f: Obj) => f.typed_config);
    for (const f of filters(render(demo)))
      expect(f).toMatchObject({
        domain: 'modelgate',
        failure_mode_deny: false,
        timeout: '0.1s',
        status_on_error: { code: 'ServiceUnavailable' },
      });
    for (const f of filters(render(demo.replace('  failureMode: allow ', '  failureMode: deny '))))
      expect(f.failure_mode_deny).toBe(true);
  });

  it('turns both filters on on every upstream route and no other; their descriptors: tokens checked only (hits 0), requests counted', () => {
    const hcm = hcmOf(render(demo));
    const routes = hcm.route_config.virtual_hosts[0].routes as Obj[];
    const limited = routes.filter((r) => r.typed_per_filter_config?.['modelgate.ratelimit_requests']);
    expect(limited.map((r) => r.name).sort()).toEqual(
      routes
        .filter((r) => r.route && r.route.cluster !== 'modelgate_http')
        .map((r) => r.name)
        .sort(),
    );
    for (const r of limited)
      expect(r.typed_per_filter_config['modelgate.ratelimit_tokens']).toEqual({
        '@type': 'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute',
        vh_rate_limits: 'OVERRIDE',
      });
    const filter = (name: string): Obj => (hcm.http_filters as Obj[]).find((f) => f.name === name)!;
    for (const name of ['modelgate.ratelimit_tokens', 'modelgate.ratelimit_requests'])
      expect(filter(name).disabled).toBe(true);
    const tokens = filter('modelgate.ratelimit_tokens').typed_config.rate_limits as Obj[];
    expect(tokens.map((t) => t.actions[0].generic_key.descriptor_value)).toEqual(['tpm', 'tpd', 'tpm_m', 'tpd_m']);
    for (const t of tokens) expect(t.hits_addend).toEqual({ number: 0 });
    const requests = filter('modelgate.ratelimit_requests').typed_config.rate_limits as Obj[];
    expect(requests[2]).toEqual({
      actions: [
        { generic_key: { descriptor_key: 'limit', descriptor_value: 'rpm_m' } },
        {
          metadata: {
            descriptor_key: 'key',
            metadata_key: {
              key: 'envoy.filters.http.ext_authz',
              path: [{ key: 'rl' }, { key: 'rpm_m' }, { key: 'key' }],
            },
          },
        },
        {
          metadata: {
            descriptor_key: 'model',
            metadata_key: {
              key: 'envoy.filters.http.ext_authz',
              path: [{ key: 'rl' }, { key: 'rpm_m' }, { key: 'model' }],
            },
          },
        },
      ],
      limit: {
        dynamic_metadata: {
          metadata_key: { key: 'envoy.filters.http.ext_authz', path: [{ key: 'rl' }, { key: 'rpm_m' }] },
        },
      },
    });
    expect(requests.some((r) => 'hits_addend' in r)).toBe(false);
  });

  it("advises a retry on every refusal: 429 with x-should-retry true and retry-after the limit's own reset, 503 rate_limit_unavailable with retry-after 1", () => {
    const hcm = hcmOf(render(demo.replace('  failureMode: allow ', '  failureMode: deny ')));
    const headersOf = (list: Obj[]): Record<string, string> =>
      Object.fromEntries(list.map((h) => [h.header.key, h.header.value]));
    const byName = Object.fromEntries(
      hcm.http_filters
        .filter((f: Obj) => f.name.startsWith('modelgate.ratelimit_'))
        .map((f: Obj) => [f.name, headersOf(f.typed_config.response_headers_to_add)]),
    );
    expect(byName['modelgate.ratelimit_requests']).toMatchObject({
      'x-should-retry': 'true',
      'retry-after': '%RESP(X-RATELIMIT-RESET)%',
    });
    expect(byName['modelgate.ratelimit_tokens']).toMatchObject({
      'x-should-retry': 'true',
      'retry-after': '%DYNAMIC_METADATA(envoy.filters.http.ext_authz:rl:tokens_reset)%',
    });
    const unavailable = (hcm.local_reply_config.mappers as Obj[]).filter((m) =>
      JSON.stringify(m.filter).includes('RLSE'),
    );
    expect(unavailable).toHaveLength(3);
    for (const m of unavailable)
      expect(headersOf(m.headers_to_add)).toMatchObject({
        'x-modelgate-reason': 'rate_limit_unavailable',
        'x-should-retry': 'true',
        'retry-after': '1',
      });
  });
});

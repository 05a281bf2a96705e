/**
 * The Envoy bundle generator (src/envoy/render.ts): envoy/envoy.yaml is exactly its output for
 * envoy/modelgate.yaml; the output passes Envoy's own v3 API protos strictly (and broken copies of it
 * exercise the checker); and it holds the settings the gateway's safety depends on (fail closed, body
 * limits, headers). What a real Envoy does with it is proven in test/e2e/.
 */
import { readFileSync, rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load';
import { decisionHeaders } from '../../src/contract/headers';
import { authPackageDefinition } from '../../src/envoy/protos';
import { checkRequestHeaders, renderEnvoyYaml } from '../../src/envoy/render';
import { adopt } from '../../src/envoy/adopt';
import { join } from 'node:path';
import { validateWithEnvoy } from '../../src/envoy/validate';
import { ENVOY_YAML_PATH, envoyBundle, extAuthzConfig, findAll, httpConnectionManager } from '../support/envoy-bundle';
import { describeE2E, envoyBinary } from '../support/gateway';
import { DEMO_CONFIG } from '../support/service-harness';
import { makeTestCerts } from '../support/test-certs';
import { parse as parseYaml, parseDocument } from 'yaml';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const MiB = 1024 * 1024;
const HCM = 'static_resources.listeners[0].filter_chains[0].filters[0].typed_config';
// http_filters[0] is the filter that writes the address into hints (base-url-filter.ts; the demo has no publicBaseUrl).
const EXT_AUTHZ = `${HCM}.http_filters[3].typed_config`;
const ROUTES = `${HCM}.route_config.virtual_hosts[0].routes`;

/** envoy.yaml with one exact text replaced (the replacement must happen). */
function broken(from: string, to: string): string {
  const { text } = envoyBundle();
  expect(text, `envoy.yaml no longer contains ${JSON.stringify(from)}`).toContain(from);
  return text.replace(from, to);
}

/** The pinned Envoy's verdict on a config (envoy --mode validate). */
const verdict = (yamlText: string) => validateWithEnvoy(yamlText, envoyBinary());

/** Envoy refuses the config, and its message names each of `words` (where Envoy names anything). */
function expectRefused(yamlText: string, ...words: (string | RegExp)[]): void {
  const r = verdict(yamlText);
  expect(r.ok, r.message).toBe(false);
  for (const w of words) {
    if (typeof w === 'string') expect(r.message).toContain(w);
    else expect(r.message).toMatch(w);
  }
}

/** Every cluster a route or a gRPC service of a bootstrap names, with where. */
function clusterReferences(bootstrap: Obj): Array<{ at: string; name: string }> {
  return [
    ...findAll(bootstrap, 'cluster'),
    ...findAll(bootstrap, 'cluster_name').filter((f) => f.at.includes('envoy_grpc')),
  ]
    .filter((f) => typeof f.value === 'string')
    .map((f) => ({ at: f.at, name: f.value as string }));
}

/**
 * What a bootstrap names but does not define: clusters (Envoy's validate mode does not look) and repeated YAML keys (it
 * keeps the last).
 */
function danglingOrRepeated(yamlText: string): string[] {
  const problems: string[] = [];
  const doc = parseDocument(yamlText, { uniqueKeys: true });
  for (const e of doc.errors) problems.push(`yaml: ${e.message.split('\n')[0]}`);
  const bootstrap = doc.toJS() as Obj;
  const defined = new Set(((bootstrap.static_resources?.clusters ?? []) as Obj[]).map((c) => c.name));
  for (const ref of clusterReferences(bootstrap))
    if (!defined.has(ref.name)) problems.push(`${ref.at}: unknown cluster "${ref.name}"`);
  return problems;
}

/** The demo config with its text changed, parsed (every variable set: credentials are not rendered). */
function demoWith(edit: (yaml: string) => string = (y) => y) {
  return parseConfig(edit(readFileSync(DEMO_CONFIG, 'utf8')), new Proxy({}, { get: () => 'set' }));
}

describe('envoy/envoy.yaml', () => {
  it('is exactly what the generator renders from envoy/modelgate.yaml (npm run envoy-config)', () => {
    expect(readFileSync(ENVOY_YAML_PATH, 'utf8')).toBe(renderEnvoyYaml(demoWith(), 'envoy/modelgate.yaml'));
  });

  it('names only clusters it defines, and no YAML key twice', () => {
    expect(danglingOrRepeated(envoyBundle().text)).toEqual([]);
    // The same walk finds a broken copy's faults (Envoy's validate mode accepts both: it keeps the
    // last of two keys, and does not look up a gRPC service's cluster).
    expect(danglingOrRepeated(broken('cluster_name: modelgate_authz }', 'cluster_name: modelgate_auth }'))).toEqual([
      `${EXT_AUTHZ}.grpc_service.envoy_grpc.cluster_name: unknown cluster "modelgate_auth"`,
    ]);
    expect(
      danglingOrRepeated(
        broken('stat_prefix: modelgate', 'stat_prefix: modelgate\n                stat_prefix: again'),
      )[0],
    ).toContain('yaml: Map keys must be unique');
  });
});

describeE2E("the pinned Envoy's own check (envoy --mode validate)", () => {
  it('accepts envoy/envoy.yaml with no warning, typed_config payloads included', () => {
    const r = verdict(envoyBundle().text);
    expect(r.ok, r.message).toBe(true);
    expect(r.output).not.toContain('[warning]');
    const hcm = httpConnectionManager(envoyBundle().config);
    expect(hcm['@type']).toBe(
      'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
    );
    expect(hcm.stat_prefix).toBe('modelgate');
  });

  it('rejects an unknown field and names it', () => {
    expectRefused(
      broken('admin: { address:', 'admin: { access_log_pathh: /dev/null, address:'),
      "no such field: 'access_log_pathh'",
    );
  });

  it('rejects a value of the wrong type and names its path', () => {
    expectRefused(
      broken('port_value: 10000', 'port_value: "ten thousand"'),
      'static_resources.listeners[0].address.socket_address.port_value',
    );
  });

  it('rejects a misspelled enum value such as transport_api_version V4', () => {
    expectRefused(broken('transport_api_version: V3', 'transport_api_version: V4'), "unknown enum value: 'V4'");
  });

  it('rejects a typed_config whose @type names no type in the API', () => {
    expectRefused(
      broken('envoy.extensions.filters.http.router.v3.Router', 'envoy.extensions.filters.http.router.v3.Rooter'),
      "could not find @type 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Rooter'",
    );
  });

  it('rejects an unknown field inside a typed_config payload', () => {
    expectRefused(
      broken('validate_mutations: true', 'validate_mutation: true'),
      'envoy.extensions.filters.http.ext_authz.v3.ExtAuthz',
    );
  });

  it('rejects two members of one oneof', () => {
    expectRefused(
      broken(
        'path: "/v1/chat/completions"\n',
        'path: "/v1/chat/completions"\n                            prefix: /v1\n',
      ),
      /routes\[0\]\.match\.(path|prefix): .*'(path|prefix)' has already been set/,
    );
  });

  // Envoy 1.40 names no field for these (its protobuf prints "goo.gle/debug..." in place of the
  // message); the JSON key order Envoy parses in is random, so which of two fields is named varies.
  it('rejects a missing required message (validate.rules message.required)', () => {
    expectRefused(broken('- timeout: 1s\n          interval: 5s', '- interval: 5s'));
  });

  it('rejects an empty string where min_len is 1, even when the field is left out', () => {
    expectRefused(broken('stat_prefix: modelgate', 'stat_prefix: ""'));
    expectRefused(broken('                stat_prefix: modelgate\n', ''));
  });

  it('rejects numbers outside their validate.rules range', () => {
    expectRefused(broken('max_request_bytes: 33554432', 'max_request_bytes: 0'));
    expectRefused(broken('status: 405', 'status: 99'));
    expectRefused(broken('port_value: 10000', 'port_value: 70000'));
  });

  it('rejects an empty ExtAuthzPerRoute (required oneof); accepts disabled: false (no constant rule on 1.40)', () => {
    expectRefused(broken('ExtAuthzPerRoute\n                              check_settings: {}', 'ExtAuthzPerRoute'));
    expect(
      verdict(
        broken(
          'ExtAuthzPerRoute\n                              check_settings: {}',
          'ExtAuthzPerRoute\n                              disabled: false',
        ),
      ).ok,
    ).toBe(true);
  });

  it('rejects a duration written as a bare number', () => {
    expectRefused(broken('timeout: 1s }', 'timeout: 1 }'), 'grpc_service.timeout: message google.protobuf.Duration');
  });

  it('rejects two clusters with one name', () => {
    expectRefused(broken('- name: upstream_alt\n', '- name: upstream_chat\n'), "duplicate cluster 'upstream_chat'");
  });

  it('rejects YAML merge keys, which Envoy does not support', () => {
    expectRefused(
      broken(
        'route: { cluster: upstream_chat, timeout: 0s, idle_timeout: 300s, auto_host_rewrite: true }\n                          request_headers_to_remove:',
        'route: { <<: { cluster: upstream_chat }, timeout: 1s }\n                          request_headers_to_remove:',
      ),
      'routes[0].route: message envoy.config.route.v3.RouteAction',
    );
  });

  it('accepts lowerCamelCase json names and enum numbers', () => {
    expect(verdict(broken('stat_prefix: modelgate', 'statPrefix: modelgate')).ok).toBe(true);
    expect(verdict(broken('transport_api_version: V3', 'transport_api_version: 2')).ok).toBe(true);
  });

  it('rejects a null value that leaves a required message unset (here: the authz cluster would lose HTTP/2)', () => {
    expectRefused(
      broken(
        'explicit_http_config: { http2_protocol_options: {} }',
        'explicit_http_config: { http2_protocol_options: }',
      ),
    );
  });

  it('warns about a deprecated field but accepts it', () => {
    const r = verdict(
      broken('{ name: ":method", string_match: { exact: POST } }', '{ name: ":method", exact_match: POST }'),
    );
    expect(r.ok, r.message).toBe(true);
    expect(r.output).toContain("Using deprecated option 'envoy.config.route.v3.HeaderMatcher.exact_match'");
  });

  it('accepts the bundle rendered for TLS upstreams, another alternate prefix and a public address', () => {
    const tls = demoWith((y) =>
      y
        .replace('chat: http://127.0.0.1:9300', 'chat: https://api.openai.com')
        .replace(
          'messages: http://127.0.0.1:9300',
          'messages: { url: "https://api.anthropic.com:8443", caFile: /etc/ssl/certs/ca-certificates.crt }',
        ),
    );
    const alt = demoWith((y) =>
      y
        .replace('altPrefix: /alt', 'altPrefix: /vendor.x')
        .replace('listen: 0.0.0.0:10000', 'listen: 127.0.0.1:8080')
        .replace('maxRequestBytes: 33554432', 'maxRequestBytes: 1048576')
        .replace('# publicBaseUrl: https://llm.example.com', 'publicBaseUrl: https://llm.example.com'),
    );
    for (const text of [renderEnvoyYaml(tls), renderEnvoyYaml(alt)]) {
      const r = verdict(text);
      expect(r.ok, r.message).toBe(true);
    }
  });

  it('reports YAML that is not an object', () => {
    expectRefused('- just a list', "expected '{'");
  });
});

describe('the settings modelgate relies on', () => {
  it('fails closed: no failure_mode_allow, 503 on authz errors, gRPC V3 to modelgate_authz with an explicit timeout', () => {
    const a = extAuthzConfig(envoyBundle().config);
    expect(a.failure_mode_allow).toBe(false);
    expect(a.status_on_error.code).toBe('ServiceUnavailable');
    const statusCodes = (
      authPackageDefinition()['envoy.type.v3.StatusCode'] as unknown as {
        type: { value: { name: string; number: number }[] };
      }
    ).type.value;
    expect(statusCodes.find((v) => v.name === 'ServiceUnavailable')!.number).toBe(503);
    expect(a.transport_api_version).toBe('V3');
    expect(a.grpc_service.envoy_grpc.cluster_name).toBe('modelgate_authz');
    expect(a.grpc_service.timeout).toMatch(/^\d+(\.\d+)?s$/);
    expect(a.validate_mutations).toBe(true);
    expect(a.clear_route_cache).toBe(false);
  });

  it('sends the whole body as bytes, at most 32 MiB and below the service gRPC limit of 40 MiB, never a partial one', () => {
    const body = extAuthzConfig(envoyBundle().config).with_request_body;
    expect(body.pack_as_bytes).toBe(true);
    expect(body.allow_partial_message).toBe(false);
    expect(body.max_request_bytes).toBe(32 * MiB);
    expect(body.max_request_bytes).toBeLessThan(40 * MiB);
  });

  it('sends exactly the headers the service reads, pseudo-headers included', () => {
    const patterns = extAuthzConfig(envoyBundle().config).allowed_headers.patterns as Obj[];
    expect(patterns.map((p) => p.exact).sort()).toEqual([
      ':method',
      ':path',
      'anthropic-beta',
      'anthropic-version',
      'authorization',
      'content-encoding',
      'content-type',
      'user-agent',
      'x-api-key',
      'x-goog-api-key',
      'x-goog-fieldmask',
      'x-modelgate-request',
      'x-vendor-api-key',
    ]);
    // Every header the service's decoder keeps for a decision is sent (Envoy adds the partial-body flag
    // itself), but the two a Check through the bundle never reads: x-request-id (the route mints
    // x-modelgate-request, which the Check reads first) and x-forwarded-for without trusted hops.
    const sent = new Set(patterns.map((p) => p.exact));
    const demoRoutes = parseConfig(readFileSync(DEMO_CONFIG, 'utf8')).routes;
    expect(decisionHeaders(demoRoutes).filter((h) => !sent.has(h))).toEqual([
      'x-request-id',
      'x-forwarded-for',
      'x-envoy-auth-partial-body',
    ]);
  });

  it("sends x-forwarded-for with gateway.trustedProxyHops (the client is then one of its entries); the chart's list keeps both", () => {
    const patterns = (hops: number): string[] =>
      (
        extAuthzConfig(
          parseYaml(
            renderEnvoyYaml(demoWith((y) => y.replace(/^gateway:\n/m, `gateway:\n  trustedProxyHops: ${hops}\n`))),
          ) as Obj,
        ).allowed_headers.patterns as Obj[]
      ).map((p) => p.exact as string);
    expect(patterns(0)).not.toContain('x-forwarded-for');
    expect(patterns(2)).toContain('x-forwarded-for');
    expect(patterns(2)).not.toContain('x-request-id');
    const demoRoutes = parseConfig(readFileSync(DEMO_CONFIG, 'utf8')).routes;
    expect(checkRequestHeaders(demoRoutes)).toEqual(expect.arrayContaining(['x-request-id', 'x-forwarded-for']));
  });

  it('runs the address-in-hints filter, the request mark (client x-modelgate-* removed, identity minted, copied to metadata), ext_authz, then the meter (its Lua tail capture and the gzip decompressor), then the rate limit filters (tokens checked, then requests counted), then the filter that drops request trailers, before the router and nothing else in between; each off unless a route turns it on', () => {
    const filters = httpConnectionManager(envoyBundle().config).http_filters as Obj[];
    expect(filters.map((f) => f.name)).toEqual([
      'modelgate.base_url_in_hints',
      'modelgate.request',
      'modelgate.request_metadata',
      'envoy.filters.http.ext_authz',
      'modelgate.meter',
      'envoy.filters.http.decompressor',
      'modelgate.ratelimit_tokens',
      'modelgate.ratelimit_requests',
      'modelgate.drop_request_trailers',
      'envoy.filters.http.router',
    ]);
    // Off by default: the decompressor (no per-route config) is skipped by a matcher unless the request carries
    // modelgate's minted id.
    expect(filters.filter((f) => f.disabled !== true).map((f) => f.name)).toEqual([
      'envoy.filters.http.decompressor',
      'envoy.filters.http.router',
    ]);
    const skip = filters[5].typed_config.xds_matcher.matcher_list.matchers[0];
    expect(skip.predicate.not_matcher.single_predicate.input.typed_config.header_name).toBe('x-modelgate-request');
    expect(skip.on_match.action.typed_config['@type']).toBe(
      'type.googleapis.com/envoy.extensions.filters.common.matcher.action.v3.SkipFilter',
    );
  });

  it('writes no address into hints at run time when gateway.publicBaseUrl is set: the hints are rendered with it', () => {
    const yaml = renderEnvoyYaml(
      demoWith((y) => y.replace('# publicBaseUrl: https://llm.example.com', 'publicBaseUrl: https://llm.example.com')),
    );
    expect(yaml).not.toContain('modelgate.base_url_in_hints');
    expect(yaml).not.toContain('{base_url}');
    expect(yaml).toContain('use the Base URL https://llm.example.com/v1');
  });

  it("meters without ever holding a response: the Lua filter keeps the body's last bytes as it passes and publishes them as metadata", () => {
    const filters = httpConnectionManager(envoyBundle().config).http_filters as Obj[];
    const lua = filters[4].typed_config;
    expect(lua['@type']).toBe('type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua');
    const source = lua.source_codes.meter.inline_string as string;
    // Streams chunk by chunk (bodyChunks), never h:body(), which would buffer the whole response.
    expect(source).toContain('h:bodyChunks()');
    expect(source).not.toMatch(/:body\(/);
    expect(source).toContain('dynamicMetadata():set("modelgate.meter", "tail"');
    // At the end: the whole tail as `final`, and a tail published on the way replaced by false (the access log carries
    // one copy).
    expect(source).toContain('md:set("modelgate.meter", "final", table.concat(parts))');
    expect(source).toContain('md:set("modelgate.meter", "tail", false)');
    // Decompresses answers only (requests are left alone).
    const dec = filters[5].typed_config.extension_config.typed_config;
    expect(dec.decompressor_library.typed_config['@type']).toBe(
      'type.googleapis.com/envoy.extensions.compression.gzip.decompressor.v3.Gzip',
    );
    expect(dec.request_direction_config.common_config.enabled.default_value).toBe(false);
  });

  it('reports every metered request to the meter through the gRPC access log, batched, and nothing else', () => {
    const logs = httpConnectionManager(envoyBundle().config).access_log as Obj[];
    const als = logs.find((l) => l.name === 'envoy.access_loggers.http_grpc')!;
    const metered = { filter: 'envoy.filters.http.ext_authz', path: [{ key: 'metered' }], value: { bool_match: true } };
    const [marked, unanswered] = als.filter.or_filter.filters as Obj[];
    // Every request the Check marked metered...
    expect(marked).toEqual({ metadata_filter: { matcher: metered, match_if_key_not_found: false } });
    // ...and every request no Check answer reached (no mark at all) that ended without a response or
    // with the 503 of a failed Check: the meter releases what it may have admitted for them.
    // On modelgate's routes only (the mark), never a request of another route.
    expect(unanswered.and_filter.filters[0]).toEqual({
      metadata_filter: {
        matcher: { filter: 'modelgate', path: [{ key: 'request' }], value: { present_match: true } },
        match_if_key_not_found: false,
      },
    });
    expect(unanswered.and_filter.filters[1]).toEqual({
      metadata_filter: { matcher: metered, match_if_key_not_found: true },
    });
    const codes = (unanswered.and_filter.filters[2].or_filter.filters as Obj[]).map(
      (f) => f.status_code_filter.comparison,
    );
    expect(codes.map((c) => [c.op, c.value.default_value])).toEqual([
      ['EQ', 0],
      ['EQ', 503],
    ]);
    expect(als.typed_config.common_config).toMatchObject({
      transport_api_version: 'V3',
      grpc_service: { envoy_grpc: { cluster_name: 'modelgate_meter' } },
      buffer_flush_interval: '0.05s',
    });
    expect(als.typed_config.additional_response_headers_to_log).toEqual(['content-type', 'content-encoding']);
    // No request header is logged (a key could be in one).
    expect(als.typed_config.additional_request_headers_to_log).toBeUndefined();
  });

  it('turns the meter on on the protocol endpoints only, where it asks providers only for encodings it reads', () => {
    const routes = httpConnectionManager(envoyBundle().config).route_config.virtual_hosts[0].routes as Obj[];
    for (const r of routes) {
      const upstream = typeof r.route?.cluster === 'string' && r.route.cluster.startsWith('upstream_');
      const on = r.typed_per_filter_config?.['modelgate.meter'];
      if (upstream)
        expect(on, r.name).toEqual({
          '@type': 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute',
          name: 'meter',
        });
      else expect(on, r.name).toBeUndefined();
      if (upstream)
        expect(r.request_headers_to_add, r.name).toEqual([
          { header: { key: 'accept-encoding', value: 'gzip' }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
        ]);
    }
  });

  it("sends the meter's access-log streams to modelgate's gRPC port over HTTP/2", () => {
    const clusters = envoyBundle().config.static_resources.clusters as Obj[];
    const byName = Object.fromEntries(clusters.map((c) => [c.name, c]));
    const meter = byName.modelgate_meter;
    expect(meter.load_assignment).toEqual({
      ...byName.modelgate_authz.load_assignment,
      cluster_name: 'modelgate_meter',
    });
    expect(
      meter.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'],
    ).toMatchObject({ explicit_http_config: { http2_protocol_options: {} } });
  });

  it('renders no meter when meter.enabled is false', () => {
    const yaml = renderEnvoyYaml(demoWith((y) => y.replace('meter:\n  enabled: true', 'meter:\n  enabled: false')));
    expect(yaml).not.toContain('modelgate.meter');
    expect(yaml).not.toContain('modelgate_meter');
    expect(yaml).not.toContain('decompressor');
  });

  it("drops every request trailer with Envoy's header_mutation filter, on upstream routes only", () => {
    const filters = httpConnectionManager(envoyBundle().config).http_filters as Obj[];
    const drop = filters.find((f) => f.name === 'modelgate.drop_request_trailers')!;
    expect(drop.typed_config['@type']).toBe(
      'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation',
    );
    expect(drop.disabled).toBe(true);
    // Only upstream routes run it: each turns it on with the mutation.
    const routes = httpConnectionManager(envoyBundle().config).route_config.virtual_hosts[0].routes as Obj[];
    for (const r of routes) {
      const on = r.typed_per_filter_config?.['modelgate.drop_request_trailers'];
      if (String(r.route?.cluster ?? '').startsWith('upstream_')) {
        expect(on['@type'], r.name).toBe(
          'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutationPerRoute',
        );
        expect(on.mutations, r.name).toEqual({
          request_trailers_mutations: [{ remove_on_match: { key_matcher: { safe_regex: { regex: '.*' } } } }],
        });
      } else expect(on, r.name).toBeUndefined();
    }
  });

  it('refuses escaped slashes, drops underscore headers and removes credential headers on every upstream route', () => {
    const hcm = httpConnectionManager(envoyBundle().config);
    expect(hcm.path_with_escaped_slashes_action).toBe('REJECT_REQUEST');
    expect(hcm.common_http_protocol_options).toEqual({ headers_with_underscores_action: 'DROP_HEADER' });
    const routes = hcm.route_config.virtual_hosts[0].routes as Obj[];
    for (const r of routes.filter((x) => String(x.route?.cluster ?? '').startsWith('upstream_'))) {
      expect(r.request_headers_to_remove, r.name).toEqual(
        expect.arrayContaining([
          'authorization',
          'proxy-authorization',
          'cookie',
          'x-api-key',
          'api-key',
          'x-goog-api-key',
          'x-vendor-api-key',
        ]),
      );
    }
  });

  it('keeps the header of a configured upstream credential on the routes to its upstream only (docs/security.md)', () => {
    const config = demoWith((y) =>
      y.replace(
        /\n    messages: http:\/\/127\.0\.0\.1:9300\n    generative: http:\/\/127\.0\.0\.1:9300\n    alt: http:\/\/127\.0\.0\.1:9300\n/,
        '\n    messages: { url: "http://127.0.0.1:9300", credential: { header: x-api-key, env: A } }\n    generative: { url: "http://127.0.0.1:9300", credential: { header: x-goog-api-key, env: G } }\n    alt: { url: "http://127.0.0.1:9300", credential: { header: x-alt-token, env: T } }\n',
      ),
    );
    expect(config.upstream.credentials.alt?.header).toBe('x-alt-token');
    const routes = httpConnectionManager(parseYaml(renderEnvoyYaml(config))).route_config.virtual_hosts[0]
      .routes as Obj[];
    const removes = (name: string) => routes.find((r) => r.name === name)!.request_headers_to_remove as string[];
    expect(removes('messages')).not.toContain('x-api-key');
    expect(removes('messages_count_tokens')).not.toContain('x-api-key');
    expect(removes('messages')).toEqual(expect.arrayContaining(['authorization', 'x-alt-token', 'x-goog-api-key']));
    expect(removes('generative')).not.toContain('x-goog-api-key');
    expect(removes('chat_completions')).toEqual(expect.arrayContaining(['x-api-key', 'x-goog-api-key', 'x-alt-token']));
    // Under the alternate prefix every route goes to the alt upstream: only its header stays.
    // (Not those modelgate answers itself, the model lists and the key's own view: they need the key.)
    for (const name of routes
      .filter((r) => String(r.name).startsWith('alt_') && (r.route as Obj | undefined)?.cluster !== 'modelgate_http')
      .map((r) => String(r.name))) {
      expect(removes(name), name).toEqual(expect.arrayContaining(['x-api-key', 'x-goog-api-key', 'authorization']));
      expect(removes(name), name).not.toContain('x-alt-token');
    }
  });

  it("removes modelgate's own credential header (the console key) on every upstream route", () => {
    const routes = httpConnectionManager(envoyBundle().config).route_config.virtual_hosts[0].routes as Obj[];
    const upstream = routes.filter((r) => String(r.route?.cluster ?? '').startsWith('upstream_'));
    expect(upstream.length).toBe(18); // the spec's 14 endpoints and the coding agents' 4 (root and alternate)
    for (const r of upstream) expect(r.request_headers_to_remove, String(r.name)).toContain('x-modelgate-console-key');
  });

  it('sets append_action OVERWRITE_IF_EXISTS_OR_ADD on every header it adds', () => {
    const { config } = envoyBundle();
    const options = [
      ...findAll(config, 'response_headers_to_add'),
      ...findAll(config, 'request_headers_to_add'),
    ].flatMap(({ at, value }) => (value as Obj[]).map((o, i) => ({ at: `${at}[${i}]`, o })));
    expect(options.length).toBeGreaterThan(50);
    for (const { at, o } of options) expect(o.append_action, at).toBe('OVERWRITE_IF_EXISTS_OR_ADD');
    // `append` only as a header_mutation action (request-mark.ts), itself with OVERWRITE_IF_EXISTS_OR_ADD; never the
    // deprecated bool.
    for (const { at, value } of findAll(config, 'append'))
      expect((value as Obj).append_action, at).toBe('OVERWRITE_IF_EXISTS_OR_ADD');
  });

  it('listens on 0.0.0.0:10000 for HTTP/1.1 and h2c, merges slashes, generates x-request-id, admin on loopback only', () => {
    const { config } = envoyBundle();
    expect(config.static_resources.listeners[0].address.socket_address).toEqual({
      address: '0.0.0.0',
      port_value: 10000,
    });
    expect(config.admin.address.socket_address).toEqual({ address: '127.0.0.1', port_value: 9901 });
    const hcm = httpConnectionManager(config);
    expect(hcm.codec_type).toBe('AUTO');
    expect(hcm.merge_slashes).toBe(true);
    expect(hcm.generate_request_id).toBe(true);
  });

  it('logs JSON with the ext_authz metadata and nothing of the request line as sent', () => {
    const hcm = httpConnectionManager(envoyBundle().config);
    const log = (hcm.access_log as Obj[]).find((l) => l.name === 'envoy.access_loggers.stdout')!.typed_config
      .log_format;
    const fields = log.json_format as Record<string, string>;
    for (const k of ['keyId', 'group', 'model', 'reason', 'style', 'decision', 'path']) {
      expect(Object.values(fields)).toContain(`%DYNAMIC_METADATA(envoy.filters.http.ext_authz:${k})%`);
    }
    expect(fields.path).toBe('%DYNAMIC_METADATA(envoy.filters.http.ext_authz:path)%');
    for (const op of [
      '%RESPONSE_CODE%',
      '%RESPONSE_FLAGS%',
      '%DURATION%',
      '%UPSTREAM_CLUSTER%',
      '%REQ(X-REQUEST-ID)%',
      '%ROUTE_NAME%',
      '%REQ(:METHOD):7%',
    ]) {
      expect(Object.values(fields)).toContain(op);
    }
    // No path as sent (a key can be in it), no key header, no query string.
    const rest = JSON.stringify(fields).toLowerCase().replace('ext_authz:path)', '');
    for (const leak of [':path', 'path)', 'authorization', 'api-key', 'original_path', 'query'])
      expect(rest).not.toContain(leak);
    expect(log.formatters).toBeUndefined();
  });

  it('follows the key headers of the config: another bearer header is sent to the check too', () => {
    const config = demoWith((y) =>
      y.replace('bearerHeaders: [authorization, x-api-key]', 'bearerHeaders: [authorization, x-api-key, api-key]'),
    );
    const patterns = extAuthzConfig(parseYaml(renderEnvoyYaml(config))).allowed_headers.patterns as Obj[];
    expect(patterns.map((p) => p.exact)).toContain('api-key');
  });

  it('reaches modelgate over HTTP/2 with gRPC health checks, and its HTTP listener over plain HTTP/1.1', () => {
    const clusters = envoyBundle().config.static_resources.clusters as Obj[];
    const byName = Object.fromEntries(clusters.map((c) => [c.name, c]));
    const authz = byName.modelgate_authz;
    const address = (c: Obj): Obj => c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address;
    expect(address(authz)).toEqual({ address: '127.0.0.1', port_value: 9191 });
    expect(
      authz.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions']
        .explicit_http_config,
    ).toEqual({ http2_protocol_options: {} });
    expect(authz.health_checks[0].grpc_health_check).toEqual({});
    expect(address(byName.modelgate_http)).toEqual({ address: '127.0.0.1', port_value: 9192 });
    expect(byName.modelgate_http.typed_extension_protocol_options).toBeUndefined();
    expect(byName.modelgate_http.transport_socket).toBeUndefined();
  });

  it("sends the demo's upstream traffic to the demo upstream over plain HTTP/1.1 on loopback", () => {
    const clusters = envoyBundle().config.static_resources.clusters as Obj[];
    const upstreams = clusters.filter((c) => c.name.startsWith('upstream_'));
    expect(upstreams.map((c) => c.name).sort()).toEqual([
      'upstream_alt',
      'upstream_chat',
      'upstream_generative',
      'upstream_messages',
    ]);
    for (const c of upstreams) {
      expect(c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address, c.name).toEqual({
        address: '127.0.0.1',
        port_value: 9300,
      });
      expect(c.type, c.name).toBe('STATIC');
      expect(c.transport_socket, c.name).toBeUndefined();
    }
  });

  it('sends traffic to a real provider over verified TLS, SNI and SAN check from its name (an https:// upstream)', () => {
    const config = demoWith((y) =>
      y
        .replace('chat: http://127.0.0.1:9300', 'chat: https://api.openai.com')
        .replace(
          'messages: http://127.0.0.1:9300',
          'messages: { url: "https://api.anthropic.com:8443", caFile: /etc/my-ca.pem }',
        ),
    );
    const text = renderEnvoyYaml(config);
    expect(danglingOrRepeated(text)).toEqual([]);
    const byName = Object.fromEntries((parseYaml(text).static_resources.clusters as Obj[]).map((c) => [c.name, c]));
    for (const [name, host, port, ca] of [
      ['upstream_chat', 'api.openai.com', 443, '/etc/ssl/certs/ca-certificates.crt'],
      ['upstream_messages', 'api.anthropic.com', 8443, '/etc/my-ca.pem'],
    ] as const) {
      const c = byName[name];
      expect(c.type).toBe('LOGICAL_DNS');
      expect(c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({
        address: host,
        port_value: port,
      });
      expect(c.transport_socket.typed_config['@type']).toBe(
        'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
      );
      expect(c.transport_socket.typed_config.common_tls_context.validation_context.trusted_ca.filename).toBe(ca);
      const http = c.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'];
      expect(http.upstream_http_protocol_options).toEqual({ auto_sni: true, auto_san_validation: true });
    }
    // The routes set Host to the provider's name (auto_host_rewrite), which SNI and the SAN check follow.
    expect(findAll(parseYaml(text), 'auto_host_rewrite').every((f) => f.value === true)).toBe(true);
  });

  it('writes the alternate prefix, the addresses and the limits of the config into the bundle', () => {
    const config = demoWith((y) =>
      y
        .replace('altPrefix: /alt', 'altPrefix: /vendor.x')
        .replace('listen: 0.0.0.0:10000', 'listen: 127.0.0.1:8080')
        .replace('maxRequestBytes: 33554432', 'maxRequestBytes: 1048576')
        .replace('# publicBaseUrl: https://llm.example.com', 'publicBaseUrl: https://llm.example.com'),
    );
    const text = renderEnvoyYaml(config);
    expect(danglingOrRepeated(text)).toEqual([]);
    expect(text).not.toContain('/alt');
    expect(text).toContain('path: "/vendor.x/v1/messages"');
    const routes = httpConnectionManager(parseYaml(text)).route_config.virtual_hosts[0].routes as Obj[];
    expect(routes.find((r) => r.name === 'repeated_v1')!.match.safe_regex.regex).toBe('(?:/vendor\\.x)?/v1/v1(?:/.*)?');
    expect(text).not.toContain('{base_url}');
    expect(text).toContain('https://llm.example.com/v1beta');
    const b = parseYaml(text);
    expect(b.static_resources.listeners[0].address.socket_address).toEqual({ address: '127.0.0.1', port_value: 8080 });
    expect(extAuthzConfig(b).with_request_body.max_request_bytes).toBe(1048576);
  });

  it('never cuts a stream: every upstream route has timeout 0s, an idle timeout and a host rewrite', () => {
    const routes = httpConnectionManager(envoyBundle().config).route_config.virtual_hosts[0].routes as Obj[];
    const upstream = routes.filter((r) => r.route?.cluster?.startsWith('upstream_'));
    // 14 spec endpoints (root and alternate), and the coding agents' /responses and /chat/completions (root and
    // alternate).
    expect(upstream.length).toBe(18);
    for (const r of upstream) {
      expect(r.route.timeout, r.name).toBe('0s');
      expect(r.route.idle_timeout, r.name).toBe('300s');
      expect(r.route.auto_host_rewrite, r.name).toBe(true);
    }
  });

  it("renders gateway.upstreamIdleTimeoutSeconds as every upstream route's idle_timeout and the stream_idle_timeout", () => {
    const b = parseYaml(
      renderEnvoyYaml(demoWith((y) => y.replace('upstreamIdleTimeoutSeconds: 300', 'upstreamIdleTimeoutSeconds: 7'))),
    );
    const hcm = httpConnectionManager(b);
    expect(hcm.stream_idle_timeout).toBe('7s');
    const upstream = (hcm.route_config.virtual_hosts[0].routes as Obj[]).filter((r) =>
      r.route?.cluster?.startsWith('upstream_'),
    );
    expect(upstream.map((r) => r.route.idle_timeout)).toEqual(upstream.map(() => '7s'));
    expect(httpConnectionManager(envoyBundle().config).stream_idle_timeout).toBe('300s');
  });

  it('gives every direct response a JSON body under 4 KB, a reason and a one-line ASCII hint, with ext_authz off', () => {
    const routes = httpConnectionManager(envoyBundle().config).route_config.virtual_hosts[0].routes as Obj[];
    const direct = routes.filter((r) => r.direct_response);
    expect(direct.length).toBeGreaterThan(15);
    for (const r of direct) {
      const body = r.direct_response.body.inline_string as string;
      expect(Buffer.byteLength(body), r.name).toBeLessThan(4096);
      const headers = Object.fromEntries(
        (r.response_headers_to_add as Obj[]).map((o) => [o.header.key, o.header.value]),
      );
      expect(headers['content-type'], r.name).toBe('application/json');
      expect(headers['x-modelgate-reason'], r.name).toMatch(
        /^(path_repeated|prefix_wrong|path_unknown|method_not_allowed)$/,
      );
      // printable ASCII on one line, and no "%" (header values are format strings)
      expect(headers['x-modelgate-hint'], r.name).toMatch(/^[\x20-\x24\x26-\x7e]+$/);
      // The SDK-visible message is the hint and the reason, as in modelgate's own denials.
      const error = JSON.parse(body).error;
      expect(error.message, r.name).toBe(
        `${headers['x-modelgate-hint']} [modelgate: ${headers['x-modelgate-reason']}]`,
      );
      // ext_authz is off by default and a direct response never turns it on.
      expect(r.typed_per_filter_config?.['envoy.filters.http.ext_authz'], r.name).toBeUndefined();
    }
  });
});

const SECRET = 'render-test-secret-0Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8';
/**
 * The demo config with the gRPC port's secret, mTLS (Envoy's certificate files as given) and two
 * trusted hops, after `edit`.
 */
const authed = (
  files = { cert: '/etc/envoy/client.crt', key: '/etc/envoy/client.key', ca: '/etc/envoy/modelgate-ca.crt' },
  edit: (y: string) => string = (y) => y,
) =>
  demoWith((y) =>
    edit(y)
      .replace(
        /^grpc:\n/m,
        'grpc:\n  secret: { env: S }\n  tls: { certFile: /etc/modelgate/tls.crt, keyFile: /etc/modelgate/tls.key, clientCaFile: /etc/modelgate/envoy-ca.crt }\n',
      )
      .replace(
        /^gateway:\n/m,
        `gateway:\n  authzTls: { certFile: ${files.cert}, keyFile: ${files.key}, caFile: ${files.ca}, serverName: modelgate.internal }\n  trustedProxyHops: 2\n`,
      ),
  );

/** The rate limits counted by envoyproxy/ratelimit instead of modelgate's embedded engine. */
const globalEngine = (y: string): string => y.replace('engine: embedded', 'engine: global');

describe('the gRPC port authenticated (docs/security.md)', () => {
  it('renders the secret, mTLS and trusted hops', () => {
    const text = renderEnvoyYaml({ ...authed(), grpcSecret: SECRET });
    const b = parseYaml(text);
    expect(httpConnectionManager(b).xff_num_trusted_hops).toBe(2);
    for (const name of ['modelgate_meter', 'modelgate_ratelimit']) {
      const c = b.static_resources.clusters.find((x: Obj) => x.name === name);
      expect(c.transport_socket.typed_config.common_tls_context.alpn_protocols, name).toEqual(['h2']);
    }
    // ext_authz, the meter's access log, the health check and the two rate limit filters (embedded engine).
    expect(text.split(`Bearer ${SECRET}`).length - 1).toBe(5);
  });

  it("puts the secret into what modelgate adopt adds to a team's Envoy too", () => {
    const team = parseYaml(readFileSync(join(__dirname, 'fixtures', 'team-envoy.yaml'), 'utf8'));
    expect(
      JSON.stringify(adopt(team, { ...authed(), grpcSecret: SECRET }).bootstrap).split(`Bearer ${SECRET}`).length - 1,
    ).toBe(5);
  });

  it('sends neither the secret nor the client certificate to envoyproxy/ratelimit (the global engine)', () => {
    const text = renderEnvoyYaml({ ...authed(undefined, globalEngine), grpcSecret: SECRET });
    const b = parseYaml(text);
    const rl = b.static_resources.clusters.find((c: Obj) => c.name === 'modelgate_ratelimit');
    expect(rl.transport_socket).toBeUndefined();
    expect(rl.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value).toBe(8081);
    expect(text.split(`Bearer ${SECRET}`).length - 1).toBe(3);
  });

  it('refuses to render a config with grpc.secret without its value', () => {
    expect(() => renderEnvoyYaml(authed())).toThrow(/grpc\.secret is set/);
  });

  it('renders no authentication and no trusted hops by default', () => {
    const text = renderEnvoyYaml(demoWith());
    expect(text).not.toMatch(
      /initial_metadata|transport_socket: \{ name: envoy\.transport_sockets\.tls[^}]*UpstreamTlsContext[^}]*tls_certificates|xff_num_trusted_hops/,
    );
  });
});

describeE2E("the gRPC port authenticated (docs/security.md): the pinned Envoy's own check", () => {
  it('accepts the bundle with the secret, mTLS and trusted hops (either rate limit engine), with no warning', () => {
    // Envoy reads the certificate files while it validates: real ones, made for this run.
    const certs = makeTestCerts();
    try {
      for (const edit of [undefined, globalEngine]) {
        const r = verdict(
          renderEnvoyYaml({
            ...authed({ cert: certs.clientCert, key: certs.clientKey, ca: certs.serverCa }, edit),
            grpcSecret: SECRET,
          }),
        );
        expect(r.ok, r.message).toBe(true);
        expect(r.output).not.toContain('[warning]');
      }
    } finally {
      rmSync(certs.dir, { recursive: true, force: true });
    }
  });
});

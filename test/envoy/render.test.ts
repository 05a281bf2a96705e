/**
 * The Envoy bundle generator (src/envoy/render.ts): envoy/envoy.yaml is exactly its output for
 * envoy/modelgate.yaml; the output passes Envoy's own v3 API protos strictly (and broken copies of it
 * exercise the checker); and it holds the settings the gateway's safety depends on (fail closed, body
 * limits, headers). What a real Envoy does with it is proven in test/e2e/.
 */
import { readFileSync } from 'node:fs';
import type { Enum } from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load';
import { decisionHeaders } from '../../src/check/read-request';
import { BOOTSTRAP_TYPE, checkEnvoyConfig, lookupEnvoyType, parseEnvoyConfig } from '../../src/envoy/config-check';
import { renderEnvoyParts, renderEnvoyYaml } from '../../src/envoy/render';
import { ENVOY_YAML_PATH, envoyBundle, extAuthzConfig, findAll, httpConnectionManager } from '../support/envoy-bundle';
import { DEMO_CONFIG } from '../support/service-harness';
import { parse as parseYaml } from 'yaml';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const MiB = 1024 * 1024;
const HCM = 'static_resources.listeners[0].filter_chains[0].filters[0].typed_config';
// http_filters[0] is the filter that writes the address into hints (base-url-filter.ts; the demo has no publicBaseUrl).
const EXT_AUTHZ = `${HCM}.http_filters[1].typed_config`;
const ROUTES = `${HCM}.route_config.virtual_hosts[0].routes`;

/** envoy.yaml with one exact text replaced (the replacement must happen). */
function broken(from: string, to: string): string {
  const { text } = envoyBundle();
  expect(text, `envoy.yaml no longer contains ${JSON.stringify(from)}`).toContain(from);
  return text.replace(from, to);
}

function expectError(yamlText: string, pathAndMessage: string): void {
  const result = checkEnvoyConfig(yamlText);
  expect(result.ok).toBe(false);
  expect(result.errors.join('\n')).toContain(pathAndMessage);
}

/** The demo config with its text changed, parsed (every variable set: credentials are not rendered). */
function demoWith(edit: (yaml: string) => string = (y) => y) {
  return parseConfig(edit(readFileSync(DEMO_CONFIG, 'utf8')), new Proxy({}, { get: () => 'set' }));
}

describe('envoy/envoy.yaml', () => {
  it('is exactly what the generator renders from envoy/modelgate.yaml (npm run envoy-config)', () => {
    expect(readFileSync(ENVOY_YAML_PATH, 'utf8')).toBe(renderEnvoyYaml(demoWith(), 'envoy/modelgate.yaml'));
  });

  it('passes strict validation against the 1.31 API protos with no error and no warning', () => {
    const { parsed } = envoyBundle();
    expect(parsed.errors).toEqual([]);
    expect(parsed.warnings).toEqual([]);
    expect(parsed.ok).toBe(true);
  });

  it('round-trips through the protobuf Bootstrap message, typed_config payloads included', () => {
    const { parsed } = envoyBundle();
    const bootstrap = lookupEnvoyType(BOOTSTRAP_TYPE)!;
    const bytes = bootstrap.encode(parsed.message!).finish();
    const back = bootstrap.toObject(bootstrap.decode(bytes), { enums: String }) as Obj;
    const hcmAny = back.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
    expect(hcmAny.type_url).toBe('type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager');
    const hcmType = lookupEnvoyType('envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager')!;
    expect((hcmType.toObject(hcmType.decode(hcmAny.value)) as Obj).stat_prefix).toBe('modelgate');
  });
});

describe('the strict checker', () => {
  it('rejects an unknown field and names its path', () => {
    expectError(broken('admin: { address:', 'admin: { access_log_pathh: /dev/null, address:'), 'admin.access_log_pathh: unknown field');
  });

  it('rejects a value of the wrong type', () => {
    expectError(broken('port_value: 10000', 'port_value: "ten thousand"'),
      'static_resources.listeners[0].address.socket_address.port_value: expected an integer (uint32)');
  });

  it('rejects a misspelled enum value such as transport_api_version V4', () => {
    expectError(broken('transport_api_version: V3', 'transport_api_version: V4'),
      `${EXT_AUTHZ}.transport_api_version: unknown enum value "V4"`);
  });

  it('rejects a typed_config whose @type names no type in the API', () => {
    expectError(broken('envoy.extensions.filters.http.router.v3.Router', 'envoy.extensions.filters.http.router.v3.Rooter'),
      `${HCM}.http_filters[6].typed_config["@type"]: cannot resolve type URL`);
  });

  it('rejects an unknown field inside a typed_config payload', () => {
    expectError(broken('validate_mutations: true', 'validate_mutation: true'),
      `${EXT_AUTHZ}.validate_mutation: unknown field "validate_mutation" in envoy.extensions.filters.http.ext_authz.v3.ExtAuthz`);
  });

  it('rejects two members of one oneof', () => {
    expectError(broken('path: "/v1/chat/completions"\n', 'path: "/v1/chat/completions"\n                            prefix: /v1\n'),
      `${ROUTES}[0].match: oneof "path_specifier" of envoy.config.route.v3.RouteMatch has 2 members set (prefix, path)`);
  });

  it('rejects a missing required message (validate.rules message.required)', () => {
    expectError(broken('- timeout: 1s\n          interval: 5s', '- interval: 5s'), 'static_resources.clusters[0].health_checks[0].timeout: is required');
  });

  it('rejects an empty string where min_len is 1, even when the field is left out', () => {
    expectError(broken('stat_prefix: modelgate', 'stat_prefix: ""'), `${HCM}.stat_prefix: violates (validate.rules).string: min_len 1`);
    expectError(broken('                stat_prefix: modelgate\n', ''), `${HCM}.stat_prefix: violates (validate.rules).string: min_len 1`);
  });

  it('rejects numbers outside their PGV range', () => {
    expectError(broken('max_request_bytes: 33554432', 'max_request_bytes: 0'), `${EXT_AUTHZ}.with_request_body.max_request_bytes: violates (validate.rules).uint32: must be > 0`);
    expectError(broken('status: 405', 'status: 99'), 'direct_response.status: violates (validate.rules).uint32: must be >= 200 and < 600');
    expectError(broken('port_value: 10000', 'port_value: 70000'), 'port_value: violates (validate.rules).uint32: must be <= 65535');
  });

  it('rejects ExtAuthzPerRoute disabled: false (PGV bool const) and an empty ExtAuthzPerRoute (required oneof)', () => {
    expectError(broken('ExtAuthzPerRoute\n                              disabled: true', 'ExtAuthzPerRoute\n                              disabled: false'), '"envoy.filters.http.ext_authz"].disabled: violates (validate.rules).bool: must be true');
    expectError(broken('ExtAuthzPerRoute\n                              disabled: true', 'ExtAuthzPerRoute'), 'one of disabled, check_settings is required');
  });

  it('rejects a duration written as a bare number', () => {
    expectError(broken('timeout: 1s }', 'timeout: 1 }'), `${EXT_AUTHZ}.grpc_service.timeout: expected a duration string like "0.5s"`);
  });

  it('rejects a route or gRPC service that names a cluster that does not exist', () => {
    expectError(broken('cluster_name: modelgate_authz }', 'cluster_name: modelgate_auth }'), `${EXT_AUTHZ}.grpc_service.envoy_grpc: unknown cluster "modelgate_auth"`);
  });

  it('rejects two clusters with one name', () => {
    expectError(broken('- name: upstream_alt\n', '- name: upstream_chat\n'), 'static_resources.clusters: duplicate cluster name "upstream_chat"');
  });

  it('loads a package even when one of its files imports protos that are not shipped (tracers)', () => {
    expect(lookupEnvoyType('envoy.config.trace.v3.ZipkinConfig')).toBeDefined();
    expect(lookupEnvoyType('envoy.config.trace.v3.OpenCensusConfig')).toBeUndefined();
    expect(lookupEnvoyType('envoy.extensions.filters.http.ext_authz.v3.ExtAuthz')).toBeDefined();
    expect(checkEnvoyConfig(envoyBundle().text).ok).toBe(true);
  });

  it('rejects duplicate YAML keys and YAML merge keys, which Envoy does not support', () => {
    expectError(broken('stat_prefix: modelgate', 'stat_prefix: modelgate\n                stat_prefix: again'), 'yaml: Map keys must be unique');
    expectError(broken('route: { cluster: upstream_chat, timeout: 0s, idle_timeout: 300s, auto_host_rewrite: true }\n                          request_headers_to_remove:', 'route: { <<: { cluster: upstream_chat }, timeout: 1s }\n                          request_headers_to_remove:'),
      `${ROUTES}[0].route.<<: unknown field "<<"`);
  });

  it('accepts lowerCamelCase json names and enum numbers, but not the same field twice', () => {
    expect(checkEnvoyConfig(broken('stat_prefix: modelgate', 'statPrefix: modelgate')).ok).toBe(true);
    expect(checkEnvoyConfig(broken('transport_api_version: V3', 'transport_api_version: 2')).ok).toBe(true);
    expectError(broken('stat_prefix: modelgate', 'stat_prefix: modelgate\n                statPrefix: again'), 'field "stat_prefix" is set twice');
  });

  it('warns about a null value, which leaves a message unset (here: the authz cluster would lose HTTP/2)', () => {
    const result = checkEnvoyConfig(broken('explicit_http_config: { http2_protocol_options: {} }', 'explicit_http_config: { http2_protocol_options: }'));
    expect(result.warnings.join('\n')).toContain('http2_protocol_options: null leaves the field unset');
    expect(result.errors.join('\n')).toContain('one of http_protocol_options, http2_protocol_options, http3_protocol_options is required');
  });

  it('warns about a deprecated field but accepts it, as Envoy does', () => {
    const result = checkEnvoyConfig(broken('{ name: ":method", string_match: { exact: POST } }', '{ name: ":method", exact_match: POST }'));
    expect(result.ok).toBe(true);
    expect(result.warnings.join('\n')).toContain('exact_match: deprecated field envoy.config.route.v3.HeaderMatcher.exact_match');
  });

  it('validates other message types on request and reports YAML that is not an object', () => {
    const r = parseEnvoyConfig('name: x\nvirtual_hosts: [{ name: v, domains: ["*"], routes: [{ match: { prefix: / }, route: { cluster: c } }] }]', 'envoy.config.route.v3.RouteConfiguration');
    expect(r.errors).toEqual([]);
    expect(checkEnvoyConfig('- just a list').errors[0]).toContain('(root): expected an object');
  });
});

describe('the settings modelgate relies on', () => {
  it('fails closed: no failure_mode_allow, 503 on authz errors, gRPC V3 to modelgate_authz with an explicit timeout', () => {
    const a = extAuthzConfig(envoyBundle().config);
    expect(a.failure_mode_allow).toBe(false);
    expect(a.status_on_error.code).toBe('ServiceUnavailable');
    expect((lookupEnvoyType('envoy.type.v3.HttpStatus')!.fields.code.resolvedType as Enum).values.ServiceUnavailable).toBe(503);
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
    expect(patterns.map((p) => p.exact).sort()).toEqual([':method', ':path', 'anthropic-version', 'authorization',
      'content-encoding', 'content-type', 'x-api-key', 'x-goog-api-key', 'x-request-id', 'x-vendor-api-key']);
    // Every header the service's decoder keeps for a decision is sent (Envoy adds the partial-body flag itself).
    const sent = new Set(patterns.map((p) => p.exact));
    const demoRoutes = parseConfig(readFileSync(DEMO_CONFIG, 'utf8')).routes;
    expect(decisionHeaders(demoRoutes).filter((h) => !sent.has(h))).toEqual(['x-envoy-auth-partial-body']);
  });

  it('runs the address-in-hints filter, ext_authz, then the meter (ext_proc), then the rate limit filters (tokens checked, then requests counted), then the filter that drops request trailers, before the router and nothing else in between', () => {
    const filters = httpConnectionManager(envoyBundle().config).http_filters as Obj[];
    expect(filters.map((f) => f.name)).toEqual(['modelgate.base_url_in_hints', 'envoy.filters.http.ext_authz', 'envoy.filters.http.ext_proc', 'modelgate.ratelimit_tokens', 'modelgate.ratelimit_requests', 'modelgate.drop_request_trailers', 'envoy.filters.http.router']);
  });

  it('writes no address into hints at run time when gateway.publicBaseUrl is set: the hints are rendered with it', () => {
    const yaml = renderEnvoyYaml(demoWith((y) => y.replace('# publicBaseUrl: https://llm.example.com', 'publicBaseUrl: https://llm.example.com')));
    expect(yaml).not.toContain('modelgate.base_url_in_hints');
    expect(yaml).not.toContain('{base_url}');
    expect(yaml).toContain('use the Base URL https://llm.example.com/v1');
  });

  it('meters without ever holding a response: observability mode, fail open, response body streamed, only the headers it reads', () => {
    const filters = httpConnectionManager(envoyBundle().config).http_filters as Obj[];
    const meter = filters.find((f) => f.name === 'envoy.filters.http.ext_proc')!.typed_config;
    expect(meter).toMatchObject({
      grpc_service: { envoy_grpc: { cluster_name: 'modelgate_meter' } },
      failure_mode_allow: true,
      observability_mode: true,
      processing_mode: { request_header_mode: 'SEND', response_header_mode: 'SEND', request_body_mode: 'NONE', response_body_mode: 'STREAMED', request_trailer_mode: 'SKIP', response_trailer_mode: 'SKIP' },
    });
    expect(meter.grpc_service.timeout).toBeUndefined();
    expect(meter.forward_rules.allowed_headers.patterns.map((p: Obj) => p.exact)).toEqual(expect.arrayContaining(['x-modelgate-key-id', 'x-request-id', ':path', ':status', 'content-encoding']));
  });

  it('turns the meter off on every route but the protocol endpoints, and leaves it on there', () => {
    const routes = httpConnectionManager(envoyBundle().config).route_config.virtual_hosts[0].routes as Obj[];
    for (const r of routes) {
      const upstream = typeof r.route?.cluster === 'string' && r.route.cluster.startsWith('upstream_');
      const off = r.typed_per_filter_config?.['envoy.filters.http.ext_proc'];
      if (upstream) expect(off, r.name).toBeUndefined();
      else expect(off, r.name).toEqual({ '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute', disabled: true });
    }
  });

  it("sends the meter's streams to modelgate's gRPC port on connections of their own, each retired after 900 streams", () => {
    // Envoy resets every observability-mode stream; Node's HTTP/2 server sends GOAWAY after 1,000
    // resets on a connection (then 33/s): the Checks on it would fail (bench/README-e2e.md).
    const clusters = envoyBundle().config.static_resources.clusters as Obj[];
    const byName = Object.fromEntries(clusters.map((c) => [c.name, c]));
    const meter = byName.modelgate_meter;
    expect(meter.load_assignment).toEqual({ ...byName.modelgate_authz.load_assignment, cluster_name: 'modelgate_meter' });
    expect(meter.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions']).toMatchObject({
      explicit_http_config: { http2_protocol_options: {} },
      common_http_protocol_options: { max_requests_per_connection: 900 },
    });
    expect(byName.modelgate_authz.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'].common_http_protocol_options).toBeUndefined();
  });

  it('renders no meter when meter.enabled is false', () => {
    const yaml = renderEnvoyYaml(demoWith((y) => y.replace('meter:\n  enabled: true', 'meter:\n  enabled: false')));
    expect(yaml).not.toContain('ext_proc');
    expect(yaml).not.toContain('modelgate_meter');
  });

  it('drops request trailers with a Lua filter, on upstream routes only', () => {
    const filters = httpConnectionManager(envoyBundle().config).http_filters as Obj[];
    expect(filters.find((f) => f.name === 'modelgate.drop_request_trailers')!.typed_config['@type']).toBe('type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua');
    // Only upstream routes run it: every other route turns it off.
    const routes = httpConnectionManager(envoyBundle().config).route_config.virtual_hosts[0].routes as Obj[];
    for (const r of routes) {
      const off = r.typed_per_filter_config?.['modelgate.drop_request_trailers']?.disabled === true;
      expect(off, r.name).toBe(!String(r.route?.cluster ?? '').startsWith('upstream_'));
    }
  });

  it('refuses escaped slashes, drops underscore headers and removes credential headers on every upstream route', () => {
    const hcm = httpConnectionManager(envoyBundle().config);
    expect(hcm.path_with_escaped_slashes_action).toBe('REJECT_REQUEST');
    expect(hcm.common_http_protocol_options).toEqual({ headers_with_underscores_action: 'DROP_HEADER' });
    const routes = hcm.route_config.virtual_hosts[0].routes as Obj[];
    for (const r of routes.filter((x) => String(x.route?.cluster ?? '').startsWith('upstream_'))) {
      expect(r.request_headers_to_remove, r.name).toEqual(expect.arrayContaining(['authorization', 'proxy-authorization', 'cookie', 'x-api-key', 'api-key', 'x-goog-api-key', 'x-vendor-api-key']));
    }
  });

  it('keeps the header of a configured upstream credential on the routes to its upstream only (issue 21)', () => {
    const config = demoWith((y) => y.replace(/\n    messages: http:\/\/127\.0\.0\.1:9300\n    generative: http:\/\/127\.0\.0\.1:9300\n    alt: http:\/\/127\.0\.0\.1:9300\n/,
      '\n    messages: { url: "http://127.0.0.1:9300", credential: { header: x-api-key, env: A } }\n    generative: { url: "http://127.0.0.1:9300", credential: { header: x-goog-api-key, env: G } }\n    alt: { url: "http://127.0.0.1:9300", credential: { header: x-alt-token, env: T } }\n'));
    expect(config.upstream.credentials.alt?.header).toBe('x-alt-token');
    const routes = httpConnectionManager(parseYaml(renderEnvoyYaml(config))).route_config.virtual_hosts[0].routes as Obj[];
    const removes = (name: string) => routes.find((r) => r.name === name)!.request_headers_to_remove as string[];
    expect(removes('messages')).not.toContain('x-api-key');
    expect(removes('messages_count_tokens')).not.toContain('x-api-key');
    expect(removes('messages')).toEqual(expect.arrayContaining(['authorization', 'x-alt-token', 'x-goog-api-key']));
    expect(removes('generative')).not.toContain('x-goog-api-key');
    expect(removes('chat_completions')).toEqual(expect.arrayContaining(['x-api-key', 'x-goog-api-key', 'x-alt-token']));
    // Under the alternate prefix every route goes to the alt upstream: only its header stays.
    for (const name of routes.map((r) => String(r.name)).filter((n) => n.startsWith('alt_') && !n.includes('models'))) {
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
    const options = [...findAll(config, 'response_headers_to_add'), ...findAll(config, 'request_headers_to_add')]
      .flatMap(({ at, value }) => (value as Obj[]).map((o, i) => ({ at: `${at}[${i}]`, o })));
    expect(options.length).toBeGreaterThan(50);
    for (const { at, o } of options) expect(o.append_action, at).toBe('OVERWRITE_IF_EXISTS_OR_ADD');
    expect(findAll(config, 'append')).toEqual([]);
  });

  it('listens on 0.0.0.0:10000 for HTTP/1.1 and h2c, merges slashes, generates x-request-id, admin on loopback only', () => {
    const { config } = envoyBundle();
    expect(config.static_resources.listeners[0].address.socket_address).toEqual({ address: '0.0.0.0', port_value: 10000 });
    expect(config.admin.address.socket_address).toEqual({ address: '127.0.0.1', port_value: 9901 });
    const hcm = httpConnectionManager(config);
    expect(hcm.codec_type).toBe('AUTO');
    expect(hcm.merge_slashes).toBe(true);
    expect(hcm.generate_request_id).toBe(true);
  });

  it('logs JSON with the ext_authz metadata and nothing of the request line as sent', () => {
    const hcm = httpConnectionManager(envoyBundle().config);
    const log = hcm.access_log[0].typed_config.log_format;
    const fields = log.json_format as Record<string, string>;
    for (const k of ['keyId', 'group', 'model', 'reason', 'style', 'decision', 'path']) {
      expect(Object.values(fields)).toContain(`%DYNAMIC_METADATA(envoy.filters.http.ext_authz:${k})%`);
    }
    expect(fields.path).toBe('%DYNAMIC_METADATA(envoy.filters.http.ext_authz:path)%');
    for (const op of ['%RESPONSE_CODE%', '%RESPONSE_FLAGS%', '%DURATION%', '%UPSTREAM_CLUSTER%', '%REQ(X-REQUEST-ID)%', '%ROUTE_NAME%', '%REQ(:METHOD):7%']) {
      expect(Object.values(fields)).toContain(op);
    }
    // No path as sent (a key can be in it), no key header, no query string.
    const rest = JSON.stringify(fields).toLowerCase().replace('ext_authz:path)', '');
    for (const leak of [':path', 'path)', 'authorization', 'api-key', 'original_path', 'query']) expect(rest).not.toContain(leak);
    expect(log.formatters).toBeUndefined();
  });

  it('follows the key headers of the config: another bearer header is sent to the check too', () => {
    const config = demoWith((y) => y.replace('bearerHeaders: [authorization, x-api-key]', 'bearerHeaders: [authorization, x-api-key, api-key]'));
    const patterns = extAuthzConfig(parseYaml(renderEnvoyYaml(config))).allowed_headers.patterns as Obj[];
    expect(patterns.map((p) => p.exact)).toContain('api-key');
  });

  it('reaches modelgate over HTTP/2 with gRPC health checks, and its HTTP listener over plain HTTP/1.1', () => {
    const clusters = envoyBundle().config.static_resources.clusters as Obj[];
    const byName = Object.fromEntries(clusters.map((c) => [c.name, c]));
    const authz = byName.modelgate_authz;
    const address = (c: Obj): Obj => c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address;
    expect(address(authz)).toEqual({ address: '127.0.0.1', port_value: 9191 });
    expect(authz.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'].explicit_http_config)
      .toEqual({ http2_protocol_options: {} });
    expect(authz.health_checks[0].grpc_health_check).toEqual({});
    expect(address(byName.modelgate_http)).toEqual({ address: '127.0.0.1', port_value: 9192 });
    expect(byName.modelgate_http.typed_extension_protocol_options).toBeUndefined();
    expect(byName.modelgate_http.transport_socket).toBeUndefined();
  });

  it("sends the demo's upstream traffic to the demo upstream over plain HTTP/1.1 on loopback", () => {
    const clusters = envoyBundle().config.static_resources.clusters as Obj[];
    const upstreams = clusters.filter((c) => c.name.startsWith('upstream_'));
    expect(upstreams.map((c) => c.name).sort()).toEqual(['upstream_alt', 'upstream_chat', 'upstream_generative', 'upstream_messages']);
    for (const c of upstreams) {
      expect(c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address, c.name).toEqual({ address: '127.0.0.1', port_value: 9300 });
      expect(c.type, c.name).toBe('STATIC');
      expect(c.transport_socket, c.name).toBeUndefined();
    }
  });

  it('sends traffic to a real provider over verified TLS, SNI and SAN check from its name (an https:// upstream)', () => {
    const config = demoWith((y) => y.replace('chat: http://127.0.0.1:9300', 'chat: https://api.openai.com')
      .replace('messages: http://127.0.0.1:9300', 'messages: { url: "https://api.anthropic.com:8443", caFile: /etc/my-ca.pem }'));
    const text = renderEnvoyYaml(config);
    expect(checkEnvoyConfig(text).errors).toEqual([]);
    const byName = Object.fromEntries((parseYaml(text).static_resources.clusters as Obj[]).map((c) => [c.name, c]));
    for (const [name, host, port, ca] of [['upstream_chat', 'api.openai.com', 443, '/etc/ssl/certs/ca-certificates.crt'], ['upstream_messages', 'api.anthropic.com', 8443, '/etc/my-ca.pem']] as const) {
      const c = byName[name];
      expect(c.type).toBe('LOGICAL_DNS');
      expect(c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({ address: host, port_value: port });
      expect(c.transport_socket.typed_config['@type']).toBe('type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext');
      expect(c.transport_socket.typed_config.common_tls_context.validation_context.trusted_ca.filename).toBe(ca);
      const http = c.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'];
      expect(http.upstream_http_protocol_options).toEqual({ auto_sni: true, auto_san_validation: true });
    }
    // The routes set Host to the provider's name (auto_host_rewrite), which SNI and the SAN check follow.
    expect(findAll(parseYaml(text), 'auto_host_rewrite').every((f) => f.value === true)).toBe(true);
  });

  it('writes the alternate prefix, the addresses and the limits of the config into the bundle', () => {
    const config = demoWith((y) => y.replace('altPrefix: /alt', 'altPrefix: /vendor.x')
      .replace('listen: 0.0.0.0:10000', 'listen: 127.0.0.1:8080').replace('maxRequestBytes: 33554432', 'maxRequestBytes: 1048576')
      .replace('# publicBaseUrl: https://llm.example.com', 'publicBaseUrl: https://llm.example.com'));
    const text = renderEnvoyYaml(config);
    expect(checkEnvoyConfig(text).errors).toEqual([]);
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

  it('renders the parts for an existing Envoy: the filter, the clusters, the virtual host and the local replies', () => {
    const parts = parseYaml(renderEnvoyParts(demoWith(), 'envoy/modelgate.yaml'));
    expect(parts.http_filters.map((f: Obj) => f.name)).toEqual(['modelgate.base_url_in_hints', 'envoy.filters.http.ext_authz', 'envoy.filters.http.ext_proc', 'modelgate.ratelimit_tokens', 'modelgate.ratelimit_requests', 'modelgate.drop_request_trailers']);
    expect(parts.connection_manager_settings).toMatchObject({ path_with_escaped_slashes_action: 'REJECT_REQUEST', common_http_protocol_options: { headers_with_underscores_action: 'DROP_HEADER' } });
    expect(parts.clusters.map((c: Obj) => c.name)).toEqual(['modelgate_authz', 'modelgate_meter', 'modelgate_ratelimit', 'modelgate_http', 'upstream_chat', 'upstream_messages', 'upstream_generative', 'upstream_alt']);
    expect(parts.virtual_host.routes.length).toBe(httpConnectionManager(envoyBundle().config).route_config.virtual_hosts[0].routes.length);
    expect(parts.local_reply_config.mappers.length).toBeGreaterThan(0);
    expect(parseEnvoyConfig(JSON.stringify({ virtual_hosts: [parts.virtual_host] }), 'envoy.config.route.v3.RouteConfiguration').errors).toEqual([]);
  });

  it('never cuts a stream: every upstream route has timeout 0s, an idle timeout and a host rewrite', () => {
    const routes = httpConnectionManager(envoyBundle().config).route_config.virtual_hosts[0].routes as Obj[];
    const upstream = routes.filter((r) => r.route?.cluster?.startsWith('upstream_'));
    // 14 spec endpoints (root and alternate), and the coding agents' /responses and /chat/completions (root and alternate).
    expect(upstream.length).toBe(18);
    for (const r of upstream) {
      expect(r.route.timeout, r.name).toBe('0s');
      expect(r.route.idle_timeout, r.name).toBe('300s');
      expect(r.route.auto_host_rewrite, r.name).toBe(true);
    }
  });

  it('renders gateway.upstreamIdleTimeoutSeconds as every upstream route\'s idle_timeout and the stream_idle_timeout', () => {
    const b = parseYaml(renderEnvoyYaml(demoWith((y) => y.replace('upstreamIdleTimeoutSeconds: 300', 'upstreamIdleTimeoutSeconds: 7'))));
    const hcm = httpConnectionManager(b);
    expect(hcm.stream_idle_timeout).toBe('7s');
    const upstream = (hcm.route_config.virtual_hosts[0].routes as Obj[]).filter((r) => r.route?.cluster?.startsWith('upstream_'));
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
      const headers = Object.fromEntries((r.response_headers_to_add as Obj[]).map((o) => [o.header.key, o.header.value]));
      expect(headers['content-type'], r.name).toBe('application/json');
      expect(headers['x-modelgate-reason'], r.name).toMatch(/^(path_repeated|prefix_wrong|path_unknown|method_not_allowed)$/);
      // printable ASCII on one line, and no "%" (header values are format strings)
      expect(headers['x-modelgate-hint'], r.name).toMatch(/^[\x20-\x24\x26-\x7e]+$/);
      // The SDK-visible message is the hint and the reason, as in modelgate's own denials.
      const error = JSON.parse(body).error;
      expect(error.message, r.name).toBe(`${headers['x-modelgate-hint']} [modelgate: ${headers['x-modelgate-reason']}]`);
      expect(r.typed_per_filter_config['envoy.filters.http.ext_authz'], r.name).toEqual({
        '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute', disabled: true,
      });
    }
  });
});

describe('the gRPC port authenticated (issue 21)', () => {
  const SECRET = 'render-test-secret-0Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8';
  const authed = (edit: (y: string) => string = (y) => y) => demoWith((y) => edit(y)
    .replace(/^grpc:\n/m, 'grpc:\n  secret: { env: S }\n  tls: { certFile: /etc/modelgate/tls.crt, keyFile: /etc/modelgate/tls.key, clientCaFile: /etc/modelgate/envoy-ca.crt }\n')
    .replace(/^gateway:\n/m, 'gateway:\n  authzTls: { certFile: /etc/envoy/client.crt, keyFile: /etc/envoy/client.key, caFile: /etc/envoy/modelgate-ca.crt, serverName: modelgate.internal }\n  trustedProxyHops: 2\n'));

  it('passes strict validation against the API protos with the secret, mTLS and trusted hops', () => {
    const text = renderEnvoyYaml({ ...authed(), grpcSecret: SECRET });
    const r = checkEnvoyConfig(text);
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual([]);
    const b = parseYaml(text);
    expect(httpConnectionManager(b).xff_num_trusted_hops).toBe(2);
    for (const name of ['modelgate_meter', 'modelgate_ratelimit']) {
      const c = b.static_resources.clusters.find((x: Obj) => x.name === name);
      expect(c.transport_socket.typed_config.common_tls_context.alpn_protocols, name).toEqual(['h2']);
    }
    // ext_authz, ext_proc, the health check and the two rate limit filters (embedded engine).
    expect(text.split(`Bearer ${SECRET}`).length - 1).toBe(5);
  });

  it('puts the secret into the parts a platform team pastes too', () => {
    expect(renderEnvoyParts({ ...authed(), grpcSecret: SECRET }).split(`Bearer ${SECRET}`).length - 1).toBe(5);
  });

  it('sends neither the secret nor the client certificate to envoyproxy/ratelimit (the global engine)', () => {
    const text = renderEnvoyYaml({ ...authed((y) => y.replace('engine: embedded', 'engine: global')), grpcSecret: SECRET });
    expect(checkEnvoyConfig(text).errors).toEqual([]);
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
    expect(text).not.toMatch(/initial_metadata|transport_socket: \{ name: envoy\.transport_sockets\.tls[^}]*UpstreamTlsContext[^}]*tls_certificates|xff_num_trusted_hops/);
  });
});

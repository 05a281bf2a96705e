/**
 * Renders the Envoy bundle from modelgate's own config (`modelgate envoy-config`): a complete
 * bootstrap (listener, ext_authz filter, routes, clusters, admin); `modelgate adopt` (adopt.ts)
 * adds the same pieces to a team's own Envoy. envoy/envoy.yaml is this output for envoy/modelgate.yaml, and the
 * end-to-end tests run a real Envoy on what this renders, so what is tested is what users get.
 *
 * Pure: config in, plain objects (and YAML text) out. Everything Envoy-specific that is not a
 * route lives here; envoy/README.md explains each setting.
 */
import { Document, isMap, isScalar, isSeq, visit, type Node } from 'yaml';
import {
  UPSTREAM_FAMILIES,
  type AuthzTls,
  type Config,
  type HostPort,
  type UpstreamFamily,
  type UpstreamTarget,
} from '../config/load';
import { authzTransportSocket, grpcServiceMetadata, healthCheckMetadata } from './render-grpc-auth';
import { errorBody } from '../contract/error-body';
import { HEADER, HEADERS_NEVER_UPSTREAM } from '../contract/headers';
import { HINTS, statusOf, type DenyReason } from '../contract/reasons';
import { retryHeaders } from '../contract/retry-advice';
import { baseUrlFilter, baseUrlPerRoute } from './base-url-filter';
import { MARK_KEY, MARK_NAMESPACE, OURS, requestFilters, requestPerRoute } from './request-mark';
import { decisionHeaders } from '../contract/headers';
import type { Family } from '../contract/error-body';
import { UPSTREAM_ACCEPT_ENCODING, meterAccessLog, meterHttpFilters, meterPerRoute } from './meter-filters';
import {
  CLUSTER,
  EXT_AUTHZ_FILTER,
  GENERATIVE_METHOD_REGEXES,
  TRAILERS_FILTER,
  UPSTREAM_CLUSTER,
  renderRoutes,
  type RouteTableInput,
} from './render-routes';
import { rateLimitFilters, rateLimitPerRoute, rateLimitReplyMappers } from './render-ratelimit';
import { refusalLogFields } from './refusal-log-fields';

type Obj = Record<string, unknown>;

/**
 * The part of modelgate's config the bundle is rendered from (no `meter`: no meter filter).
 * `upstream` (its credentials) decides which credential header each upstream route keeps: the one
 * modelgate sets for that route's upstream.
 */
export type GatewayRenderInput = Pick<Config, 'routes' | 'gateway'> &
  Partial<Pick<Config, 'meter' | 'grpc' | 'rateLimits'>> & {
    readonly upstream?: Config['upstream'];
    /** The gRPC port's secret, read (config/grpc-auth.ts readGrpcSecret): required when `grpc.secret` is set. */
    readonly grpcSecret?: string;
  };

/** The secret Envoy presents to modelgate's gRPC port, if the config sets one. */
function secretOf(input: GatewayRenderInput): string | undefined {
  if (input.grpc?.secret && input.grpcSecret === undefined)
    throw new Error('grpc.secret is set: the bundle is rendered with its value (readGrpcSecret)');
  return input.grpc?.secret ? input.grpcSecret : undefined;
}

/**
 * The request headers Envoy sends in a CheckRequest: those a decision reads (contract/headers.ts
 * decisionHeaders, the key headers included) and content-type. Envoy adds x-envoy-auth-partial-body
 * itself. In gRPC mode, once allowed_headers is set, pseudo-headers are sent only when listed.
 *
 * With `bundle` (this renderer's own routes), two that no Check through them reads are left out:
 * x-request-id (each route mints x-modelgate-request before the Check, request-mark.ts, which the
 * Check reads instead) and, without trusted hops, x-forwarded-for (the client is then the source
 * address: decision-log.ts clientAddress). Without it (the chart's gateways, which mint no identity
 * and whose hops are set later), every one.
 */
export function checkRequestHeaders(
  routes: Config['routes'],
  bundle?: { readonly trustedProxyHops: number },
): string[] {
  const unread = (h: string): boolean =>
    bundle !== undefined && (h === 'x-request-id' || (h === 'x-forwarded-for' && bundle.trustedProxyHops === 0));
  return [
    ...new Set([
      ...decisionHeaders(routes).filter((h) => h !== 'x-envoy-auth-partial-body' && !unread(h)),
      'content-type',
    ]),
  ];
}

const isIp = (h: string): boolean => /^\d{1,3}(\.\d{1,3}){3}$/.test(h) || h.includes(':');
const socket = (a: HostPort): Obj => ({ socket_address: { address: a.host, port_value: a.port } });
const ms = (n: number): string => `${n / 1000}s`;

function cluster(name: string, at: HostPort, extra: Obj): Obj {
  return {
    name,
    type: isIp(at.host) ? 'STATIC' : 'STRICT_DNS',
    connect_timeout: '0.25s',
    ...extra,
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: socket(at) } }] }] },
  };
}

/**
 * Circuit breakers: Envoy's default of 1,024 concurrent requests per cluster would turn a busy gateway's Checks into
 * errors (503).
 */
const BREAKERS = {
  thresholds: [{ max_connections: 100000, max_pending_requests: 100000, max_requests: 100000, max_retries: 3 }],
};

function upstreamCluster(name: string, u: UpstreamTarget): Obj {
  const base: Obj = {
    name,
    type: isIp(u.host) ? 'STATIC' : 'LOGICAL_DNS',
    ...(isIp(u.host) ? {} : { dns_lookup_family: 'V4_PREFERRED' }),
    connect_timeout: '5s',
    circuit_breakers: BREAKERS,
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: socket(u) } }] }] },
  };
  if (!u.tls) {
    return {
      ...base,
      typed_extension_protocol_options: httpOptions({ explicit_http_config: { http_protocol_options: {} } }),
    };
  }
  // TLS with certificate checking: SNI and the SAN check follow the Host header, which the routes'
  // auto_host_rewrite sets to the endpoint's DNS name. HTTP/2 or HTTP/1.1 by ALPN.
  return {
    ...base,
    typed_extension_protocol_options: httpOptions({
      upstream_http_protocol_options: { auto_sni: true, auto_san_validation: true },
      auto_config: {},
    }),
    transport_socket: {
      name: 'envoy.transport_sockets.tls',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
        common_tls_context: { validation_context: { trusted_ca: { filename: u.caFile } } },
      },
    },
  };
}

function httpOptions(options: Obj): Obj {
  return {
    'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
      '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
      ...options,
    },
  };
}

/** The ext_authz HTTP filter (notes §1: fail closed, whole body as bytes, only the headers modelgate reads). */
export function extAuthzFilter(input: GatewayRenderInput): Obj {
  return {
    name: EXT_AUTHZ_FILTER,
    // Off by default: each route of modelgate's that reaches a cluster turns it on with its own
    // check_settings (extAuthzOn), which no virtual host's or connection manager's disable overrides.
    disabled: true,
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz',
      transport_api_version: 'V3',
      grpc_service: {
        envoy_grpc: { cluster_name: CLUSTER.authz },
        timeout: ms(input.gateway.authzTimeoutMs),
        ...grpcServiceMetadata(secretOf(input)),
      },
      failure_mode_allow: false,
      status_on_error: { code: 'ServiceUnavailable' },
      with_request_body: {
        max_request_bytes: input.gateway.maxRequestBytes,
        allow_partial_message: false,
        pack_as_bytes: true,
      },
      allowed_headers: { patterns: checkRequestHeaders(input.routes, input.gateway).map((h) => ({ exact: h })) },
      validate_mutations: true,
      clear_route_cache: false,
    },
  };
}

/** The meter's cluster: modelgate's gRPC port again (its access-log service), for the meter's long-lived streams. */
function meterCluster(at: HostPort, tls: AuthzTls | null): Obj {
  return cluster(CLUSTER.meter, at, {
    ...authzTransportSocket(tls),
    typed_extension_protocol_options: httpOptions({ explicit_http_config: { http2_protocol_options: {} } }),
    circuit_breakers: BREAKERS,
  });
}

/** The clusters: modelgate's two listeners (and the meter's connections to the first) and the four upstreams. */
export function renderClusters(input: GatewayRenderInput): Obj[] {
  const g = input.gateway;
  return [
    // gRPC needs HTTP/2. Health-checked with grpc.health.v1, so a dead service shows in /clusters and stats.
    cluster(CLUSTER.authz, g.authz, {
      ...authzTransportSocket(g.authzTls),
      typed_extension_protocol_options: httpOptions({ explicit_http_config: { http2_protocol_options: {} } }),
      circuit_breakers: BREAKERS,
      health_checks: [
        {
          timeout: '1s',
          interval: '5s',
          unhealthy_threshold: 2,
          healthy_threshold: 1,
          grpc_health_check: healthCheckMetadata(secretOf(input)),
        },
      ],
    }),
    ...(input.meter?.enabled ? [meterCluster(g.authz, g.authzTls)] : []),
    // The rate limit service (docs/rate-limits.md): modelgate itself (embedded engine: its gRPC port, so the
    // port's mTLS too) or envoyproxy/ratelimit (plaintext; it knows nothing of modelgate's port).
    ...(input.rateLimits
      ? [
          cluster(CLUSTER.ratelimit, input.rateLimits.engine === 'embedded' ? g.authz : input.rateLimits.service, {
            ...(input.rateLimits.engine === 'embedded' ? authzTransportSocket(g.authzTls) : {}),
            typed_extension_protocol_options: httpOptions({ explicit_http_config: { http2_protocol_options: {} } }),
            circuit_breakers: BREAKERS,
          }),
        ]
      : []),
    cluster(CLUSTER.http, g.http, { circuit_breakers: BREAKERS }),
    ...UPSTREAM_FAMILIES.map((f) => upstreamCluster(UPSTREAM_CLUSTER[f], g.upstreams[f])),
  ];
}

/**
 * The access log: JSON lines on stdout, never a key. A client can put a key anywhere in the request
 * line, so nothing of it is logged as sent: `path` is the path as modelgate logged it (its dynamic
 * metadata; null where modelgate was not asked: `route` names what matched), and the method is cut
 * to 7 characters (the longest standard one), so that a key sent as an HTTP/2 method leaves at most
 * its first character.
 */
function accessLog(input: GatewayRenderInput): Obj[] {
  const md = (k: string): string => `%DYNAMIC_METADATA(${EXT_AUTHZ_FILTER}:${k})%`;
  return [
    ...(input.meter?.enabled ? [meterAccessLog(grpcServiceMetadata(secretOf(input)))] : []),
    {
      name: 'envoy.access_loggers.stdout',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog',
        log_format: {
          json_format: {
            time: '%START_TIME%',
            request_id: '%REQ(X-REQUEST-ID)%',
            request: `%DYNAMIC_METADATA(${MARK_NAMESPACE}:${MARK_KEY})%`,
            method: '%REQ(:METHOD):7%',
            path: md('path'),
            protocol: '%PROTOCOL%',
            status: '%RESPONSE_CODE%',
            details: '%RESPONSE_CODE_DETAILS%',
            flags: '%RESPONSE_FLAGS%',
            duration_ms: '%DURATION%',
            route: '%ROUTE_NAME%',
            upstream_cluster: '%UPSTREAM_CLUSTER%',
            bytes_received: '%BYTES_RECEIVED%',
            bytes_sent: '%BYTES_SENT%',
            client: '%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%',
            key_id: md('keyId'),
            group: md('group'),
            model: md('model'),
            reason: md('reason'),
            style: md('style'),
            decision: md('decision'),
            ...refusalLogFields(),
          },
        },
      },
    },
  ];
}

/**
 * Drops every HTTP/2 request trailer before the router (only upstream routes run it; the others
 * turn it off). ext_authz never sees trailers, Envoy forwards them to an HTTP/2 upstream (a TLS
 * provider negotiates h2), and a client could put a key there. No provider API reads request
 * trailers. Envoy's header_mutation filter, whose request trailer mutations (remove_on_match with
 * any name) load and work on every supported version (1.39.0 and 1.40.0, and 1.36.2: the trailer tests of
 * test/e2e/credential-stripping.test.ts through each). By the time this filter runs ext_authz has
 * buffered the whole body, so waiting for the end of the stream adds nothing.
 */
export function trailersFilter(): Obj {
  return {
    name: TRAILERS_FILTER,
    disabled: true,
    typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation' },
  };
}

/** What turns the trailer filter on, on an upstream route. */
export function trailersPerRoute(): Obj {
  return {
    [TRAILERS_FILTER]: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutationPerRoute',
      mutations: {
        request_trailers_mutations: [{ remove_on_match: { key_matcher: { safe_regex: { regex: '.*' } } } }],
      },
    },
  };
}

/**
 * ext_authz on, on a route: its own per-route config (check_settings), the most specific one, so
 * that a disable on the virtual host or the connection manager (a team's) never reaches it.
 */
export function extAuthzOn(): Obj {
  return {
    [EXT_AUTHZ_FILTER]: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute',
      check_settings: {},
    },
  };
}

/**
 * The per-route configs that turn modelgate's filters on (all off by default, request-mark.ts):
 * upstream routes run every one, model lists the mark and ext_authz, direct responses the
 * base-URL filter only.
 */
export function routeFilterConfigs(input: GatewayRenderInput): { upstream: Obj; models: Obj; direct: Obj } {
  const base = input.gateway.publicBaseUrl ? {} : baseUrlPerRoute();
  return {
    upstream: {
      ...base,
      ...requestPerRoute(),
      ...extAuthzOn(),
      ...(input.meter?.enabled ? meterPerRoute() : {}),
      ...(input.rateLimits ? rateLimitPerRoute() : {}),
      ...trailersPerRoute(),
    },
    models: { ...base, ...requestPerRoute(), ...extAuthzOn() },
    direct: base,
  };
}

/**
 * modelgate's HTTP filters in order, each off by default (a route of modelgate's turns it on):
 * before the router of the connection manager.
 */
export function modelgateHttpFilters(input: GatewayRenderInput): Obj[] {
  return [
    // First, so that it sees every answer: Envoy's, modelgate's denials (base-url-filter.ts).
    ...(input.gateway.publicBaseUrl ? [] : [baseUrlFilter()]),
    // The client's x-modelgate-* removed and the request's identity minted, before the Check reads it.
    ...requestFilters(),
    extAuthzFilter(input),
    ...(input.meter?.enabled ? meterHttpFilters() : []),
    // After the meter, so that it sees the end of every allowed request, a refused one too (an
    // in-flight slot is given back at that end). The embedded engine is modelgate's gRPC port:
    // its calls carry the port's secret like every other (never sent to envoyproxy/ratelimit).
    ...(input.rateLimits
      ? rateLimitFilters({
          rateLimits: input.rateLimits,
          grpcSecret: input.rateLimits.engine === 'embedded' ? secretOf(input) : undefined,
        })
      : []),
    trailersFilter(),
  ];
}

/**
 * Headers that carry a credential to some provider or server, removed from every request an
 * upstream route forwards (route-level request_headers_to_remove, at the router, after ext_authz):
 * modelgate is never shown most of them (ext_authz allowed_headers), so it cannot remove them
 * itself. `api-key` is Azure OpenAI's, `x-goog-api-key` Gemini's, `x-api-key` Anthropic's,
 * `x-amz-security-token` Bedrock's; `proxy-authorization` and `cookie` are any server's.
 */
export const PROVIDER_CREDENTIAL_HEADERS = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'x-api-key',
  'api-key',
  'anthropic-api-key',
  'x-goog-api-key',
  'x-vendor-api-key',
  'x-amz-security-token',
] as const;

/**
 * What the route to this upstream removes: the provider credential headers, modelgate's own
 * headers no upstream gets (contract/headers.ts HEADERS_NEVER_UPSTREAM) and the configured key
 * headers, except the header modelgate sets this upstream's own credential in (a route-level
 * removal runs after ext_authz and would drop it; modelgate's set overwrites the client's value
 * instead). Every other upstream's credential header
 * is removed here too, so a route keeps only its own upstream's.
 */
export function upstreamHeadersToRemove(input: GatewayRenderInput, family: UpstreamFamily): string[] {
  const own = input.upstream?.credentials[family]?.header;
  const others = UPSTREAM_FAMILIES.filter((f) => f !== family).flatMap(
    (f) => input.upstream?.credentials[f]?.header ?? [],
  );
  return [
    ...new Set([
      ...PROVIDER_CREDENTIAL_HEADERS,
      ...HEADERS_NEVER_UPSTREAM,
      ...input.routes.bearerHeaders,
      ...input.routes.vendorHeaders,
      ...others,
    ]),
  ].filter((h) => h !== own);
}

/**
 * Envoy's own error answers, rewritten into the client's error shape with a reason and a hint
 * (HCM local_reply_config): the authorization service unreachable or too slow (Envoy's
 * `ext_authz_error`, fail closed: 503), a body over the limit (413, before any Check), and an
 * upstream that cannot be reached. A reply that carries modelgate's own decision (ext_authz dynamic
 * metadata present) is left alone: it already has its reason, hint and body.
 */
export function renderLocalReplies(input: GatewayRenderInput, { adopt = false }: { adopt?: boolean } = {}): Obj {
  const A = `(?:${input.routes.altPrefix.replace(/[.]/g, '\\.')})?`;
  const noDecision = {
    metadata_filter: {
      matcher: {
        filter: EXT_AUTHZ_FILTER,
        path: [{ key: 'decision' }],
        value: { string_match: { exact: '(no decision)' } },
      },
      match_if_key_not_found: true,
    },
  };
  const status = (code: number): Obj => ({
    status_code_filter: {
      comparison: { op: 'EQ', value: { default_value: code, runtime_key: `modelgate.local_reply.${code}` } },
    },
  });
  const pathIs = (regex: string): Obj => ({
    header_filter: { header: { name: ':path', string_match: { safe_regex: { regex } } } },
  });
  const families: Array<[Family, Obj | undefined]> = [
    [
      'gemini',
      {
        or_filter: {
          filters: [
            pathIs(`${A}/v1beta(?:[/?].*)?`),
            // One regex per group, not one alternation: Envoy 1.36 refuses a program over 100 (re2.max_program_size).
            ...GENERATIVE_METHOD_REGEXES.map((methods) => pathIs(`[^?]*${methods}(?:[?].*)?`)),
          ],
        },
      },
    ],
    [
      'anthropic',
      {
        or_filter: {
          filters: [
            pathIs(`${A}/v1/messages(?:[/?].*)?`),
            { header_filter: { header: { name: 'anthropic-version', present_match: true } } },
          ],
        },
      },
    ],
    ['openai', undefined],
  ];
  // Rate limit refusals first: their 429s and 503s carry no ext_authz decision of their own.
  const mappers: Obj[] = input.rateLimits ? rateLimitReplyMappers(families, OURS) : [];
  // Header values and the body are Envoy format strings: a literal '%' is written '%%'.
  const literal = (s: string): string => s.replace(/%/g, '%%');
  /**
   * Envoy's own answer `status` (a local reply) rewritten as the reason's, with its hint; the status line too with
   * `rewriteStatus`.
   */
  const add = (when: Obj[], reason: DenyReason, hint: string, rewriteStatus = false, scoped = true): void => {
    const code = statusOf(reason);
    for (const [family, filter] of families) {
      mappers.push({
        filter: { and_filter: { filters: [...(scoped ? [OURS] : []), ...when, ...(filter ? [filter] : [])] } },
        ...(rewriteStatus ? { status_code: code } : {}),
        headers_to_add: [
          { header: { key: HEADER.reason, value: reason }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
          { header: { key: HEADER.hint, value: literal(hint) }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
          // Retry a 503/504 after a second, never a 400/413 (src/contract/retry-advice.ts).
          ...retryHeaders(code).map(([key, value]) => ({
            header: { key, value },
            append_action: 'OVERWRITE_IF_EXISTS_OR_ADD',
          })),
        ],
        body_format_override: {
          text_format_source: { inline_string: literal(errorBody(family, code, reason, hint)) },
          content_type: 'application/json',
        },
      });
    }
  };
  add(
    [status(503), noDecision, { response_flag_filter: { flags: ['UAEX'] } }],
    'authz_unavailable',
    HINTS.authz_unavailable.noDecision,
  );
  if (!adopt) {
    // The bundle's only: Envoy's own 400s (modelgate's carry its decision), before any route (so
    // unscoped): an escaped slash or a bad character in the path (path_with_escaped_slashes_action,
    // normalize_path), a missing Host, broken framing. In a team's Envoy they are the team's.
    add([status(400), noDecision], 'request_invalid', HINTS.request_invalid.refused, false, false);
    // HTTP/1 Transfer-Encoding other than chunked (`gzip, chunked`): Envoy's 501, the same refusal.
    add([status(501), noDecision], 'request_invalid', HINTS.request_invalid.refused, true, false);
  }
  add([status(413), noDecision], 'body_too_large', HINTS.body_too_large.overLimit(input.gateway.maxRequestBytes));
  add(
    [status(503), { response_flag_filter: { flags: ['UF', 'UH', 'UO', 'URX', 'UC'] } }],
    'upstream_unavailable',
    HINTS.upstream_unavailable.unreachable,
  );
  // A route's idle_timeout firing before the provider's first byte is 504 with flag SI (details
  // stream_idle_timeout), not UT (seen on Envoy 1.40); UT is the route's total timeout (model lists).
  add(
    [status(504), { response_flag_filter: { flags: ['UT', 'SI'] } }],
    'upstream_timeout',
    HINTS.upstream_timeout.silent,
  );
  return { mappers };
}

/** The HTTP connection manager of the public listener. */
export function renderConnectionManager(input: GatewayRenderInput): Obj {
  return {
    '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
    stat_prefix: 'modelgate',
    codec_type: 'AUTO',
    merge_slashes: true,
    normalize_path: true,
    // %2F and %5C would be one path segment to modelgate and the routes, but two to a provider
    // that decodes before routing: refused (400 request_invalid) rather than guessed.
    path_with_escaped_slashes_action: 'REJECT_REQUEST',
    // `x_api_key` is `x-api-key` to CGI-style servers; dropped (a reset, not an answer, is what
    // REJECT_REQUEST gives HTTP/2 clients). modelgate never reads such a name.
    common_http_protocol_options: { headers_with_underscores_action: 'DROP_HEADER' },
    use_remote_address: true,
    // Load balancers in front (gateway.trustedProxyHops): the client's address is taken that many
    // x-forwarded-for hops from the right, for the access log and the console's per-address limit.
    ...(input.gateway.trustedProxyHops > 0 ? { xff_num_trusted_hops: input.gateway.trustedProxyHops } : {}),
    generate_request_id: true,
    preserve_external_request_id: false,
    stream_idle_timeout: `${input.gateway.upstreamIdleTimeoutSeconds}s`,
    access_log: accessLog(input),
    local_reply_config: renderLocalReplies(input),
    http_filters: [
      ...modelgateHttpFilters(input),
      {
        name: 'envoy.filters.http.router',
        typed_config: {
          '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
          suppress_envoy_headers: true,
        },
      },
    ],
    route_config: {
      name: 'modelgate',
      virtual_hosts: [{ name: 'modelgate', domains: ['*'], routes: renderRoutes(routeTableInput(input)) }],
    },
  };
}

/** What the route table is rendered from; `adopt` for `modelgate adopt`'s routes (render-routes.ts). */
export function routeTableInput(input: GatewayRenderInput, adopt?: RouteTableInput['adopt']): RouteTableInput {
  return {
    altPrefix: input.routes.altPrefix,
    publicBaseUrl: input.gateway.publicBaseUrl,
    perRoute: routeFilterConfigs(input),
    upstreamRequestHeaders: input.meter?.enabled ? { 'accept-encoding': UPSTREAM_ACCEPT_ENCODING } : undefined,
    upstreamIdleTimeoutSeconds: input.gateway.upstreamIdleTimeoutSeconds,
    headersToRemove: (family) => upstreamHeadersToRemove(input, family),
    // The team's own provider clusters (gateway.upstreams.<name>.cluster): modelgate adopt's only.
    ...(adopt
      ? { adopt, clusterOf: (f: UpstreamFamily) => input.gateway.upstreams[f].cluster ?? UPSTREAM_CLUSTER[f] }
      : {}),
  };
}

/** The complete bootstrap. */
export function renderBootstrap(input: GatewayRenderInput): Obj {
  const g = input.gateway;
  return {
    admin: { address: socket(g.admin) },
    overload_manager: {
      resource_monitors: [
        {
          name: 'envoy.resource_monitors.global_downstream_max_connections',
          typed_config: {
            '@type':
              'type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig',
            max_active_downstream_connections: g.maxConnections,
          },
        },
      ],
    },
    static_resources: {
      listeners: [
        {
          name: 'modelgate',
          address: socket(g.listen),
          filter_chains: [
            {
              filters: [
                { name: 'envoy.filters.network.http_connection_manager', typed_config: renderConnectionManager(input) },
              ],
            },
          ],
        },
      ],
      clusters: renderClusters(input),
    },
  };
}

/**
 * YAML text: small maps on one line, so the file reads like a hand-written Envoy config. Envoy's
 * parser (yaml-cpp) is stricter than YAML 1.2 about plain scalars in flow collections ("?", ":"),
 * so every string with a character outside a safe set is quoted, and no anchors are written.
 */
export function toYaml(tree: Obj, header: string): string {
  const doc = new Document(tree, { aliasDuplicateObjects: false });
  visit(doc, {
    Scalar(_key, node) {
      if (typeof node.value === 'string' && !/^[A-Za-z0-9_][A-Za-z0-9_./-]*$/.test(node.value)) {
        // JSON bodies read best single-quoted (no escaped quotes); anything else double-quoted.
        node.type =
          node.value.includes('"') && !node.value.includes("'") && !/[\n\\]/.test(node.value)
            ? 'QUOTE_SINGLE'
            : 'QUOTE_DOUBLE';
      }
    },
    Map(_key, node) {
      if (
        node.items.length <= 4 &&
        JSON.stringify(node.toJSON()).length <= 90 &&
        !node.items.some(
          (p) => isSeq(p.value) || (isMap(p.value) && (p.value as Node & { items: unknown[] }).items.length > 2),
        )
      )
        node.flow = true;
    },
    Seq(_key, node) {
      // A list of names (headers to remove) on one line up to 400 characters; anything else up to 60.
      const json = JSON.stringify(node.toJSON());
      if (json.length <= 60 || (json.length <= 400 && node.items.every((i) => isScalar(i)))) node.flow = true;
    },
  });
  doc.commentBefore = header;
  return doc.toString({ lineWidth: 0, flowCollectionPadding: true });
}

const BANNER = `modelgate: Envoy bootstrap for the AI model gateway, rendered by \`modelgate envoy-config\`
from modelgate's config. Do not edit: change the config and render again (envoy/README.md).
Envoy routes by path and proxies upstream; the ext_authz filter asks modelgate (gRPC) about every
request on a real endpoint first and fails closed; paths clients get wrong are answered by Envoy
itself with a reason and a hint. Check a modified copy with \`modelgate envoy-check FILE\`.`;

/** The complete bootstrap as YAML, with a header saying where it comes from. */
export function renderEnvoyYaml(input: GatewayRenderInput, source?: string): string {
  const text = source ? `${BANNER}\nRendered from: ${source}` : BANNER;
  return toYaml(
    renderBootstrap(input),
    text
      .split('\n')
      .map((l) => (l ? ` ${l}` : ''))
      .join('\n'),
  );
}

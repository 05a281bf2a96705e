/**
 * `modelgate adopt --check`: the linter of a merged Envoy config (made by `modelgate adopt` or by
 * hand). Envoy's own `--mode validate` knows nothing of what modelgate needs; this does. For each
 * route to a provider cluster it computes the effective ext_authz (route over virtual host over
 * route config over the connection manager's filter), the filter's fail-closed settings and body
 * buffering, the key headers removed, the request mark (the client's x-modelgate-* removed, the
 * identity minted), the meter's pieces, the rate limit filters and the filter order; and it
 * reports catch-alls that shadow routes and modelgate pieces that act on other routes. Pure:
 * bootstrap and config in, findings out; each names the config path and the fix.
 */
import { UPSTREAM_FAMILIES, type UpstreamFamily } from '../config/load';
import { HEADER, HEADER_PREFIX } from '../contract/headers';
import { CLUSTER, EXT_AUTHZ_FILTER, TRAILERS_FILTER, UPSTREAM_CLUSTER } from './render-routes';
import { DECOMPRESSOR_FILTER, METER_FILTER } from './meter-filters';
import { RATE_LIMIT_FILTER } from './render-ratelimit';
import { BASE_URL_FILTER } from './base-url-filter';
import { REQUEST_FILTER, REQUEST_METADATA_FILTER, MARK_NAMESPACE } from './request-mark';
import { upstreamHeadersToRemove, type GatewayRenderInput } from './render';
import { REQUIRED_HCM_SETTINGS, chooseHcm, isMeterLog, type AdoptOptions } from './adopt';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Finding {
  /** Where in the config, e.g. static_resources.listeners[0]....route_config.virtual_hosts[0].routes[3]. */
  readonly at: string;
  readonly problem: string;
  readonly fix: string;
}

/** The order modelgate's filters must run in (those present), before the router. */
const ORDER = [
  BASE_URL_FILTER,
  REQUEST_FILTER,
  REQUEST_METADATA_FILTER,
  EXT_AUTHZ_FILTER,
  METER_FILTER,
  DECOMPRESSOR_FILTER,
  RATE_LIMIT_FILTER.tokens,
  RATE_LIMIT_FILTER.requests,
  TRAILERS_FILTER,
];

const typeOf = (o: Obj | undefined): string => String(o?.['@type'] ?? '');
/** A per-filter config's inner config (FilterConfig wraps one) and whether it disables. */
function perFilter(o: Obj | undefined): { present: boolean; disabled: boolean; inner: Obj | undefined } {
  if (!o) return { present: false, disabled: false, inner: undefined };
  if (typeOf(o).endsWith('envoy.config.route.v3.FilterConfig'))
    return { present: true, disabled: o.disabled === true, inner: o.config };
  return { present: true, disabled: o.disabled === true, inner: o };
}

/**
 * Whether a route matches every path (a catch-all): prefix "/" or "", regex ".*", without header or query conditions.
 */
function isCatchAll(r: Obj): boolean {
  const m = r.match ?? {};
  if (
    (m.headers ?? []).length > 0 ||
    (m.query_parameters ?? []).length > 0 ||
    m.grpc ||
    m.runtime_fraction ||
    m.dynamic_metadata
  )
    return false;
  return (
    m.prefix === '/' ||
    m.prefix === '' ||
    m.path_separated_prefix === '/' ||
    m.safe_regex?.regex === '.*' ||
    m.safe_regex?.regex === '/.*'
  );
}

const clustersOf = (r: Obj): string[] => {
  const a = r.route ?? {};
  if (typeof a.cluster === 'string') return [a.cluster];
  return ((a.weighted_clusters?.clusters ?? []) as Obj[]).map((c) => String(c.name));
};

/** The findings for a merged config; none: modelgate is wired fail closed and metered. */
export function checkMerged(
  bootstrap: Obj,
  input: GatewayRenderInput,
  opts: Pick<AdoptOptions, 'listener' | 'routeConfig'> = {},
): Finding[] {
  const out: Finding[] = [];
  const found = chooseHcm(bootstrap, opts);
  const { hcm, at } = found;
  const filters = (hcm.http_filters ?? []) as Obj[];
  const byName = new Map(filters.map((f, i) => [String(f.name), { f, i }]));
  const fAt = (name: string): string => `${at}.http_filters[${byName.get(name)?.i ?? '?'}]`;
  const metering = input.meter?.enabled === true;
  const limiting = input.rateLimits !== undefined && input.rateLimits !== null;

  // Which cluster goes to which upstream: the config's own (gateway.upstreams.<name>.cluster) or upstream_<name>.
  const familyOf = new Map<string, UpstreamFamily>();
  for (const f of UPSTREAM_FAMILIES) {
    familyOf.set(UPSTREAM_CLUSTER[f], f);
    const own = input.gateway.upstreams[f].cluster;
    if (own) familyOf.set(own, f);
  }

  // ---- The filters themselves.
  const authz = byName.get(EXT_AUTHZ_FILTER)?.f;
  if (!authz)
    out.push({
      at: `${at}.http_filters`,
      problem: 'no ext_authz filter: nothing asks modelgate',
      fix: 'run `modelgate adopt` (or add envoy.filters.http.ext_authz as it renders it, before the router)',
    });
  else {
    const c = authz.typed_config ?? {};
    if (c.failure_mode_allow === true)
      out.push({
        at: `${fAt(EXT_AUTHZ_FILTER)}.typed_config.failure_mode_allow`,
        problem: 'true: with modelgate down every request is served (fail open)',
        fix: 'set failure_mode_allow: false',
      });
    if (c.grpc_service?.envoy_grpc?.cluster_name !== CLUSTER.authz)
      out.push({
        at: `${fAt(EXT_AUTHZ_FILTER)}.typed_config.grpc_service`,
        problem: `does not call the cluster ${CLUSTER.authz}`,
        fix: `envoy_grpc: {cluster_name: ${CLUSTER.authz}}`,
      });
    const body = c.with_request_body;
    if (!body || body.allow_partial_message === true || body.pack_as_bytes !== true)
      out.push({
        at: `${fAt(EXT_AUTHZ_FILTER)}.typed_config.with_request_body`,
        problem: 'the Check does not get the whole body as bytes (the model and the maximum cost are read from it)',
        fix: `with_request_body: {max_request_bytes: ${input.gateway.maxRequestBytes}, allow_partial_message: false, pack_as_bytes: true}`,
      });
    if (c.filter_enabled || c.filter_enabled_metadata || c.deny_at_disable)
      out.push({
        at: `${fAt(EXT_AUTHZ_FILTER)}.typed_config`,
        problem: 'filter_enabled / filter_enabled_metadata / deny_at_disable can turn the check off at run time',
        fix: 'remove them',
      });
  }
  const required = [
    REQUEST_FILTER,
    REQUEST_METADATA_FILTER,
    TRAILERS_FILTER,
    ...(metering ? [METER_FILTER, DECOMPRESSOR_FILTER] : []),
    ...(limiting ? [RATE_LIMIT_FILTER.tokens, RATE_LIMIT_FILTER.requests] : []),
  ];
  for (const name of required)
    if (!byName.has(name))
      out.push({
        at: `${at}.http_filters`,
        problem: `no ${name} filter`,
        fix: 'run `modelgate adopt` again: it adds every filter modelgate needs',
      });
  // Order: modelgate's filters in their order, all before the router.
  const routerAt = filters.findIndex((f) => String(f.name) === 'envoy.filters.http.router');
  const present = ORDER.filter((n) => byName.has(n));
  for (let k = 1; k < present.length; k++) {
    if (byName.get(present[k])!.i < byName.get(present[k - 1])!.i)
      out.push({
        at: fAt(present[k]),
        problem: `${present[k]} runs before ${present[k - 1]}`,
        fix: `order: ${present.join(', ')}`,
      });
  }
  for (const n of present)
    if (routerAt >= 0 && byName.get(n)!.i > routerAt)
      out.push({
        at: fAt(n),
        problem: `${n} is after the router: it never runs`,
        fix: 'move it before envoy.filters.http.router',
      });
  // A modelgate filter on by default runs on every route of the connection manager, the team's too.
  for (const n of present) {
    const f = byName.get(n)!.f;
    if (n === DECOMPRESSOR_FILTER) {
      if (!JSON.stringify(f.typed_config?.xds_matcher ?? '').includes(HEADER.request))
        out.push({
          at: fAt(n),
          problem:
            "the decompressor runs on every route (it rewrites accept-encoding and decompresses the team's answers)",
          fix: 'wrap it in the matcher modelgate renders (skipped without x-modelgate-request)',
        });
    } else if (f.disabled !== true)
      out.push({
        at: `${fAt(n)}.disabled`,
        problem: `${n} is on by default: it runs on every route, the team's too`,
        fix: "disabled: true (modelgate's routes turn it on)",
      });
  }

  // ---- Each route.
  const vhosts = (hcm.route_config?.virtual_hosts ?? []) as Obj[];
  const rcPer = (hcm.route_config?.typed_per_filter_config ?? {}) as Obj;
  if (vhosts.filter((v) => ((v.domains ?? []) as string[]).includes('*')).length > 1)
    out.push({
      at: `${at}.route_config.virtual_hosts`,
      problem: 'two virtual hosts with domain "*": Envoy refuses the route config',
      fix: "put modelgate's routes into the existing one (modelgate adopt does)",
    });
  let providerRoutes = 0;
  /**
   * A route of modelgate's: named by adopt, to an upstream or modelgate's HTTP port, or a direct answer with
   * modelgate's reason.
   */
  const isModelgates = (r: Obj): boolean =>
    String(r.name ?? '').startsWith('modelgate.') ||
    clustersOf(r).some((c) => familyOf.has(c) || c === CLUSTER.http) ||
    (r.direct_response !== undefined && JSON.stringify(r.response_headers_to_add ?? []).includes(HEADER.reason));
  vhosts.forEach((v, vi) => {
    const routes = (v.routes ?? []) as Obj[];
    const vPer = (v.typed_per_filter_config ?? {}) as Obj;
    const catchAll = routes.findIndex(isCatchAll);
    if (catchAll >= 0 && catchAll < routes.length - 1) {
      out.push({
        at: `${at}.route_config.virtual_hosts[${vi}].routes[${catchAll}]`,
        problem: `catch-all route ${String(routes[catchAll].name ?? '')} shadows the ${routes.length - 1 - catchAll} routes after it (${routes
          .slice(catchAll + 1, catchAll + 4)
          .map((r) => r.name)
          .join(', ')}...)`,
        fix: 'move the catch-all last (modelgate adopt adds none)',
      });
    }
    routes.forEach((r, ri) => {
      const rAt = `${at}.route_config.virtual_hosts[${vi}].routes[${ri}]`;
      const rPer = (r.typed_per_filter_config ?? {}) as Obj;
      const clusters = clustersOf(r);
      const families = clusters.map((c) => familyOf.get(c)).filter((f): f is UpstreamFamily => f !== undefined);
      const ours = isModelgates(r);
      if (families.length === 0) {
        // A route of the team's: no modelgate filter turned on there.
        if (!ours) {
          for (const n of present) {
            const p = perFilter(rPer[n]);
            if (p.present && !p.disabled && n !== DECOMPRESSOR_FILTER)
              out.push({
                at: `${rAt}.typed_per_filter_config.${n}`,
                problem: `turns modelgate's ${n} on for a route that is not modelgate's`,
                fix: 'remove it',
              });
          }
        }
        return;
      }
      providerRoutes++;
      // Effective ext_authz: route, then virtual host, then route config, then the filter's default.
      const levels: Array<[string, Obj | undefined]> = [
        [`${rAt}.typed_per_filter_config`, rPer[EXT_AUTHZ_FILTER]],
        [`${at}.route_config.virtual_hosts[${vi}].typed_per_filter_config`, vPer[EXT_AUTHZ_FILTER]],
        [`${at}.route_config.typed_per_filter_config`, rcPer[EXT_AUTHZ_FILTER]],
      ];
      const first = levels.find(([, o]) => o !== undefined);
      const route = perFilter(rPer[EXT_AUTHZ_FILTER]);
      if (first && perFilter(first[1]).disabled)
        out.push({
          at: `${first[0]}.${EXT_AUTHZ_FILTER}`,
          problem: `ext_authz is disabled for route ${String(r.name ?? ri)} to a provider: served without a key (fail open)`,
          fix: 'give the route its own ExtAuthzPerRoute {check_settings: {}}',
        });
      else if (!first && (!authz || authz.disabled === true))
        out.push({
          at: rAt,
          problem: `ext_authz never runs on route ${String(r.name ?? ri)} to a provider`,
          fix: 'give the route its own ExtAuthzPerRoute {check_settings: {}}',
        });
      else if (!route.present || !route.inner?.check_settings)
        out.push({
          at: `${rAt}.typed_per_filter_config`,
          problem: `route ${String(r.name ?? ri)} to a provider has no ext_authz config of its own: a disable on its virtual host or connection manager would reach it`,
          fix: `${EXT_AUTHZ_FILTER}: {'@type': ...ExtAuthzPerRoute, check_settings: {}}`,
        });
      // The request mark: client x-modelgate-* removed and the identity minted (the meter settles by it).
      const mark = perFilter(rPer[REQUEST_FILTER]).inner;
      const muts = JSON.stringify(mark?.mutations ?? {});
      if (!mark || !muts.includes(`"prefix":"${HEADER_PREFIX}"`) || !muts.includes('%UNIQUE_ID%'))
        out.push({
          at: `${rAt}.typed_per_filter_config.${REQUEST_FILTER}`,
          problem:
            "the client's x-modelgate-* headers reach the provider and the meter settles by a request id the client can choose",
          fix: 'run `modelgate adopt` again (the route turns modelgate.request on)',
        });
      if (!perFilter(rPer[REQUEST_METADATA_FILTER]).inner)
        out.push({
          at: `${rAt}.typed_per_filter_config.${REQUEST_METADATA_FILTER}`,
          problem:
            "the request is not marked as modelgate's: the meter cannot settle it by its minted identity, local replies and the meter's log do not see it",
          fix: 'run `modelgate adopt` again',
        });
      if (!perFilter(rPer[TRAILERS_FILTER]).inner)
        out.push({
          at: `${rAt}.typed_per_filter_config.${TRAILERS_FILTER}`,
          problem: 'request trailers (where a key can hide) reach the provider',
          fix: 'turn modelgate.drop_request_trailers on for the route',
        });
      // Key headers removed (route and virtual host).
      const removed = new Set(
        [
          ...((r.request_headers_to_remove ?? []) as string[]),
          ...((v.request_headers_to_remove ?? []) as string[]),
        ].map((h) => h.toLowerCase()),
      );
      const missing = [...new Set(families.flatMap((f) => upstreamHeadersToRemove(input, f)))].filter(
        (h) => !removed.has(h),
      );
      if (missing.length > 0)
        out.push({
          at: `${rAt}.request_headers_to_remove`,
          problem: `the client's ${missing.join(', ')} reach the provider`,
          fix: `remove: ${missing.join(', ')}`,
        });
      if (metering) {
        if (!perFilter(rPer[METER_FILTER]).inner)
          out.push({
            at: `${rAt}.typed_per_filter_config.${METER_FILTER}`,
            problem: 'the meter never sees the answer: usage is estimated, never read',
            fix: 'turn modelgate.meter on for the route (LuaPerRoute {name: meter})',
          });
        const ae = ((r.request_headers_to_add ?? []) as Obj[]).find(
          (h) => String(h.header?.key).toLowerCase() === 'accept-encoding',
        );
        if (!ae || ae.header.value !== 'gzip')
          out.push({
            at: `${rAt}.request_headers_to_add`,
            problem: 'the provider may answer br or zstd, which the meter cannot read',
            fix: 'set accept-encoding: gzip (OVERWRITE_IF_EXISTS_OR_ADD)',
          });
      }
      if (limiting) {
        for (const n of [RATE_LIMIT_FILTER.tokens, RATE_LIMIT_FILTER.requests]) {
          const p = perFilter(rPer[n]);
          const descriptors = p.inner?.rate_limits ?? byName.get(n)?.f.typed_config?.rate_limits;
          if (!p.inner || p.disabled || !descriptors)
            out.push({
              at: `${rAt}.typed_per_filter_config.${n}`,
              problem: `${n} is not on with descriptors here: the key's rate limits do not apply on this route`,
              fix: 'run `modelgate adopt` again (RateLimitPerRoute on the route, the descriptors in the filter)',
            });
        }
      }
      // A catch-all before this route shadows it.
      if (catchAll >= 0 && catchAll < ri)
        out.push({
          at: rAt,
          problem: `never matched: catch-all routes[${catchAll}] comes first`,
          fix: 'move the catch-all last',
        });
    });
  });
  if (providerRoutes === 0)
    out.push({
      at: `${at}.route_config`,
      problem: 'no route reaches a provider cluster of the config (gateway.upstreams: upstream_<name> or its cluster)',
      fix: 'run `modelgate adopt`, or name your clusters in gateway.upstreams.<name>.cluster',
    });

  // ---- The connection manager: settings, local replies, the meter's log.
  for (const s of REQUIRED_HCM_SETTINGS)
    if (!s.ok(hcm)) out.push({ at, problem: `${s.text.split(':')[0]} is not set: ${s.why}`, fix: s.text });
  const teamRoutes = vhosts.some((v) => ((v.routes ?? []) as Obj[]).some((r) => !isModelgates(r)));
  ((hcm.local_reply_config?.mappers ?? []) as Obj[]).forEach((m, mi) => {
    const text = JSON.stringify(m).toLowerCase();
    if (teamRoutes && text.includes(HEADER.reason) && !text.includes(`"filter":"${MARK_NAMESPACE}"`)) {
      out.push({
        at: `${at}.local_reply_config.mappers[${mi}]`,
        problem:
          "a modelgate local reply that acts on every route: it rewrites the team's own answers (e.g. its 503s) into modelgate's",
        fix: "add the metadata_filter on modelgate's mark (filter modelgate, key request) to its and_filter",
      });
    }
  });
  const meterLogs = ((hcm.access_log ?? []) as Obj[]).map((l, i) => ({ l, i })).filter(({ l }) => isMeterLog(l));
  if (metering && meterLogs.length === 0)
    out.push({
      at: `${at}.access_log`,
      problem: 'no gRPC access log to modelgate_meter: nothing is ever debited',
      fix: "run `modelgate adopt` again (it adds the meter's access log)",
    });
  for (const { l, i } of meterLogs) {
    const text = JSON.stringify(l.filter ?? {});
    const scoped = text.includes('"metered"') && text.includes(`"filter":"${MARK_NAMESPACE}"`);
    if (!l.filter || (teamRoutes && !scoped))
      out.push({
        at: `${at}.access_log[${i}].filter`,
        problem: "the meter's log reports requests that are not modelgate's (the team's 503s)",
        fix: "filter on the Check's `metered` mark, and modelgate's request mark for unanswered requests",
      });
  }
  return out;
}

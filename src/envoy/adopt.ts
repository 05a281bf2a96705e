/**
 * `modelgate adopt`: modelgate added to a team's own Envoy bootstrap, changing nothing of the
 * team's but the connection-manager settings it names in its summary. Pure: the team's bootstrap
 * (parsed YAML or JSON) and modelgate's config in, the merged bootstrap and a summary out.
 *
 * What it adds to the one HTTP connection manager it is pointed at (envoy/README.md, "Adopt"):
 * - modelgate's HTTP filters right before the router, each off by default (request-mark.ts): no
 *   route of the team's runs any of them, whatever its place;
 * - the endpoint routes (render-routes.ts, from the one endpoint table) at the start of one virtual
 *   host, each named `modelgate.*` and turning its filters on itself (ext_authz with its own
 *   check_settings: a disable on the virtual host or connection manager never reaches it); no
 *   404/405 routes and no catch-all;
 * - modelgate's clusters (each marked in its metadata), and `upstream_<name>` only for an
 *   upstream without `gateway.upstreams.<name>.cluster` (the team's own cluster otherwise);
 * - local-reply mappers and the meter's gRPC access log, each matching modelgate's requests only.
 *
 * A re-run on its own output first removes every part it added (by the marks above), so the
 * result is the same as one run on the team's original: idempotent.
 */
import { UPSTREAM_FAMILIES, type UpstreamFamily } from '../config/load';
import { CLUSTER, EXT_AUTHZ_FILTER, UPSTREAM_CLUSTER, ADOPT_ROUTE_PREFIX, renderRoutes } from './render-routes';
import {
  modelgateHttpFilters,
  renderClusters,
  renderLocalReplies,
  routeTableInput,
  type GatewayRenderInput,
} from './render';
import { DECOMPRESSOR_FILTER, meterAccessLog } from './meter-filters';
import { grpcServiceMetadata } from './render-grpc-auth';
import { MARK_NAMESPACE } from './request-mark';
import { HEADER } from '../contract/headers';
import { InternalError } from '../errors/internal-error';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export const HCM_TYPE =
  'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = 'envoy.filters.http.router';
/** The mark on each cluster adopt adds (a re-run removes what carries it). */
const ADOPTED = { filter_metadata: { [MARK_NAMESPACE]: { adopted: true } } };

/** A bootstrap adopt cannot change as asked; the message says why. */
export class AdoptError extends InternalError {
  constructor(message: string) {
    super('adopt_refused', message);
  }
}

export interface AdoptOptions {
  /** The listener holding the connection manager, when the bootstrap has more than one. */
  readonly listener?: string;
  /** The route_config (by name) of the connection manager, when the bootstrap has more than one. */
  readonly routeConfig?: string;
  /** The virtual host that gets the routes (default: the one whose domains hold "*", or the only one). */
  readonly virtualHost?: string;
  /** The upstreams whose endpoints get routes (default: every upstream). */
  readonly upstreams?: readonly UpstreamFamily[];
  /** The model lists (`GET /v1/models`, ...; answered by modelgate's HTTP port). Default true. */
  readonly modelLists?: boolean;
}

export interface AdoptResult {
  readonly bootstrap: Obj;
  /** One line each: what was added, what was changed and why, what the team must know. */
  readonly summary: string[];
}

/** A connection manager found in a bootstrap, with where it is. */
export interface FoundHcm {
  readonly hcm: Obj;
  readonly listener: string;
  /** The config path, e.g. static_resources.listeners[0].filter_chains[0].filters[0].typed_config. */
  readonly at: string;
}

/** Every HTTP connection manager of the static listeners. */
export function connectionManagers(bootstrap: Obj): FoundHcm[] {
  const out: FoundHcm[] = [];
  ((bootstrap?.static_resources?.listeners ?? []) as Obj[]).forEach((l, li) => {
    ((l?.filter_chains ?? []) as Obj[]).forEach((fc, ci) => {
      ((fc?.filters ?? []) as Obj[]).forEach((f, fi) => {
        if (f?.typed_config?.['@type'] === HCM_TYPE)
          out.push({
            hcm: f.typed_config,
            listener: String(l.name ?? `#${li}`),
            at: `static_resources.listeners[${li}].filter_chains[${ci}].filters[${fi}].typed_config`,
          });
      });
    });
  });
  return out;
}

/** The one connection manager adopt (or the linter) works on, as the options choose it. */
export function chooseHcm(bootstrap: Obj, opts: Pick<AdoptOptions, 'listener' | 'routeConfig'>): FoundHcm {
  const all = connectionManagers(bootstrap);
  const fits = all.filter(
    (h) =>
      (opts.listener === undefined || h.listener === opts.listener) &&
      (opts.routeConfig === undefined || h.hcm.route_config?.name === opts.routeConfig),
  );
  const names = all
    .map((h) => `listener ${h.listener}${h.hcm.route_config?.name ? ` route_config ${h.hcm.route_config.name}` : ''}`)
    .join('; ');
  if (fits.length === 0)
    throw new AdoptError(
      all.length === 0
        ? 'no HTTP connection manager in static_resources.listeners'
        : `no HTTP connection manager fits --listener/--route-config (there are: ${names})`,
    );
  if (fits.length > 1)
    throw new AdoptError(
      `${fits.length} HTTP connection managers fit (${names}): choose one with --listener NAME or --route-config NAME`,
    );
  if (!fits[0].hcm.route_config)
    throw new AdoptError(
      `${fits[0].at}: the connection manager has no inline route_config (rds or scoped routes): adopt adds routes to an inline one`,
    );
  return fits[0];
}

/**
 * Whether an HTTP filter is one of modelgate's (by name, or by what it is: ext_authz to modelgate_authz, the
 * decompressor in modelgate's matcher).
 */
export function isModelgateFilter(f: Obj): boolean {
  const name = String(f?.name ?? '');
  if (name.startsWith('modelgate.')) return true;
  if (name === EXT_AUTHZ_FILTER) return f?.typed_config?.grpc_service?.envoy_grpc?.cluster_name === CLUSTER.authz;
  if (name === DECOMPRESSOR_FILTER) return JSON.stringify(f?.typed_config?.xds_matcher ?? '').includes(HEADER.request);
  return false;
}

export const isModelgateRoute = (r: Obj): boolean => String(r?.name ?? '').startsWith(ADOPT_ROUTE_PREFIX);
export const isModelgateMapper = (m: Obj): boolean =>
  JSON.stringify(m?.filter ?? {}).includes(`"filter":"${MARK_NAMESPACE}"`);
export const isMeterLog = (l: Obj): boolean =>
  l?.typed_config?.common_config?.grpc_service?.envoy_grpc?.cluster_name === CLUSTER.meter;
const isAdoptedCluster = (c: Obj): boolean => c?.metadata?.filter_metadata?.[MARK_NAMESPACE]?.adopted === true;

/** The virtual host that gets the routes. */
function chooseVirtualHost(hcm: Obj, at: string, name: string | undefined): Obj {
  const hosts = (hcm.route_config.virtual_hosts ?? []) as Obj[];
  if (name !== undefined) {
    const v = hosts.find((h) => h.name === name);
    if (!v)
      throw new AdoptError(
        `${at}.route_config: no virtual host named ${name} (there are: ${hosts.map((h) => h.name).join(', ') || 'none'})`,
      );
    return v;
  }
  if (hosts.length === 1) return hosts[0];
  const wild = hosts.filter((h) => ((h.domains ?? []) as string[]).includes('*'));
  if (wild.length === 1) return wild[0];
  throw new AdoptError(
    `${at}.route_config has ${hosts.length} virtual hosts and none is the only one with domain "*": choose one with --virtual-host NAME (${hosts.map((h) => h.name).join(', ')})`,
  );
}

/** The settings modelgate needs of the connection manager, and why (each applies to every route of it). */
const HCM_SETTINGS: ReadonlyArray<readonly [string, (h: Obj) => boolean, (h: Obj) => void, string]> = [
  [
    'path_with_escaped_slashes_action: REJECT_REQUEST',
    (h) => h.path_with_escaped_slashes_action === 'REJECT_REQUEST',
    (h) => {
      h.path_with_escaped_slashes_action = 'REJECT_REQUEST';
    },
    'a %2F in a path is one segment to modelgate and two to a provider that decodes it: the model checked would not be the model served',
  ],
  [
    'normalize_path: true',
    (h) => h.normalize_path === true,
    (h) => {
      h.normalize_path = true;
    },
    'modelgate, the routes and the provider see one canonical path (dot segments removed)',
  ],
  [
    'merge_slashes: true',
    (h) => h.merge_slashes === true,
    (h) => {
      h.merge_slashes = true;
    },
    'a Base URL with a trailing / still reaches its route',
  ],
  [
    'common_http_protocol_options.headers_with_underscores_action: DROP_HEADER',
    (h) => h.common_http_protocol_options?.headers_with_underscores_action === 'DROP_HEADER',
    (h) => {
      h.common_http_protocol_options = {
        ...(h.common_http_protocol_options ?? {}),
        headers_with_underscores_action: 'DROP_HEADER',
      };
    },
    'x_api_key is x-api-key to some servers: a key in it would pass every header removal',
  ],
];
export const REQUIRED_HCM_SETTINGS = HCM_SETTINGS.map(([text, ok, , why]) => ({ text, ok, why }));

/** modelgate added to `team` (not modified: a copy is returned). */
export function adopt(team: Obj, input: GatewayRenderInput, opts: AdoptOptions = {}): AdoptResult {
  const bootstrap = structuredClone(team) as Obj;
  const found = chooseHcm(bootstrap, opts);
  const { hcm, at } = found;
  const summary: string[] = [];

  // What an earlier run added goes first (idempotent).
  hcm.http_filters = ((hcm.http_filters ?? []) as Obj[]).filter((f) => !isModelgateFilter(f));
  for (const v of (hcm.route_config.virtual_hosts ?? []) as Obj[])
    v.routes = ((v.routes ?? []) as Obj[]).filter((r) => !isModelgateRoute(r));
  if (hcm.local_reply_config?.mappers) {
    hcm.local_reply_config.mappers = (hcm.local_reply_config.mappers as Obj[]).filter((m) => !isModelgateMapper(m));
    if (hcm.local_reply_config.mappers.length === 0) delete hcm.local_reply_config.mappers;
    if (Object.keys(hcm.local_reply_config).length === 0) delete hcm.local_reply_config;
  }
  if (hcm.access_log) {
    hcm.access_log = (hcm.access_log as Obj[]).filter((l) => !isMeterLog(l));
    if (hcm.access_log.length === 0) delete hcm.access_log;
  }
  bootstrap.static_resources.clusters = ((bootstrap.static_resources.clusters ?? []) as Obj[]).filter(
    (c) => !isAdoptedCluster(c),
  );

  // Refusals: what adopt cannot merge without changing the team's config.
  const filters = hcm.http_filters as Obj[];
  const routerAt = filters.findIndex(
    (f) => f.name === ROUTER || String(f.typed_config?.['@type']).endsWith('.router.v3.Router'),
  );
  if (routerAt < 0) throw new AdoptError(`${at}.http_filters: no router filter (envoy.filters.http.router)`);
  for (const name of [EXT_AUTHZ_FILTER, DECOMPRESSOR_FILTER]) {
    const i = filters.findIndex((f) => f.name === name);
    if (i >= 0)
      throw new AdoptError(
        `${at}.http_filters[${i}]: the team's own ${name}: modelgate's has the same name (its routes' per-filter configs are keyed by it); rename the team's filter first`,
      );
  }
  const families = new Set<UpstreamFamily>(opts.upstreams ?? UPSTREAM_FAMILIES);
  const teamClusters = new Set(((bootstrap.static_resources.clusters ?? []) as Obj[]).map((c) => String(c.name)));
  for (const f of families) {
    const own = input.gateway.upstreams[f].cluster;
    if (own && !teamClusters.has(own))
      throw new AdoptError(`gateway.upstreams.${f}.cluster: ${own} is not a cluster of static_resources.clusters`);
  }

  // The parts, rendered as the bundle renders them (one truth: render.ts, render-routes.ts).
  const ours = modelgateHttpFilters(input);
  filters.splice(routerAt, 0, ...ours);
  const vhost = chooseVirtualHost(hcm, at, opts.virtualHost);
  const routes = renderRoutes(routeTableInput(input, { upstreams: families, modelLists: opts.modelLists ?? true }));
  vhost.routes = [...routes, ...((vhost.routes ?? []) as Obj[])];
  const needed = new Set<string>([
    CLUSTER.authz,
    CLUSTER.meter,
    CLUSTER.ratelimit,
    CLUSTER.http,
    ...[...families].filter((f) => !input.gateway.upstreams[f].cluster).map((f) => UPSTREAM_CLUSTER[f]),
  ]);
  const clusters = renderClusters(input).filter((c) => needed.has(String(c.name)));
  for (const c of clusters) {
    if (teamClusters.has(String(c.name)))
      throw new AdoptError(
        `static_resources.clusters: the team already has a cluster named ${String(c.name)}, one of modelgate's names`,
      );
  }
  bootstrap.static_resources.clusters = [
    ...((bootstrap.static_resources.clusters ?? []) as Obj[]),
    ...clusters.map((c) => ({ ...c, metadata: ADOPTED })),
  ];
  const mappers = renderLocalReplies(input, { adopt: true }).mappers as Obj[];
  hcm.local_reply_config = {
    ...(hcm.local_reply_config ?? {}),
    mappers: [...mappers, ...((hcm.local_reply_config?.mappers ?? []) as Obj[])],
  };
  const meterLog = input.meter?.enabled
    ? [meterAccessLog(grpcServiceMetadata(input.grpc?.secret ? input.grpcSecret : undefined))]
    : [];
  if (meterLog.length > 0) hcm.access_log = [...((hcm.access_log ?? []) as Obj[]), ...meterLog];

  summary.push(`added to ${at} (listener ${found.listener}):`);
  summary.push(
    `  ${ours.length} HTTP filters before the router, each off unless a modelgate route turns it on: ${ours.map((f) => f.name).join(', ')}`,
  );
  summary.push(
    `  ${routes.length} routes (named ${ADOPT_ROUTE_PREFIX}*) at the start of virtual host ${String(vhost.name)}: ${[...families].join(', ')}${opts.modelLists === false ? '' : ', model lists'}; each turns ext_authz on with its own check_settings`,
  );
  summary.push(`  ${clusters.length} clusters: ${clusters.map((c) => c.name).join(', ')}`);
  for (const f of families)
    if (input.gateway.upstreams[f].cluster)
      summary.push(`  ${f} routes go to your cluster ${input.gateway.upstreams[f].cluster}`);
  summary.push(
    `  ${mappers.length} local-reply mappers (first; they match modelgate's requests only)${meterLog.length ? ", the meter's gRPC access log (modelgate's requests only)" : ''}`,
  );
  const changed: string[] = [];
  for (const [text, ok, set, why] of HCM_SETTINGS) {
    if (ok(hcm)) continue;
    set(hcm);
    changed.push(`  ${text}: ${why}`);
  }
  if (changed.length > 0)
    summary.push('changed on the connection manager (it applies to your routes too):', ...changed);
  summary.push('you must know:');
  summary.push(
    "  your other routes run none of modelgate's filters, local replies or meter; modelgate is asked only on its routes, and they fail closed (503) while it is down",
  );
  summary.push(
    "  the client's key headers are removed before the provider; set the provider credential in modelgate.yaml (gateway.upstreams.<name>.credential), or in your cluster",
  );
  if (
    ((hcm.access_log ?? []) as Obj[]).some(
      (l) =>
        !isMeterLog(l) &&
        /%REQ\((AUTHORIZATION|X-API-KEY|X-GOOG-API-KEY|API-KEY|COOKIE)\)%|%REQUEST_HEADERS|request_headers/i.test(
          JSON.stringify(l),
        ),
    )
  ) {
    summary.push(
      "  one of your access logs records a request header that carries client keys on modelgate's routes: remove it",
    );
  }
  summary.push(
    '  run `modelgate adopt --check` on the result after every hand edit; re-run adopt after a change of modelgate.yaml',
  );
  return { bootstrap, summary };
}

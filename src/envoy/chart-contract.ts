/**
 * What the Helm chart's Envoy Gateway and Istio resources need of modelgate's Envoy contract
 * (deploy/helm/modelgate/files/, written by `npm run gen:chart`), derived from the sources the plain
 * bundle is rendered from, so the two cannot drift: the provider endpoints (providers/endpoints.ts) and
 * where each goes, the headers a Check is shown (ext_authz allowed_headers), the headers removed from
 * upstream requests, the Check's body limit, the meter's Lua tail and its access log's name and fields;
 * and, for Envoy Gateway's EnvoyPatchPolicy (what its API has no field for), the plain bundle's own
 * pieces as `modelgate adopt` puts them into a team's Envoy: the request mark (request-mark.ts), the
 * rate limit filters (render-ratelimit.ts), the request-trailer filter and the local replies.
 */
import { ENDPOINTS, MODEL, familyOf } from '../providers/endpoints';
import { HEADERS_NEVER_UPSTREAM } from '../contract/headers';
import { parseConfig } from '../config/load';
import { METER_LUA } from './meter-filters';
import { EXT_AUTHZ_FILTER } from './render-routes';
import {
  checkRequestHeaders,
  PROVIDER_CREDENTIAL_HEADERS,
  renderLocalReplies,
  trailersFilter,
  trailersPerRoute,
} from './render';
import { rateLimitFilters, rateLimitPerRoute } from './render-ratelimit';
import { MARK_KEY, MARK_NAMESPACE, requestFilters, requestPerRoute } from './request-mark';

export interface ChartRoute {
  readonly method: 'GET' | 'POST';
  readonly match: 'Exact' | 'PathPrefix';
  readonly path: string;
  /** The provider's upstream (gateway.upstreams), or modelgate's HTTP port (the model lists). */
  readonly to: 'chat' | 'messages' | 'generative' | 'alt' | 'modelgate';
  /** The path the upstream gets instead (the coding agents' root paths). */
  readonly rewrite?: string;
}

const UPSTREAM = { openai: 'chat', anthropic: 'messages', gemini: 'generative' } as const;

/** The endpoints as Gateway API path matches (a `{model}` path: its prefix), each once. */
export function chartRoutes(): ChartRoute[] {
  const out = new Map<string, ChartRoute>();
  for (const e of ENDPOINTS) {
    const at = e.path.indexOf(MODEL);
    const route: ChartRoute = {
      method: e.method,
      match: at < 0 ? 'Exact' : 'PathPrefix',
      path: at < 0 ? e.path : e.path.slice(0, at),
      to: e.style === 'models' ? 'modelgate' : UPSTREAM[familyOf(e.path, false)],
      ...(e.upstreamPath ? { rewrite: e.upstreamPath } : {}),
    };
    out.set(`${route.method} ${route.match} ${route.path}`, route);
  }
  return [...out.values()];
}

/**
 * The endpoints under the alternate prefix (routes.altPrefix), as the plain bundle routes them:
 * every provider endpoint to the `alt` upstream with its path as sent, prefix included (a coding
 * agent's root path rewritten to the prefix and its `/v1/...`), the model lists to modelgate.
 */
export function chartAltRoutes(altPrefix: string): ChartRoute[] {
  return chartRoutes().map((r) => ({
    ...r,
    path: `${altPrefix}${r.path}`,
    to: r.to === 'modelgate' ? 'modelgate' : 'alt',
    ...(r.rewrite ? { rewrite: `${altPrefix}${r.rewrite}` } : {}),
  }));
}

/** The chart's files: name -> text. */
export function chartFiles(): Record<string, string> {
  const defaults = parseConfig('groups: {}\nkeys: []\n', {});
  const contract = {
    $comment: 'Written by `npm run gen:chart` from src/envoy/chart-contract.ts; do not edit.',
    routes: chartRoutes(),
    checkRequestHeaders: checkRequestHeaders(defaults.routes),
    maxRequestBytes: defaults.gateway.maxRequestBytes,
    extAuthzMetadataNamespace: EXT_AUTHZ_FILTER,
    // Removed from every upstream request, but for the header the route's own credential is set in.
    headersRemovedUpstream: [
      ...new Set([
        ...PROVIDER_CREDENTIAL_HEADERS,
        ...HEADERS_NEVER_UPSTREAM,
        ...defaults.routes.bearerHeaders,
        ...defaults.routes.vendorHeaders,
      ]),
    ],
    meterLogName: 'modelgate_meter',
    meterResponseHeaders: ['content-type', 'content-encoding'],
    altPrefix: defaults.routes.altPrefix,
    altRoutes: chartAltRoutes(defaults.routes.altPrefix),
    // What the chart's EnvoyPatchPolicy adds to Envoy Gateway's listener and routes (each filter off
    // by default, turned on by the per-route configs on modelgate's routes only).
    patch: {
      markNamespace: MARK_NAMESPACE,
      markKey: MARK_KEY,
      // First in http_filters: the client's x-modelgate-* removed and the request's identity
      // minted before ext_authz reads it.
      requestFilters: requestFilters(),
      requestPerRoute: requestPerRoute(),
      // Before the router: tokens checked, then requests counted (the cluster, domain, timeout and
      // failure mode are the chart's, from config.rateLimits).
      rateLimitFilters: rateLimitFilters({ rateLimits: defaults.rateLimits }),
      rateLimitPerRoute: rateLimitPerRoute(),
      trailersFilter: trailersFilter(),
      trailersPerRoute: trailersPerRoute(),
      // The connection manager's local_reply_config, scoped to modelgate's requests (the mark), as
      // `modelgate adopt` writes it into a team's Envoy; the rate limit refusals' bodies first. The
      // 413's hint names maxRequestBytes: the chart writes the release's limit over the default's.
      localReplies: renderLocalReplies(
        { routes: defaults.routes, gateway: defaults.gateway, rateLimits: defaults.rateLimits },
        { adopt: true },
      ),
    },
  };
  return { 'contract.json': JSON.stringify(contract, null, 2) + '\n', 'meter.lua': METER_LUA };
}

/**
 * What the Helm chart's Envoy Gateway and Istio resources need of modelgate's Envoy contract
 * (deploy/helm/modelgate/files/, written by `npm run gen:chart`), derived from the sources the plain
 * bundle is rendered from, so the two cannot drift: the provider endpoints (check/endpoints.ts) and
 * where each goes, the headers a Check is shown (ext_authz allowed_headers), the headers removed from
 * upstream requests, the Check's body limit, the meter's Lua tail and its access log's name and fields.
 */
import { ENDPOINTS, MODEL } from '../check/endpoints';
import { HEADERS_NEVER_UPSTREAM } from '../contract/headers';
import { familyOf } from '../check/routes';
import { parseConfig } from '../config/load';
import { METER_LUA } from './meter-filters';
import { EXT_AUTHZ_FILTER } from './render-routes';
import { checkRequestHeaders, PROVIDER_CREDENTIAL_HEADERS } from './render';

export interface ChartRoute {
  readonly method: 'GET' | 'POST';
  readonly match: 'Exact' | 'PathPrefix';
  readonly path: string;
  /** The provider's upstream (gateway.upstreams), or modelgate's HTTP port (the model lists). */
  readonly to: 'chat' | 'messages' | 'generative' | 'modelgate';
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
    headersRemovedUpstream: [...new Set([...PROVIDER_CREDENTIAL_HEADERS, ...HEADERS_NEVER_UPSTREAM, ...defaults.routes.bearerHeaders, ...defaults.routes.vendorHeaders])],
    meterLogName: 'modelgate_meter',
    meterResponseHeaders: ['content-type', 'content-encoding'],
  };
  return { 'contract.json': JSON.stringify(contract, null, 2) + '\n', 'meter.lua': METER_LUA };
}

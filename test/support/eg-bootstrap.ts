/**
 * Envoy Gateway's translated xDS (`egctl x translate --to xds`: a config dump of listeners, routes,
 * clusters, endpoints and secrets, each served over ADS) read, and made into one static bootstrap a
 * plain Envoy runs: each listener's RDS replaced by its route configuration, each EDS cluster made
 * STATIC with its endpoints, and each SDS reference left to name a static secret.
 */
type Any = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface XdsDump {
  readonly raw: Any;
  listeners(): Any[];
  clusters(): Any[];
  routes(): Any[];
  secrets(): Any[];
  endpointsOf(cluster: string): Any[];
}

/** Wraps one gateway's dump (`out.xds["<ns>/<gateway>"]`). */
export function xdsDump(raw: { configs: Any[] }): XdsDump {
  const of = (type: string): Any => raw.configs.find((c) => c['@type'] === `type.googleapis.com/envoy.admin.v3.${type}`) ?? {};
  const endpoints = (): Any[] => (of('EndpointsConfigDump').dynamicEndpointConfigs ?? []).map((e: Any) => e.endpointConfig);
  return {
    raw,
    listeners: () => (of('ListenersConfigDump').dynamicListeners ?? []).map((l: Any) => l.activeState.listener),
    clusters: () => [...(of('ClustersConfigDump').staticClusters ?? []), ...(of('ClustersConfigDump').dynamicActiveClusters ?? [])].map((c: Any) => c.cluster),
    routes: () => (of('RoutesConfigDump').dynamicRouteConfigs ?? []).map((r: Any) => r.routeConfig),
    secrets: () => [...(of('SecretsConfigDump').staticSecrets ?? []), ...(of('SecretsConfigDump').dynamicActiveSecrets ?? [])].map((s: Any) => s.secret),
    endpointsOf: (cluster) => endpoints().filter((e) => e.clusterName === cluster || e.cluster_name === cluster).flatMap((e) => (e.endpoints ?? []).flatMap((l: Any) => l.lbEndpoints ?? l.lb_endpoints ?? [])),
  };
}

/** Drops every `sds_config` (a static secret is then looked up by its name) and `@type`-less noise. */
function staticSecrets(node: Any): Any {
  if (Array.isArray(node)) return node.map(staticSecrets);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(Object.entries(node).filter(([k]) => k !== 'sds_config').map(([k, v]) => [k, staticSecrets(v)]));
}

/** One static bootstrap of the dump; `endpoints` replaces a cluster's endpoints by name (local addresses). */
export function translatedBootstrap(xds: XdsDump, opts: { adminPort: number; endpoints?: Record<string, { address: string; port: number }[]> }): Any {
  const routes = new Map(xds.routes().map((r) => [r.name, r]));
  const listeners = xds.listeners().map((l) => {
    const chains = [...(l.filter_chains ?? []), ...(l.default_filter_chain ? [l.default_filter_chain] : [])];
    for (const chain of chains) {
      for (const f of chain.filters ?? []) {
        const hcm = f.typed_config;
        if (hcm?.rds) {
          hcm.route_config = routes.get(hcm.rds.route_config_name);
          delete hcm.rds;
        }
      }
    }
    return l;
  });
  const clusters = xds.clusters().map((c) => {
    if (c.type !== 'EDS') return c;
    const { eds_cluster_config: _eds, ...rest } = c; // eslint-disable-line @typescript-eslint/no-unused-vars
    const local = opts.endpoints?.[c.name];
    const lbEndpoints = local
      ? local.map((a) => ({ endpoint: { address: { socket_address: { address: a.address, port_value: a.port } } } }))
      : xds.endpointsOf(c.name);
    return { ...rest, type: 'STATIC', load_assignment: { cluster_name: c.name, endpoints: [{ lb_endpoints: lbEndpoints }] } };
  });
  return staticSecrets({
    admin: { address: { socket_address: { address: '127.0.0.1', port_value: opts.adminPort } } },
    static_resources: { listeners, clusters, secrets: xds.secrets() },
  });
}

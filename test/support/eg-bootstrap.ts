/**
 * Envoy Gateway's translated xDS (`egctl x translate --to xds -o json`: a config dump in proto3 JSON,
 * lowerCamelCase, of listeners, routes, clusters and endpoints, each served over ADS) read, and made
 * into one static bootstrap a plain Envoy runs: each listener's RDS replaced by its route
 * configuration, each EDS cluster made STATIC with its endpoints (their addresses mapped, their
 * metadata kept: it selects the transport socket), and each SDS reference left naming a static secret.
 */
type Any = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface XdsDump {
  readonly raw: Any;
  listeners(): Any[];
  clusters(): Any[];
  routes(): Any[];
  /** The ClusterLoadAssignment of a cluster (EDS). */
  loadAssignment(cluster: string): Any | undefined;
  /** Every SDS secret name the clusters reference, and what for. */
  sdsNames(): { certificates: string[]; validationContexts: string[] };
}

/** A resource of the dump as a bootstrap holds it: a copy without its Any `@type`. */
function untyped(resource: Any): Any {
  const { '@type': _type, ...rest } = structuredClone(resource ?? {}); // eslint-disable-line @typescript-eslint/no-unused-vars
  return rest;
}

/** Wraps one gateway's dump (`out.xds["<ns>/<gateway>"]`). */
export function xdsDump(raw: { configs: Any[] }): XdsDump {
  const of = (type: string): Any =>
    raw.configs.find((c) => c['@type'] === `type.googleapis.com/envoy.admin.v3.${type}`) ?? {};
  const assignments = (): Any[] =>
    (of('EndpointsConfigDump').dynamicEndpointConfigs ?? []).map((e: Any) => untyped(e.endpointConfig));
  const clusters = (): Any[] =>
    [...(of('ClustersConfigDump').staticClusters ?? []), ...(of('ClustersConfigDump').dynamicActiveClusters ?? [])].map(
      (c: Any) => untyped(c.cluster),
    );
  return {
    raw,
    listeners: () =>
      (of('ListenersConfigDump').dynamicListeners ?? []).map((l: Any) => untyped(l.activeState.listener)),
    clusters,
    routes: () => (of('RoutesConfigDump').dynamicRouteConfigs ?? []).map((r: Any) => untyped(r.routeConfig)),
    loadAssignment: (cluster) => assignments().find((a) => a.clusterName === cluster),
    sdsNames: () => {
      const text = JSON.stringify(clusters());
      const names = (key: string): string[] => [
        ...new Set([...text.matchAll(new RegExp(`"${key}":\\[?\\{"name":"([^"]+)"`, 'g'))].map((m) => m[1])),
      ];
      return {
        certificates: names('tlsCertificateSdsSecretConfigs'),
        validationContexts: names('validationContextSdsSecretConfig'),
      };
    },
  };
}

/** Drops every `sdsConfig` (a static secret is then looked up by its name). */
function staticSecrets(node: Any): Any {
  if (Array.isArray(node)) return node.map(staticSecrets);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.entries(node)
      .filter(([k]) => k !== 'sdsConfig' && k !== 'sds_config')
      .map(([k, v]) => [k, staticSecrets(v)]),
  );
}

export interface BootstrapOptions {
  readonly adminPort: number;
  /** Where an endpoint of the dump goes instead (its cluster, its address and port); default unchanged. */
  readonly endpoint?: (cluster: string, address: string, port: number) => { address: string; port: number };
  /** The static secrets the SDS names resolve to (Envoy's Secret, as JSON). */
  readonly secrets?: Any[];
}

/** One static bootstrap of the dump. */
export function translatedBootstrap(xds: XdsDump, opts: BootstrapOptions): Any {
  const routes = new Map(xds.routes().map((r) => [r.name, r]));
  const listeners = xds.listeners().map((l) => {
    for (const chain of [...(l.filterChains ?? []), ...(l.defaultFilterChain ? [l.defaultFilterChain] : [])]) {
      for (const f of chain.filters ?? []) {
        const hcm = f.typedConfig;
        if (hcm?.rds) {
          hcm.routeConfig = routes.get(hcm.rds.routeConfigName);
          delete hcm.rds;
        }
      }
    }
    return l;
  });
  const clusters = xds.clusters().map((c) => {
    if (c.type !== 'EDS') return c;
    const { edsClusterConfig: _eds, ...rest } = c; // eslint-disable-line @typescript-eslint/no-unused-vars
    const assignment = xds.loadAssignment(c.name) ?? { clusterName: c.name, endpoints: [] };
    for (const locality of assignment.endpoints ?? []) {
      for (const lb of locality.lbEndpoints ?? []) {
        const sa = lb.endpoint.address.socketAddress;
        const to = opts.endpoint?.(c.name, sa.address, sa.portValue) ?? { address: sa.address, port: sa.portValue };
        lb.endpoint.address.socketAddress = { address: to.address, portValue: to.port };
      }
    }
    return { ...rest, type: 'STATIC', loadAssignment: assignment };
  });
  return staticSecrets({
    admin: { address: { socketAddress: { address: '127.0.0.1', portValue: opts.adminPort } } },
    staticResources: { listeners, clusters, secrets: opts.secrets ?? [] },
  });
}

/**
 * What a cluster holds beside the chart for `egctl x translate`: the GatewayClass, the Gateway `eg`
 * in namespace `ai` (listener 10080, the chart's EnvoyProxy as its parameters) and the CA ConfigMap
 * by which the gateway trusts modelgate's certificate.
 */
export function gatewayObjects(serverCaPem: string): object[] {
  return [
    {
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'GatewayClass',
      metadata: { name: 'eg' },
      spec: { controllerName: 'gateway.envoyproxy.io/gatewayclass-controller' },
    },
    {
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'Gateway',
      metadata: { name: 'eg', namespace: 'ai' },
      spec: {
        gatewayClassName: 'eg',
        infrastructure: {
          parametersRef: { group: 'gateway.envoyproxy.io', kind: 'EnvoyProxy', name: 'modelgate-proxy' },
        },
        listeners: [{ name: 'http', protocol: 'HTTP', port: 10080 }],
      },
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'mg-modelgate-ca', namespace: 'ai' },
      data: { 'ca.crt': serverCaPem },
    },
  ];
}

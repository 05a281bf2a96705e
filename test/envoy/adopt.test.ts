/**
 * `modelgate adopt` and `modelgate adopt --check` (src/envoy/adopt.ts, adopt-check.ts) on a team's
 * hand-written Envoy (fixtures/team-envoy.yaml): nothing of the team's changes but the named
 * connection-manager settings, a re-run replaces only modelgate's parts, Envoy accepts the result,
 * and the linter passes it and envoy/envoy.yaml and catches each broken merge of the corpus (the
 * mistakes of issue 37's table among them).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseConfig } from '../../src/config/load';
import { adopt, connectionManagers } from '../../src/envoy/adopt';
import { checkMerged, type Finding } from '../../src/envoy/adopt-check';
import { validateWithEnvoy } from '../../src/envoy/validate';
import { ensureEnvoy } from '../../src/envoy/ensure';
import { toYaml } from '../../src/envoy/render';
import { ENVOY_YAML_PATH } from '../support/envoy-bundle';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const FIXTURES = join(__dirname, 'fixtures');
const team = (): Obj => parseYaml(readFileSync(join(FIXTURES, 'team-envoy.yaml'), 'utf8'));
const EVERY = new Proxy({}, { get: () => 'set' }) as NodeJS.ProcessEnv;
const configText = readFileSync(join(FIXTURES, 'modelgate-adopt.yaml'), 'utf8');
const config = (edit: (y: string) => string = (y) => y) => parseConfig(edit(configText), EVERY);
const hcmOf = (b: Obj): Obj => connectionManagers(b)[0].hcm;
const vhostOf = (b: Obj): Obj => hcmOf(b).route_config.virtual_hosts[0];

describe('modelgate adopt', () => {
  const before = team();
  const merged = adopt(before, config()).bootstrap;

  it("keeps every route, cluster, access log, local reply and filter of the team's as it was", () => {
    const t = hcmOf(before);
    const m = hcmOf(merged);
    const teamRoutes = vhostOf(merged).routes.filter((r: Obj) => !String(r.name).startsWith('modelgate.'));
    expect(teamRoutes).toEqual(t.route_config.virtual_hosts[0].routes);
    for (const c of before.static_resources.clusters)
      expect(merged.static_resources.clusters.find((x: Obj) => x.name === c.name)).toEqual(c);
    expect(m.access_log.slice(0, t.access_log.length)).toEqual(t.access_log);
    expect(m.local_reply_config.mappers.slice(-t.local_reply_config.mappers.length)).toEqual(
      t.local_reply_config.mappers,
    );
    expect(m.http_filters.at(-1)).toEqual(t.http_filters.at(-1));
    expect(m.stat_prefix).toBe('ingress');
    // The team's Envoy defaults for request ids stay: the meter no longer depends on them.
    expect(m.use_remote_address).toBeUndefined();
    expect(m.preserve_external_request_id).toBeUndefined();
    expect(before).toEqual(team()); // the input is not modified
  });

  it("uses the team's own provider clusters and adds only modelgate's, each marked", () => {
    const routes = vhostOf(merged).routes.filter((r: Obj) => String(r.name).startsWith('modelgate.'));
    const clusters = new Set(routes.map((r: Obj) => r.route.cluster));
    expect([...clusters].sort()).toEqual(['anthropic', 'gemini', 'modelgate_http', 'openai', 'upstream_alt']);
    const added = merged.static_resources.clusters
      .filter((c: Obj) => c.metadata?.filter_metadata?.modelgate?.adopted === true)
      .map((c: Obj) => c.name);
    expect(added).toEqual([
      'modelgate_authz',
      'modelgate_meter',
      'modelgate_ratelimit',
      'modelgate_http',
      'upstream_alt',
    ]);
    // First in the virtual host, no catch-all and no direct answer among them.
    expect(vhostOf(merged).routes.findIndex((r: Obj) => !String(r.name).startsWith('modelgate.'))).toBe(routes.length);
    expect(routes.some((r: Obj) => r.direct_response || r.match.prefix === '/')).toBe(false);
  });

  it('is idempotent: a re-run on its own output, and a run after a change of modelgate.yaml, replace only its parts', () => {
    expect(adopt(merged, config()).bootstrap).toEqual(merged);
    const changed = config((y) => y.replace('authzTimeoutMs: 1000', 'authzTimeoutMs: 2500'));
    const once = adopt(before, changed).bootstrap;
    expect(adopt(merged, changed).bootstrap).toEqual(once);
    expect(JSON.stringify(once)).toContain('"timeout":"2.5s"');
    // Fewer upstreams: the routes of the others go, and upstream_alt with them.
    const three = adopt(merged, config(), { upstreams: ['chat', 'messages', 'generative'] }).bootstrap;
    expect(three).toEqual(adopt(before, config(), { upstreams: ['chat', 'messages', 'generative'] }).bootstrap);
    expect(three.static_resources.clusters.map((c: Obj) => c.name)).not.toContain('upstream_alt');
  });

  it('says what it changed on the connection manager and why', () => {
    const { summary } = adopt(before, config());
    expect(summary.join('\n')).toMatch(/path_with_escaped_slashes_action: REJECT_REQUEST: a %2F/);
    expect(summary.join('\n')).toMatch(/chat routes go to your cluster openai/);
  });

  it("refuses what it cannot merge without changing the team's config, naming the place", () => {
    const two = team();
    two.static_resources.listeners.push({ ...structuredClone(two.static_resources.listeners[0]), name: 'other' });
    expect(() => adopt(two, config())).toThrow(/2 HTTP connection managers fit .*--listener/);
    expect(adopt(two, config(), { listener: 'other' }).bootstrap.static_resources.listeners[0]).toEqual(
      two.static_resources.listeners[0],
    );
    expect(() =>
      adopt(
        team(),
        config((y) => y.replace('cluster: openai', 'cluster: opneai')),
      ),
    ).toThrow(/gateway.upstreams.chat.cluster: opneai is not a cluster/);
  });

  it('lints clean: the merged fixture and envoy/envoy.yaml', () => {
    expect(checkMerged(merged, config())).toEqual([]);
    const demo = parseConfig(readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8'), EVERY);
    expect(checkMerged(parseYaml(readFileSync(ENVOY_YAML_PATH, 'utf8')), demo)).toEqual([]);
  });

  it('is accepted by the Envoy at hand (envoy --mode validate)', () => {
    const envoy = ensureEnvoy({ log: () => {} });
    const r = validateWithEnvoy(toYaml(merged, ' merged'), envoy.path);
    expect(r.ok, r.message).toBe(true);
  });
});

/** A broken merge: the merged fixture, then `edit`. */
function broken(edit: (b: Obj, hcm: Obj, routes: Obj[]) => void): Obj {
  const b = structuredClone(adopt(team(), config()).bootstrap);
  const hcm = hcmOf(b);
  edit(b, hcm, hcm.route_config.virtual_hosts[0].routes);
  return b;
}
const filterAt = (hcm: Obj, name: string): number => (hcm.http_filters as Obj[]).findIndex((f) => f.name === name);
const HCM = 'static_resources.listeners[0].filter_chains[0].filters[0].typed_config';

/** The corpus: each broken merge, and what a finding must name (its path, and words of its problem). */
const CORPUS: Array<[string, (b: Obj, hcm: Obj, routes: Obj[]) => void, RegExp, RegExp]> = [
  [
    'issue 1: ext_authz disabled on the virtual host, provider routes without a config of their own',
    (_b, hcm, routes) => {
      hcm.route_config.virtual_hosts[0].typed_per_filter_config = {
        'envoy.filters.http.ext_authz': {
          '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute',
          disabled: true,
        },
      };
      for (const r of routes)
        if (String(r.name).startsWith('modelgate.')) delete r.typed_per_filter_config['envoy.filters.http.ext_authz'];
    },
    /virtual_hosts\[0\]\.typed_per_filter_config\.envoy\.filters\.http\.ext_authz$/,
    /fail open/,
  ],
  [
    'ext_authz disabled on one provider route',
    (_b, _hcm, routes) => {
      routes[0].typed_per_filter_config['envoy.filters.http.ext_authz'] = {
        '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute',
        disabled: true,
      };
    },
    /routes\[0\]\.typed_per_filter_config\.envoy\.filters\.http\.ext_authz$/,
    /fail open/,
  ],
  [
    'a provider route relying on the filter being on (no per-route config)',
    (_b, hcm, routes) => {
      hcm.http_filters[filterAt(hcm, 'envoy.filters.http.ext_authz')].disabled = false;
      delete routes[1].typed_per_filter_config['envoy.filters.http.ext_authz'];
    },
    /routes\[1\]\.typed_per_filter_config$/,
    /no ext_authz config of its own/,
  ],
  [
    'failure_mode_allow: true',
    (_b, hcm) => {
      hcm.http_filters[filterAt(hcm, 'envoy.filters.http.ext_authz')].typed_config.failure_mode_allow = true;
    },
    /typed_config\.failure_mode_allow$/,
    /fail open/,
  ],
  [
    'no body buffering',
    (_b, hcm) => {
      delete hcm.http_filters[filterAt(hcm, 'envoy.filters.http.ext_authz')].typed_config.with_request_body;
    },
    /with_request_body$/,
    /whole body/,
  ],
  [
    'issue 2: no request mark (the meter settles by a client-chosen x-request-id)',
    (_b, _hcm, routes) => {
      delete routes[2].typed_per_filter_config['modelgate.request'];
    },
    /routes\[2\]\.typed_per_filter_config\.modelgate\.request$/,
    /request id the client can choose/,
  ],
  [
    'issue 3: a second wildcard virtual host',
    (_b, hcm) => {
      hcm.route_config.virtual_hosts.push({ name: 'modelgate', domains: ['*'], routes: [] });
    },
    /route_config\.virtual_hosts$/,
    /two virtual hosts/,
  ],
  [
    "issue 4: a catch-all 404 before the team's routes",
    (_b, _hcm, routes) => {
      routes.unshift({ name: 'unknown', match: { prefix: '/' }, direct_response: { status: 404 } });
    },
    /routes\[0\]$/,
    /catch-all route unknown shadows/,
  ],
  [
    "issue 5: a local-reply mapper of modelgate's acting on every route",
    (_b, hcm) => {
      const m = hcm.local_reply_config.mappers[0];
      m.filter.and_filter.filters = m.filter.and_filter.filters.filter(
        (f: Obj) => f.metadata_filter?.matcher?.filter !== 'modelgate',
      );
    },
    /local_reply_config\.mappers\[0\]$/,
    /team's own answers/,
  ],
  [
    "issue 5: the meter's log taking the team's 503s",
    (_b, hcm) => {
      const log = hcm.access_log.find((l: Obj) => l.name === 'envoy.access_loggers.http_grpc');
      log.filter.or_filter.filters[1].and_filter.filters.shift();
    },
    /access_log\[1\]\.filter$/,
    /not modelgate's/,
  ],
  [
    'issue 7: key headers not removed',
    (_b, _hcm, routes) => {
      routes[3].request_headers_to_remove = ['authorization', 'x-api-key'];
    },
    /routes\[3\]\.request_headers_to_remove$/,
    /cookie.*reach the provider/,
  ],
  [
    'issue 7: no accept-encoding: gzip',
    (_b, _hcm, routes) => {
      delete routes[0].request_headers_to_add;
    },
    /routes\[0\]\.request_headers_to_add$/,
    /br or zstd/,
  ],
  [
    'issue 7: no meter on a route',
    (_b, _hcm, routes) => {
      delete routes[0].typed_per_filter_config['modelgate.meter'];
    },
    /routes\[0\]\.typed_per_filter_config\.modelgate\.meter$/,
    /never sees the answer/,
  ],
  [
    'issue 7: no meter access log',
    (_b, hcm) => {
      hcm.access_log = hcm.access_log.filter((l: Obj) => l.name !== 'envoy.access_loggers.http_grpc');
    },
    /access_log$/,
    /nothing is ever debited/,
  ],
  [
    'no trailer filter on a route',
    (_b, _hcm, routes) => {
      delete routes[4].typed_per_filter_config['modelgate.drop_request_trailers'];
    },
    /routes\[4\]\.typed_per_filter_config\.modelgate\.drop_request_trailers$/,
    /trailers/,
  ],
  [
    'the meter before ext_authz',
    (_b, hcm) => {
      const i = filterAt(hcm, 'modelgate.meter');
      const [meter] = hcm.http_filters.splice(i, 1);
      hcm.http_filters.splice(filterAt(hcm, 'envoy.filters.http.ext_authz'), 0, meter);
    },
    /http_filters\[\d+\]$/,
    /modelgate.meter runs before envoy.filters.http.ext_authz/,
  ],
  [
    'a filter after the router',
    (_b, hcm) => {
      hcm.http_filters.push(hcm.http_filters.splice(filterAt(hcm, 'modelgate.drop_request_trailers'), 1)[0]);
    },
    /http_filters\[\d+\]$/,
    /after the router/,
  ],
  [
    "a modelgate filter on by default (runs on the team's routes)",
    (_b, hcm) => {
      delete hcm.http_filters[filterAt(hcm, 'modelgate.meter')].disabled;
    },
    /http_filters\[\d+\]\.disabled$/,
    /the team's too/,
  ],
  [
    'no rate limit filter',
    (_b, hcm) => {
      hcm.http_filters.splice(filterAt(hcm, 'modelgate.ratelimit_requests'), 1);
    },
    /http_filters$/,
    /no modelgate.ratelimit_requests filter/,
  ],
  [
    'no rate limit on a route',
    (_b, _hcm, routes) => {
      delete routes[5].typed_per_filter_config['modelgate.ratelimit_tokens'];
    },
    /routes\[5\]\.typed_per_filter_config\.modelgate\.ratelimit_tokens$/,
    /rate limits do not apply/,
  ],
  [
    "modelgate's meter turned on on a team route",
    (_b, _hcm, routes) => {
      const health = routes.find((r) => r.name === 'health')!;
      health.typed_per_filter_config = {
        'modelgate.meter': {
          '@type': 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute',
          name: 'meter',
        },
      };
    },
    /typed_per_filter_config\.modelgate\.meter$/,
    /not modelgate's/,
  ],
  [
    'escaped slashes kept',
    (_b, hcm) => {
      delete hcm.path_with_escaped_slashes_action;
    },
    new RegExp(`^${HCM.replace(/[.[\]]/g, '\\$&')}$`),
    /path_with_escaped_slashes_action/,
  ],
];

describe('modelgate adopt --check: the corpus of broken merges', () => {
  it.each(CORPUS)('%s', (_name, edit, at, problem) => {
    const findings: Finding[] = checkMerged(broken(edit), config());
    const hit = findings.filter((f) => at.test(f.at) && problem.test(f.problem));
    expect(hit.length, JSON.stringify(findings, null, 1)).toBeGreaterThan(0);
    for (const f of findings) expect(f.fix.length).toBeGreaterThan(0);
  });
});

/**
 * Evaluates an Envoy route configuration the way Envoy's router picks a route, so tests can say
 * where a request line goes without an Envoy binary. Input is the normalised JSON from
 * parseEnvoyConfig (proto field names, Any payloads inline).
 *
 * Semantics follow route_components.proto and the project notes (§5): the HCM normalises the path
 * first (normalize_path, then merge_slashes); routes are tried in order and the first match wins;
 * `prefix` is compared with the whole :path including the query, `path` and `path_separated_prefix`
 * with the path without query, `safe_regex` and uri_template must match the whole path without
 * query (RE2, via re2-wasm); `case_sensitive` (default true) applies to prefix and path only;
 * every `headers` matcher must match. A match field this evaluator does not model throws, rather
 * than being ignored.
 */
import { RE2 } from 're2-wasm';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** One request line. Header names are lowercase. */
export interface RouteRequest {
  method: string;
  path: string;
  authority?: string;
  headers?: Record<string, string>;
}

/** Where Envoy sends a request line, and what it answers itself. */
export interface RouteOutcome {
  /** The matched route's name, or undefined when no route matches (Envoy answers 404). */
  route?: string;
  /** :path after the connection manager's normalisation, as routes and ext_authz see it. */
  path: string;
  cluster?: string;
  /** direct_response status, or 404 when no route matched. */
  status?: number;
  body?: string;
  /** Response headers Envoy adds to a direct response (lowercase names). */
  responseHeaders: Record<string, string>;
  /** Whether the ext_authz filter runs for this request. */
  extAuthz: boolean;
}

/** HCM settings that change :path before routing. */
export interface PathNormalisation {
  mergeSlashes: boolean;
  normalizePath: boolean;
}

const KNOWN_MATCH_FIELDS = new Set(['prefix', 'path', 'safe_regex', 'path_separated_prefix', 'path_match_policy', 'case_sensitive', 'headers']);
// uri_template_internal.cc: characters a variable or a suffix literal may hold ("-" last in a class).
const TEMPLATE_CHARS = "a-zA-Z0-9._~%!$&'()+,;:@";
const ONE_SEGMENT = `[${TEMPLATE_CHARS}-]+`;
const ANY_SEGMENTS = `[${TEMPLATE_CHARS}/-]*`;
const reCache = new Map<string, RE2>();

/** RE2 full match, as Envoy's safe_regex does. */
export function re2FullMatch(regex: string, input: string): boolean {
  let re = reCache.get(regex);
  if (!re) {
    re = new RE2(`^(?:${regex})$`, 'u');
    reCache.set(regex, re);
  }
  return re.test(input);
}

/** Compiles a uri_template path template (notes §5) to an RE2 regex over the path without query. */
export function uriTemplateRegex(template: string): string {
  const segments = template.split('/').slice(1);
  const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return '/' + segments.map((seg, i) => {
    const last = i === segments.length - 1;
    if (seg === '**') return ANY_SEGMENTS;
    if (seg === '*') return ONE_SEGMENT;
    const v = /^\{[a-zA-Z][a-zA-Z0-9_]{0,15}(?:=(\*\*?))?\}(.*)$/.exec(seg) ?? /^(\*\*?)(.+)$/.exec(seg);
    if (!v) return escape(seg);
    const suffix = v[2] ?? '';
    if (suffix && !last) throw new Error(`uri_template ${template}: a suffix is allowed only in the last segment`);
    const body = v[1] === '**' ? ANY_SEGMENTS : ONE_SEGMENT;
    return body + escape(suffix);
  }).join('/');
}

/** RFC 3986 remove_dot_segments, as normalize_path does for "." and ".." segments. */
function removeDotSegments(path: string): string {
  const out: string[] = [];
  const segments = path.split('/');
  for (let i = 1; i < segments.length; i++) {
    const s = segments[i];
    if (s !== '.' && s !== '..') out.push(s);
    else {
      if (s === '..') out.pop();
      if (i === segments.length - 1) out.push(''); // "/a/." and "/a/b/.." keep their trailing slash
    }
  }
  return '/' + out.join('/');
}

function headerMatches(m: Obj, value: string | undefined): boolean {
  let ok: boolean;
  if (m.present_match !== undefined) ok = (value !== undefined) === m.present_match;
  else if (value === undefined) ok = false;
  else if (m.exact_match !== undefined) ok = value === m.exact_match;
  else if (m.string_match) {
    const s = m.string_match;
    const v = s.ignore_case ? value.toLowerCase() : value;
    const lit = (x: string): string => (s.ignore_case ? x.toLowerCase() : x);
    if (s.exact !== undefined) ok = v === lit(s.exact);
    else if (s.prefix !== undefined) ok = v.startsWith(lit(s.prefix));
    else if (s.suffix !== undefined) ok = v.endsWith(lit(s.suffix));
    else if (s.contains !== undefined) ok = v.includes(lit(s.contains));
    else if (s.safe_regex) ok = re2FullMatch(s.safe_regex.regex, value);
    else throw new Error(`unsupported string_match ${JSON.stringify(s)}`);
  } else if (Object.keys(m).every((k) => k === 'name' || k === 'invert_match')) ok = value !== undefined;
  else throw new Error(`unsupported header matcher ${JSON.stringify(m)}`);
  return m.invert_match ? !ok : ok;
}

function pathMatches(match: Obj, fullPath: string): boolean {
  const bare = fullPath.split('?')[0];
  const cs = match.case_sensitive !== false;
  const fold = (s: string): string => (cs ? s : s.toLowerCase());
  if (match.prefix !== undefined) return fold(fullPath).startsWith(fold(match.prefix));
  if (match.path !== undefined) return fold(bare) === fold(match.path);
  if (match.safe_regex) return re2FullMatch(match.safe_regex.regex, bare);
  if (match.path_separated_prefix !== undefined) {
    const p = fold(match.path_separated_prefix);
    return fold(bare) === p || fold(bare).startsWith(`${p}/`);
  }
  if (match.path_match_policy) return re2FullMatch(uriTemplateRegex(match.path_match_policy.typed_config.path_template), bare);
  throw new Error(`route match without a path specifier: ${JSON.stringify(match)}`);
}

/** True when the per-filter config under `filterName` turns the filter off. */
function disables(tpfc: Obj | undefined, filterName: string): boolean | undefined {
  const c = tpfc?.[filterName];
  return c === undefined ? undefined : c.disabled === true;
}

function applyHeaders(into: Record<string, string>, options: Obj[] | undefined): void {
  for (const o of options ?? []) {
    const key = String(o.header.key).toLowerCase();
    const value = String(o.header.value);
    switch (o.append_action ?? 'APPEND_IF_EXISTS_OR_ADD') {
      case 'OVERWRITE_IF_EXISTS_OR_ADD': into[key] = value; break;
      case 'ADD_IF_ABSENT': if (!(key in into)) into[key] = value; break;
      case 'OVERWRITE_IF_EXISTS': if (key in into) into[key] = value; break;
      default: into[key] = key in into ? `${into[key]},${value}` : value;
    }
  }
}

/** A route configuration ready to evaluate request lines. */
export class RouteTable {
  constructor(
    private readonly config: Obj,
    private readonly normalisation: PathNormalisation,
    private readonly authzFilter = 'envoy.filters.http.ext_authz',
  ) {}

  /** :path as the routes see it after the connection manager's normalisation. */
  normalise(rawPath: string): string {
    const q = rawPath.indexOf('?');
    let path = q < 0 ? rawPath : rawPath.slice(0, q);
    const query = q < 0 ? '' : rawPath.slice(q);
    if (this.normalisation.normalizePath) path = removeDotSegments(path);
    if (this.normalisation.mergeSlashes) path = path.replace(/\/{2,}/g, '/');
    return path + query;
  }

  private virtualHost(authority: string): Obj | undefined {
    const host = authority.replace(/:\d+$/, '').toLowerCase();
    const hosts: Obj[] = this.config.virtual_hosts ?? [];
    const domains = (vh: Obj): string[] => vh.domains ?? [];
    return hosts.find((vh) => domains(vh).includes(host))
      ?? hosts.find((vh) => domains(vh).some((d) => d.length > 1 && d.startsWith('*') && host.endsWith(d.slice(1))))
      ?? hosts.find((vh) => domains(vh).some((d) => d.length > 1 && d.endsWith('*') && host.startsWith(d.slice(0, -1))))
      ?? hosts.find((vh) => domains(vh).includes('*'));
  }

  /** The outcome for one request line. */
  route(req: RouteRequest): RouteOutcome {
    const path = this.normalise(req.path);
    const vh = this.virtualHost(req.authority ?? 'gateway.example');
    const headerOf = (name: string): string | undefined =>
      name === ':method' ? req.method : name === ':path' ? path : name === ':authority' ? req.authority : req.headers?.[name];
    for (const r of (vh?.routes ?? []) as Obj[]) {
      for (const k of Object.keys(r.match)) if (!KNOWN_MATCH_FIELDS.has(k)) throw new Error(`route ${r.name}: match.${k} is not modelled`);
      if (!pathMatches(r.match, path)) continue;
      if (!((r.match.headers ?? []) as Obj[]).every((h) => headerMatches(h, headerOf(h.name)))) continue;
      const off = disables(r.typed_per_filter_config, this.authzFilter) ?? disables(vh?.typed_per_filter_config, this.authzFilter)
        ?? disables(this.config.typed_per_filter_config, this.authzFilter) ?? false;
      const responseHeaders: Record<string, string> = {};
      const outcome: RouteOutcome = { route: r.name, path, responseHeaders, extAuthz: !off };
      if (r.route) outcome.cluster = r.route.cluster;
      if (r.direct_response) {
        outcome.status = r.direct_response.status;
        outcome.body = r.direct_response.body?.inline_string;
        // Route, then virtual host, then route configuration: with the default
        // most_specific_header_mutations_wins: false the least specific level is applied last.
        applyHeaders(responseHeaders, r.response_headers_to_add);
        applyHeaders(responseHeaders, vh?.response_headers_to_add);
        applyHeaders(responseHeaders, this.config.response_headers_to_add);
        // prepareLocalReply: text/plain only when there is a body and no content-type yet.
        if (outcome.body && !responseHeaders['content-type']) responseHeaders['content-type'] = 'text/plain';
      }
      if (!r.route && !r.direct_response) throw new Error(`route ${r.name}: only route and direct_response are modelled`);
      return outcome;
    }
    // No route: ext_authz skips the check (getPerRouteFlags) and the router answers 404.
    return { path, status: 404, responseHeaders: {}, extAuthz: false };
  }
}

/** The first listener's HTTP connection manager config in a normalised bootstrap. */
export function httpConnectionManager(bootstrap: Obj): Obj {
  for (const l of bootstrap.static_resources?.listeners ?? []) {
    for (const fc of l.filter_chains ?? []) {
      for (const f of fc.filters ?? []) {
        if (String(f.typed_config?.['@type']).endsWith('.HttpConnectionManager')) return f.typed_config;
      }
    }
  }
  throw new Error('no http_connection_manager in the bootstrap');
}

/** A RouteTable for the inline route_config of the bootstrap's connection manager. */
export function routeTableOf(bootstrap: Obj): RouteTable {
  const hcm = httpConnectionManager(bootstrap);
  if (!hcm.route_config) throw new Error('the connection manager has no inline route_config');
  return new RouteTable(hcm.route_config, { mergeSlashes: hcm.merge_slashes === true, normalizePath: hcm.normalize_path === true });
}

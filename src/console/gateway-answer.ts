/**
 * What the gateway's Envoy answers for a request line, read from the route table that
 * `modelgate envoy-config` renders (envoy/render-routes.ts), matched the way Envoy matches it: first
 * match wins; `path` exact, `safe_regex` full-match, `prefix`, `path_separated_prefix`; the
 * `:method` header; after merge_slashes and normalize_path. The doctor uses it to say which answer
 * a wrong Base URL gets (404 path_repeated, prefix_wrong, ...) without sending anything, and the
 * end-to-end tests check its predictions against the real Envoy.
 */
import { HEADER } from '../contract/headers';
import { renderRoutes } from '../envoy/render-routes';

export interface GatewayAnswer {
  /** The route's name in the rendered table. */
  readonly route: string;
  /** A direct answer of Envoy (404/405 with a reason), or where the request goes. */
  readonly status?: number;
  readonly reason?: string;
  /** The hint Envoy sends, with `{base_url}` as written in the table. */
  readonly hint?: string;
  /** The cluster the request is routed to (ext_authz decides first, except on the console). */
  readonly cluster?: string;
}

interface Matcher {
  readonly name: string;
  readonly method?: string;
  test(path: string): boolean;
  readonly answer: GatewayAnswer;
}

type Obj = Record<string, unknown>;

function matcherOf(route: Obj): Matcher {
  const match = route.match as Obj;
  const method = ((match.headers as Obj[] | undefined) ?? []).map((h) => (h.string_match as Obj).exact as string)[0];
  let test: (path: string) => boolean;
  if (typeof match.path === 'string') test = (p) => p === match.path;
  else if (typeof match.prefix === 'string') test = (p) => p.startsWith(match.prefix as string);
  else if (typeof match.path_separated_prefix === 'string') {
    const prefix = match.path_separated_prefix;
    test = (p) => p === prefix || p.startsWith(`${prefix}/`);
  } else {
    // RE2 full match; the table's regexes use only syntax JavaScript reads the same way.
    const re = new RegExp(`^(?:${(match.safe_regex as Obj).regex as string})$`);
    test = (p) => re.test(p);
  }
  const direct = route.direct_response as Obj | undefined;
  const headers = ((route.response_headers_to_add as Obj[] | undefined) ?? []).map(
    (h) => h.header as { key: string; value: string },
  );
  const answer: GatewayAnswer = direct
    ? {
        route: route.name as string,
        status: direct.status as number,
        reason: headers.find((h) => h.key === HEADER.reason)?.value,
        hint: headers.find((h) => h.key === HEADER.hint)?.value,
      }
    : { route: route.name as string, cluster: (route.route as Obj).cluster as string };
  return { name: route.name as string, method, test, answer };
}

/** One table per alternate prefix (a config has one; reloads rarely change it). */
const tables = new Map<string, readonly Matcher[]>();

function tableFor(altPrefix: string): readonly Matcher[] {
  let t = tables.get(altPrefix);
  if (!t) {
    if (tables.size >= 8) tables.clear();
    t = renderRoutes({ altPrefix, publicBaseUrl: null, perRoute: { upstream: {}, models: {}, direct: {} } }).map(
      matcherOf,
    );
    tables.set(altPrefix, t);
  }
  return t;
}

/** The path as Envoy routes it: merge_slashes, then dot segments removed (normalize_path). */
export function normalizedPath(path: string): string {
  const merged = path.replace(/\/{2,}/g, '/');
  const out: string[] = [];
  for (const seg of merged.split('/').slice(1)) {
    if (seg === '.') continue;
    if (seg === '..') out.pop();
    else out.push(seg);
  }
  const last = merged.split('/').at(-1);
  return `/${out.join('/')}${last === '.' || last === '..' ? '/' : ''}`;
}

/**
 * What Envoy answers for `method path`. A query string is ignored, as Envoy's `path`, `safe_regex`
 * and `path_separated_prefix` matchers ignore it (the table's only `prefix` route is the catch-all `/`).
 */
export function gatewayAnswer(method: string, path: string, altPrefix: string): GatewayAnswer {
  const q = path.indexOf('?');
  const p = normalizedPath(q === -1 ? path : path.slice(0, q));
  for (const m of tableFor(altPrefix)) {
    if ((m.method === undefined || m.method === method) && m.test(p)) return m.answer;
  }
  // The table ends with a catch-all, so this is not reached; answer as it would.
  return { route: 'unknown', status: 404, reason: 'path_unknown' };
}

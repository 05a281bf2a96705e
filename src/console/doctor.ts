/**
 * The doctor: given the Base URL and the client kind a person configured (and, if they have them,
 * the model, a failing request URL and the status it got), it applies the spec's rules in the
 * spec's order and names the first one that fails, with the one setting to change (docs/spec.md §4.1 rule
 * 4: "One setting is changed at a time"):
 *
 *   §4.1 rule 1  the Base URL holds the base address only
 *   §5 rule 4    no key in the URL (a failing URL)
 *   §4.1 rule 2  a URL field holds the full endpoint path (a failing URL)
 *   §4.1 rule 4  no repeated path, the right prefix (also §7's 404 row)
 *   §7 401       the address, then the key's completeness and validity, then the headers
 *   §7 403 and the model-not-found checks 1-5, then the balance
 *
 * Pure: the key's access and the gateway's address come in as data; the console page
 * (console/api.ts) and `modelgate doctor` (cli/doctor.ts) both call runDoctor. Echoed input passes
 * through printable(), which redacts anything shaped like a key; a URL's query is never echoed.
 */
import { findKeyInUrl } from '../check/extract-key';
import { suggestModel } from '../check/model-hints';
import { ENDPOINTS, GENERATIVE_METHODS, MODEL } from '../providers/endpoints';
import { classify, endpointFor } from '../check/routes';
import { printable } from '../contract/safe-text';
import type { Config } from '../config/load';
import type { GroupRecord } from '../store/store';
import type { ConsoleAccess } from './access';
import { clientKind, CLIENT_KINDS, headerLine, setupFor, type ClientKind, type ClientSetup } from './client-kinds';
import { gatewayAnswer, normalizedPath, type GatewayAnswer } from './gateway-answer';

export interface DoctorInput {
  readonly baseUrl: string;
  /** An id of CLIENT_KINDS. */
  readonly clientKind: string;
  readonly model?: string;
  /** A request URL that failed (full endpoint), if the person has one. */
  readonly failingUrl?: string;
  /** The HTTP status the failing request got. */
  readonly status?: number;
}

/** The key the person signed in with (or `modelgate doctor` read): its access, or why it has none. */
export type DoctorKey =
  | {
      readonly ok: true;
      readonly id: string;
      readonly groupName: string;
      readonly group: GroupRecord | undefined;
      readonly balance: number | null;
    }
  | { readonly ok: false; readonly reason: string; readonly hint: string };

export interface DoctorContext {
  /**
   * This gateway's {base_url}: `gateway.publicBaseUrl`, else the address the console was reached at; `{base_url}` when
   * unknown.
   */
  readonly gatewayBase: string;
  /** true when gatewayBase is the configured public address (a Base URL elsewhere is then wrong). */
  readonly baseConfigured: boolean;
  readonly routes: Config['routes'];
  readonly key: DoctorKey;
  /** The model field holds a known key (the caller checks, against the store). */
  readonly modelIsKey?: boolean;
  /** false: nothing at the Base URL's address answered as this gateway (`modelgate doctor` asks first). */
  readonly reachable?: boolean;
}

export type Outcome = 'pass' | 'fail' | 'note' | 'skip';

export interface DoctorStep {
  readonly id: string;
  /** Where the spec says it: `§4.1 rule 1`. */
  readonly ref: string;
  readonly title: string;
  readonly outcome: Outcome;
  readonly detail: string;
  /** On a failure: the one setting to change. */
  readonly change?: string;
  /** What the gateway answers to the request this setting produces, when that is an answer of its own. */
  readonly gatewayAnswers?: { readonly status: number; readonly reason: string };
}

export interface DoctorReport {
  readonly clientKind: { readonly id: string; readonly label: string };
  /** What this client kind should be configured with, on this gateway. */
  readonly expected: {
    readonly baseUrl: string;
    readonly endpoint: string;
    readonly header: string;
    readonly listUrl: string;
  };
  readonly steps: readonly DoctorStep[];
  /** The first failing step: the one thing to change now. */
  readonly failing: DoctorStep | null;
  /** What to do next. */
  readonly next: string;
}

type Result = Pick<DoctorStep, 'outcome' | 'detail' | 'change' | 'gatewayAnswers'>;

interface Rule {
  readonly id: string;
  readonly ref: string;
  readonly title: string;
  /** null: does not apply to this input (not shown). */
  run(s: State): Result | null;
}

/** What the rules share: the parsed input. */
interface State {
  readonly input: DoctorInput;
  readonly ctx: DoctorContext;
  readonly kind: ClientKind;
  readonly expected: ClientSetup;
  readonly model: string | undefined;
  /** The Base URL, parsed; undefined when it is not an http(s) URL. */
  readonly url: URL | undefined;
  /** The gateway's own path ('' at the root), and the Base URL's path after it ('' for the root). */
  readonly rootPath: string;
  readonly rest: string;
  readonly underRoot: boolean;
}

const PASS = (detail: string): Result => ({ outcome: 'pass', detail });
const NOTE = (detail: string): Result => ({ outcome: 'note', detail });
const FAIL = (detail: string, change: string, gatewayAnswers?: GatewayAnswer): Result => ({
  outcome: 'fail',
  detail,
  change,
  gatewayAnswers:
    gatewayAnswers?.status !== undefined && gatewayAnswers.reason !== undefined
      ? { status: gatewayAnswers.status, reason: gatewayAnswers.reason }
      : undefined,
});

const show = (s: string, max = 120): string => printable(s, max);
/**
 * A path to echo: printable, and any long segment that is not an endpoint's is shown as its length
 * (as the decision log does), so a key without the sk-mg- prefix pasted into a path is not echoed.
 */
const showPath = (p: string): string =>
  show(
    p
      .split('/')
      .map((seg) => (seg.length >= 16 && !seg.includes(':') ? `{${seg.length} characters}` : seg))
      .join('/'),
    200,
  );
/** A path, without dot segments or doubled slashes, without a trailing slash ('' for the root). */
const trimPath = (p: string): string => normalizedPath(p).replace(/\/+$/, '');

/** Segments only an endpoint path has (past its version): a Base URL that holds one is rule 1's classic mistake. */
const ENDPOINT_WORDS: ReadonlySet<string> = new Set(
  ENDPOINTS.flatMap((e) =>
    e.path
      .split('/')
      .slice(2)
      .filter((seg) => seg !== MODEL),
  ),
);
const isEndpointSegment = (seg: string): boolean =>
  ENDPOINT_WORDS.has(seg) || (seg.includes(':') && GENERATIVE_METHODS.has(seg.slice(seg.lastIndexOf(':') + 1)));

function parseUrl(text: string): URL | undefined {
  try {
    const u = new URL(text);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u : undefined;
  } catch {
    // not a URL
    return undefined;
  }
}

function rootPathOf(base: string): string {
  const u = parseUrl(base);
  return u ? trimPath(u.pathname) : '';
}

/** The method a client of this kind uses on its endpoint. */
const POST = 'POST';

const RULES: readonly Rule[] = [
  {
    id: 'base-url',
    ref: '§4.1 rule 1',
    title: 'The Base URL holds the base address only',
    run(s) {
      const raw = s.input.baseUrl;
      const set = `set the Base URL to ${s.expected.baseUrl}`;
      if (raw.trim() === '') return FAIL('the Base URL is empty', set);
      if (raw !== raw.trim()) return FAIL('the Base URL has spaces before or after it', `remove the spaces: ${set}`);
      if (!s.url) return FAIL('the Base URL is not an http:// or https:// address', set);
      if (s.url.username || s.url.password)
        return FAIL('the Base URL holds a user name or password; the key goes in the API Key box', set);
      if (s.url.search || s.url.hash) {
        const keyInIt = findKeyInUrl(
          {
            method: 'GET',
            path: '',
            query: s.url.search.slice(1),
            headers: {},
            body: undefined,
            partialBody: false,
            requestId: '',
          },
          s.ctx.routes,
        );
        return FAIL(
          keyInIt
            ? 'the Base URL has a query string with a key in it: keys never go in a URL (§5 rule 4)'
            : 'the Base URL has a query string (?...) or a fragment (#...)',
          set,
        );
      }
      const segments = s.rest.split('/').filter((x) => x !== '');
      const at = segments.findIndex(isEndpointSegment);
      if (at !== -1) {
        const tail = `/${segments.slice(at).join('/')}`;
        return FAIL(
          `the Base URL holds an endpoint path, ${JSON.stringify(showPath(tail))}; a Base URL ends before /chat/completions, /responses, /embeddings, /messages or /models, and the client appends it itself`,
          set,
          gatewayAnswer(
            POST,
            `${s.rootPath}${s.rest}${s.kind.appends.replace('{model}', s.model ?? '{model}')}`,
            s.ctx.routes.altPrefix,
          ),
        );
      }
      if (raw.endsWith('/') && s.url.pathname !== '' && raw.length > s.url.origin.length) {
        if (s.kind.noTrailingSlash)
          return FAIL(`the Base URL ends with "/"; ${s.kind.label} clients take it without a trailing "/"`, set);
        return NOTE(
          'the Base URL ends with "/"; the gateway tolerates it, but a Base URL is generally written without one',
        );
      }
      return PASS('the Base URL holds a base address and nothing else');
    },
  },
  {
    id: 'url-key',
    ref: '§5 rule 4',
    title: 'No key in the request URL',
    run(s) {
      const u = s.input.failingUrl === undefined ? undefined : parseUrl(s.input.failingUrl.trim());
      if (!u) return null;
      const inUrl = findKeyInUrl(
        {
          method: POST,
          path: decodeURIComponentSafe(u.pathname),
          query: u.search.slice(1),
          headers: {},
          body: undefined,
          partialBody: false,
          requestId: '',
        },
        s.ctx.routes,
      );
      return inUrl
        ? FAIL(inUrl, 'remove the key from the URL and send it only in the header')
        : PASS('the request URL carries no key');
    },
  },
  {
    id: 'endpoint-url',
    ref: '§4.1 rule 2',
    title: 'The request URL holds the full endpoint path',
    run(s) {
      if (s.input.failingUrl === undefined || s.input.failingUrl.trim() === '') return null;
      const u = parseUrl(s.input.failingUrl.trim());
      const use = `use ${s.expected.endpoint}`;
      if (!u) return FAIL('the request URL is not an http:// or https:// address', use);
      const path = trimPath(u.pathname);
      const rootPath = s.rootPath;
      if (rootPath !== '' && path !== rootPath && !path.startsWith(`${rootPath}/`))
        return FAIL(`the request path does not start with this gateway's path ${JSON.stringify(rootPath)}`, use);
      const rel = path.slice(rootPath.length);
      const alt = s.ctx.routes.altPrefix;
      const route = [classify(POST, rel, alt, false), classify('GET', rel, alt, false)].find(
        (r) => r.kind === 'protocol' || r.kind === 'models',
      );
      if (route) return PASS(`${JSON.stringify(showPath(rel))} is a full endpoint path (${route.style})`);
      const answer = gatewayAnswer(POST, path, alt);
      const shape = segmentDifference(rel, s.expected.path);
      return FAIL(
        `${JSON.stringify(showPath(rel))} is not an endpoint of this gateway: ${shape}; the full endpoint for ${s.kind.label} is ${s.expected.path}`,
        use,
        answer,
      );
    },
  },
  {
    id: 'path',
    ref: '§4.1 rule 4, §7 404',
    title: 'No repeated path, the right prefix',
    run(s) {
      const want = `${s.kind.alt ? s.ctx.routes.altPrefix : ''}${s.kind.suffix}`;
      const set = `set the Base URL to ${s.expected.baseUrl}`;
      if (!s.underRoot)
        return FAIL(
          `this gateway's address is ${s.ctx.gatewayBase}; the Base URL's path does not start with ${JSON.stringify(s.rootPath)}`,
          set,
        );
      const appended = s.kind.appends.replace('{model}', s.model ?? '{model}');
      if (s.rest === want) return PASS(`the client requests ${want}${appended}, the endpoint for ${s.kind.label}`);
      const sent = `${s.rest}${appended}`;
      const answer = gatewayAnswer(POST, `${s.rootPath}${sent}`, s.ctx.routes.altPrefix);
      // Another Base URL that still reaches an endpoint of this kind's style and route: it works (the
      // coding agents' /responses and /chat/completions at the root serve any client that sends them,
      // and a coding agent set to {base_url}/v1 sends /v1/responses), though the table says otherwise.
      const reached = answer.cluster === undefined ? undefined : classify(POST, sent, s.ctx.routes.altPrefix, false);
      if (reached?.kind === 'protocol' && reached.style === s.kind.style && reached.alt === s.kind.alt) {
        return NOTE(
          `the client requests ${showPath(sent)}, an endpoint of this gateway for ${s.kind.style} requests, so it works; the Base URL table sets ${s.kind.label} clients up with ${s.expected.baseUrl}`,
        );
      }
      const what =
        answer.reason === 'path_repeated'
          ? `path repeated: the Base URL ends in ${JSON.stringify(showPath(s.rest || '/'))} and the client appends ${s.kind.appends} itself, so it requests ${showPath(sent)}`
          : answer.reason !== undefined
            ? `wrong prefix: the client requests ${showPath(sent)}`
            : `wrong prefix: the client requests ${showPath(sent)}, which reaches ${s.kind.alt ? 'the root route, not the alternate route' : 'the alternate route, not the root route'} this client kind is for`;
      return FAIL(
        `${what}. ${prefixAdvice(s.kind, s.rest, s.ctx.routes.altPrefix, s.ctx.gatewayBase)}`.trim(),
        set,
        answer,
      );
    },
  },
  {
    id: 'address',
    ref: '§7 401 (address first)',
    title: 'The address is this gateway',
    run(s) {
      if (s.ctx.reachable === false && s.url) {
        return FAIL(
          `no modelgate gateway answered at ${show(s.url.origin)} (its console API did not): the address is wrong, or the gateway is down`,
          `check the address: the Base URL must point at the gateway, whose console answers at ${s.ctx.gatewayBase}/console/`,
        );
      }
      const gw = parseUrl(s.ctx.gatewayBase);
      if (!gw || !s.url) return null;
      if (gw.origin === s.url.origin) return PASS(`the Base URL points at this gateway (${gw.origin})`);
      const detail = `the Base URL points at ${show(s.url.origin)}; this console was reached at ${gw.origin}`;
      return s.ctx.baseConfigured
        ? FAIL(`${detail}, the gateway's public address`, `set the Base URL to ${s.expected.baseUrl}`)
        : NOTE(`${detail}: fine if both reach the same gateway`);
    },
  },
  {
    id: 'key',
    ref: '§7 401 (key)',
    title: 'The key is complete and valid',
    run(s) {
      const k = s.ctx.key;
      if (k.ok)
        return PASS(`the key is complete and valid: key ${JSON.stringify(k.id)}, group ${JSON.stringify(k.groupName)}`);
      const incomplete = k.reason === 'key_malformed' || k.reason === 'key_incomplete' || k.reason === 'key_missing';
      return FAIL(
        `${incomplete ? 'the key is incomplete or malformed' : 'the key is not valid'} (${k.reason}): ${k.hint}`,
        incomplete
          ? 'paste the whole key into the API Key box, exactly as issued: no quotes, no "Bearer ", nothing cut'
          : 'use a current key issued by this gateway',
      );
    },
  },
  {
    id: 'headers',
    ref: '§7 401 (headers), §5',
    title: 'The key goes in the right header',
    run(s) {
      const header = s.expected.header;
      if (s.input.status === 401 && s.ctx.key.ok) {
        return FAIL(
          `the key you checked here is valid, yet the client got 401: it sends another key, or the key in a header this route does not read (${s.kind.label} requests carry ${header})`,
          `paste this key into the client's API Key box (the whole key, no quotes, no "Bearer "); in hand-built requests send ${header}`,
        );
      }
      return PASS(
        `${s.kind.label} requests carry ${header}${s.expected.headerName === 'authorization' ? ' (in an API Key box, the key alone: the client adds "Bearer ")' : ''}`,
      );
    },
  },
  {
    id: 'model-group',
    ref: '§7 model check 1',
    title: 'The key is bound to the right group',
    run(s) {
      const k = s.ctx.key;
      if (!k.ok) return null;
      if (!k.group)
        return FAIL(
          `the key is bound to group ${JSON.stringify(k.groupName)}, which no longer exists`,
          'ask for the key to be bound to an existing group, or use another key',
        );
      return PASS(`the key is bound to group ${JSON.stringify(k.groupName)}; a key uses only its own group's models`);
    },
  },
  {
    id: 'model-in-group',
    ref: '§7 model check 2',
    title: 'The group contains the model',
    run(s) {
      const k = s.ctx.key;
      if (!k.ok) return null;
      if (s.model === undefined)
        return { outcome: 'skip', detail: 'enter the model the client uses to run the model checks (2 to 4)' };
      if (s.ctx.modelIsKey)
        return FAIL(
          'the model field holds an API key',
          'put the key in the API Key box and a model name in the model field',
        );
      const g = k.group;
      if (g?.models.has(s.model))
        return PASS(`group ${JSON.stringify(k.groupName)} contains ${JSON.stringify(show(s.model))}`);
      if (g && suggestModel(s.model, g))
        return NOTE(`group ${JSON.stringify(k.groupName)} has no model named exactly ${JSON.stringify(show(s.model))}`);
      const names = g ? [...g.models.keys()] : [];
      return FAIL(
        `group ${JSON.stringify(k.groupName)} does not include ${JSON.stringify(show(s.model))}${names.length ? `; its models: ${names.join(', ')}` : ''}`,
        `use one of the group's models, or a key bound to a group that includes ${JSON.stringify(show(s.model))} (check 1)`,
      );
    },
  },
  {
    id: 'model-name',
    ref: '§7 model check 3',
    title: 'The model name has no typo or extra space',
    run(s) {
      const k = s.ctx.key;
      if (!k.ok || s.model === undefined || !k.group || s.ctx.modelIsKey) return null;
      if (k.group.models.has(s.model)) return PASS('the model name is exact');
      const hint = suggestModel(s.model, k.group);
      if (!hint) return null;
      const why =
        hint.why === 'spaces'
          ? 'has leading or trailing spaces'
          : hint.why === 'case'
            ? 'differs in case (names are case-sensitive)'
            : 'looks misspelled';
      return FAIL(
        `the model name ${JSON.stringify(show(s.model))} ${why}: did you mean ${JSON.stringify(hint.name)}?`,
        `set the model to ${JSON.stringify(hint.name)}`,
      );
    },
  },
  {
    id: 'model-protocol',
    ref: '§7 model check 4',
    title: 'The client uses the right protocol',
    run(s) {
      const k = s.ctx.key;
      const m = k.ok && s.model !== undefined ? k.group?.models.get(s.model) : undefined;
      if (!m) return null;
      if (m.protocols === null || m.protocols.includes(s.kind.style))
        return PASS(`${JSON.stringify(m.name)} is served on ${s.kind.style}`);
      const kinds = CLIENT_KINDS.filter((c) => c.alt === s.kind.alt && m.protocols!.includes(c.style)).map(
        (c) => c.label,
      );
      return FAIL(
        `${JSON.stringify(m.name)} is served on ${m.protocols.join(', ')}, not on ${s.kind.style} (${s.kind.label}): its endpoint is ${m.protocols.map((p) => endpointFor(p, m.name, s.kind.alt ? s.ctx.routes.altPrefix : '')).join(' or ')}`,
        `use a client of the kind ${kinds[0] ?? m.protocols[0]} for this model, or a model served on ${s.kind.style}`,
      );
    },
  },
  {
    id: 'available',
    ref: '§7 model check 5',
    title: 'The console shows the group and the model as available',
    run(s) {
      const k = s.ctx.key;
      if (!k.ok) return null;
      if (!k.group) return null;
      if (!k.group.available)
        return FAIL(
          `the console shows group ${JSON.stringify(k.groupName)} as unavailable: no model of it can be used now`,
          'wait until the group is available again, or use a key of an available group',
        );
      const m = s.model === undefined ? undefined : k.group.models.get(s.model);
      if (m && !m.available)
        return FAIL(
          `the console shows ${JSON.stringify(m.name)} as unavailable (its channel is down)`,
          'retry later, or use another model of the group',
        );
      return PASS(
        m
          ? `group ${JSON.stringify(k.groupName)} and ${JSON.stringify(m.name)} are available`
          : `group ${JSON.stringify(k.groupName)} is available`,
      );
    },
  },
  {
    id: 'balance',
    ref: '§7 403 (balance)',
    title: 'The balance suffices',
    run(s) {
      const k = s.ctx.key;
      if (!k.ok) return null;
      if (k.balance === null) return PASS('the key has no balance limit');
      if (k.balance <= 0)
        return FAIL(
          `the key's balance is ${k.balance}: every model request is refused with 403 balance_insufficient`,
          "top up the key's balance",
        );
      return PASS(`the key's balance is ${k.balance}`);
    },
  },
];

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    // URIError: an escape that is not UTF-8 stays as written
    return s;
  }
}

/** The spec's own words for the prefix mistakes it names (docs/spec.md §7 404 row, §4.1 table notes). */
function prefixAdvice(kind: ClientKind, rest: string, alt: string, base: string): string {
  const tail = rest.slice(kind.alt && rest.startsWith(alt) ? alt.length : 0);
  if (kind.style === 'generative' && kind.suffix === '' && tail.endsWith('/v1beta'))
    return 'A command-line generative client must use the root address, not /v1beta.';
  if (kind.style === 'generative' && kind.suffix === '/v1beta')
    return `An editor generative provider (or a hand-written generative request) must use ${base}/v1beta.`;
  if (kind.suffix === '' && tail.endsWith('/v1')) return 'No /v1 suffix: this client adds /v1 itself.';
  if (kind.suffix === '/v1' && tail === '')
    return 'This client appends only the endpoint, so the Base URL ends in /v1.';
  return '';
}

/** How a path differs from the expected one: a segment missing, added, or different. */
function segmentDifference(actual: string, expected: string): string {
  const norm = (p: string): string[] =>
    p
      .split('/')
      .filter((x) => x !== '')
      .map((x) => (x.includes(':') ? x.slice(x.lastIndexOf(':')) : x));
  const a = norm(actual);
  const e = norm(expected);
  const isSub = (small: string[], big: string[]): boolean => {
    let i = 0;
    for (const x of big) if (i < small.length && small[i] === x) i++;
    return i === small.length;
  };
  if (a.length < e.length && isSub(a, e)) return 'a segment is missing';
  if (a.length > e.length && isSub(e, a)) return 'a segment is added or repeated';
  return 'its segments differ';
}

/**
 * The doctor's view of a key from the console's access answer (`POST /console/api/access`), for
 * `modelgate doctor`, which reads it over HTTP: the group's models as a GroupRecord.
 */
export function doctorKeyFromAccess(access: ConsoleAccess): DoctorKey {
  const models = new Map(
    access.models.map((m) => [m.name, { name: m.name, protocols: m.protocols, available: m.available }]),
  );
  return {
    ok: true,
    id: access.key.id,
    groupName: access.group.name,
    group: access.group.exists ? { name: access.group.name, available: access.group.available, models } : undefined,
    balance: access.key.balance,
  };
}

/** The rules' ids, in the order they run. */
export const RULE_IDS: readonly string[] = RULES.map((r) => r.id);

/** Runs the rules in the spec's order; the first failure stops the rest (one setting at a time). */
export function runDoctor(input: DoctorInput, ctx: DoctorContext): DoctorReport {
  const kind = clientKind(input.clientKind);
  if (!kind) throw new RangeError(`unknown client kind ${JSON.stringify(printable(input.clientKind, 40))}`);
  const model = input.model === undefined || input.model === '' ? undefined : input.model;
  const expected = setupFor(
    kind,
    ctx.gatewayBase,
    ctx.routes,
    model === undefined || ctx.modelIsKey ? '<model>' : model,
  );
  const url = parseUrl(input.baseUrl.trim());
  const rootPath = rootPathOf(ctx.gatewayBase);
  const path = url ? trimPath(url.pathname) : '';
  const underRoot = rootPath === '' || path === rootPath || path.startsWith(`${rootPath}/`);
  const state: State = {
    input,
    ctx,
    kind,
    expected,
    model,
    url,
    rootPath,
    rest: underRoot ? path.slice(rootPath.length) : path,
    underRoot,
  };

  const steps: DoctorStep[] = [];
  let failing: DoctorStep | null = null;
  for (const rule of RULES) {
    const head = { id: rule.id, ref: rule.ref, title: rule.title };
    if (failing) {
      if (applies(rule, state))
        steps.push({
          ...head,
          outcome: 'skip',
          detail: 'checked once the change above is made (one setting at a time)',
        });
      continue;
    }
    const r = rule.run(state);
    if (r === null) continue;
    const step: DoctorStep = { ...head, ...r };
    steps.push(step);
    if (step.outcome === 'fail') failing = step;
  }
  const next = failing
    ? `Change this one setting: ${failing.change}. Then save, restart the client fully and check with one short request (§4.1 rule 3).`
    : `Nothing to change here. Save the client's settings, restart it fully, then check with one short request (§4.1 rule 3), e.g. GET ${expected.listUrl} with ${expected.header}.`;
  return {
    clientKind: { id: kind.id, label: kind.label },
    expected: {
      baseUrl: expected.baseUrl,
      endpoint: expected.endpoint,
      header: headerLine(expected.headerName),
      listUrl: expected.listUrl,
    },
    steps,
    failing,
    next,
  };
}

/** Whether a rule skipped after a failure would have applied to this input (so the skip is worth showing). */
function applies(rule: Rule, s: State): boolean {
  switch (rule.id) {
    case 'url-key':
    case 'endpoint-url':
      return s.input.failingUrl !== undefined && s.input.failingUrl.trim() !== '';
    case 'address':
      return s.url !== undefined && (s.ctx.reachable === false || parseUrl(s.ctx.gatewayBase) !== undefined);
    case 'model-group':
    case 'model-in-group':
    case 'available':
    case 'balance':
      return s.ctx.key.ok;
    case 'model-name':
    case 'model-protocol':
      return s.model !== undefined && s.ctx.key.ok;
    default:
      return true;
  }
}

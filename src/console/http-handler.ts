/**
 * The console on modelgate's HTTP listener, under `/console/` (Envoy routes `{base_url}/console/`
 * here with ext_authz off: the console authenticates each API call itself).
 *
 *   GET  /console/                 the page (and app.js, app.css, icon.svg)
 *   GET  /console/api/info         this gateway's address, the alternate prefix, the client kinds
 *   POST /console/api/access       "My access" for the presenting key
 *   POST /console/api/setup        the Base URL table and snippets, filled in for this gateway
 *   POST /console/api/doctor       the doctor's report for a configured client (JSON body)
 *
 * The key travels only in the `x-modelgate-console-key` request header, percent-encoded (so any
 * pasted text, curly quotes included, reaches the hygiene checks intact); never in a URL, and never
 * in a log line. Every answer carries `cache-control: no-store`, a strict content security policy,
 * `x-frame-options: DENY`, `x-content-type-options: nosniff` and `referrer-policy: no-referrer`. The
 * API is rate limited per client address and per key (429 console_rate_limited).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Lookups } from '../check/decide';
import { HEADER } from '../contract/headers';
import { hashKey } from '../contract/key-format';
import type { CheckLogger } from '../check/pipeline';
import { statusOf, type Reason } from '../contract/reasons';
import type { Config } from '../config/load';
import { PROTOCOLS, type GroupRecord } from '../store/store';
import { signIn, type SignIn } from './access';
import { loadAssets, type Asset } from './assets';
import { CLIENT_KINDS, setupFor, type ClientKind } from './client-kinds';
import { runDoctor, type DoctorInput, type DoctorKey } from './doctor';
import { gatewayBaseOf } from './gateway-base';
import { RateLimiter } from './rate-limit';
import { snippetsFor } from './snippets';
import { RECENT_USAGE_ROWS, type UsageProvider } from './usage';
import type { KeyRecord } from '../store/store';

/** On every console answer. The page loads only its own files; no inline script or style. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

/** The largest API request body read (the doctor's form is a few hundred bytes). */
const MAX_BODY_BYTES = 16 * 1024;
const MAX_FIELD = 2048;

export interface ConsoleDeps {
  readonly config: () => Config;
  readonly lookups: Lookups;
  /** pino's Logger fits. */
  readonly logger: CheckLogger & { warn(obj: object, msg: string): void };
  readonly now?: () => number;
  /** Recent usage per key (the meter); absent: the access view has no usage section. */
  readonly usage?: UsageProvider;
  /**
   * What is left of a key's key-wide rate limit windows, asked of the rate limit engine without
   * counting (docs/rate-limits.md); absent, or rejecting: the view shows the limits alone.
   */
  readonly rateLimitsLeft?: (
    record: KeyRecord,
    group: GroupRecord | undefined,
  ) => Promise<Record<string, number> | null>;
}

interface Answer {
  readonly status: number;
  readonly body: unknown;
  readonly reason?: Reason;
  readonly keyId?: string;
  readonly headers?: Record<string, string>;
}

function problem(
  reason: Reason,
  hint: string,
  extra: { keyId?: string; headers?: Record<string, string>; field?: string } = {},
): Answer {
  return {
    status: statusOf(reason),
    reason,
    keyId: extra.keyId,
    headers: extra.headers,
    body: { error: { reason, status: statusOf(reason), hint, ...(extra.field ? { field: extra.field } : {}) } },
  };
}

/**
 * The client address for rate limiting: the one Envoy determined and set on the console's route
 * (x-modelgate-client-address: the connection's peer, or behind gateway.trustedProxyHops load
 * balancers the x-forwarded-for hop that many from the right; render-routes.ts), else the last
 * x-forwarded-for entry, which Envoy appends itself (use_remote_address: true; a client can prepend
 * entries, never append), else the socket's peer.
 */
export function clientAddress(req: IncomingMessage): string {
  const set = req.headers[HEADER.clientAddress];
  const xff = req.headers['x-forwarded-for'];
  const last = (Array.isArray(xff) ? xff.join(',') : (xff ?? ''))
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .at(-1);
  const address = (typeof set === 'string' && set !== '' ? set : undefined) ?? last ?? req.socket.remoteAddress ?? '';
  // Only an address is logged and counted: anything else in the header (a key, say) is not.
  return IP_ADDRESS.test(address) ? address : 'unparseable';
}

/** An IPv4 or IPv6 address (as Envoy writes it into x-forwarded-for), nothing else. */
const IP_ADDRESS = /^(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f:.]{2,45})$/;

/** The API names; anything else is logged as "unknown" (a path segment can hold anything). */
const API_NAMES = new Set(['info', 'access', 'setup', 'doctor']);

function readBody(req: IncomingMessage): Promise<Buffer | 'too_large'> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        resolve('too_large');
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** The pasted key from its header, decoded (`key` undefined when there is none), or why it cannot be read. */
function pastedKey(req: IncomingMessage): { readonly key: string | undefined } | { readonly answer: Answer } {
  const raw = req.headers[HEADER.consoleKey];
  if (raw === undefined) return { key: undefined };
  const value = Array.isArray(raw) ? raw.join(',') : raw;
  try {
    return { key: decodeURIComponent(value) };
  } catch {
    return {
      answer: problem(
        'key_malformed',
        'the key you pasted has a character that no key contains: paste the key exactly as issued',
        { field: 'key' },
      ),
    };
  }
}

/** A model of the group for the snippets: one served on the kind's style and available, if any. */
function exampleModel(group: GroupRecord | undefined, kind: ClientKind): string {
  const models = group ? [...group.models.values()] : [];
  const served = models.filter((m) => m.protocols === null || m.protocols.includes(kind.style));
  return (
    (served.find((m) => m.available && m.protocols !== null) ?? served.find((m) => m.available) ?? served[0])?.name ??
    '<model>'
  );
}

function doctorKey(s: SignIn): DoctorKey {
  return s.ok
    ? { ok: true, id: s.record.id, groupName: s.record.group, group: s.group, balance: s.record.balance }
    : { ok: false, reason: s.reason, hint: s.hint };
}

/** The doctor's input from a JSON body, or what is wrong with it. */
function doctorInput(body: Buffer): { readonly input: DoctorInput } | { readonly answer: Answer } {
  const r = readDoctorInput(body);
  return 'body' in r ? { answer: r } : { input: r };
}

function readDoctorInput(body: Buffer): DoctorInput | Answer {
  let data: unknown;
  try {
    data = JSON.parse(body.toString('utf8'));
  } catch {
    return problem(
      'body_invalid',
      'send a JSON object: {"baseUrl": "...", "clientKind": "...", "model": "...", "failingUrl": "...", "status": 404}',
    );
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data))
    return problem('body_invalid', 'send a JSON object with baseUrl and clientKind');
  const o = data as Record<string, unknown>;
  const str = (name: string, required: boolean): string | undefined | Answer => {
    const v = o[name];
    if (v === undefined || v === null || (v === '' && !required))
      return required ? problem('body_invalid', `${name} is required`, { field: name }) : undefined;
    if (typeof v !== 'string') return problem('body_invalid', `${name} must be a string`, { field: name });
    if (v.length > MAX_FIELD)
      return problem('body_invalid', `${name} is longer than ${MAX_FIELD} characters`, { field: name });
    return v;
  };
  const baseUrl = str('baseUrl', true);
  const clientKind = str('clientKind', true);
  const model = str('model', false);
  const failingUrl = str('failingUrl', false);
  for (const v of [baseUrl, clientKind, model, failingUrl]) if (typeof v === 'object') return v;
  if (!CLIENT_KINDS.some((k) => k.id === clientKind)) {
    return problem('body_invalid', `clientKind must be one of: ${CLIENT_KINDS.map((k) => k.id).join(', ')}`, {
      field: 'clientKind',
    });
  }
  let status: number | undefined;
  if (o.status !== undefined && o.status !== null && o.status !== '') {
    status = typeof o.status === 'string' ? Number(o.status) : (o.status as number);
    if (!Number.isInteger(status) || status < 100 || status > 599)
      return problem('body_invalid', 'status must be an HTTP status such as 401, 403 or 404', { field: 'status' });
  }
  return {
    baseUrl: baseUrl as string,
    clientKind: clientKind as string,
    model: model as string | undefined,
    failingUrl: failingUrl as string | undefined,
    status,
  };
}

/** An HTTP route handler for `/console` and everything under it; returns false for other paths. */
export function createConsoleHandler(
  deps: ConsoleDeps,
): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  const assets: ReadonlyMap<string, Asset> = loadAssets();
  const now = deps.now ?? Date.now;
  // Limits follow the config as it was when the limiter was built; a reload that changes them builds new ones.
  let limits: { perAddress: RateLimiter; perKey: RateLimiter; config: Config['console']['rateLimit'] } | undefined;
  const limiters = (config: Config) => {
    const c = config.console.rateLimit;
    if (!limits || limits.config !== c) {
      limits = {
        config: c,
        perAddress: new RateLimiter({ perMinute: c.perAddressPerMinute, maxTracked: c.maxTracked, now }),
        perKey: new RateLimiter({ perMinute: c.perKeyPerMinute, maxTracked: c.maxTracked, now }),
      };
    }
    return limits;
  };

  const send = (
    res: ServerResponse,
    status: number,
    headers: Record<string, string>,
    body: string | Buffer,
    head: boolean,
  ): void => {
    res.writeHead(status, { ...SECURITY_HEADERS, ...headers });
    res.end(head ? undefined : body);
  };
  const sendJson = (res: ServerResponse, a: Answer, head: boolean): void => {
    send(
      res,
      a.status,
      { 'content-type': 'application/json', ...(a.reason ? { [HEADER.reason]: a.reason } : {}), ...a.headers },
      JSON.stringify(a.body),
      head,
    );
  };

  async function api(req: IncomingMessage, name: string, config: Config, client: string): Promise<Answer> {
    const post = ['access', 'setup', 'doctor'].includes(name);
    if (name !== 'info' && !post)
      return problem('path_unknown', 'no such console API: the API has info, access, setup and doctor');
    const method = req.method ?? '';
    const allow = post ? 'POST' : 'GET, HEAD';
    if (!allow.split(', ').includes(method))
      return problem('method_not_allowed', `this console API takes ${allow}`, { headers: { allow } });

    const limit = limiters(config);
    const wait = limit.perAddress.take(client);
    if (wait > 0)
      return problem('console_rate_limited', `too many console requests from this address: retry in ${wait} s`, {
        headers: { 'retry-after': String(wait) },
      });

    const base = gatewayBaseOf(config, req);
    if (name === 'info') {
      return {
        status: 200,
        body: {
          baseUrl: base.url,
          baseConfigured: base.configured,
          altPrefix: config.routes.altPrefix,
          console: `${base.url}/console/`,
          // What `modelgate doctor` needs to run the doctor itself: where keys go, what counts as a key in a URL.
          routes: {
            altPrefix: config.routes.altPrefix,
            bearerHeaders: config.routes.bearerHeaders,
            vendorHeaders: config.routes.vendorHeaders,
            queryKeyParams: config.routes.queryKeyParams,
          },
          clientKinds: CLIENT_KINDS.map((k) => ({ id: k.id, label: k.label, spec: k.spec })),
        },
      };
    }

    const pasted = pastedKey(req);
    if ('answer' in pasted) return pasted.answer;
    const key = pasted.key;
    const body = name === 'doctor' ? await readBody(req) : undefined;
    if (body === 'too_large') return problem('body_invalid', `the request body is over ${MAX_BODY_BYTES} bytes`);
    const read = body === undefined ? undefined : doctorInput(body);
    if (read && 'answer' in read) return read.answer;
    if (key === undefined) return problem('key_missing', 'sign in: paste your key', { field: 'key' });
    if (key.trim() !== '') {
      const keyWait = limit.perKey.take(hashKey(key.trim()));
      if (keyWait > 0)
        return problem('console_rate_limited', `too many console requests with this key: retry in ${keyWait} s`, {
          headers: { 'retry-after': String(keyWait) },
        });
    }
    const who = await signIn(key, { config: deps.config, lookups: deps.lookups, logger: deps.logger, now }, base.url);

    if (name === 'doctor') {
      const di = (read as { input: DoctorInput }).input;
      let modelIsKey = false;
      if (di.model) {
        const asKey = await deps.lookups.keys.get(hashKey(di.model));
        modelIsKey = asKey.status === 'found';
      }
      const report = runDoctor(di, {
        gatewayBase: base.url,
        baseConfigured: base.configured,
        routes: config.routes,
        key: doctorKey(who),
        modelIsKey,
      });
      return { status: 200, body: report, keyId: who.ok ? who.record.id : who.keyId };
    }
    // The gateway's hints write {base_url} where they name its address; the console knows it (gateway-base.ts).
    if (!who.ok)
      return problem(who.reason, who.hint.split('{base_url}').join(base.url), {
        keyId: who.keyId,
        field: who.status === 401 ? 'key' : undefined,
      });

    if (name === 'access') {
      let usage: unknown;
      if (deps.usage) {
        try {
          usage = await deps.usage.recent(who.record.id, RECENT_USAGE_ROWS);
        } catch (err) {
          deps.logger.error(
            { err: err instanceof Error ? err.message : String(err), keyId: who.record.id },
            'console usage unavailable',
          );
          usage = null;
        }
      }
      let left: Record<string, number> | null = null;
      if (deps.rateLimitsLeft) {
        try {
          left = await deps.rateLimitsLeft(who.record, who.group);
        } catch (err) {
          deps.logger.warn(
            { err: err instanceof Error ? err.message : String(err), keyId: who.record.id },
            'console: rate limits left unavailable',
          );
        }
      }
      const access = left ? { ...who.access, key: { ...who.access.key, left } } : who.access;
      return { status: 200, keyId: who.record.id, body: { ...access, ...(deps.usage ? { usage } : {}) } };
    }
    // setup
    return {
      status: 200,
      keyId: who.record.id,
      body: {
        baseUrl: base.url,
        baseConfigured: base.configured,
        altPrefix: config.routes.altPrefix,
        rows: CLIENT_KINDS.map((kind) => {
          const model = exampleModel(who.group, kind);
          const s = setupFor(kind, base.url, config.routes, model);
          return {
            id: kind.id,
            label: kind.label,
            spec: kind.spec,
            note: kind.note,
            alt: kind.alt,
            style: kind.style,
            baseUrl: s.baseUrl,
            endpoint: s.endpoint,
            header: s.header,
            listUrl: s.listUrl,
            model,
            snippets: snippetsFor(s, model),
          };
        }),
        protocols: PROTOCOLS,
      },
    };
  }

  return async (req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (path !== '/console' && !path.startsWith('/console/')) return false;
    const head = req.method === 'HEAD';
    if (path === '/console') {
      send(res, 308, { location: 'console/', 'content-type': 'text/plain' }, 'see /console/\n', head);
      return true;
    }
    if (!path.startsWith('/console/api/')) {
      const asset = assets.get(path);
      if (!asset) sendJson(res, problem('path_unknown', 'no such console page: open /console/'), head);
      else if (req.method !== 'GET' && !head)
        sendJson(
          res,
          problem('method_not_allowed', 'the console pages take GET', { headers: { allow: 'GET, HEAD' } }),
          false,
        );
      else send(res, 200, { 'content-type': asset.type }, asset.body, head);
      return true;
    }

    const started = process.hrtime.bigint();
    const config = deps.config();
    const client = clientAddress(req);
    const name = path.slice('/console/api/'.length);
    let answer: Answer;
    try {
      answer = await api(req, name, config, client);
    } catch (err) {
      deps.logger.error({ err: err instanceof Error ? err.message : String(err) }, 'console failed');
      answer = problem('internal_error', 'the console failed to answer; retry shortly');
    }
    sendJson(res, answer, head);
    // One line per API call: never the key, the body or the query; failed sign-ins as warnings.
    const line = {
      api: API_NAMES.has(name) ? name : 'unknown',
      status: answer.status,
      reason: answer.reason ?? 'ok',
      keyId: answer.keyId,
      client,
      durUs: Math.round(Number(process.hrtime.bigint() - started) / 1000),
    };
    if (answer.status >= 400) deps.logger.warn(line, 'console');
    else deps.logger.info(line, 'console');
    return true;
  };
}

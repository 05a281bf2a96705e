/**
 * `modelgate doctor --base-url URL --client KIND [--model M]`: the console's "Check my setup" from
 * a terminal. It finds the gateway's console from the Base URL (GET .../console/api/info, no key),
 * signs the key in there (POST /console/api/access), runs the same doctor as the page
 * (console/doctor.ts runDoctor) and then, as docs/spec.md §4.1 rule 3 asks, sends one short request through
 * the gateway exactly where the client would: the model list, or with --model a one-line request to
 * the model.
 *
 * The key comes from MODELGATE_API_KEY, or a prompt without echo when stdin is a terminal; never
 * from an argument (it would sit in the shell history and the process list). It is sent only to
 * the gateway that answered as a modelgate console, and never printed.
 */
import { Command } from 'commander';
import { checkPastedKey } from '../check/extract-key';
import { HEADER } from '../contract/headers';
import { KEY_PREFIX } from '../contract/key-format';
import { printable } from '../contract/safe-text';
import type { Config } from '../config/load';
import { PROVIDERS } from '../providers/providers';
import type { ConsoleAccess } from '../console/access';
import { CLIENT_KINDS, clientKind, keyHeaderOf, modelSegment, type ClientKind } from '../console/client-kinds';
import { doctorKeyFromAccess, runDoctor, type DoctorKey, type DoctorReport } from '../console/doctor';
import { CliError, once, usageError } from './errors';
import type { CliRun } from './io';

/** The environment variable the key is read from. */
export const KEY_ENV = 'MODELGATE_API_KEY';
const TIMEOUT_MS = 15_000;

interface Info {
  readonly baseUrl: string;
  readonly baseConfigured: boolean;
  readonly altPrefix: string;
  readonly routes: Pick<Config['routes'], 'altPrefix' | 'bearerHeaders' | 'vendorHeaders' | 'queryKeyParams'>;
}

interface ShortRequest {
  readonly method: string;
  /** The URL without its query (a query is never printed: it could hold a key). */
  readonly url: string;
  readonly status: number;
  readonly reason?: string;
  readonly hint?: string;
  readonly error?: string;
}

/** Segments only an endpoint path or a version prefix has; stripped to find the gateway's root. */
const SPEC_SEGMENT = /^(v1|v1beta|chat|completions|responses|embeddings|messages|count_tokens|models)$|:/;

/** Where the gateway's root may be, most likely first: the Base URL without the spec's segments, then each parent. */
export function rootCandidates(base: URL): string[] {
  const segs = base.pathname.split('/').filter((s) => s !== '');
  while (segs.length > 0 && SPEC_SEGMENT.test(segs[segs.length - 1])) segs.pop();
  const out: string[] = [];
  for (let n = segs.length; n >= 0; n--) out.push(`${base.origin}${n === 0 ? '' : `/${segs.slice(0, n).join('/')}`}`);
  return out;
}

async function fetchJson(
  url: string,
  init: RequestInit = {},
): Promise<{ status: number; headers: Headers; data: unknown }> {
  const res = await fetch(url, { ...init, redirect: 'manual', signal: AbortSignal.timeout(TIMEOUT_MS) });
  const text = await res.text();
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    // not JSON: the caller goes by the status alone
    data = undefined;
  }
  return { status: res.status, headers: res.headers, data };
}

/** The first root that answers as a modelgate console. */
async function findConsole(base: URL): Promise<{ root: string; info: Info } | undefined> {
  for (const root of rootCandidates(base)) {
    try {
      const r = await fetchJson(`${root}/console/api/info`);
      const info = r.data as Info | undefined;
      if (r.status === 200 && typeof info?.altPrefix === 'string' && typeof info.baseUrl === 'string' && info.routes)
        return { root, info };
    } catch {
      // not this one (or not reachable): try the next
    }
  }
  return undefined;
}

/** Reads a line from a terminal without echoing it. */
function promptHidden(prompt: string): Promise<string> {
  const stdin = process.stdin;
  return new Promise((resolve, reject) => {
    process.stderr.write(prompt);
    let value = '';
    const done = (err?: Error): void => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (chunk: string): void => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n') return done();
        if (ch === '\u0003') return done(new CliError('cancelled'));
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else value += ch;
      }
    };
    stdin.setRawMode(true);
    stdin.setEncoding('utf8');
    stdin.on('data', onData);
    stdin.resume();
  });
}

async function readKey(run: CliRun): Promise<string> {
  const fromEnv = run.env[KEY_ENV];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  if (process.stdin.isTTY && run.env === process.env) return promptHidden('API key (not shown): ');
  throw usageError(
    `no key: set ${KEY_ENV} (or run in a terminal to be asked); the key is never taken from an argument`,
  );
}

/** Seed §4.1 rule 3: one short request, where the client sends it (its Base URL + the path it appends). */
async function sendShortRequest(
  baseUrl: string,
  kind: ClientKind,
  model: string | undefined,
  key: string,
  routes: Config['routes'],
): Promise<ShortRequest> {
  const headerName = keyHeaderOf(kind, routes);
  const headers: Record<string, string> = { [headerName]: headerName === 'authorization' ? `Bearer ${key}` : key };
  const client = PROVIDERS[kind.style].client;
  for (const [name, value] of client.extraHeaders) headers[name] = value;
  const method = model === undefined ? 'GET' : 'POST';
  const url =
    model === undefined ? baseUrl + kind.lists : baseUrl + kind.appends.replace('{model}', modelSegment(model));
  let body: string | undefined;
  if (model !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(client.probeBody(model));
  }
  const shown = printable(url.split('?')[0], 200);
  try {
    const r = await fetchJson(url, { method, headers, body });
    return {
      method,
      url: shown,
      status: r.status,
      reason: r.headers.get(HEADER.reason) ?? undefined,
      hint: r.headers.get(HEADER.hint) ?? undefined,
    };
  } catch (err) {
    return { method, url: shown, status: 0, error: err instanceof Error ? err.message : String(err) };
  }
}

const MARK = { pass: 'ok', fail: 'CHANGE', note: 'note', skip: 'later' } as const;

function renderText(
  report: DoctorReport,
  base: string,
  gateway: Info | undefined,
  request: ShortRequest | string,
): string {
  const out = [`modelgate doctor: ${report.clientKind.label}, Base URL ${printable(base, 200)}`];
  if (gateway) out.push(`gateway: ${gateway.baseUrl} (alternate prefix ${gateway.altPrefix})`);
  out.push('');
  const refWidth = Math.max(...report.steps.map((s) => s.ref.length));
  for (const s of report.steps) {
    out.push(`  ${MARK[s.outcome].padEnd(6)}  ${s.ref.padEnd(refWidth)}  ${s.title}`);
    if (s.outcome !== 'skip' && s.outcome !== 'pass')
      out.push(`  ${''.padEnd(6)}  ${''.padEnd(refWidth)}  ${s.detail}`);
    if (s.change) out.push(`  ${''.padEnd(6)}  ${''.padEnd(refWidth)}  change: ${s.change}`);
    if (s.gatewayAnswers)
      out.push(
        `  ${''.padEnd(6)}  ${''.padEnd(refWidth)}  the gateway answers this with ${s.gatewayAnswers.status} ${s.gatewayAnswers.reason}`,
      );
  }
  out.push(
    '',
    `expected: Base URL ${report.expected.baseUrl}; endpoint ${report.expected.endpoint}; header ${report.expected.header}`,
  );
  if (typeof request === 'object') {
    const answer =
      request.status === 0
        ? `no answer (${request.error})`
        : `${request.status}${request.reason ? ` ${request.reason}` : request.status < 300 ? ' OK' : ''}`;
    out.push(`one short request (§4.1 rule 3): ${request.method} ${request.url} -> ${answer}`);
    if (request.hint) out.push(`  hint: ${request.hint}`);
  } else out.push(`one short request (§4.1 rule 3): not sent (${request})`);
  out.push('', report.next);
  return out.join('\n') + '\n';
}

export function doctorCommand(run: CliRun): Command {
  return new Command('doctor')
    .description(
      "check a client's setup (Base URL, client kind, key, model) against the spec's rules, then send one short request through the gateway",
    )
    .option('--base-url <url>', 'the Base URL configured in the client (required)', once('--base-url'))
    .option(
      '--client <kind>',
      `the client kind (required): ${CLIENT_KINDS.map((k) => k.id).join(', ')}`,
      once('--client'),
    )
    .option(
      '--model <name>',
      'the model the client uses (checks the model too, and sends a one-token request to it)',
      once('--model'),
    )
    .option('--json', 'print the report and the short request as JSON')
    .addHelpText(
      'after',
      [
        '',
        `The key is read from ${KEY_ENV}, or asked for without echo when stdin is a terminal; never from an argument.`,
        "It is sent only to the gateway whose console answers at the Base URL's address, and never printed.",
        'Exit codes: 0 nothing to change and the short request succeeded; 1 a setting to change or the request failed; 2 the command line is wrong.',
      ].join('\n'),
    )
    .action(async (opts: { baseUrl?: string; client?: string; model?: string; json?: boolean }) => {
      if (opts.baseUrl === undefined) throw usageError('--base-url is required: the Base URL configured in the client');
      if (opts.client === undefined)
        throw usageError(`--client is required: one of ${CLIENT_KINDS.map((k) => k.id).join(', ')}`);
      const kind = clientKind(opts.client);
      if (!kind) throw usageError(`--client must be one of: ${CLIENT_KINDS.map((k) => k.id).join(', ')}`);
      const key = await readKey(run);
      const baseUrl = opts.baseUrl;
      let base: URL | undefined;
      try {
        base = new URL(baseUrl.trim());
      } catch {
        // not a URL: reported below as such
        base = undefined;
      }
      const found = base && /^https?:$/.test(base.protocol) ? await findConsole(base) : undefined;
      const routes = {
        altPrefix: found?.info.routes.altPrefix ?? '/alt',
        bearerHeaders: found?.info.routes.bearerHeaders ?? ['authorization', 'x-api-key'],
        vendorHeaders: found?.info.routes.vendorHeaders ?? ['x-vendor-api-key', 'x-goog-api-key'],
        queryKeyParams: found?.info.routes.queryKeyParams ?? ['key'],
        maxJsonDepth: 256,
      } as Config['routes'];

      // The key's shape is checked here first: a malformed key is not sent anywhere.
      let doctorKey: DoctorKey;
      const shape = checkPastedKey(key);
      if (!shape.ok) doctorKey = { ok: false, reason: shape.reason, hint: shape.hint };
      else if (!found)
        doctorKey = {
          ok: false,
          reason: 'key_unknown',
          hint: 'not checked: the key is sent only to a gateway whose console answers',
        };
      else {
        const r = await fetchJson(`${found.root}/console/api/access`, {
          method: 'POST',
          headers: { [HEADER.consoleKey]: encodeURIComponent(shape.key) },
        }).catch((err: Error) => {
          throw new CliError(`the console at ${found.root}/console/ did not answer: ${err.message}`);
        });
        const e = (r.data as { error?: { reason: string; hint: string } } | undefined)?.error;
        if (r.status === 200) doctorKey = doctorKeyFromAccess(r.data as ConsoleAccess);
        else if (e && r.status < 500 && r.status !== 429) doctorKey = { ok: false, reason: e.reason, hint: e.hint };
        else
          throw new CliError(
            `the console at ${found.root}/console/ answered ${r.status}${e ? `: ${e.hint} (${e.reason})` : ''}`,
          );
      }

      const gatewayBase = found?.info.baseUrl ?? (base ? base.origin : '{base_url}');
      const model = opts.model;
      const report = runDoctor(
        { baseUrl, clientKind: kind.id, model },
        {
          gatewayBase,
          baseConfigured: found?.info.baseConfigured ?? false,
          routes,
          key: doctorKey,
          reachable: base ? found !== undefined : undefined,
          modelIsKey: model !== undefined && (model === key || model.includes(KEY_PREFIX)),
        },
      );
      // Rule 3: one short request through the gateway, where the client would send it; only to a
      // gateway that answered as a modelgate console, and only with a key of the right shape.
      const request = !found
        ? 'no modelgate console answered at this address, so the key stays here'
        : !shape.ok
          ? 'the key is malformed: fix it first'
          : await sendShortRequest(baseUrl.trim(), kind, model, shape.key, routes);

      if (opts.json)
        run.stdout(
          `${JSON.stringify({ report, request: typeof request === 'object' ? request : { sent: false, why: request } }, null, 2)}\n`,
        );
      else run.stdout(renderText(report, baseUrl, found?.info, request));
      run.exitCode =
        report.failing === null && typeof request === 'object' && request.status >= 200 && request.status < 300 ? 0 : 1;
    });
}

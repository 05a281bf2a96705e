/**
 * The one log line per decision that ops read (pino JSON). It carries the key's id, never the key:
 * the path is logged without its query, and client-supplied strings (path, model) pass through
 * `printable` (safe-text.ts), so a key pasted into the wrong place still never reaches a log line;
 * a model that is somebody's key (decide.ts checks) is not logged at all, nor is the path holding it.
 */
import type { Decision } from './decision';
import { statusOf } from '../contract/reasons';
import type { RequestView } from './request-view';
import { lenientDecode, printable, printableRequestId } from '../contract/safe-text';

/**
 * The path as logged (and as Envoy's access log shows it, through the CheckResponse's metadata).
 * A classified route's path is fixed words plus, at most, a model: that one is percent-decoded
 * first, so that `safe-text.ts` sees (and hides) a key spelled with escapes. An unclassified path
 * is free text a client may have pasted a key into, so its long segments (where keys live; short
 * ones stay readable for typos) are logged as their length only.
 */
export function logPath(d: Decision, path: string): string {
  if (d.modelIsKey) return '[redacted: the path holds a key]';
  const kind = d.route.kind;
  if ((kind === 'protocol' || kind === 'models') && d.route.model === undefined) {
    // A fixed endpoint (a small set, as in routes.ts): its text is computed once.
    let text = FIXED_PATHS.get(path);
    if (text === undefined) {
      text = printable(path, 256);
      if (FIXED_PATHS.size < 1024) FIXED_PATHS.set(path, text);
    }
    return text;
  }
  if (kind !== 'unknown' && kind !== 'wrong_method') return printable(lenientDecode(path), 256);
  return printable(path, 256)
    .split('/')
    .map((seg) => (seg.length >= LONG_SEGMENT ? `[${seg.length} chars]` : seg))
    .join('/');
}

const LONG_SEGMENT = 16;
const FIXED_PATHS = new Map<string, string>();

/**
 * A decision line's fields, in the order they are written. The fields of the decision's shape come
 * first, the two that differ on every Check (requestId, durUs) last: the text of the shape is the
 * same for every Check with the same answer, so the Check path writes it once (shapeText).
 */
export interface DecisionLine {
  decision: 'allow' | 'deny';
  status: number;
  reason: string;
  style: string;
  method: string;
  path: string;
  keyId?: string;
  group?: string;
  model?: string;
  hint?: string;
  stale?: true;
  /** The client's address as Envoy determined it (clientAddress). */
  client?: string;
  /** The User-Agent header, bounded, printable and key-redacted (loggedUserAgent). */
  userAgent?: string;
  requestId: string;
  durUs: number;
}

/** The log line for a decision: a model of the key's group as is, another requested model bounded and redacted. */
export function decisionLine(d: Decision, view: RequestView, durUs: number, trustedProxyHops = 0): DecisionLine {
  const line = decisionShape(d, view) as DecisionLine;
  const client = loggedClient(clientAddress(view, trustedProxyHops));
  const userAgent = loggedUserAgent(view.headers['user-agent']);
  if (client !== undefined) line.client = client;
  if (userAgent !== undefined) line.userAgent = userAgent;
  line.requestId = printableRequestId(view.requestId);
  line.durUs = durUs;
  return line;
}

/**
 * The model as logged, here and in Envoy's access log (write-response.ts metadata): a model of the
 * key's group as is, another requested model bounded and redacted, none when it is a key.
 */
export function loggedModel(d: Decision): string | undefined {
  return d.model === undefined || d.modelIsKey ? undefined : d.modelKnown ? d.model : printable(d.model, 128);
}

/**
 * What Envoy sends as the source address: an IP literal, kept as it is; anything else (a pipe, a name) as client text.
 */
const IP_TEXT = /^[0-9A-Fa-f:.]{2,45}$/;

/**
 * The client's address as Envoy determined it (what its access log's `client` shows). Without
 * trusted hops it is the connection's peer: the CheckRequest's source address (x-forwarded-for's
 * last entry is not: for a loopback peer Envoy appends its own local address there). With
 * `gateway.trustedProxyHops` N (xff_num_trusted_hops) it is the x-forwarded-for entry N from the
 * right of the header Envoy passes on, its own entry appended; with fewer entries, the peer.
 */
export function clientAddress(view: RequestView, trustedProxyHops: number): string | undefined {
  const xff = trustedProxyHops > 0 ? view.headers['x-forwarded-for'] : undefined;
  if (xff !== undefined && xff !== '') {
    const hops = xff.split(',');
    const i = hops.length - 1 - trustedProxyHops;
    if (i >= 0) return hops[i].trim();
  }
  return view.client;
}

/** The client address as logged. */
export function loggedClient(client: string | undefined): string | undefined {
  return client === undefined || client === '' ? undefined : IP_TEXT.test(client) ? client : printable(client, 64);
}

/**
 * The User-Agent as logged: percent-decoded first (so a key spelled with escapes is found), then
 * printable, key-redacted and cut at 128 characters (safe-text.ts). Agents send a handful of
 * values, so the text of the last ones is kept (bounded) rather than redone per Check.
 */
export function loggedUserAgent(ua: string | undefined): string | undefined {
  if (ua === undefined || ua === '') return undefined;
  let text = USER_AGENTS.get(ua);
  if (text === undefined) {
    text = printable(lenientDecode(ua), 128);
    if (USER_AGENTS.size >= 256) USER_AGENTS.clear();
    if (ua.length <= 512) USER_AGENTS.set(ua, text);
  }
  return text;
}

const USER_AGENTS = new Map<string, string>();

/** The fields of a decision line but those of the request itself (client, user agent, request id, duration). */
export function decisionShape(d: Decision, view: RequestView): Omit<DecisionLine, PerRequest> {
  const model = loggedModel(d);
  const line: Omit<DecisionLine, PerRequest> = {
    decision: d.allowed ? 'allow' : 'deny',
    status: statusOf(d.reason),
    reason: d.reason,
    style: d.route.style,
    method: printable(view.method, 16),
    path: logPath(d, view.path),
  };
  if (d.keyId !== undefined) line.keyId = d.keyId;
  if (d.group !== undefined) line.group = d.group;
  if (model !== undefined) line.model = model;
  if (!d.allowed) line.hint = d.hint;
  if (d.stale) line.stale = true;
  return line;
}

/** The fields that differ on every Check: written after the shape, never cached with it. */
type PerRequest = 'client' | 'userAgent' | 'requestId' | 'durUs';

const str = JSON.stringify;

/**
 * The middle of a decision line: the logger's bindings and the shape's fields, between the time and
 * the request id (`,"svc":"modelgate","decision":...,"model":"m",`). `bindings` is the logger's
 * base, already serialised (e.g. `"svc":"modelgate"`).
 */
export function shapeText(l: Omit<DecisionLine, PerRequest>, bindings: string): string {
  let out = `,${bindings},"decision":"${l.decision}","status":${l.status},"reason":"${l.reason}","style":"${l.style}","method":${str(l.method)},"path":${str(l.path)}`;
  if (l.keyId !== undefined) out += `,"keyId":${str(l.keyId)}`;
  if (l.group !== undefined) out += `,"group":${str(l.group)}`;
  if (l.model !== undefined) out += `,"model":${str(l.model)}`;
  if (l.hint !== undefined) out += `,"hint":${str(l.hint)}`;
  if (l.stale) out += ',"stale":true';
  return `${out},`;
}

/**
 * A whole line from its shape's text: what pino writes for the same fields (pino's line format).
 * `client` and `userAgent` are as logged (loggedClient, loggedUserAgent), undefined when absent.
 */
export function lineFromShape(
  shape: string,
  time: number,
  client: string | undefined,
  userAgent: string | undefined,
  requestId: string,
  durUs: number,
): string {
  const c = client === undefined ? '' : `"client":${str(client)},`;
  const ua = userAgent === undefined ? '' : `"userAgent":${str(userAgent)},`;
  return `{"level":30,"time":${time}${shape}${c}${ua}"requestId":${str(requestId)},"durUs":${durUs},"msg":"decision"}\n`;
}

/**
 * A decision line in pino's own line format (`level`, `time`, the logger's bindings, the fields,
 * `msg`), written by a fixed-shape serialiser: on the Check path it costs a fraction of pino's
 * generic one.
 */
export function formatDecisionLine(l: DecisionLine, time: number, bindings: string): string {
  return lineFromShape(shapeText(l, bindings), time, l.client, l.userAgent, l.requestId, l.durUs);
}

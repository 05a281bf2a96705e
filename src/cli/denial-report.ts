/**
 * "Who was denied, and why": the denials in modelgate's decision lines and in Envoy's access log,
 * one per request, grouped. modelgate logs every denial it makes (reason, key id, group, client
 * address, user agent); Envoy's access log adds the answers it gives itself (`reply_reason`: 503
 * authz_unavailable while modelgate cannot be reached, the 404/405 routes, 413, the global rate
 * limit engine's 429s). A request in both logs is counted once, on its request id. It reads logs,
 * so it works the same on either store, and nothing about denials is stored (a key scan must not
 * become writes to the store).
 */

/** One denied request, from either log or both. */
export interface Denial {
  /** Epoch milliseconds. */
  readonly time: number;
  readonly requestId: string;
  readonly reason: string;
  readonly status: number;
  readonly keyId?: string;
  readonly group?: string;
  readonly client?: string;
  readonly userAgent?: string;
  /** Which logs saw it: modelgate, envoy, or both. */
  readonly seenBy: 'modelgate' | 'envoy' | 'both';
}

export const DENIAL_GROUPINGS = ['reason', 'key', 'group', 'client', 'agent'] as const;
export type DenialGrouping = (typeof DENIAL_GROUPINGS)[number];

type Json = Record<string, unknown>;
const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' && v !== '-' ? v : undefined);

/**
 * A log line as a denial, if it is one (a modelgate decision line that denies, or an Envoy access-log line with a reply
 * reason).
 */
export function denialOf(line: string): (Omit<Denial, 'seenBy'> & { from: 'modelgate' | 'envoy' }) | undefined {
  if (!line.startsWith('{')) return undefined;
  let j: Json;
  try {
    j = JSON.parse(line) as Json;
  } catch {
    // not a JSON line: not a decision line either
    return undefined;
  }
  if (j.msg === 'decision' && j.decision === 'deny' && typeof j.reason === 'string') {
    return {
      from: 'modelgate',
      time: typeof j.time === 'number' ? j.time : 0,
      requestId: text(j.requestId) ?? '',
      reason: j.reason,
      status: typeof j.status === 'number' ? j.status : 0,
      keyId: text(j.keyId),
      group: text(j.group),
      client: text(j.client),
      userAgent: text(j.userAgent),
    };
  }
  const reason = text(j.reply_reason);
  const status = Number(j.status);
  if (reason !== undefined && 'request_id' in j && status >= 400) {
    return {
      // The identity Envoy minted on modelgate's routes (the decision line's requestId), else Envoy's x-request-id.
      from: 'envoy',
      time: Date.parse(String(j.time)) || 0,
      requestId: (j.request !== '-' ? text(j.request) : undefined) ?? text(j.request_id) ?? '',
      reason,
      status,
      keyId: text(j.key_id),
      group: text(j.group),
      client: text(j.client),
    };
  }
  return undefined;
}

/** The denials of some log lines since a time, one per request id (lines without one each count). */
export function collectDenials(lines: Iterable<string>, since: number): Denial[] {
  const byId = new Map<string, Denial>();
  const out: Denial[] = [];
  for (const line of lines) {
    const d = denialOf(line);
    if (!d || d.time < since) continue;
    const { from, ...rest } = d;
    if (rest.requestId === '') {
      out.push({ ...rest, seenBy: from });
      continue;
    }
    const prev = byId.get(rest.requestId);
    if (!prev) {
      byId.set(rest.requestId, { ...rest, seenBy: from });
      continue;
    }
    // Both logs: modelgate's fields win (its reason is the decision's; Envoy's may be a later answer of its own, e.g.
    // 429).
    const [m, e] = from === 'modelgate' ? [rest, prev] : [prev, rest];
    byId.set(rest.requestId, {
      time: Math.min(prev.time, rest.time),
      requestId: rest.requestId,
      reason: m.reason,
      status: m.status,
      keyId: m.keyId ?? e.keyId,
      group: m.group ?? e.group,
      client: m.client ?? e.client,
      userAgent: m.userAgent ?? e.userAgent,
      seenBy: prev.seenBy === from ? from : 'both',
    });
  }
  return [...byId.values(), ...out].sort((a, b) => a.time - b.time);
}

export interface DenialGroup {
  readonly value: string;
  readonly denied: number;
  readonly reasons: Readonly<Record<string, number>>;
  readonly keys: number;
  readonly clients: number;
  /** The most frequent client addresses, at most 3. */
  readonly topClients: string[];
  /** Epoch milliseconds of the latest. */
  readonly last: number;
}

const keyOf: Record<DenialGrouping, (d: Denial) => string> = {
  reason: (d) => d.reason,
  key: (d) => d.keyId ?? '(no key)',
  group: (d) => d.group ?? '(no group)',
  client: (d) => d.client ?? '(unknown)',
  agent: (d) => d.userAgent ?? '(none)',
};

/** Denials grouped, most first. */
export function groupDenials(denials: readonly Denial[], by: DenialGrouping): DenialGroup[] {
  const groups = new Map<
    string,
    { denied: number; reasons: Record<string, number>; keys: Set<string>; clients: Map<string, number>; last: number }
  >();
  for (const d of denials) {
    const k = keyOf[by](d);
    let g = groups.get(k);
    if (!g) groups.set(k, (g = { denied: 0, reasons: {}, keys: new Set(), clients: new Map(), last: 0 }));
    g.denied++;
    g.reasons[d.reason] = (g.reasons[d.reason] ?? 0) + 1;
    if (d.keyId) g.keys.add(d.keyId);
    if (d.client) g.clients.set(d.client, (g.clients.get(d.client) ?? 0) + 1);
    g.last = Math.max(g.last, d.time);
  }
  return [...groups]
    .map(([value, g]) => ({
      value,
      denied: g.denied,
      reasons: g.reasons,
      keys: g.keys.size,
      clients: g.clients.size,
      topClients: [...g.clients]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 3)
        .map(([c, n]) => `${c} (${n})`),
      last: g.last,
    }))
    .sort((a, b) => b.denied - a.denied || a.value.localeCompare(b.value));
}

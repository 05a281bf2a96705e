/**
 * Rate limits (docs/rate-limits.md): which limits apply to a request, and how they
 * travel. One source for everything that must agree: the descriptors the Check puts in Envoy's
 * dynamic metadata, the route actions the Envoy bundle reads them with (envoy/render-ratelimit.ts),
 * the token charges after each response (charges.ts), and the hints and headers of a 429.
 *
 * A key's limits: its group's (`groups.G.limits`, each key counted on its own), each one the key
 * sets itself replacing the group's; per model of the group (`models[].limits`), further limits
 * for the key on that model. Requests and tokens per minute and day are fixed windows aligned to
 * the epoch (a minute starts at :00, a day at 00:00 UTC), as envoyproxy/ratelimit counts them; the
 * embedded engine counts the same windows.
 *
 * Pure: records and a clock in, plain data out.
 */
import type { GroupRecord, KeyRecord, Limits, ModelRecord } from '../store/store';

/** The four counted limits and their windows. */
export const WINDOWED = {
  rpm: { what: 'requests', seconds: 60, unit: 'MINUTE' },
  rpd: { what: 'requests', seconds: 86_400, unit: 'DAY' },
  tpm: { what: 'tokens', seconds: 60, unit: 'MINUTE' },
  tpd: { what: 'tokens', seconds: 86_400, unit: 'DAY' },
} as const;
export type WindowedLimit = keyof typeof WINDOWED;

/** Envoy's rate limit filters, one per kind (render-ratelimit.ts): tokens are checked first, then requests counted. */
export const KINDS = ['tokens', 'requests'] as const;
export type LimitKind = (typeof KINDS)[number];

/**
 * The descriptor slots of each kind: key-wide, and per model (`_m`). Their names are metadata fields and descriptor
 * values.
 */
export const SLOTS = {
  tokens: ['tpm', 'tpd', 'tpm_m', 'tpd_m'],
  requests: ['rpm', 'rpd', 'rpm_m', 'rpd_m'],
} as const;
export type Slot = (typeof SLOTS)[LimitKind][number];

/** The Envoy dynamic metadata field (ext_authz namespace) holding a request's limits. */
export const METADATA_FIELD = 'rl';

/** Descriptor entry keys (the domain is modelgate's own: rateLimits.domain). */
export const ENTRY = { limit: 'limit', key: 'key', model: 'model' } as const;

/** The limits that apply to one key (and model), after overrides. */
export interface EffectiveLimits {
  /** Key-wide: the key's own, else its group's. */
  readonly key: Limits;
  /** For the requested model (model limits of the group), if it has any. */
  readonly model: Limits | null;
}

/** The key-wide limits of a key in its group: each set on the key replaces the group's. */
export function keyLimits(key: KeyRecord, group: GroupRecord | undefined): Limits {
  const g = group?.limits ?? {};
  const k = key.limits ?? {};
  return {
    rpm: k.rpm ?? g.rpm ?? null,
    tpm: k.tpm ?? g.tpm ?? null,
    rpd: k.rpd ?? g.rpd ?? null,
    tpd: k.tpd ?? g.tpd ?? null,
    inFlight: k.inFlight ?? g.inFlight ?? null,
  };
}

export function effectiveLimits(
  key: KeyRecord,
  group: GroupRecord | undefined,
  model: ModelRecord | undefined,
): EffectiveLimits {
  const m = model?.limits;
  return { key: keyLimits(key, group), model: m && (m.rpm || m.tpm || m.rpd || m.tpd) ? m : null };
}

/** Whether any counted limit applies (the rate limit filters then have something to send). */
export function hasWindowed(l: EffectiveLimits): boolean {
  return Boolean(l.key.rpm || l.key.tpm || l.key.rpd || l.key.tpd || l.model);
}

/** The limit behind a slot, if set. */
export function slotLimit(l: EffectiveLimits, slot: Slot): number | null {
  const perModel = slot.endsWith('_m');
  const name = (perModel ? slot.slice(0, 3) : slot) as WindowedLimit;
  const v = (perModel ? l.model : l.key)?.[name];
  return typeof v === 'number' && v > 0 ? v : null;
}

export function slotName(slot: Slot): WindowedLimit {
  return slot.slice(0, 3) as WindowedLimit;
}

/** Seconds until the window of `seconds` that holds `nowMs` ends (1..seconds). */
export function resetSeconds(nowMs: number, seconds: number): number {
  const now = Math.floor(nowMs / 1000);
  return seconds - (now % seconds);
}

/** When that window ends, as RFC 3339 (Anthropic's *-reset headers). */
export function resetAt(nowMs: number, seconds: number): string {
  const now = Math.floor(nowMs / 1000);
  return new Date((now - (now % seconds) + seconds) * 1000).toISOString().replace('.000Z', 'Z');
}

/**
 * The limit a descriptor carries. A token slot is only checked at request time (hits 0: the
 * service adds nothing) and refuses once the tokens used reach the limit: the service answers
 * OVER_LIMIT when the count is above the limit it is given, so it is given one less.
 */
export function carriedLimit(slot: Slot, limit: number): number {
  return WINDOWED[slotName(slot)].what === 'tokens' ? limit - 1 : limit;
}

/** Text of one limit: "3 requests per minute", "2,000 tokens per day". */
export function limitText(name: WindowedLimit, n: number, model?: string): string {
  const w = WINDOWED[name];
  return `${n.toLocaleString('en-US')} ${w.what} per ${w.seconds === 60 ? 'minute' : 'day'}${model === undefined ? '' : ` on ${model}`}`;
}

/** What a 429 of one kind says: the limits of that kind, the first window's reset. */
export interface KindAnswer {
  /** "the key \"k\" may use 3 requests per minute and 100 per day on gpt-4o". */
  readonly hint: string;
  /** The limit shown in x-ratelimit-limit-* / anthropic-ratelimit-*-limit (the shortest window's). */
  readonly limit: number;
  /** Seconds until that window resets. */
  readonly resetSeconds: number;
  /** The same, as RFC 3339. */
  readonly resetAt: string;
}

/** The 429 texts of a kind, or null when the key has no limit of that kind. */
export function kindAnswer(
  kind: LimitKind,
  l: EffectiveLimits,
  keyId: string,
  model: string | undefined,
  nowMs: number,
): KindAnswer | null {
  const parts: string[] = [];
  let shortest: { limit: number; seconds: number } | undefined;
  for (const slot of SLOTS[kind]) {
    const n = slotLimit(l, slot);
    if (n === null) continue;
    const name = slotName(slot);
    parts.push(limitText(name, n, slot.endsWith('_m') ? model : undefined));
    const seconds = WINDOWED[name].seconds;
    if (!shortest || seconds < shortest.seconds) shortest = { limit: n, seconds };
  }
  if (!shortest) return null;
  const list = parts.length === 1 ? parts[0] : `${parts.slice(0, -1).join(', ')} and ${parts[parts.length - 1]}`;
  return {
    hint: `the key ${JSON.stringify(keyId)} may use ${list}`,
    limit: shortest.limit,
    resetSeconds: resetSeconds(nowMs, shortest.seconds),
    resetAt: resetAt(nowMs, shortest.seconds),
  };
}

/** The descriptor entries of a slot for a key (and model): what Envoy sends and what a token charge names. */
export function descriptorEntries(
  slot: Slot,
  keyId: string,
  model: string | undefined,
): Array<{ key: string; value: string }> {
  const entries: Array<{ key: string; value: string }> = [
    { key: ENTRY.limit, value: slot },
    { key: ENTRY.key, value: keyId },
  ];
  if (slot.endsWith('_m') && model !== undefined) entries.push({ key: ENTRY.model, value: model });
  return entries;
}

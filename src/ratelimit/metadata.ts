/**
 * What an allowed request carries to Envoy's rate limit filters: one Struct in ext_authz's dynamic
 * metadata (field METADATA_FIELD), read by the route actions of envoy/render-ratelimit.ts.
 *
 *   <slot>: {requests_per_unit, unit, key[, model]}   one per limit that applies (a descriptor:
 *     Envoy sends it only when `key` is there, with the limit it carries: Envoy's per-descriptor
 *     override, so a limit changed in the store applies with the next Check)
 *   <kind>_hint, <kind>_limit, <kind>_reset, <kind>_reset_at   what a 429 of that kind says
 *     (reason catalogue: rate_limited, tokens_rate_limited), computed for this second
 *
 * The values depend on the clock (resets), so a CheckResponse that carries them is encoded for
 * the second it answers (check/response-encoder.ts keys it by the whole metadata; `stamp` is that second).
 */
import {
  KINDS,
  SLOTS,
  WINDOWED,
  carriedLimit,
  hasWindowed,
  kindAnswer,
  slotLimit,
  slotName,
  type EffectiveLimits,
} from './limits';

type Value = { numberValue: number } | { stringValue: string } | { structValue: { fields: Record<string, Value> } };

/** The rate limit part of an allowed decision. */
export interface RateLimitMetadata {
  /** The Struct's fields (proto-loader's JSON form of google.protobuf.Struct). */
  readonly fields: Record<string, Value>;
  /** The epoch second the resets were computed for. */
  readonly stamp: number;
}

const str = (s: string): Value => ({ stringValue: s });

/** The metadata for a key's limits on a model, at `nowMs`; undefined when no counted limit applies. */
export function rateLimitMetadata(
  limits: EffectiveLimits,
  keyId: string,
  model: string | undefined,
  nowMs: number,
): RateLimitMetadata | undefined {
  if (!hasWindowed(limits)) return undefined;
  const fields: Record<string, Value> = {};
  for (const kind of KINDS) {
    for (const slot of SLOTS[kind]) {
      const n = slotLimit(limits, slot);
      if (n === null || (slot.endsWith('_m') && model === undefined)) continue;
      const d: Record<string, Value> = {
        requests_per_unit: { numberValue: carriedLimit(slot, n) },
        unit: str(WINDOWED[slotName(slot)].unit),
        key: str(keyId),
      };
      if (slot.endsWith('_m')) d.model = str(model as string);
      fields[slot] = { structValue: { fields: d } };
    }
    const a = kindAnswer(kind, limits, keyId, model, nowMs);
    if (a) {
      fields[`${kind}_hint`] = str(a.hint);
      fields[`${kind}_limit`] = str(String(a.limit));
      fields[`${kind}_reset`] = str(String(a.resetSeconds));
      fields[`${kind}_reset_at`] = str(a.resetAt);
    }
  }
  return { fields, stamp: Math.floor(nowMs / 1000) };
}

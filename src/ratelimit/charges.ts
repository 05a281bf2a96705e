/**
 * Token charges (docs/rate-limits.md): after each metered response, the tokens it used (input, cached
 * included, plus output, as the meter read them) are added to the key's token windows in the rate
 * limit engine, so that the token check of the key's next request (Envoy's tokens filter, which
 * adds nothing itself) sees them. One RateLimitRequest per response, one descriptor per token limit
 * that applies, each with the response's tokens as its hits and the limit it carries (the service
 * counts only descriptors that carry a limit; the unit picks the window).
 *
 * Why the meter charges, rather than Envoy's `hits_addend` applied at stream end: Envoy would need
 * the token count in its dynamic metadata when the stream ends, which only a filter in the
 * response's path can set; the meter reads responses beside the path (Envoy's access log, after the
 * response has gone), never holding a byte (docs/rate-limits.md).
 */
import type { RateLimitEngine } from './embedded-engine';
import { SLOTS, WINDOWED, carriedLimit, descriptorEntries, slotLimit, slotName, type EffectiveLimits } from './limits';
import { UNIT, type Descriptor } from './rls-codec';

export interface TokenUse {
  readonly keyId: string;
  readonly group: string;
  readonly model: string;
  readonly tokens: number;
}

export interface ChargeDeps {
  readonly engine: RateLimitEngine;
  readonly domain: () => string;
  /** The limits of a key (by id) on a model, as the Check would find them; null: none or unknown. */
  readonly limits: (keyId: string, group: string, model: string) => Promise<EffectiveLimits | null>;
}

/** The descriptors of a charge: one per token limit that applies. */
export function chargeDescriptors(limits: EffectiveLimits, use: TokenUse): Descriptor[] {
  const out: Descriptor[] = [];
  for (const slot of SLOTS.tokens) {
    const n = slotLimit(limits, slot);
    if (n === null) continue;
    out.push({
      entries: descriptorEntries(slot, use.keyId, use.model),
      limit: { requestsPerUnit: carriedLimit(slot, n), unit: UNIT[WINDOWED[slotName(slot)].unit] },
      hitsAddend: use.tokens,
    });
  }
  return out;
}

/**
 * Charges one response's tokens; resolves to the descriptors charged (none: nothing to charge). Rejects when the engine
 * failed.
 */
export async function chargeTokens(deps: ChargeDeps, use: TokenUse): Promise<number> {
  if (!(use.tokens > 0)) return 0;
  const limits = await deps.limits(use.keyId, use.group, use.model);
  if (!limits) return 0;
  const descriptors = chargeDescriptors(limits, use);
  if (descriptors.length === 0) return 0;
  await deps.engine.shouldRateLimit({ domain: deps.domain(), descriptors, hitsAddend: 0 });
  return descriptors.length;
}

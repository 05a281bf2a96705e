/**
 * What is left of a key's key-wide rate limit windows (the console's My access): the engine is
 * asked about each of them without counting (hits 0), with the limits they carry on requests.
 */
import type { RateLimitEngine } from './embedded-engine';
import { WINDOWED, carriedLimit, descriptorEntries, type EffectiveLimits, type WindowedLimit } from './limits';
import { CODE, UNIT } from './rls-codec';

/** Remaining requests or tokens per key-wide limit (rpm, tpm, rpd, tpd that apply); null when none applies. */
export async function limitsLeft(
  engine: RateLimitEngine,
  domain: string,
  limits: EffectiveLimits,
  keyId: string,
): Promise<Record<string, number> | null> {
  const names = (['rpm', 'tpm', 'rpd', 'tpd'] as WindowedLimit[]).filter(
    (n) => typeof limits.key[n] === 'number' && (limits.key[n] as number) > 0,
  );
  if (names.length === 0) return null;
  const res = await engine.shouldRateLimit({
    domain,
    hitsAddend: 0,
    descriptors: names.map((n) => ({
      entries: descriptorEntries(n, keyId, undefined),
      limit: { requestsPerUnit: carriedLimit(n, limits.key[n] as number), unit: UNIT[WINDOWED[n].unit] },
      hitsAddend: 0,
    })),
  });
  const out: Record<string, number> = {};
  names.forEach((n, i) => {
    const s = res.statuses[i];
    // A token window carries its limit less one (limits.ts carriedLimit): while it is not over,
    // what is left is one more than the engine says (99 of 100 tokens used: 1 left, remaining 0).
    const left = !s || s.code === CODE.OVER_LIMIT ? 0 : s.remaining + (WINDOWED[n].what === 'tokens' ? 1 : 0);
    out[n] = Math.min(left, limits.key[n] as number);
  });
  return out;
}

/** A key's limits after overrides, and what a request carries to Envoy's rate limit filters (docs/rate-limits.md). */
import { describe, expect, it } from 'vitest';
import { effectiveLimits, resetAt, resetSeconds } from '../../src/ratelimit/limits';
import { rateLimitMetadata } from '../../src/ratelimit/metadata';
import type { GroupRecord, KeyRecord, ModelRecord } from '../../src/store/store';

const key = (limits?: KeyRecord['limits']): KeyRecord => ({
  id: 'k1',
  sha256: 'x',
  group: 'g',
  balance: null,
  disabled: false,
  expiresAt: null,
  ...(limits ? { limits } : {}),
});
const model: ModelRecord = { name: 'o3', protocols: null, available: true, limits: { rpm: 2 } };
const group: GroupRecord = {
  name: 'g',
  available: true,
  models: new Map([['o3', model]]),
  limits: { rpm: 60, tpm: 1000, inFlight: 4 },
};

describe('effective limits', () => {
  it("takes each of the key's own limits over its group's, one by one, and the model's on top", () => {
    expect(effectiveLimits(key({ rpm: 5 }), group, model)).toEqual({
      key: { rpm: 5, tpm: 1000, rpd: null, tpd: null, inFlight: 4 },
      model: { rpm: 2 },
    });
    expect(effectiveLimits(key(), undefined, undefined)).toEqual({
      key: { rpm: null, tpm: null, rpd: null, tpd: null, inFlight: null },
      model: null,
    });
  });

  it('computes the reset of epoch-aligned windows', () => {
    const t = Date.UTC(2026, 10, 25, 21, 28, 4, 500);
    expect(resetSeconds(t, 60)).toBe(56);
    expect(resetAt(t, 60)).toBe('2026-11-25T21:29:00Z');
    expect(resetAt(t, 86_400)).toBe('2026-11-26T00:00:00Z');
  });
});

describe('the metadata an allowed request carries', () => {
  it('holds one descriptor per limit (tokens one less, to refuse once reached) and the texts of each kind of 429', () => {
    const m = rateLimitMetadata(
      effectiveLimits(key({ rpm: 5 }), group, model),
      'k1',
      'o3',
      Date.UTC(2026, 0, 1, 0, 0, 20),
    )!;
    expect(m.stamp).toBe(Date.UTC(2026, 0, 1, 0, 0, 20) / 1000);
    expect(Object.keys(m.fields).sort()).toEqual(
      [
        'requests_hint',
        'requests_limit',
        'requests_reset',
        'requests_reset_at',
        'rpm',
        'rpm_m',
        'tokens_hint',
        'tokens_limit',
        'tokens_reset',
        'tokens_reset_at',
        'tpm',
      ].sort(),
    );
    expect(m.fields.tpm).toEqual({
      structValue: {
        fields: {
          requests_per_unit: { numberValue: 999 },
          unit: { stringValue: 'MINUTE' },
          key: { stringValue: 'k1' },
        },
      },
    });
    expect(m.fields.rpm_m).toEqual({
      structValue: {
        fields: {
          requests_per_unit: { numberValue: 2 },
          unit: { stringValue: 'MINUTE' },
          key: { stringValue: 'k1' },
          model: { stringValue: 'o3' },
        },
      },
    });
    expect(m.fields.requests_hint).toEqual({
      stringValue: 'the key "k1" may use 5 requests per minute and 2 requests per minute on o3',
    });
    expect(m.fields.tokens_reset).toEqual({ stringValue: '40' });
  });

  it('is absent for a key with no counted limit (inFlight alone is decided by the Check)', () => {
    expect(
      rateLimitMetadata(effectiveLimits(key({ inFlight: 2 }), undefined, undefined), 'k1', 'o3', 0),
    ).toBeUndefined();
  });
});

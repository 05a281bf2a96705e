/**
 * The two kinds of Decision: a later stage turning an allow down keeps who asked and drops what only
 * an allow carries (balance, budget, the meter's and the rate limits' annotations).
 */
import { expect, test } from 'vitest';
import { denyAllowed, namesModel, type AllowedDecision } from '../../src/check/decision';
import { classify } from '../../src/check/routes';

const allowed: AllowedDecision = {
  allowed: true,
  reason: 'allowed',
  hint: '',
  route: classify('POST', '/v1/chat/completions', '/alt', false),
  keyId: 'alice',
  keySha256: 'sha-alice',
  group: 'basic',
  model: 'gpt-4o-mini',
  modelKnown: true,
  stale: true,
  balance: 5,
  inFlightLimit: 2,
  meterMarks: { maxInput: 10 },
  removeQuery: ['key'],
};

test('denyAllowed keeps the key, group, model and staleness, and nothing only an allow carries', () => {
  expect(denyAllowed(allowed, 'store_unavailable', 'h')).toEqual({
    allowed: false,
    reason: 'store_unavailable',
    hint: 'h',
    route: allowed.route,
    keyId: 'alice',
    group: 'basic',
    model: 'gpt-4o-mini',
    modelKnown: true,
    stale: true,
  });
});

test('namesModel tells a protocol allow (with its model) from the model list (without one)', () => {
  expect(namesModel(allowed)).toBe(true);
  const list: AllowedDecision = {
    ...allowed,
    route: classify('GET', '/v1/models', '/alt', false),
    model: undefined,
    modelKnown: undefined,
  };
  expect(namesModel(list)).toBe(false);
});

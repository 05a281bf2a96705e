/**
 * x-should-retry and retry-after follow the status alone (src/contract/retry-advice.ts): every
 * reason of the catalogue gets the advice its status implies, so a client stops at once on what a
 * retry cannot fix and waits a second on what it can.
 */
import { expect, test } from 'vitest';
import { REASONS } from '../../src/contract/reasons';
import { retryable, retryHeaders, SHOULD_RETRY_HEADER } from '../../src/contract/retry-advice';

test.each(Object.entries(REASONS).filter(([r]) => r !== 'allowed'))(
  '%s (%o): the advice its status implies',
  (_reason, { status }) => {
    const headers = Object.fromEntries(retryHeaders(status));
    if ([429, 503, 504].includes(status)) {
      expect(headers).toEqual({ [SHOULD_RETRY_HEADER]: 'true', 'retry-after': '1' });
    } else {
      expect(status).toBeGreaterThanOrEqual(400);
      expect(status).toBeLessThan(500);
      expect(headers).toEqual({ [SHOULD_RETRY_HEADER]: 'false' });
    }
  },
);

test('a denial may name its own wait, in whole seconds', () => {
  expect(retryHeaders(429, 12.2)).toEqual([
    ['x-should-retry', 'true'],
    ['retry-after', '13'],
  ]);
  expect(retryable(400)).toBe(false);
});

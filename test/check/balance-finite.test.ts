/**
 * A balance is usable only when it is a finite number > 0. PostgreSQL's numeric accepts
 * 'NaN' (which compares false with everything in JavaScript, so `balance <= 0` let it through for
 * ever); whatever a store returns, anything but a finite positive number is balance_insufficient.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { amountText, decide, type Lookups } from '../../src/check/decide';
import { generateKey, hashKey } from '../../src/contract/key-format';
import { statusOf, type Reason } from '../../src/contract/reasons';
import type { RequestView } from '../../src/check/request-view';
import { parseConfig } from '../../src/config/load';
import type { KeyRecord } from '../../src/store/store';

const config = parseConfig(readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8'));
const key = generateKey();

function decideWith(balance: number | null) {
  const record: KeyRecord = {
    id: 'k',
    sha256: hashKey(key),
    group: 'basic',
    balance,
    disabled: false,
    expiresAt: null,
  };
  const lookups: Lookups = {
    keys: {
      get: (sha) =>
        sha === record.sha256
          ? { status: 'found', value: record, stale: false }
          : { status: 'not_found', stale: false },
    },
    groups: { get: (name) => ({ status: 'found', value: config.groups.get(name)!, stale: false }) },
  };
  const view: RequestView = {
    method: 'POST',
    path: '/v1/chat/completions',
    query: '',
    headers: { authorization: `Bearer ${key}` },
    body: Buffer.from(JSON.stringify({ model: 'gpt-4o-mini', messages: [] })),
    partialBody: false,
    requestId: 'r',
  };
  return decide(view, config, lookups, Date.now()) as ReturnType<typeof decide> & { reason: string };
}

it.each([NaN, Infinity, -Infinity, 0, -0, -1, Number.MIN_VALUE * -1])(
  'denies a balance of %s with balance_insufficient',
  (balance) => {
    const d = decideWith(balance);
    expect(d).toMatchObject({ allowed: false, reason: 'balance_insufficient' });
    expect(statusOf(d.reason as Reason)).toBe(403);
  },
);

it.each([0.0001, 12.5, Number.MAX_VALUE])('allows a finite positive balance of %s, and an unlimited key', (balance) => {
  expect(decideWith(balance)).toMatchObject({ allowed: true, balance });
  expect(decideWith(null)).toMatchObject({ allowed: true, balance: null });
});

it('writes amounts in hints as Intl would (decimal, at most 12 places, never an exponent), taking the shortest form when it is one', () => {
  const intl = (n: number): string =>
    Number.isFinite(n)
      ? (n === 0 ? 0 : n).toLocaleString('en-US', { maximumFractionDigits: 12, useGrouping: false })
      : String(n);
  const cases = [
    0,
    -0,
    0.00006,
    -6e-7,
    12.5,
    1e21,
    1e-7,
    1.5e-13,
    123456789012345680000,
    Number.NaN,
    -Infinity,
    Infinity,
    0.1 + 0.2,
    0.0220704,
    1 / 3,
    -2 / 3,
    9.999999999999e-1,
  ];
  // And a spread of magnitudes, rounded as the meter rounds them (6 significant digits) and not.
  for (let e = -15; e <= 15; e++)
    for (const m of [1.234567, -7.654321, 3]) cases.push(m * 10 ** e, Number((m * 10 ** e).toPrecision(6)));
  for (const n of cases) expect(amountText(n), String(n)).toBe(intl(n));
  expect(amountText(-6e-7)).toBe('-0.0000006');
});

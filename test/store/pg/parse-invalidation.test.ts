/** The LISTEN payloads modelgate's triggers send, and what anything else means: never "ignore". */
import { expect, test } from 'vitest';
import { parseInvalidation } from '../../../src/store/pg/listener';

const H = 'a'.repeat(64);

test.each<[string, string | undefined, unknown]>([
  ['a key', `{"kind":"key","sha256":"${H}"}`, { kind: 'key', sha256: H }],
  [
    'a balance-only change',
    `{"kind":"key","sha256":"${H}","balance":"9.99998485"}`,
    { kind: 'key', sha256: H, balance: 9.99998485 },
  ],
  [
    'a balance made unlimited',
    `{"kind":"key","sha256":"${H}","balance":null}`,
    { kind: 'key', sha256: H, balance: null },
  ],
  [
    'a balance that is not a finite number: a plain invalidation',
    `{"kind":"key","sha256":"${H}","balance":"NaN"}`,
    { kind: 'key', sha256: H },
  ],
  [
    'a balance sent as a JSON number (not what the trigger sends): a plain invalidation',
    `{"kind":"key","sha256":"${H}","balance":3}`,
    { kind: 'key', sha256: H },
  ],
  ['an empty balance: a plain invalidation', `{"kind":"key","sha256":"${H}","balance":""}`, { kind: 'key', sha256: H }],
  ['a group', '{"kind":"group","name":"basic"}', { kind: 'group', name: 'basic' }],
  ['garbage: everything', 'not json', { kind: 'all' }],
  ['no payload: everything', undefined, { kind: 'all' }],
])('%s', (_name, payload, event) => {
  expect(parseInvalidation(payload)).toEqual(event);
});

/**
 * printable: what a hint, a header value or a log line may echo of a client's string — printable
 * ASCII, bounded, and with anything that starts like a modelgate key redacted whole.
 */
import { describe, expect, test } from 'vitest';
import { printable } from '../../src/check/safe-text';
import { DEMO_KEYS } from '../support/demo-keys';

const K = DEMO_KEYS.alice;

describe('printable', () => {
  test.each([
    ['plain text unchanged', 'gpt-4o-mini', 80, 'gpt-4o-mini'],
    ['the empty string', '', 80, ''],
    ['text exactly at the bound', 'abcd', 4, 'abcd'],
    ['text over the bound cut with an ellipsis', 'abcdef', 4, 'abcd...'],
    ['control characters as ?', 'a\u0000b\u001bc\u007fd\ne\tf', 80, 'a?b?c?d?e?f'],
    ['non-ASCII as ?', 'caf\u00e9 \u4e2d', 80, 'caf? ?'],
    ['a key redacted', K, 80, 'sk-mg-[redacted]'],
    ['a key inside text redacted', `model=${K} please`, 80, 'model=sk-mg-[redacted] please'],
    ['a key with a stray dot redacted whole', `${K.slice(0, 20)}.${K.slice(20)}`, 80, 'sk-mg-[redacted]'],
    ['a key with a non-ASCII character redacted whole', `${K.slice(0, 20)}\u00e9${K.slice(21)}`, 80, 'sk-mg-[redacted]'],
    ['a key in a path up to the next slash', `/v1/${K}/chat`, 80, '/v1/sk-mg-[redacted]/chat'],
    ['a key in quotes', `"${K}"`, 80, '"sk-mg-[redacted]"'],
    ['two keys', `${K} ${DEMO_KEYS.bob}`, 200, 'sk-mg-[redacted] sk-mg-[redacted]'],
    ['a key cut by the bound, keeping the ellipsis', `xx${K}`, 20, 'xxsk-mg-[redacted]...'],
    ['the prefix alone', 'sk-mg-', 80, 'sk-mg-[redacted]'],
    ['a prefix split by the bound (nothing of the key is left)', `abcdsk-mg-${K.slice(6)}`, 8, 'abcdsk-m...'],
  ])('renders %s', (_name, input, max, expected) => {
    expect(printable(input, max)).toBe(expected);
  });

  test('bounds by the default of 80 characters', () => {
    expect(printable('x'.repeat(1000))).toBe('x'.repeat(80) + '...');
  });

  test('never returns more than 12 characters of any demo key, wherever it is pasted', () => {
    for (const key of Object.values(DEMO_KEYS)) {
      for (const wrap of [(k: string) => k, (k: string) => ` ${k} `, (k: string) => `Bearer ${k}`, (k: string) => `${k}\n`, (k: string) => `a=${k}&b=1`]) {
        const out = printable(wrap(key), 256);
        for (let i = 0; i + 12 <= key.length; i++) expect(out).not.toContain(key.slice(i, i + 12));
      }
    }
  });
});

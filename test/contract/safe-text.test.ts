/**
 * printable: what a hint, a header value or a log line may echo of a client's string — printable
 * ASCII, bounded, with anything that starts like a modelgate key redacted whole, and long runs of
 * letters and digits that are not words shown as their length (keys without their prefix, pieces).
 */
import { describe, expect, test } from 'vitest';
import { lenientDecode, printable, printableRequestId } from '../../src/contract/safe-text';
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
    [
      'a key with a non-ASCII character redacted whole',
      `${K.slice(0, 20)}\u00e9${K.slice(21)}`,
      80,
      'sk-mg-[redacted]',
    ],
    ['a key in a path up to the next slash', `/v1/${K}/chat`, 80, '/v1/sk-mg-[redacted]/chat'],
    ['a key in quotes', `"${K}"`, 80, '"sk-mg-[redacted]"'],
    ['two keys', `${K} ${DEMO_KEYS.bob}`, 200, 'sk-mg-[redacted] sk-mg-[redacted]'],
    ['a key cut by the bound, keeping the ellipsis', `xx${K}`, 20, 'xxsk-mg-[redacted]...'],
    ['the prefix alone', 'sk-mg-', 80, 'sk-mg-[redacted]'],
    ['a prefix split by the bound (nothing of the key is left)', `abcdsk-mg-${K.slice(6)}`, 8, 'abcdsk-m...'],
    ['a key with a space inside redacted whole', `${K.slice(0, 20)} ${K.slice(20)}`, 80, 'sk-mg-[redacted]'],
    ['a key with a slash inside redacted whole', `${K.slice(0, 9)}/${K.slice(9)}`, 80, 'sk-mg-[redacted]'],
    ['a key with a quote inside redacted whole', `${K.slice(0, 12)}"${K.slice(12)}`, 80, 'sk-mg-[redacted]'],
    ['a key without its prefix as its length', K.slice(6), 80, '[40 chars]'],
    ['an imported key as its length', 'legacyKey0123456789abcdefXYZ', 80, '[28 chars]'],
    ['pieces of a key as their lengths', `${K.slice(6, 20)}/${K.slice(20, 46)}`, 80, '[14 chars]/[26 chars]'],
    [
      'model names with dates and words unchanged',
      'claude-3-5-sonnet-20241022 text-embedding-3-small Qwen2.5-72B-Instruct',
      80,
      'claude-3-5-sonnet-20241022 text-embedding-3-small Qwen2.5-72B-Instruct',
    ],
    [
      'camelCase path words unchanged',
      '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
      80,
      '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
    ],
    ['a run mixing letters and digits as its length', 'mixtral8x7b', 80, '[11 chars]'],
  ])('renders %s', (_name, input, max, expected) => {
    expect(printable(input, max)).toBe(expected);
  });

  test('bounds by the default of 80 characters', () => {
    expect(printable('x'.repeat(1000))).toBe('x'.repeat(80) + '...');
  });

  test('never returns 8 characters in a row of any demo key, wherever it is pasted and however it is split', () => {
    const wraps = [
      (k: string) => k,
      (k: string) => ` ${k} `,
      (k: string) => `Bearer ${k}`,
      (k: string) => `${k}\n`,
      (k: string) => `a=${k}&b=1`,
      (k: string) => k.slice(6),
      (k: string) => `x${k.slice(6)}y`,
    ];
    for (const key of Object.values(DEMO_KEYS)) {
      const variants = wraps.map((w) => w(key));
      // Split by one stray character anywhere, with and without the prefix.
      for (let at = 1; at < key.length; at++)
        for (const c of ['/', ' ', '"', '.', '-', '%'])
          variants.push(
            `${key.slice(0, at)}${c}${key.slice(at)}`,
            `${key.slice(6, at)}${c}${key.slice(Math.max(at, 6))}`,
          );
      for (const v of variants) {
        const out = printable(v, 256);
        for (let i = 6; i + 8 <= key.length; i++) expect(out, v).not.toContain(key.slice(i, i + 8));
      }
    }
  });

  test('lets about 0.4% of random 8-character pieces of base62 through as words, and about 0.04% of 12-character ones', () => {
    const B62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
    let seed = 1;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const piece = (n: number) => Array.from({ length: n }, () => B62[Math.floor(rnd() * 62)]).join('');
    const through = (n: number) =>
      Array.from({ length: 20_000 }, () => piece(n)).filter((p) => printable(p) === p).length / 20_000;
    expect(through(8)).toBeLessThan(0.008);
    expect(through(12)).toBeLessThan(0.001);
  });
});

describe('printableRequestId', () => {
  test("keeps Envoy's UUIDs and treats anything else as client text", () => {
    expect(printableRequestId('70d444a5-e43b-467c-8b8a-8b6bef1de255')).toBe('70d444a5-e43b-467c-8b8a-8b6bef1de255');
    expect(printableRequestId(K)).toBe('sk-mg-[redacted]');
    expect(printableRequestId('req-123')).toBe('req-123');
  });
});

describe('lenientDecode', () => {
  test.each([
    ['no escapes', 'a+b', false, 'a+b'],
    ['plus as space in a query', 'a+b', true, 'a b'],
    ['a valid escape', 'sk%2Dmg', false, 'sk-mg'],
    ['an invalid escape kept, the valid ones around it decoded', '%zz%41%', false, '%zzA%'],
    ['UTF-8 sequences', '%D0%BA%D0%BB%D1%8E%D1%87', false, '\u043a\u043b\u044e\u0447'],
    ['invalid UTF-8 as U+FFFD', '%FF', false, '\ufffd'],
    ['double encoding, decoded again', 'sk%252Dmg', false, 'sk-mg'],
    ['an encoded plus is data', '%2B', true, '+'],
  ])('%s', (_name, input, plus, expected) => {
    expect(lenientDecode(input, plus)).toBe(expected);
  });
});

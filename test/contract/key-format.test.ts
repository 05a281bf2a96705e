/**
 * The issued key format: `sk-mg-` + 34 base62 characters + a 6-character base62 CRC32 of those 34.
 * A CRC32 detects every single-byte change, so any one mistyped character, and any cut, is caught
 * before a lookup.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { describe, expect, test } from 'vitest';
import { parseConfig } from '../../src/config/load';
import { KEY_LENGTH, KEY_PREFIX, generateKey, hashKey, isCompleteKey } from '../../src/contract/key-format';
import { DEMO_KEYS } from '../support/demo-keys';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** Every character a client could plausibly type in place of another. */
const ALPHABET = [...BASE62, '-', '_', '.', '~', '+', '/', '=', ':', ' ', '\u00e9', '\u0430'];

/** The checksum as the format describes it, computed independently of key-format.ts. */
function expectedChecksum(body: string): string {
  let n = crc32(body);
  let out = '';
  for (let i = 0; i < 6; i++) {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

const GENERATED = Array.from({ length: 200 }, () => generateKey());

describe('generateKey', () => {
  test('issues 46-character keys: the prefix and 40 base62 characters', () => {
    expect(KEY_PREFIX).toBe('sk-mg-');
    expect(KEY_LENGTH).toBe(46);
    for (const key of GENERATED) expect(key).toMatch(/^sk-mg-[0-9A-Za-z]{40}$/);
  });

  test('ends every key with the base62 CRC32 of its 34-character body', () => {
    for (const key of GENERATED) expect(key.slice(40)).toBe(expectedChecksum(key.slice(6, 40)));
  });

  test('issues keys that pass isCompleteKey', () => {
    for (const key of GENERATED) expect(isCompleteKey(key)).toBe(true);
  });

  test('never issues the same key twice in 200 draws', () => {
    expect(new Set(GENERATED).size).toBe(GENERATED.length);
  });

  test('uses the whole base62 alphabet in the body', () => {
    const seen = new Set(GENERATED.flatMap((k) => [...k.slice(6, 40)]));
    expect(seen.size).toBe(62);
  });
});

describe('isCompleteKey', () => {
  test.each(Object.entries(DEMO_KEYS))('accepts the demo key of %s', (_id, key) => {
    expect(isCompleteKey(key)).toBe(true);
  });

  test.each([...Object.entries(DEMO_KEYS), ['a fresh key', GENERATED[0]]])(
    'rejects every single-character substitution of %s',
    (_id, key) => {
      const accepted: string[] = [];
      let tried = 0;
      for (let i = 0; i < key.length; i++) {
        for (const ch of ALPHABET) {
          if (ch === key[i]) continue;
          const changed = key.slice(0, i) + ch + key.slice(i + 1);
          tried++;
          if (isCompleteKey(changed)) accepted.push(`${i}:${ch}`);
        }
      }
      expect(tried).toBeGreaterThan(46 * 60);
      expect(accepted).toEqual([]);
    },
  );

  test.each(Object.entries(DEMO_KEYS))('rejects every truncation and every extension of %s', (_id, key) => {
    for (let n = 0; n < key.length; n++) {
      expect(isCompleteKey(key.slice(0, n)), `first ${n} characters`).toBe(false);
      expect(isCompleteKey(key.slice(key.length - n)), `last ${n} characters`).toBe(false);
    }
    for (const ch of ['0', 'a', 'Z', ' ']) {
      expect(isCompleteKey(key + ch)).toBe(false);
      expect(isCompleteKey(ch + key)).toBe(false);
    }
  });

  test('rejects two adjacent characters swapped anywhere in the body or checksum', () => {
    const key = DEMO_KEYS.alice;
    for (let i = 6; i < key.length - 1; i++) {
      if (key[i] === key[i + 1]) continue;
      const swapped = key.slice(0, i) + key[i + 1] + key[i] + key.slice(i + 2);
      expect(isCompleteKey(swapped), `swap at ${i}`).toBe(false);
    }
  });

  test('rejects a key of the right length with another prefix', () => {
    const key = DEMO_KEYS.bob;
    for (const prefix of ['sk-mG-', 'SK-MG-', 'sk_mg_', 'xx-mg-', 'sk-mg_'])
      expect(isCompleteKey(prefix + key.slice(6))).toBe(false);
  });
});

describe('hashKey', () => {
  test.each([...Object.values(DEMO_KEYS), GENERATED[0], 'imported-key', '', '\u00e9\u{1f511}'])(
    'is the lowercase hex SHA-256 of %j',
    (key) => {
      const h = hashKey(key);
      expect(h).toMatch(/^[0-9a-f]{64}$/);
      expect(h).toBe(createHash('sha256').update(Buffer.from(key, 'utf8')).digest('hex'));
    },
  );

  test('matches the sha256 of every demo key in envoy/modelgate.yaml', () => {
    const config = parseConfig(readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8'));
    const byHash = new Map(config.keys.map((k) => [k.sha256, k.id]));
    for (const [id, key] of Object.entries(DEMO_KEYS)) expect(byHash.get(hashKey(key))).toBe(id);
  });

  test('gives different hashes for keys one character apart', () => {
    const key = DEMO_KEYS.alice;
    expect(hashKey(key)).not.toBe(hashKey(key.slice(0, -1) + (key.endsWith('a') ? 'b' : 'a')));
  });
});

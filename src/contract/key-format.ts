/**
 * The shape of keys modelgate issues: `sk-mg-` + 40 base62 characters, the last 6 of which are a
 * CRC32 checksum (base62, zero-padded) of the first 34. A truncated or mistyped key is recognised
 * as incomplete without any store lookup. Imported keys (without the prefix) skip this check.
 */
import { hash, randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';

export const KEY_PREFIX = 'sk-mg-';
/** The prefix of the admin API's management tokens (admin/tokens.ts): never a model key. */
export const MANAGEMENT_TOKEN_PREFIX = 'mg-admin-';
const BODY_LENGTH = 34;
const CHECKSUM_LENGTH = 6;
/** Total length of an issued key: 6 + 40 = 46 characters. */
export const KEY_LENGTH = KEY_PREFIX.length + BODY_LENGTH + CHECKSUM_LENGTH;

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function checksum(body: string): string {
  let n = crc32(body);
  let out = '';
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

/** A fresh key from the CSPRNG (34 × log2(62) ≈ 202 bits of entropy). */
export function generateKey(): string {
  let body = '';
  for (let i = 0; i < BODY_LENGTH; i++) body += BASE62[randomInt(62)];
  return KEY_PREFIX + body + checksum(body);
}

const ISSUED_SHAPE = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${BODY_LENGTH + CHECKSUM_LENGTH}}$`);

/** true when `key` has the shape of an issued key: the prefix, then 40 base62 characters, nothing else. */
export function hasIssuedShape(key: string): boolean {
  return ISSUED_SHAPE.test(key);
}

/** The value of one base62 digit (the caller has checked the shape). */
function digit(code: number): number {
  return code <= 0x39 ? code - 0x30 : code <= 0x5a ? code - 0x41 + 10 : code - 0x61 + 36;
}

/** true when a key of the issued shape carries the right checksum (compared as numbers: no strings built). */
export function checksumMatches(key: string): boolean {
  let n = 0;
  for (let i = KEY_PREFIX.length + BODY_LENGTH; i < KEY_LENGTH; i++) n = n * 62 + digit(key.charCodeAt(i));
  return n === crc32(key.slice(KEY_PREFIX.length, KEY_PREFIX.length + BODY_LENGTH));
}

/** true when `key` is a whole issued key: the prefix, base62 after it, the right length and checksum. */
export function isCompleteKey(key: string): boolean {
  return hasIssuedShape(key) && checksumMatches(key);
}

/** Lowercase hex SHA-256 of the full key string: the only form in which keys are stored or looked up. */
export function hashKey(key: string): string {
  // One-shot hash (Node >= 20.12): no Hash object per Check.
  return hash('sha256', key, 'hex');
}

/** true when `s` is the 40 characters after the prefix of an issued key (a key pasted without `sk-mg-`). */
export function isKeyBody(s: string): boolean {
  return s.length === BODY_LENGTH + CHECKSUM_LENGTH && /^[0-9A-Za-z]+$/.test(s) && checksumMatches(KEY_PREFIX + s);
}

const BASE62_RUN = new RegExp(`[0-9A-Za-z]{${BODY_LENGTH + CHECKSUM_LENGTH},}`, 'g');

/**
 * true when `s` holds the 40 characters after an issued key's prefix anywhere (with or without the
 * prefix, with anything around them): every 40-character window of a long enough run of base62
 * characters whose last 6 are the checksum of the first 34. A random window passes with a
 * probability of 2^-32.
 */
export function containsKeyBody(s: string): boolean {
  if (s.length < BODY_LENGTH + CHECKSUM_LENGTH) return false;
  BASE62_RUN.lastIndex = 0;
  let m: RegExpExecArray | null;
  while ((m = BASE62_RUN.exec(s)) !== null) {
    const run = m[0];
    for (let i = 0; i + BODY_LENGTH + CHECKSUM_LENGTH <= run.length; i++) {
      if (checksumMatches(KEY_PREFIX + run.slice(i, i + BODY_LENGTH + CHECKSUM_LENGTH))) return true;
    }
  }
  return false;
}

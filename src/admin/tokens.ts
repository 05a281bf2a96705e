/**
 * Management tokens: the credential of the admin API (docs/admin-api.md). A token is
 * `mg-admin-` and 43 base64url characters (32 bytes from the CSPRNG), shown once when it is created
 * and stored only as its SHA-256, like a key. It is never a model key: the Check looks keys up
 * among keys only (a token is refused there as key_unknown), and the admin API looks tokens up
 * among tokens only (a model key is refused there).
 */
import { hash, randomBytes } from 'node:crypto';
import { MANAGEMENT_TOKEN_PREFIX } from '../contract/key-format';

export const TOKEN_PREFIX = MANAGEMENT_TOKEN_PREFIX;
const TOKEN_SHAPE = /^mg-admin-[A-Za-z0-9_-]{43}$/;

/** What a token may do: read everything; also write keys; also move balances; everything. */
export const SCOPES = ['read', 'keys', 'billing', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

/** A stored token: its id, hash and scope (never the token). */
export interface TokenRecord {
  readonly id: string;
  readonly sha256: string;
  readonly scope: Scope;
  /** Epoch milliseconds. */
  readonly createdAt: number;
  readonly description?: string | null;
}

/** A fresh token (the only time it exists in the clear). */
export function generateToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function hasTokenShape(s: string): boolean {
  return TOKEN_SHAPE.test(s);
}

/** Lowercase hex SHA-256 of the token: the only form in which tokens are stored or looked up. */
export function hashToken(token: string): string {
  return hash('sha256', token, 'hex');
}

/** A random id for a token created without one. */
export function defaultTokenId(): string {
  return `tok-${randomBytes(4).toString('hex')}`;
}

/** What each scope may do: `need` is the scope an operation asks for. */
export function scopeAllows(have: Scope, need: Scope): boolean {
  if (have === 'admin' || need === 'read') return true;
  return have === need;
}

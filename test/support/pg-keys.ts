/**
 * Keys issued straight into a PostgreSQL store, as `modelgate keys new` and `keys rotate` issue
 * them: a fresh key, shown once to the test, stored as its hash through the store's write side
 * (src/store/pg/keys.ts).
 */
import { generateKey, hashKey } from '../../src/contract/key-format';
import type { AdminDb } from '../../src/store/pg/admin';
import { insertKey, replaceKeyHash, type KeyInfo } from '../../src/store/pg/keys';

export interface IssuedKey {
  readonly key: string;
  readonly record: KeyInfo;
}

/** Issues a key in `group` (balance a decimal string, absent: unlimited). */
export async function issueKey(
  db: AdminDb,
  input: { group: string; id: string; balance?: string | null; expiresAt?: Date | null },
): Promise<IssuedKey> {
  const key = generateKey();
  const record = await insertKey(db, {
    id: input.id,
    sha256: hashKey(key),
    group: input.group,
    balance: input.balance ?? null,
    expiresAt: input.expiresAt ?? null,
  });
  return { key, record };
}

/** Gives key `id` a fresh key (a rotation): the old one stops working. */
export async function reissueKey(db: AdminDb, id: string): Promise<IssuedKey> {
  const key = generateKey();
  return { key, record: await replaceKeyHash(db, id, hashKey(key)) };
}

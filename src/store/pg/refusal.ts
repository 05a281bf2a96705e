import { InternalError } from '../../errors/internal-error';
/**
 * What the store's write side refuses, as data: the operation could not be done as asked (a key id
 * taken, a group missing, keys still in a group). Callers word it for their people (the CLI:
 * cli/store-errors.ts); anything else thrown is a failure of the store itself.
 */
export type Refusal =
  | { readonly code: 'key_exists'; readonly id: string }
  | { readonly code: 'key_not_found'; readonly id: string }
  | { readonly code: 'group_not_found'; readonly group: string }
  /** A key for a group that does not exist. */
  | { readonly code: 'key_group_not_found'; readonly group: string }
  | {
      readonly code: 'group_has_keys';
      readonly group: string;
      /** Up to six of them, by id ([] when not known). */ readonly ids: readonly string[];
    }
  | { readonly code: 'model_not_in_group'; readonly group: string; readonly model: string };

export class StoreRefusal extends InternalError {
  constructor(readonly refusal: Refusal) {
    super(refusal.code, `refused: ${refusal.code} ${JSON.stringify({ ...refusal, code: undefined })}`);
  }
}

/** The SQLSTATE of a PostgreSQL error, if it is one (23505 unique violation, 23503 foreign key violation). */
export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

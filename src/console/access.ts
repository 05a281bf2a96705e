/**
 * "My access": what one key may use, as the console shows it. Signing in runs, in order, the same
 * key hygiene as the Check path (check/extract-key.ts checkPastedKey: quotes, a pasted `Bearer `, a
 * cut key), then the same decision as a model list (check/decide.ts: unknown, disabled, expired,
 * the group), so the console's answers and hints are the gateway's. The models come from
 * check/group-models.ts, the one function the model lists use too.
 *
 * A key whose group is unavailable still signs in: the console is where a person sees that the
 * group is marked unavailable (docs/spec.md §2, §7 check 5). Only the presenting key's own group is ever
 * read.
 */
import { checkPastedKey } from '../check/extract-key';
import type { Lookups } from '../check/decide';
import { offeredModels } from '../check/group-models';
import { hashKey } from '../contract/key-format';
import { decideSafely, type CheckLogger } from '../check/pipeline';
import { HINTS, statusOf, type Reason } from '../contract/reasons';
import type { RequestView } from '../check/request-view';
import type { Family } from '../contract/error-body';
import { endpointFor } from '../check/routes';
import type { Config } from '../config/load';
import { PROTOCOLS, type GroupRecord, type KeyRecord, type Limits, type Protocol } from '../store/store';
import { keyLimits } from '../ratelimit/limits';

export interface ConsoleModel {
  readonly name: string;
  /** The protocol styles it is served on; null: any. */
  readonly protocols: readonly Protocol[] | null;
  readonly available: boolean;
  /** What to call, after this gateway's {base_url}: `POST /v1/chat/completions`. */
  readonly endpoints: readonly string[];
  /** The model lists that show it (the same answer as those endpoints give): `GET /v1/models`. */
  readonly listedOn: readonly string[];
  /** Rate limits of each key on this model (on top of the key's own), if any. */
  readonly limits?: Limits;
}

export interface ConsoleAccess {
  /** This gateway's {base_url}, before every endpoint path. */
  readonly baseUrl: string;
  /** `limits`: the key's rate limits in force (its own, else its group's; docs/rate-limits.md). */
  readonly key: {
    readonly id: string;
    readonly balance: number | null;
    readonly expiresAt: string | null;
    readonly limits: Limits;
  };
  readonly group: { readonly name: string; readonly available: boolean; readonly exists: boolean };
  readonly models: readonly ConsoleModel[];
}

export type SignIn =
  | {
      readonly ok: true;
      readonly access: ConsoleAccess;
      readonly record: KeyRecord;
      readonly group: GroupRecord | undefined;
    }
  | {
      readonly ok: false;
      readonly status: number;
      readonly reason: Reason;
      readonly hint: string;
      readonly keyId?: string;
    };

export interface AccessDeps {
  readonly config: () => Config;
  readonly lookups: Lookups;
  readonly logger: CheckLogger;
  readonly now: () => number;
}

const LIST_PATH: Readonly<Record<Family, string>> = {
  openai: 'GET /v1/models',
  anthropic: 'GET /v1/models (anthropic-version)',
  gemini: 'GET /v1beta/models',
};

function fail(reason: Reason, hint: string, keyId?: string): SignIn {
  return { ok: false, status: statusOf(reason), reason, hint, keyId };
}

/** The group's models as the console shows them. */
export function consoleModels(group: GroupRecord): ConsoleModel[] {
  return offeredModels(group).map(({ model, listedOn }) => ({
    name: model.name,
    protocols: model.protocols,
    available: model.available,
    endpoints: (model.protocols ?? PROTOCOLS).map((style) => endpointFor(style, model.name, '')),
    listedOn: listedOn.map((f) => LIST_PATH[f]),
    ...(model.limits ? { limits: model.limits } : {}),
  }));
}

/** Signs a pasted key in: hygiene first, then the decision, then the key's record and group. */
export async function signIn(pasted: string, deps: AccessDeps, base: string): Promise<SignIn> {
  const shape = checkPastedKey(pasted);
  if (!shape.ok) return fail(shape.reason, shape.hint);
  const key = shape.key;
  const config = deps.config();
  // The decision a model list would get, with the key where the spec puts it (docs/spec.md §4.2).
  const view: RequestView = {
    method: 'GET',
    path: '/v1/models',
    query: '',
    headers: { authorization: `Bearer ${key}` },
    body: undefined,
    partialBody: false,
    requestId: '',
  };
  const d = await decideSafely(view, config, deps.lookups, deps.now(), deps.logger);
  if (!d.allowed && d.reason !== 'group_unavailable') return fail(d.reason, d.hint, d.keyId);

  const found = await deps.lookups.keys.get(hashKey(key));
  if (found.status === 'unavailable') return fail('store_unavailable', HINTS.store_unavailable.keyStore);
  if (found.status === 'not_found') return fail('key_unknown', HINTS.key_unknown.removed);
  const record = found.value;
  const g = await deps.lookups.groups.get(record.group);
  if (g.status === 'unavailable') return fail('store_unavailable', HINTS.store_unavailable.keyStore, record.id);
  const group = g.status === 'found' ? g.value : undefined;
  return {
    ok: true,
    record,
    group,
    access: {
      baseUrl: base,
      key: {
        id: record.id,
        balance: record.balance,
        expiresAt: record.expiresAt === null ? null : new Date(record.expiresAt).toISOString(),
        limits: Object.fromEntries(Object.entries(keyLimits(record, group)).filter(([, v]) => typeof v === 'number')),
      },
      group: { name: record.group, available: group?.available ?? false, exists: group !== undefined },
      models: group ? consoleModels(group) : [],
    },
  };
}

/**
 * A key holder's own view, `GET {base_url}/v1/me` (and `/v1beta/me` with x-goog-api-key; both
 * under the alternate prefix too): the key's group, models, balance, rate limits and recent spend
 * as one JSON document, for status lines and scripts (docs/clients.md). Envoy routes it to this
 * listener like the model lists (check/endpoints.ts); as there, no identity header is trusted: the
 * request is decided here with the Check path's own decision, the key where its protocol sends it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Lookups } from '../check/decide';
import type { CheckPipeline } from '../check/pipeline';
import { HINTS } from '../check/reasons';
import { denialParts } from '../check/write-response';
import { consoleModels } from '../console/access';
import type { UsageProvider } from '../console/usage';
import { keyLimits } from '../ratelimit/limits';
import type { KeyRecord } from '../store/store';
import { viewOf } from './catalog';

export interface KeyViewDeps {
  readonly lookups: Lookups;
  readonly pipeline: Pick<CheckPipeline, 'decide' | 'logServed'>;
  readonly keyById: (id: string) => Promise<KeyRecord | null>;
  readonly usage?: UsageProvider;
  readonly now: () => number;
}

/** Recent requests shown. */
const RECENT = 20;

export function createKeyViewHandler(deps: KeyViewDeps): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  return async (req, res) => {
    const started = performance.now();
    const view = viewOf(req);
    if (!/\/v1(beta)?\/me$/.test(view.path)) return false;
    let d = await deps.pipeline.decide(view);
    if (d.allowed && d.route.kind !== 'models') return false;
    let body = '';
    if (d.allowed) {
      let [record, g] = await Promise.all([deps.keyById(d.keyId!).catch(() => undefined), deps.lookups.groups.get(d.group!)]);
      if (record === undefined || g.status === 'unavailable') d = { ...d, allowed: false, reason: 'store_unavailable', hint: HINTS.store_unavailable.keyStore };
      else if (record === null) d = { ...d, allowed: false, reason: 'key_unknown', hint: HINTS.key_unknown.removed };
      else {
        // The record as the Check serves it (the file store's balance is net of what the key spent).
        const served = await deps.lookups.keys.get(record.sha256);
        if (served.status === 'found') record = served.value;
        const group = g.status === 'found' ? g.value : undefined;
        const recent = deps.usage ? await deps.usage.recent(record.id, RECENT).catch(() => undefined) : undefined;
        const limits = Object.fromEntries(Object.entries(keyLimits(record, group)).filter(([, v]) => typeof v === 'number'));
        body = JSON.stringify({
          object: 'key',
          key: { id: record.id, expiresAt: record.expiresAt === null ? null : new Date(record.expiresAt).toISOString(), disabled: record.disabled },
          group: { name: record.group, available: group?.available ?? false },
          balance: record.balance,
          limits,
          models: group ? consoleModels(group).map((m) => ({ name: m.name, available: m.available, protocols: m.protocols, endpoints: m.endpoints })) : [],
          recentSpend: recent === undefined ? null : {
            requests: recent.length,
            cost: Math.round(recent.reduce((n, r) => n + (r.cost ?? 0), 0) * 1e12) / 1e12,
            entries: recent,
          },
        });
      }
    }
    deps.pipeline.logServed(d, view, started);
    if (!d.allowed) {
      const denial = denialParts(d);
      res.writeHead(denial.status, Object.fromEntries(denial.headers)).end(denial.body);
    } else res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(body);
    return true;
  };
}

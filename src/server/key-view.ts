/**
 * A key holder's own view, `GET {base_url}/v1/me` (and `/v1beta/me` with x-goog-api-key; both
 * under the alternate prefix too): the key's group, models, balance, rate limits and recent spend
 * as one JSON document, for status lines and scripts (docs/clients.md). Envoy routes it to this
 * listener like the model lists (providers/endpoints.ts); as there, no identity header is trusted: the
 * request is decided here with the Check path's own decision, the key where its protocol sends it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Lookups } from '../check/decide';
import { denyAllowed } from '../check/decision';
import type { CheckPipeline } from '../check/pipeline';
import { HINTS } from '../contract/reasons';
import { denialParts } from '../check/write-response';
import { consoleModels } from '../console/access';
import type { UsageProvider } from '../console/usage';
import type { BudgetStatus, BudgetSubject } from '../meter/budgets';
import { keyLimits } from '../ratelimit/limits';
import { budgetWindow, isBudget, type Budget } from '../store/budget-window';
import type { KeyRecord } from '../store/store';
import { viewOf } from './catalog';

export interface KeyViewDeps {
  readonly lookups: Lookups;
  readonly pipeline: Pick<CheckPipeline, 'decide' | 'logServed'>;
  readonly keyById: (id: string) => Promise<KeyRecord | null>;
  readonly usage?: UsageProvider;
  /** A budget's current window and spend (meter/budgets.ts BudgetBook.status); absent: budgets not enforced. */
  readonly budgetStatus?: (subject: BudgetSubject, budget: Budget) => Promise<BudgetStatus>;
  readonly now: () => number;
}

/** Recent requests shown. */
const RECENT = 20;

export function createKeyViewHandler(
  deps: KeyViewDeps,
): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  return async (req, res) => {
    const started = performance.now();
    const view = viewOf(req);
    if (!/\/v1(beta)?\/me$/.test(view.path)) return false;
    let d = await deps.pipeline.decide(view);
    if (d.allowed && d.route.kind !== 'models') return false;
    let body = '';
    if (d.allowed) {
      let [record, g] = await Promise.all([
        deps.keyById(d.keyId).catch(() => undefined),
        deps.lookups.groups.get(d.group),
      ]);
      if (record === undefined || g.status === 'unavailable')
        d = denyAllowed(d, 'store_unavailable', HINTS.store_unavailable.keyStore);
      else if (record === null) d = denyAllowed(d, 'key_unknown', HINTS.key_unknown.removed);
      else {
        // The record as the Check serves it (the file store's balance is net of what the key spent).
        const served = await deps.lookups.keys.get(record.sha256);
        if (served.status === 'found') record = served.value;
        const group = g.status === 'found' ? g.value : undefined;
        const recent = deps.usage ? await deps.usage.recent(record.id, RECENT).catch(() => undefined) : undefined;
        const budgets = await budgetWindows(deps, record, group);
        const limits = Object.fromEntries(
          Object.entries(keyLimits(record, group)).filter(([, v]) => typeof v === 'number'),
        );
        body = JSON.stringify({
          object: 'key',
          key: {
            id: record.id,
            expiresAt: record.expiresAt === null ? null : new Date(record.expiresAt).toISOString(),
            disabled: record.disabled,
          },
          group: { name: record.group, available: group?.available ?? false },
          balance: record.balance,
          budgets,
          limits,
          models: group
            ? consoleModels(group).map((m) => ({
                name: m.name,
                available: m.available,
                protocols: m.protocols,
                endpoints: m.endpoints,
              }))
            : [],
          recentSpend:
            recent === undefined
              ? null
              : {
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

/**
 * The budgets the key is held to (its own, its own on each model: `of: model` with `model`, its
 * group's) with their current window: start, reset
 * (ISO 8601 UTC), spent, held by this replica's requests in flight, remaining; spent null when the
 * ledger cannot say.
 */
async function budgetWindows(
  deps: KeyViewDeps,
  record: KeyRecord,
  group: { readonly name: string; readonly budget?: Budget | null } | undefined,
): Promise<unknown[]> {
  const wanted: { subject: BudgetSubject; budget: Budget }[] = [];
  if (record.budget) wanted.push({ subject: { kind: 'key', name: record.id }, budget: record.budget });
  if (record.modelBudgets)
    for (const [model, budget] of Object.entries(record.modelBudgets))
      wanted.push({ subject: { kind: 'model', name: record.id, model }, budget });
  if (group?.budget) wanted.push({ subject: { kind: 'group', name: group.name }, budget: group.budget });
  return Promise.all(
    wanted.map(async ({ subject, budget }) => {
      const base = {
        of: subject.kind,
        ...(subject.kind === 'model' ? { model: subject.model } : {}),
        amount: budget.amount,
        period: budget.period,
        timeZone: budget.timeZone,
      };
      // A budget this runtime cannot place in time (a zone unknown to its Intl) is refused at the Check: shown without
      // a window.
      if (!isBudget(budget))
        return { ...base, windowStart: null, resetsAt: null, spent: null, held: null, remaining: null };
      const st = deps.budgetStatus ? await deps.budgetStatus(subject, budget).catch(() => undefined) : undefined;
      if (!st) {
        const w = budgetWindow(budget.period, budget.timeZone, deps.now());
        return {
          ...base,
          windowStart: new Date(w.start).toISOString(),
          resetsAt: new Date(w.resetsAt).toISOString(),
          spent: null,
          held: null,
          remaining: null,
        };
      }
      return {
        ...base,
        windowStart: new Date(st.window.start).toISOString(),
        resetsAt: new Date(st.window.resetsAt).toISOString(),
        spent: st.spent,
        held: st.held,
        remaining: st.remaining,
      };
    }),
  );
}

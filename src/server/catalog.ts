/**
 * The model lists (`GET /v1/models`, `/v1beta/models`, `{alt}/v1/models`, `{alt}/v1beta/models`,
 * and one model at `.../models/{id}`), answered on the HTTP listener with the models of the
 * caller's group, in the protocol's own shape. Envoy routes them to cluster modelgate_http.
 *
 * It trusts no identity header (a client could reach this port directly and send
 * x-modelgate-group): it authenticates the request itself with the same decision as the Check path
 * (ext_authz leaves the key headers on model-list routes for this reason).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { denialParts } from '../check/write-response';
import { HEADER } from '../contract/headers';
import type { Lookups } from '../check/decide';
import { denyAllowed, type Decision } from '../check/decision';
import type { CheckPipeline } from '../check/pipeline';
import { HINTS } from '../contract/reasons';
import type { RequestView } from '../check/request-view';
import type { Family } from '../contract/error-body';
import type { GroupRecord, ModelRecord } from '../store/store';
import { isListed, listedModels } from '../check/group-models';

export interface CatalogDeps {
  readonly lookups: Lookups;
  /** Decides each request as the Check path does, and logs its decision line. */
  readonly pipeline: Pick<CheckPipeline, 'decide' | 'logServed'>;
}

/** The request as the Check path reads it (the key headers as sent). */
export function viewOf(req: IncomingMessage): RequestView {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers))
    if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(',') : v;
  return {
    method: req.method ?? '',
    path: q === -1 ? url : url.slice(0, q),
    query: q === -1 ? '' : url.slice(q + 1),
    headers,
    body: undefined,
    partialBody: false,
    requestId: headers['x-request-id'] ?? '',
  };
}

function modelObject(m: ModelRecord, family: Family): object {
  switch (family) {
    case 'anthropic':
      return { type: 'model', id: m.name, display_name: m.name, created_at: '1970-01-01T00:00:00Z' };
    case 'gemini':
      return {
        name: `models/${m.name}`,
        displayName: m.name,
        supportedGenerationMethods:
          m.protocols === null || m.protocols.includes('generative')
            ? ['generateContent', 'streamGenerateContent', 'countTokens']
            : ['embedContent'],
      };
    default:
      return { id: m.name, object: 'model', created: 0, owned_by: 'modelgate' };
  }
}

function listBody(group: GroupRecord, family: Family): object {
  const models = listedModels(group, family).map((m) => modelObject(m, family));
  if (family === 'gemini') return { models };
  if (family === 'anthropic') {
    const ids = models.map((m) => (m as { id: string }).id);
    return { data: models, has_more: false, first_id: ids[0] ?? null, last_id: ids.at(-1) ?? null };
  }
  return { object: 'list', data: models };
}

function send(res: ServerResponse, status: number, headers: [string, string][], body: string): void {
  res.writeHead(status, Object.fromEntries(headers)).end(body);
}

/** An HTTP route handler for the model-list paths; returns false for any other path. */
export function createCatalogHandler(
  deps: CatalogDeps,
): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  return async (req, res) => {
    const started = performance.now();
    const view = viewOf(req);
    if (!/\/v1(beta)?\/models(\/|$)/.test(view.path)) return false;
    let d: Decision = await deps.pipeline.decide(view);
    if (d.allowed && d.route.kind !== 'models') {
      // Only model lists are served here; anything else that reached this port is not ours to answer.
      return false;
    }
    let body = '';
    const route = d.route;
    if (d.allowed && route.kind === 'models') {
      const g = await deps.lookups.groups.get(d.group);
      if (g.status !== 'found') {
        d = denyAllowed(d, 'store_unavailable', HINTS.store_unavailable.keyStore);
      } else if (route.model !== undefined) {
        const m = g.value.models.get(route.model)!;
        if (!isListed(m, route.family))
          d = denyAllowed(d, 'model_wrong_protocol', HINTS.model_wrong_protocol.notListed(m.name));
        else body = JSON.stringify(modelObject(m, route.family));
      } else body = JSON.stringify(listBody(g.value, route.family));
    }
    deps.pipeline.logServed(d, view, started);
    if (!d.allowed) {
      const denial = denialParts(d);
      send(res, denial.status, denial.headers, denial.body);
    } else
      send(
        res,
        200,
        [
          ['content-type', 'application/json'],
          [HEADER.keyId, d.keyId],
          [HEADER.group, d.group],
        ],
        body,
      );
    return true;
  };
}

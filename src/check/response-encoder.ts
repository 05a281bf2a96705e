/**
 * Serialised CheckResponses, cached. A response is a pure function of a few decision fields (and the
 * config), while encoding one with protobufjs costs several microseconds per Check — more than the
 * whole decision. So each distinct answer is encoded once and its bytes are reused from a bounded
 * LRU per config (a reload starts a fresh one); gRPC sends the bytes as they are.
 */
import { LRUCache } from 'lru-cache';
import type { CheckResponse } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import { allowPlan, writeCheckResponse, type AllowPlan } from './write-response';
import type { Config } from '../config/load';
import type { Decision } from './decision';
import { logPath } from './decision-log';

export type Serialize = (response: CheckResponse) => Buffer;

interface PerConfig {
  readonly plan: AllowPlan;
  readonly bytes: LRUCache<string, Buffer>;
}

/**
 * Everything writeCheckResponse reads from a decision, and the path (logged through the metadata):
 * a fixed endpoint's path by its route's number (routes.ts fixedId: a short key on the hot path),
 * any other path as it is. '\0' cannot occur in any of them but the path, which comes last.
 */
function responseKey(d: Decision, path: string): string {
  const r = d.route;
  const where = (r.kind === 'protocol' || r.kind === 'models') && r.fixedId !== undefined ? r.fixedId : `/${path}`;
  const rare = d.modelIsKey || d.removeQuery ? `${d.modelIsKey ? 1 : 0}\0${d.removeQuery ? d.removeQuery.join('&') : ''}` : '';
  return `${d.allowed ? 1 : 0}\0${d.reason}\0${r.kind}\0${r.style}\0${r.family}\0${r.kind === 'wrong_method' ? r.allow : ''}\0${d.keyId ?? ''}\0${d.group ?? ''}\0${d.modelKnown ? d.model : ''}\0${d.hint}\0${rare}\0${where}`;
}

export class ResponseEncoder {
  readonly #perConfig = new WeakMap<Config, PerConfig>();

  constructor(readonly serialize: Serialize, readonly maxEntries = 10_000) {}

  /** The serialised CheckResponse for a decision on a request with this path (without query). */
  encode(d: Decision, config: Config, path = ''): Buffer {
    let c = this.#perConfig.get(config);
    if (!c) this.#perConfig.set(config, (c = { plan: allowPlan(config), bytes: new LRUCache({ max: this.maxEntries }) }));
    const key = responseKey(d, path);
    let bytes = c.bytes.get(key);
    if (!bytes) {
      bytes = this.serialize(writeCheckResponse(d, config, c.plan, d.modelKnown ? d.model : undefined, logPath(d, path)));
      c.bytes.set(key, bytes);
    }
    return bytes;
  }
}

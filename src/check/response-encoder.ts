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
import { loggedModel, logPath } from './decision-log';

export type Serialize = (response: CheckResponse) => Buffer;

interface PerConfig {
  readonly plan: AllowPlan;
  readonly bytes: LRUCache<string, Buffer>;
  /**
   * The common answer, an allowed request on a fixed endpoint, found without building a key
   * string: by endpoint, key id, group, then model. Bounded by counting: full, it starts over.
   */
  readonly allowed: Map<number, Map<string, Map<string, Map<string, Buffer>>>>;
  allowedCount: number;
}

/**
 * Everything writeCheckResponse reads from a decision, and the path (logged through the metadata):
 * a fixed endpoint's path by its route's number (routes.ts fixedId: a short key on the hot path),
 * any other path as it is. '\0' cannot occur in any of them but the path, which comes last.
 */
function responseKey(d: Decision, path: string): string {
  const r = d.route;
  const where = (r.kind === 'protocol' || r.kind === 'models') && r.fixedId !== undefined ? r.fixedId : `/${path}`;
  const rare = d.modelIsKey || d.removeQuery || d.rateLimit || d.retryAfter !== undefined
    ? `${d.modelIsKey ? 1 : 0}\0${d.removeQuery ? d.removeQuery.join('&') : ''}\0${d.rateLimit ? d.rateLimit.stamp : ''}\0${d.retryAfter ?? ''}` : '';
  return `${d.allowed ? 1 : 0}\0${d.reason}\0${r.kind}\0${r.style}\0${r.family}\0${r.alt ? 1 : 0}\0${r.kind === 'wrong_method' ? r.allow : ''}\0${d.keyId ?? ''}\0${d.group ?? ''}\0${loggedModel(d) ?? ''}\0${d.hint}\0${rare}\0${where}`;
}

export class ResponseEncoder {
  readonly #perConfig = new WeakMap<Config, PerConfig>();

  constructor(readonly serialize: Serialize, readonly maxEntries = 10_000) {}

  /** The serialised CheckResponse for a decision on a request with this path (without query). */
  encode(d: Decision, config: Config, path = ''): Buffer {
    let c = this.#perConfig.get(config);
    if (!c) this.#perConfig.set(config, (c = { plan: allowPlan(config), bytes: new LRUCache({ max: this.maxEntries }), allowed: new Map(), allowedCount: 0 }));
    const r = d.route;
    // Answers with rate limit metadata change every second (their resets): keyed by it below.
    if (d.allowed && r.kind === 'protocol' && r.fixedId !== undefined && d.keyId !== undefined && d.group !== undefined && !d.modelIsKey && !d.removeQuery && !d.rateLimit) {
      return this.#encodeAllowed(c, d, config, path, r.fixedId, d.keyId, d.group, d.modelKnown && d.model !== undefined ? d.model : '');
    }
    return this.#encodeAny(c, d, config, path);
  }

  #encodeAllowed(c: PerConfig, d: Decision, config: Config, path: string, fixedId: number, keyId: string, group: string, model: string): Buffer {
    let byKey = c.allowed.get(fixedId);
    if (!byKey) c.allowed.set(fixedId, (byKey = new Map()));
    let byGroup = byKey.get(keyId);
    if (!byGroup) byKey.set(keyId, (byGroup = new Map()));
    let byModel = byGroup.get(group);
    if (!byModel) byGroup.set(group, (byModel = new Map()));
    let bytes = byModel.get(model);
    if (!bytes) {
      if (c.allowedCount >= this.maxEntries) {
        c.allowed.clear();
        c.allowedCount = 0;
        return this.#encodeAllowed(c, d, config, path, fixedId, keyId, group, model);
      }
      bytes = this.#encodeAny(c, d, config, path);
      byModel.set(model, bytes);
      c.allowedCount++;
    }
    return bytes;
  }

  #encodeAny(c: PerConfig, d: Decision, config: Config, path: string): Buffer {
    const key = responseKey(d, path);
    let bytes = c.bytes.get(key);
    if (!bytes) {
      bytes = this.serialize(writeCheckResponse(d, config, c.plan, loggedModel(d), logPath(d, path)));
      c.bytes.set(key, bytes);
    }
    return bytes;
  }
}

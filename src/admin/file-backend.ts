/**
 * The admin API on the file store: what it writes lives in modelgate's own state file
 * (`<config>.admin.json` beside the config, mode 0600, written atomically), never in the operator's
 * YAML. Keys defined in the YAML are shown but not changed here: a write to one answers 409 naming
 * the file. Keys created here are served by the FileStore (setManaged) and so seen by the Check.
 *
 * A key's `base` is what it would have had spent nothing: the balance it was created with plus its
 * credits plus what its id had spent before it was created (the meter counts spending by id, and a
 * deleted key's id may be used again). Its balance is base minus what it spent.
 *
 * The command line writes tokens to the same file while a service runs: every operation first
 * re-reads the file when it changed on disk (one stat), so a token created by `admin-tokens new`
 * works at once. One writer at a time is assumed (an admin write is rare and quick).
 */
import { randomUUID } from 'node:crypto';
import { chmodSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { isBudget, type Budget } from '../store/budget-window';
import type { FileStore, ManagedKeyRecord } from '../store/file-store';
import {
  toLimits,
  type GroupRecord,
  type Limits,
  type ModelPrice,
  type Protocol,
  type UsageEntry,
} from '../store/store';
import type {
  Actor,
  AdminBackend,
  AuditView,
  CreditView,
  GroupChange,
  GroupView,
  KeyChange,
  KeyView,
  NewKeyRecord,
  UsageFilter,
  WebhookDelivery,
} from './backend';
import {
  deliveryCursor,
  DELIVERIES_MAX,
  parseDeliveryCursor,
  laterDelivery,
  isoTime,
  mergeModelBudgets,
  modelBudgetsView,
  newerFirst,
  tokenView,
  type TokenView,
  type UsageTotals,
} from './backend';
import {
  AdminRefusal,
  groupExists,
  groupHasKeys,
  groupNotFound,
  keyNotFound,
  webhookExists,
  webhookNotFound,
} from './refusal';
import { SCOPES, type TokenRecord } from './tokens';
import { changedWebhook, CONFIG_WEBHOOK_ID, webhookView, type WebhookChange, type WebhookRecord } from './webhooks';

/** Audit entries kept in the state file (the oldest are dropped past it). */
const AUDIT_MAX = 10_000;
/** Credits remembered for idempotency. */
const CREDITS_MAX = 100_000;

interface StoredKey {
  id: string;
  sha256: string;
  group: string;
  /** Balance before spending (see above); null: unlimited. */
  base: number | null;
  expiresAt: number | null;
  disabled: boolean;
  limits: Limits | null;
  /** Absent in a state written before budgets: none. */
  budget?: Budget | null;
  /** Budgets per window by model name; absent in a state written before them: none. */
  modelBudgets?: Record<string, Budget> | null;
  metadata: Record<string, string>;
  createdAt: number;
  previous: { sha256: string; until: number } | null;
}

interface AdminState {
  version: 1;
  tokens: TokenRecord[];
  keys: StoredKey[];
  credits: Record<string, CreditView>;
  audit: AuditView[];
  /** Budget alert deliveries, oldest first (absent in a state written before them; webhookId absent: config). */
  deliveries?: WebhookDelivery[];
  /** Webhooks created through the API, their secrets included (absent in a state written before them). */
  webhooks?: WebhookRecord[];
  /** Groups created through the API (absent in a state written before them). */
  groups?: StoredGroup[];
}

interface StoredModel {
  name: string;
  protocols: Protocol[] | null;
  available: boolean;
  price: ModelPrice | null;
  maxOutputTokens: number | null;
}

interface StoredGroup {
  name: string;
  available: boolean;
  models: StoredModel[];
  limits: Limits | null;
  budget: Budget | null;
  createdAt: number;
}

function groupRecord(g: StoredGroup): GroupRecord {
  return {
    name: g.name,
    available: g.available,
    models: new Map(g.models.map((m) => [m.name, { ...m }])),
    limits: toLimits(g.limits),
    budget: g.budget,
  };
}

function storedGroup(g: GroupRecord, createdAt: number): StoredGroup {
  return {
    name: g.name,
    available: g.available,
    models: [...g.models.values()].map((m) => ({
      name: m.name,
      protocols: m.protocols === null ? null : [...m.protocols],
      available: m.available,
      price: m.price ?? null,
      maxOutputTokens: m.maxOutputTokens ?? null,
    })),
    limits: g.limits ?? null,
    budget: g.budget ?? null,
    createdAt,
  };
}

const empty = (): AdminState => ({ version: 1, tokens: [], keys: [], credits: {}, audit: [] });

/** The admin state file of a config: `<config without .yaml>.admin.json`. */
export function adminStatePath(configPath: string): string {
  return `${configPath.replace(/\.(ya?ml|json)$/i, '')}.admin.json`;
}

/** Reads the state file (absent: empty); a file that is not a usable state stops the caller. */
export function readAdminState(path: string): AdminState {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return empty();
    throw err;
  }
  const bad = (why: string): Error =>
    new Error(
      `the admin state file ${path} is not usable (${why}): fix it, or move it away to start without API keys and tokens`,
    );
  let d: Partial<AdminState>;
  try {
    d = JSON.parse(text) as Partial<AdminState>;
  } catch (err) {
    throw bad((err as Error).message);
  }
  if (
    !d ||
    d.version !== 1 ||
    !Array.isArray(d.tokens) ||
    !Array.isArray(d.keys) ||
    !Array.isArray(d.audit) ||
    typeof d.credits !== 'object' ||
    d.credits === null
  )
    throw bad('not a version 1 state');
  if (
    d.deliveries !== undefined &&
    !(
      Array.isArray(d.deliveries) &&
      d.deliveries.every((x) => typeof x?.eventId === 'string' && typeof x.createdAt === 'string')
    )
  )
    throw bad('deliveries is not a list of deliveries');
  if (
    d.webhooks !== undefined &&
    !(
      Array.isArray(d.webhooks) &&
      d.webhooks.every(
        (w) =>
          typeof w?.id === 'string' &&
          typeof w.url === 'string' &&
          typeof w.secret === 'string' &&
          Array.isArray(w.thresholds) &&
          w.thresholds.every((t) => typeof t === 'number' && Number.isFinite(t)) &&
          (w.subjects === null || (Array.isArray(w.subjects) && w.subjects.every((x) => typeof x === 'string'))) &&
          typeof w.enabled === 'boolean',
      )
    )
  )
    throw bad('webhooks is not a list of webhooks');
  if (
    d.groups !== undefined &&
    !(
      Array.isArray(d.groups) &&
      d.groups.every(
        (g) =>
          typeof g?.name === 'string' &&
          typeof g.available === 'boolean' &&
          Array.isArray(g.models) &&
          g.models.every((m) => typeof m?.name === 'string' && typeof m.available === 'boolean') &&
          (g.budget == null || isBudget(g.budget)),
      )
    )
  )
    throw bad('groups is not a list of groups');
  for (const x of d.deliveries ?? []) (x as { webhookId?: string }).webhookId ??= CONFIG_WEBHOOK_ID;
  for (const t of d.tokens)
    if (!(SCOPES as readonly string[]).includes(t.scope) || !/^[0-9a-f]{64}$/.test(t.sha256))
      throw bad(`token ${JSON.stringify(t.id)} is not usable`);
  for (const k of d.keys)
    if (
      !/^[0-9a-f]{64}$/.test(k.sha256) ||
      !(k.base === null || Number.isFinite(k.base)) ||
      !(k.budget == null || isBudget(k.budget)) ||
      !(k.modelBudgets == null || (typeof k.modelBudgets === 'object' && Object.values(k.modelBudgets).every(isBudget)))
    )
      throw bad(`key ${JSON.stringify(k.id)} is not usable`);
  return d as AdminState;
}

/** Writes the state atomically (a temporary file, then rename), owner only: it holds hashes and amounts. */
export function writeAdminState(path: string, state: AdminState): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(state)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

/** Adds a token to a config's admin state file (the command line; the running service sees it at its next request). */
export function addTokenToFile(path: string, token: TokenRecord, actor: Actor, now = Date.now()): void {
  const state = readAdminState(path);
  if (state.tokens.some((t) => t.id === token.id))
    throw new AdminRefusal(409, 'token_exists', `a token with id ${JSON.stringify(token.id)} already exists`);
  state.tokens.push(token);
  state.audit.push(auditEntry(actor, 'token.create', token.id, null, { id: token.id, scope: token.scope }, now));
  writeAdminState(path, state);
}

function auditEntry(
  actor: Actor,
  action: string,
  target: string,
  before: unknown,
  after: unknown,
  now: number,
): AuditView {
  return {
    id: randomUUID(),
    time: isoTime(now),
    actor: actor.tokenId,
    address: actor.address,
    requestId: actor.requestId,
    action,
    target,
    before,
    after,
  };
}

export interface FileBackendOptions {
  readonly path: string;
  /** The config file, named in hints about keys defined there. */
  readonly configPath: string;
  readonly now?: () => number;
  /** How often the file is checked for changes made elsewhere (default 1000 ms; 0: only at each admin request). */
  readonly pollMs?: number;
  /** A state file changed elsewhere that cannot be read (the last good state stays in use). */
  readonly onError?: (err: Error) => void;
  /** The groups of modelgate's own state were handed to the store (at start and after each change). */
  readonly onGroups?: () => void;
  /**
   * What a key id has spent, for a process without the store's meter (the command line); default: the store's meter.
   */
  readonly spent?: (keyId: string) => number;
}

export class FileAdminBackend implements AdminBackend {
  readonly kind = 'file';
  #state: AdminState;
  #stamp = '';
  readonly #now: () => number;
  readonly #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: FileStore,
    private readonly opts: FileBackendOptions,
  ) {
    this.#now = opts.now ?? Date.now;
    this.#state = readAdminState(opts.path);
    this.#stamp = this.#fileStamp();
    this.#publish();
    // Changes another process made (the command line, another worker) reach this one's Check within a second.
    if (opts.pollMs !== 0) {
      this.#timer = setInterval(() => {
        try {
          this.#fresh();
        } catch (err) {
          opts.onError?.(err as Error);
        }
      }, opts.pollMs ?? 1000);
      this.#timer.unref();
    }
  }

  #fileStamp(): string {
    try {
      const s = statSync(this.opts.path);
      return `${s.mtimeMs}:${s.size}:${s.ino}`;
    } catch {
      // no file (yet): '' differs from every stamp, so the file's arrival is seen
      return '';
    }
  }

  /** Re-reads the file when another process (the command line) changed it. */
  #fresh(): AdminState {
    const stamp = this.#fileStamp();
    if (stamp !== this.#stamp) {
      // Taken first: a file that cannot be read is reported once, not at every poll.
      this.#stamp = stamp;
      this.#state = readAdminState(this.opts.path);
      this.#publish();
    }
    return this.#state;
  }

  /** Writes the state; a write that fails undoes the change in memory too (the file is what was made). */
  #save(): void {
    try {
      writeAdminState(this.opts.path, this.#state);
    } catch (err) {
      this.#state = readAdminState(this.opts.path);
      this.#stamp = this.#fileStamp();
      throw err;
    }
    this.#stamp = this.#fileStamp();
    this.#publish();
  }

  /** Hands the keys to the FileStore (the Check sees them at once). */
  #publish(): void {
    this.store.setManagedGroups(new Map((this.#state.groups ?? []).map((g) => [g.name, groupRecord(g)])));
    this.opts.onGroups?.();
    this.store.setManaged(
      this.#state.keys.map((k): ManagedKeyRecord => {
        const limits = toLimits(k.limits);
        return {
          id: k.id,
          sha256: k.sha256,
          group: k.group,
          balance: k.base,
          disabled: k.disabled,
          expiresAt: k.expiresAt,
          ...(limits ? { limits } : {}),
          ...(k.budget ? { budget: k.budget } : {}),
          ...(k.modelBudgets ? { modelBudgets: mergeModelBudgets(null, k.modelBudgets) } : {}),
          previous: k.previous,
        };
      }),
    );
  }

  #audit(actor: Actor, action: string, target: string, before: unknown, after: unknown): void {
    const a = this.#state.audit;
    a.push(auditEntry(actor, action, target, before, after, this.#now()));
    if (a.length > AUDIT_MAX) a.splice(0, a.length - AUDIT_MAX);
  }

  #spent(id: string): number {
    return this.opts.spent?.(id) ?? this.store.meter?.spent(id) ?? 0;
  }

  #balance(id: string, base: number | null): number | null {
    if (base === null) return null;
    return Math.round((base - this.#spent(id)) * 1e12) / 1e12;
  }

  #view(k: StoredKey): KeyView {
    const now = this.#now();
    return {
      id: k.id,
      group: k.group,
      balance: this.#balance(k.id, k.base),
      disabled: k.disabled,
      expiresAt: k.expiresAt === null ? null : isoTime(k.expiresAt),
      limits: toLimits(k.limits) as Record<string, number> | null,
      budget: k.budget ?? null,
      modelBudgets: modelBudgetsView(k.modelBudgets),
      metadata: k.metadata,
      source: 'api',
      createdAt: isoTime(k.createdAt),
      previousSecretValidUntil: k.previous && k.previous.until > now ? isoTime(k.previous.until) : null,
    };
  }

  /** A key of the config file, as the API shows it (read only). */
  async #configView(id: string): Promise<KeyView | null> {
    if (!this.store.configKeyIds().has(id)) return null;
    const k = await this.store.findKeyById(id);
    if (!k) return null;
    const served = await this.store.findKey(k.sha256);
    return {
      id: k.id,
      group: k.group,
      balance: served?.balance ?? k.balance,
      disabled: k.disabled,
      expiresAt: k.expiresAt === null ? null : isoTime(k.expiresAt),
      limits: (k.limits ?? null) as Record<string, number> | null,
      budget: k.budget ?? null,
      modelBudgets: modelBudgetsView(k.modelBudgets),
      metadata: {},
      source: 'config',
      createdAt: null,
      previousSecretValidUntil: null,
    };
  }

  #inConfig(id: string): AdminRefusal {
    return new AdminRefusal(
      409,
      'key_in_config',
      `key ${JSON.stringify(id)} is defined in ${this.opts.configPath}`,
      `change it in ${this.opts.configPath} (the admin API writes only the keys it created); or create a new key through the API`,
    );
  }

  #find(id: string): StoredKey {
    if (this.store.configKeyIds().has(id)) throw this.#inConfig(id);
    const k = this.#fresh().keys.find((x) => x.id === id);
    if (!k) throw keyNotFound(id);
    return k;
  }

  async findToken(sha256: string): Promise<TokenRecord | null> {
    return this.#fresh().tokens.find((t) => t.sha256 === sha256) ?? null;
  }

  async createToken(token: TokenRecord, actor: Actor): Promise<void> {
    const s = this.#fresh();
    if (s.tokens.some((t) => t.id === token.id))
      throw new AdminRefusal(409, 'token_exists', `a token with id ${JSON.stringify(token.id)} already exists`);
    s.tokens.push(token);
    this.#audit(actor, 'token.create', token.id, null, { id: token.id, scope: token.scope });
    this.#save();
  }

  async listTokens(): Promise<TokenView[]> {
    return this.#fresh().tokens.map(tokenView);
  }

  async deleteToken(id: string, actor: Actor): Promise<TokenView> {
    const s = this.#fresh();
    const t = s.tokens.find((x) => x.id === id);
    if (!t)
      throw new AdminRefusal(
        404,
        'token_not_found',
        `no token with id ${JSON.stringify(id)} in ${this.opts.path}`,
        'tokens of the config file (adminTokens) are removed there',
      );
    s.tokens = s.tokens.filter((x) => x !== t);
    this.#audit(actor, 'token.delete', id, { id, scope: t.scope }, null);
    this.#save();
    return tokenView(t);
  }

  async listKeys(group?: string): Promise<KeyView[]> {
    const out: KeyView[] = [];
    for (const id of this.store.configKeyIds()) {
      const v = await this.#configView(id);
      if (v && (group === undefined || v.group === group)) out.push(v);
    }
    for (const k of this.#fresh().keys) if (group === undefined || k.group === group) out.push(this.#view(k));
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async getKey(id: string): Promise<KeyView | null> {
    const c = await this.#configView(id);
    if (c) return c;
    const k = this.#fresh().keys.find((x) => x.id === id);
    return k ? this.#view(k) : null;
  }

  async createKey(n: NewKeyRecord, actor: Actor): Promise<KeyView> {
    const s = this.#fresh();
    if (this.store.configKeyIds().has(n.id)) throw this.#inConfig(n.id);
    if (s.keys.some((k) => k.id === n.id))
      throw new AdminRefusal(409, 'key_exists', `a key with id ${JSON.stringify(n.id)} already exists`);
    if (!this.store.groups().has(n.group)) throw groupNotFound(n.group);
    const spent = this.#spent(n.id);
    const k: StoredKey = {
      id: n.id,
      sha256: n.sha256,
      group: n.group,
      base: n.balance === null ? null : n.balance + spent,
      expiresAt: n.expiresAt,
      disabled: n.disabled,
      limits: n.limits,
      budget: n.budget,
      modelBudgets: n.modelBudgets ? modelBudgetsView(n.modelBudgets) : null,
      metadata: { ...n.metadata },
      createdAt: this.#now(),
      previous: null,
    };
    s.keys.push(k);
    const view = this.#view(k);
    this.#audit(actor, 'key.create', k.id, null, view);
    this.#save();
    return view;
  }

  async updateKey(id: string, c: KeyChange, actor: Actor): Promise<KeyView> {
    const k = this.#find(id);
    if (c.group !== undefined && !this.store.groups().has(c.group)) throw groupNotFound(c.group);
    const before = this.#view(k);
    if (c.group !== undefined) k.group = c.group;
    if (c.expiresAt !== undefined) k.expiresAt = c.expiresAt;
    if (c.disabled !== undefined) k.disabled = c.disabled;
    if (c.limits !== undefined) k.limits = c.limits;
    if (c.budget !== undefined) k.budget = c.budget;
    if (c.modelBudgets !== undefined) {
      const m = mergeModelBudgets(k.modelBudgets, c.modelBudgets);
      k.modelBudgets = m ? modelBudgetsView(m) : null;
    }
    if (c.metadata !== undefined) k.metadata = { ...c.metadata };
    const after = this.#view(k);
    this.#audit(actor, 'key.update', id, before, after);
    this.#save();
    return after;
  }

  async deleteKey(id: string, actor: Actor): Promise<KeyView> {
    const k = this.#find(id);
    const before = this.#view(k);
    this.#state.keys = this.#state.keys.filter((x) => x !== k);
    this.#audit(actor, 'key.delete', id, before, null);
    this.#save();
    return before;
  }

  async rotateKey(id: string, sha256: string, previousUntil: number | null, actor: Actor): Promise<KeyView> {
    const k = this.#find(id);
    const before = this.#view(k);
    k.previous =
      previousUntil !== null && previousUntil > this.#now() ? { sha256: k.sha256, until: previousUntil } : null;
    k.sha256 = sha256;
    const after = this.#view(k);
    this.#audit(actor, 'key.rotate', id, before, after);
    this.#save();
    return after;
  }

  async credit(
    id: string,
    amount: number,
    idempotencyKey: string,
    reason: string | null,
    actor: Actor,
  ): Promise<CreditView> {
    const s = this.#fresh();
    const done = Object.hasOwn(s.credits, idempotencyKey) ? s.credits[idempotencyKey] : undefined;
    if (done) {
      if (done.keyId !== id || done.amount !== amount) {
        throw new AdminRefusal(
          409,
          'idempotency_key_reused',
          'this idempotency key was used for another credit',
          'use a new idempotency key for a different credit',
        );
      }
      return { ...done, replayed: true };
    }
    const k = this.#find(id);
    if (k.base === null)
      throw new AdminRefusal(
        409,
        'balance_unlimited',
        `key ${JSON.stringify(id)} has an unlimited balance`,
        'PATCH cannot set a balance; create the key with a balance',
      );
    const before = this.#view(k);
    const base = Math.round((k.base + amount) * 1e12) / 1e12;
    if (!Number.isFinite(base))
      throw new AdminRefusal(422, 'amount_invalid', 'the balance would not be a finite number');
    k.base = base;
    const credit: CreditView = {
      id: randomUUID(),
      keyId: id,
      amount,
      balance: this.#balance(id, base),
      idempotencyKey,
      reason,
      time: isoTime(this.#now()),
      replayed: false,
    };
    // Defined, not assigned: `__proto__` assigned would set the record's prototype and be forgotten.
    Object.defineProperty(s.credits, idempotencyKey, {
      value: credit,
      enumerable: true,
      writable: true,
      configurable: true,
    });
    const ids = Object.keys(s.credits);
    if (ids.length > CREDITS_MAX) for (const old of ids.slice(0, ids.length - CREDITS_MAX)) delete s.credits[old];
    this.#audit(
      actor,
      'key.credit',
      id,
      { balance: before.balance },
      { balance: credit.balance, amount, idempotencyKey, reason },
    );
    this.#save();
    return credit;
  }

  /** Every ledger entry the filter selects, newest first (the ledger holds the last 2,000 or so). */
  async #selected(f: UsageFilter): Promise<UsageEntry[]> {
    const meter = this.store.meter;
    if (!meter) return [];
    const rows = await meter.usage({ keyId: f.keyId, group: f.group, since: f.since, limit: Number.MAX_SAFE_INTEGER });
    return rows
      .filter((e) => (f.model === undefined || e.model === f.model) && (f.until === undefined || e.time < f.until))
      .sort(newerFirst);
  }

  async usage(f: UsageFilter): Promise<UsageEntry[]> {
    const rows = await this.#selected(f);
    const after = f.after;
    const from =
      after === undefined
        ? 0
        : rows.findIndex((e) => newerFirst({ time: after.time, requestId: after.requestId } as UsageEntry, e) < 0);
    return from < 0 ? [] : rows.slice(from, from + f.limit);
  }

  async usageTotals(f: UsageFilter): Promise<UsageTotals> {
    return totalsOf(await this.#selected(f));
  }

  async audit(limit: number, before?: string): Promise<AuditView[]> {
    const a = this.#fresh().audit;
    const end = before === undefined ? a.length : a.findIndex((e) => e.id === before);
    return end <= 0 ? [] : a.slice(Math.max(0, end - limit), end).reverse();
  }

  async listGroups(): Promise<GroupView[]> {
    return [...this.store.groups().values()].map(groupView);
  }

  async recordDelivery(d: WebhookDelivery): Promise<void> {
    const s = this.#fresh();
    const list = (s.deliveries ??= []);
    const at = list.findIndex((x) => x.eventId === d.eventId && x.webhookId === d.webhookId);
    if (at >= 0) list[at] = laterDelivery(list[at], d);
    else list.push(d);
    if (list.length > DELIVERIES_MAX) list.splice(0, list.length - DELIVERIES_MAX);
    this.#save();
  }

  async listDeliveries(limit: number, before?: string, webhookId?: string): Promise<WebhookDelivery[]> {
    const list = (this.#fresh().deliveries ?? [])
      .filter((x) => webhookId === undefined || x.webhookId === webhookId)
      .sort(newerDelivery);
    if (before === undefined) return list.slice(0, limit);
    const c = parseDeliveryCursor(before);
    const from = list.findIndex((x) => deliveryCursor(x) === deliveryCursor(c)) + 1;
    return from <= 0 ? [] : list.slice(from, from + limit);
  }

  #webhookInConfig(id: string): AdminRefusal {
    return new AdminRefusal(
      409,
      'webhook_in_config',
      `webhook ${JSON.stringify(id)} is meter.budgetAlerts of ${this.opts.configPath}`,
      `change it in ${this.opts.configPath} (read at start); or create a webhook through the API`,
    );
  }

  #webhook(id: string): WebhookRecord {
    if (id === CONFIG_WEBHOOK_ID) throw this.#webhookInConfig(id);
    const w = (this.#fresh().webhooks ?? []).find((x) => x.id === id);
    if (!w) throw webhookNotFound(id);
    return w;
  }

  #replaceWebhook(id: string, w: WebhookRecord | null): void {
    const s = this.#state;
    s.webhooks = (s.webhooks ?? []).flatMap((x) => (x.id !== id ? [x] : w ? [w] : []));
  }

  async listWebhooks(): Promise<WebhookRecord[]> {
    return [...(this.#fresh().webhooks ?? [])].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async createWebhook(w: WebhookRecord, actor: Actor): Promise<WebhookRecord> {
    const s = this.#fresh();
    if (w.id === CONFIG_WEBHOOK_ID) throw this.#webhookInConfig(w.id);
    if ((s.webhooks ?? []).some((x) => x.id === w.id)) throw webhookExists(w.id);
    (s.webhooks ??= []).push(w);
    this.#audit(actor, 'webhook.create', w.id, null, webhookView(w));
    this.#save();
    return w;
  }

  async updateWebhook(id: string, c: WebhookChange, actor: Actor): Promise<WebhookRecord> {
    const w = this.#webhook(id);
    const after = changedWebhook(w, c);
    this.#replaceWebhook(id, after);
    this.#audit(actor, 'webhook.update', id, webhookView(w), webhookView(after));
    this.#save();
    return after;
  }

  async deleteWebhook(id: string, actor: Actor): Promise<WebhookRecord> {
    const w = this.#webhook(id);
    this.#replaceWebhook(id, null);
    this.#audit(actor, 'webhook.delete', id, webhookView(w), null);
    this.#save();
    return w;
  }

  async rotateWebhookSecret(id: string, secret: string, actor: Actor): Promise<WebhookRecord> {
    const w = this.#webhook(id);
    const after: WebhookRecord = { ...w, secret, secretRotatedAt: this.#now() };
    this.#replaceWebhook(id, after);
    this.#audit(actor, 'webhook.rotate-secret', id, webhookView(w), webhookView(after));
    this.#save();
    return after;
  }

  #groupInConfig(name: string): AdminRefusal {
    return new AdminRefusal(
      409,
      'group_in_config',
      `group ${JSON.stringify(name)} is defined in ${this.opts.configPath}`,
      `change it in ${this.opts.configPath}; the service reloads the file`,
    );
  }

  #group(name: string): StoredGroup {
    if (this.store.configGroupNames().has(name)) throw this.#groupInConfig(name);
    const g = (this.#fresh().groups ?? []).find((x) => x.name === name);
    if (!g) throw new AdminRefusal(404, 'group_not_found', `no group named ${JSON.stringify(name)}`);
    return g;
  }

  async updateGroup(name: string, c: GroupChange, actor: Actor): Promise<GroupView> {
    const g = this.#group(name);
    const before = groupView(groupRecord(g));
    if (c.available !== undefined) g.available = c.available;
    if (c.limits !== undefined) g.limits = c.limits;
    if (c.budget !== undefined) g.budget = c.budget;
    for (const m of c.models ?? []) {
      const at = g.models.findIndex((x) => x.name === m.name);
      if (m.remove) {
        if (at < 0) {
          this.#state = readAdminState(this.opts.path);
          throw new AdminRefusal(
            422,
            'model_not_in_group',
            `group ${JSON.stringify(name)} has no model ${JSON.stringify(m.name)} to remove`,
          );
        }
        g.models.splice(at, 1);
        continue;
      }
      const old = at >= 0 ? g.models[at] : undefined;
      const next: StoredModel = {
        name: m.name,
        protocols:
          m.protocols !== undefined ? (m.protocols === null ? null : [...m.protocols]) : (old?.protocols ?? null),
        available: m.available ?? old?.available ?? true,
        price: m.price !== undefined ? m.price : (old?.price ?? null),
        maxOutputTokens: m.maxOutputTokens !== undefined ? m.maxOutputTokens : (old?.maxOutputTokens ?? null),
      };
      if (at >= 0) g.models[at] = next;
      else g.models.push(next);
    }
    const after = groupView(groupRecord(g));
    this.#audit(actor, 'group.update', name, before, after);
    this.#save();
    return after;
  }

  async createGroup(group: GroupRecord, actor: Actor): Promise<GroupView> {
    const s = this.#fresh();
    if (this.store.configGroupNames().has(group.name)) throw this.#groupInConfig(group.name);
    if ((s.groups ?? []).some((g) => g.name === group.name)) throw groupExists(group.name);
    const stored = storedGroup(group, this.#now());
    (s.groups ??= []).push(stored);
    const view = groupView(groupRecord(stored));
    this.#audit(actor, 'group.create', group.name, null, view);
    this.#save();
    return view;
  }

  async deleteGroup(name: string, actor: Actor): Promise<GroupView> {
    const g = this.#group(name);
    const ids = this.#state.keys.filter((k) => k.group === name).map((k) => k.id);
    if (ids.length > 0) throw groupHasKeys(name, ids.sort());
    const before = groupView(groupRecord(g));
    this.#state.groups = (this.#state.groups ?? []).filter((x) => x !== g);
    this.#audit(actor, 'group.delete', name, before, null);
    this.#save();
    return before;
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
  }
}

/** Newest first: by creation time, then by event id, then by webhook id, all descending. */
export function newerDelivery(a: WebhookDelivery, b: WebhookDelivery): number {
  const desc = (x: string, y: string): number => (x < y ? 1 : x > y ? -1 : 0);
  return desc(a.createdAt, b.createdAt) || desc(a.eventId, b.eventId) || desc(a.webhookId, b.webhookId);
}

/** The totals of some usage entries. */
export function totalsOf(rows: readonly UsageEntry[]): UsageTotals {
  const t = { requests: rows.length, inputTokens: 0, outputTokens: 0, cost: 0 };
  for (const e of rows) {
    t.inputTokens += e.inputTokens;
    t.outputTokens += e.outputTokens;
    t.cost += e.cost;
  }
  t.cost = Math.round(t.cost * 1e12) / 1e12;
  return t;
}

/** A group as the API shows it. */
export function groupView(g: import('../store/store').GroupRecord): GroupView {
  return {
    name: g.name,
    available: g.available,
    limits: (g.limits ?? null) as Record<string, number> | null,
    budget: g.budget ?? null,
    models: [...g.models.values()].map((m) => ({
      name: m.name,
      protocols: m.protocols === null ? null : [...m.protocols],
      available: m.available,
      price: m.price ? { input: m.price.input, output: m.price.output, cachedInput: m.price.cachedInput } : null,
      maxOutputTokens: m.maxOutputTokens ?? null,
    })),
  };
}

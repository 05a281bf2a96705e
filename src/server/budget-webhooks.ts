/**
 * Sends each budget alert to every webhook that takes it: the config file's (meter.budgetAlerts,
 * read at start) and those of the admin API (admin/webhooks.ts), each by its own BudgetWebhook
 * (signed with its own secret, retried, its deliveries recorded under its id).
 *
 * The admin API's webhooks are read from the store when an alert fires and again before each retry,
 * so a webhook created, changed or removed on any replica holds at once for the next alert, and a
 * removed one gets no more attempts. Which thresholds fire at all (BudgetAlerts) is read from a copy
 * refreshed every `pollMs` and at once after a change made through this replica's API.
 */
import type { WebhookDelivery } from '../admin/backend';
import { CONFIG_WEBHOOK_ID, watches, type WebhookRecord } from '../admin/webhooks';
import type { BudgetAlertEvent } from '../meter/budget-alerts';
import { BudgetWebhook, type WebhookDeps } from './budget-webhook';

export interface BudgetWebhooksDeps {
  /** meter.budgetAlerts of the config file, or null. */
  readonly config: { readonly url: string; readonly secret: string; readonly thresholds: readonly number[] } | null;
  /** The admin API's webhooks (undefined: no admin API). */
  readonly load?: () => Promise<readonly WebhookRecord[]>;
  readonly pollMs?: number;
  readonly now?: () => number;
  readonly delay?: (ms: number) => Promise<void>;
  readonly attempts?: number;
  readonly log: WebhookDeps['log'];
  readonly record?: (d: WebhookDelivery) => void;
  /** The store could not list the webhooks (the last list read stays in use). */
  readonly onLoadError?: (err: Error) => void;
}

export class BudgetWebhooks {
  #known: readonly WebhookRecord[] = [];
  readonly #senders = new Map<string, BudgetWebhook>();
  readonly #config: BudgetWebhook | undefined;
  readonly #timer: NodeJS.Timeout | undefined;
  #pending = new Set<Promise<void>>();

  constructor(private readonly deps: BudgetWebhooksDeps) {
    if (deps.config) this.#config = this.#sender(CONFIG_WEBHOOK_ID, deps.config);
    if (deps.load) {
      void this.refresh();
      if (deps.pollMs !== 0) {
        this.#timer = setInterval(() => void this.refresh(), deps.pollMs ?? 1000);
        this.#timer.unref();
      }
    }
  }

  #sender(id: string, w: { readonly url: string; readonly secret: string }): BudgetWebhook {
    return new BudgetWebhook({
      webhookId: id,
      url: w.url,
      secret: w.secret,
      log: (o) => this.deps.log({ ...o, webhookId: id } as Parameters<WebhookDeps['log']>[0]),
      ...(this.deps.now ? { now: this.deps.now } : {}),
      ...(this.deps.delay ? { delay: this.deps.delay } : {}),
      ...(this.deps.attempts ? { attempts: this.deps.attempts } : {}),
      ...(this.deps.record ? { record: this.deps.record } : {}),
      ...(id === CONFIG_WEBHOOK_ID ? {} : { current: () => this.#current(id) }),
    });
  }

  async #current(id: string): Promise<{ url: string; secret: string } | null> {
    const w = (await this.#load()).find((x) => x.id === id);
    return w && w.enabled ? { url: w.url, secret: w.secret } : null;
  }

  async #load(): Promise<readonly WebhookRecord[]> {
    if (!this.deps.load) return [];
    this.#known = await this.deps.load();
    return this.#known;
  }

  /** Re-reads the admin API's webhooks (their thresholds). */
  async refresh(): Promise<void> {
    try {
      await this.#load();
    } catch (err) {
      this.deps.onLoadError?.(err as Error);
    }
  }

  /** Every threshold some webhook takes (BudgetAlerts fires only these). */
  thresholds(): number[] {
    const all = new Set<number>(this.deps.config?.thresholds ?? []);
    for (const w of this.#known) if (w.enabled) for (const t of w.thresholds) all.add(t);
    return [...all].sort((a, b) => a - b);
  }

  /** Queues the event's delivery to each webhook that takes it (never throws). */
  send(e: BudgetAlertEvent): void {
    if (this.#config && this.deps.config?.thresholds.includes(e.threshold)) this.#config.send(e);
    if (!this.deps.load) return;
    const p = this.#dispatch(e).finally(() => this.#pending.delete(p));
    this.#pending.add(p);
  }

  async #dispatch(e: BudgetAlertEvent): Promise<void> {
    let list: readonly WebhookRecord[];
    try {
      list = await this.#load();
    } catch (err) {
      this.deps.onLoadError?.(err as Error);
      list = this.#known;
    }
    for (const w of list) {
      if (!w.enabled || !w.thresholds.includes(e.threshold) || !watches(w.subjects, e.subject.kind, e.subject.name))
        continue;
      let s = this.#senders.get(w.id);
      if (!s) this.#senders.set(w.id, (s = this.#sender(w.id, w)));
      s.send(e);
    }
    for (const id of this.#senders.keys()) if (!list.some((w) => w.id === id)) this.#senders.delete(id);
  }

  /** Resolves when every queued delivery has ended (delivered, given up, or its webhook removed). */
  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
    await this.#config?.idle();
    for (const s of [...this.#senders.values()]) await s.idle();
  }

  close(): void {
    clearInterval(this.#timer);
  }
}

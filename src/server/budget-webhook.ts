/**
 * Delivers budget alerts (meter/budget-alerts.ts) to a webhook: a JSON POST signed with
 * HMAC-SHA256 over `<timestamp>.<body>` (the timestamp in Unix seconds, sent with the signature so
 * a receiver can refuse an old replay), the event id in its own header for idempotency, retried with
 * exponential backoff while the receiver fails (a status other than 2xx, or no answer), and every
 * outcome logged. Time and waiting are parameters (tests use a fake clock and no real waits).
 */
import { createHmac } from 'node:crypto';
import { WEBHOOK_HEADER } from '../contract/headers';
import type { WebhookDelivery } from '../admin/backend';
import type { BudgetAlertEvent } from '../meter/budget-alerts';

export const SIGNATURE_HEADER = WEBHOOK_HEADER.signature;
export const EVENT_ID_HEADER = WEBHOOK_HEADER.eventId;

/** `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
export function signature(secret: string, timestamp: number, body: string): string {
  return `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

export interface WebhookDeps {
  /** The webhook's id in deliveries (default `config`: meter.budgetAlerts). */
  readonly webhookId?: string;
  readonly url: string;
  readonly secret: string;
  /**
   * The webhook as it is now, read before each attempt (a webhook of the admin API may change or go):
   * null stops the delivery (recorded as failed, `webhook_removed`).
   */
  readonly current?: () => Promise<{ readonly url: string; readonly secret: string } | null>;
  readonly now?: () => number;
  /** Waits before a retry (tests: resolves at once and records the delay). */
  readonly delay?: (ms: number) => Promise<void>;
  /** Attempts in all (default 6: waits of 1, 2, 4, 8 and 16 s between them). */
  readonly attempts?: number;
  readonly timeoutMs?: number;
  readonly log: (outcome: { id: string; attempt: number; delivered: boolean; status?: number; error?: string }) => void;
  /** Each change of a delivery's state (queued, after each attempt), for the admin API's delivery status. */
  readonly record?: (d: WebhookDelivery) => void;
}

/** Whose budget, as a delivery names it: `key:<id>`, `group:<name>`, `model:<key id>:<model>`. */
export function deliverySubject(e: BudgetAlertEvent): string {
  return e.subject.kind === 'model'
    ? `model:${e.subject.name}:${e.subject.model}`
    : `${e.subject.kind}:${e.subject.name}`;
}

/**
 * An attempt's failure as a delivery shows it: the HTTP status, `timeout`, or the system error's
 * code; never fetch's message (it may carry the URL, and a webhook URL often holds a secret).
 */
export function deliveryError(err: unknown): string {
  const e = err as { name?: string; cause?: { code?: unknown } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return 'timeout';
  const code = e?.cause?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,40}$/.test(code) ? code : 'network_error';
}

/** The delivery state of recent events, for tests and status. */
export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export class BudgetWebhook {
  readonly #status = new Map<string, DeliveryStatus>();
  #pending = new Set<Promise<void>>();

  constructor(private readonly deps: WebhookDeps) {}

  status(id: string): DeliveryStatus | undefined {
    return this.#status.get(id);
  }

  /** Queues an event's delivery (never throws; failures are logged). */
  send(e: BudgetAlertEvent): void {
    if (this.#status.size >= 10_000) this.#status.delete(this.#status.keys().next().value as string);
    this.#status.set(e.id, 'pending');
    const p = this.#deliver(e).finally(() => this.#pending.delete(p));
    this.#pending.add(p);
  }

  /** Resolves when every queued delivery has ended (delivered or given up). */
  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }

  async #deliver(e: BudgetAlertEvent): Promise<void> {
    const body = JSON.stringify(e);
    const attempts = this.deps.attempts ?? 6;
    const now = this.deps.now ?? Date.now;
    const createdAt = new Date(now()).toISOString();
    const record = (
      status: WebhookDelivery['status'],
      attempt: number,
      lastStatus: number | null,
      lastError: string | null,
    ): void => {
      this.deps.record?.({
        webhookId: this.deps.webhookId ?? 'config',
        eventId: e.id,
        type: e.type,
        subject: deliverySubject(e),
        threshold: e.threshold,
        status,
        attempts: attempt,
        lastStatus,
        lastError,
        createdAt,
        updatedAt: new Date(now()).toISOString(),
      });
    };
    record('pending', 0, null, null);
    const delay = this.deps.delay ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref()));
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const timestamp = Math.floor((this.deps.now ?? Date.now)() / 1000);
      let target: { readonly url: string; readonly secret: string } | null = this.deps;
      try {
        if (this.deps.current) target = await this.deps.current();
      } catch {
        // The store cannot say now: the last known webhook is used (a removal is seen at the next attempt).
      }
      if (target === null) {
        this.deps.log({ id: e.id, attempt, delivered: false, error: 'webhook_removed' });
        record('failed', attempt - 1, null, 'webhook_removed');
        this.#status.set(e.id, 'failed');
        return;
      }
      try {
        const res = await fetch(target.url, {
          method: 'POST',
          body,
          redirect: 'error',
          signal: AbortSignal.timeout(this.deps.timeoutMs ?? 10_000),
          headers: {
            'content-type': 'application/json',
            [SIGNATURE_HEADER]: signature(target.secret, timestamp, body),
            [EVENT_ID_HEADER]: e.id,
          },
        });
        await res.arrayBuffer().catch(() => undefined);
        const delivered = res.status >= 200 && res.status < 300;
        this.deps.log({ id: e.id, attempt, delivered, status: res.status });
        record(
          delivered ? 'delivered' : attempt < attempts ? 'pending' : 'failed',
          attempt,
          res.status,
          delivered ? null : `http_${res.status}`,
        );
        if (delivered) {
          this.#status.set(e.id, 'delivered');
          return;
        }
      } catch (err) {
        // The code only: fetch's message may carry the URL, whose query string may hold a credential.
        this.deps.log({ id: e.id, attempt, delivered: false, error: deliveryError(err) });
        record(attempt < attempts ? 'pending' : 'failed', attempt, null, deliveryError(err));
      }
      if (attempt < attempts) await delay(1000 * 2 ** (attempt - 1));
    }
    this.#status.set(e.id, 'failed');
  }
}

/**
 * Webhooks as an admin API resource (docs/admin-api.md, "Webhooks"): where budget alerts go, which
 * thresholds and budgets each one watches, and its signing secret. The secret is made here, answered
 * once (on create and on rotate-secret) and stored in the clear beside the webhook, because signing
 * needs it (the state file is owner-only; on PostgreSQL it is a column of modelgate.webhooks).
 *
 * A webhook URL often carries a credential of the receiver (`?token=...`, `?code=...`): the URL is
 * kept whole for delivery but answered, audited and logged without its query string (`urlHasQuery`
 * says there is one). Credentials in the URL's userinfo are refused outright, as is anything not
 * http(s) and any fragment.
 */
import { randomBytes } from 'node:crypto';

/** The id of the webhook of the config file (meter.budgetAlerts). */
export const CONFIG_WEBHOOK_ID = 'config';
/** Ids that name a path, not a webhook (GET /admin/v1/webhooks/deliveries). */
export const RESERVED_WEBHOOK_IDS: readonly string[] = [CONFIG_WEBHOOK_ID, 'deliveries'];

export const SECRET_PREFIX = 'whsec_';
/** The thresholds of a webhook created without any (meter.budgetAlerts' default too). */
export const DEFAULT_WEBHOOK_THRESHOLDS: readonly number[] = [50, 80, 95, 100];

/** A stored webhook: what the sender needs, the secret included. */
export interface WebhookRecord {
  readonly id: string;
  readonly url: string;
  readonly secret: string;
  /** Percentages of a budget's amount. */
  readonly thresholds: readonly number[];
  /** `key:<id>` (its budget and its budgets per model) or `group:<name>`; null: every budget. */
  readonly subjects: readonly string[] | null;
  readonly enabled: boolean;
  readonly description: string | null;
  /** Epoch milliseconds. */
  readonly createdAt: number;
  readonly secretRotatedAt: number;
}

export interface WebhookChange {
  readonly url?: string;
  readonly thresholds?: readonly number[];
  readonly subjects?: readonly string[] | null;
  readonly enabled?: boolean;
  readonly description?: string | null;
}

/** A webhook as the API, the audit log and the logs show it: never its secret or its query string. */
export interface WebhookView {
  readonly id: string;
  readonly url: string;
  readonly urlHasQuery: boolean;
  readonly thresholds: number[];
  readonly subjects: string[] | null;
  readonly enabled: boolean;
  readonly description: string | null;
  readonly source: 'api' | 'config';
  readonly createdAt: string | null;
  readonly secretRotatedAt: string | null;
}

/** A fresh signing secret: `whsec_` and 43 base64url characters (32 bytes from the CSPRNG). */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64url');
}

export function defaultWebhookId(): string {
  return `wh-${randomBytes(4).toString('hex')}`;
}

/** Why a webhook URL is refused, or null when it may be used. */
export function webhookUrlProblem(raw: string): string | null {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'not a URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'only http:// and https:// URLs';
  if (u.username !== '' || u.password !== '')
    return 'no user or password in the URL (the receiver checks the signature instead)';
  if (raw.includes('#')) return 'no fragment (#...) in the URL';
  if (u.hostname === '') return 'no host';
  if (/\s/.test(raw)) return 'no spaces in the URL';
  return null;
}

/** The URL as it may be shown: scheme, host, port and path, without the query string. */
export function shownUrl(raw: string): { url: string; urlHasQuery: boolean } {
  try {
    const u = new URL(raw);
    return { url: `${u.origin}${u.pathname}`, urlHasQuery: u.search !== '' || raw.includes('?') };
  } catch {
    const at = raw.indexOf('?');
    return { url: at < 0 ? raw : raw.slice(0, at), urlHasQuery: at >= 0 };
  }
}

const iso = (ms: number): string => new Date(ms).toISOString().replace('.000Z', 'Z');

export function webhookView(w: WebhookRecord): WebhookView {
  return {
    id: w.id,
    ...shownUrl(w.url),
    thresholds: [...w.thresholds],
    subjects: w.subjects === null ? null : [...w.subjects],
    enabled: w.enabled,
    description: w.description,
    source: 'api',
    createdAt: iso(w.createdAt),
    secretRotatedAt: iso(w.secretRotatedAt),
  };
}

/** The config file's webhook (meter.budgetAlerts) as the API shows it (read only). */
export function configWebhookView(c: { readonly url: string; readonly thresholds: readonly number[] }): WebhookView {
  return {
    id: CONFIG_WEBHOOK_ID,
    ...shownUrl(c.url),
    thresholds: [...c.thresholds],
    subjects: null,
    enabled: true,
    description: null,
    source: 'config',
    createdAt: null,
    secretRotatedAt: null,
  };
}

/** A webhook after a change (absent fields kept). */
export function changedWebhook(w: WebhookRecord, c: WebhookChange): WebhookRecord {
  return {
    ...w,
    ...(c.url !== undefined ? { url: c.url } : {}),
    ...(c.thresholds !== undefined ? { thresholds: [...c.thresholds] } : {}),
    ...(c.subjects !== undefined ? { subjects: c.subjects === null ? null : [...c.subjects] } : {}),
    ...(c.enabled !== undefined ? { enabled: c.enabled } : {}),
    ...(c.description !== undefined ? { description: c.description } : {}),
  };
}

/**
 * Whether a webhook watching `subjects` takes an alert about `subject` (`key:<id>`, `group:<name>` or
 * `model:<key id>:<model>`, as deliveries name it): null takes every one; `key:<id>` takes the key's
 * budget and its budgets per model.
 */
export function watches(subjects: readonly string[] | null, kind: 'key' | 'group' | 'model', name: string): boolean {
  if (subjects === null) return true;
  return subjects.includes(kind === 'group' ? `group:${name}` : `key:${name}`);
}

/**
 * The dedicated LISTEN connection of the PostgreSQL store: turns notifications into
 * InvalidationEvents and keeps itself connected.
 *
 * A notification sent while no connection listens is lost for good, so every gap is covered by
 * `{kind:'all'}`: once when the connection drops (the cache cannot know what it is missing from
 * now on) and once after LISTEN is active again (anything that changed during the gap must go).
 * A heartbeat query finds connections that died silently (a half-open TCP connection raises no
 * error by itself and would swallow revocations without anyone noticing).
 */
import pg from 'pg';
import type { InvalidationEvent } from '../store';

export interface PgListenerOptions {
  readonly connectionString: string;
  readonly channel: string;
  readonly applicationName: string;
  /** Bound on opening the connection. */
  readonly connectTimeoutMs: number;
  /** Interval of the liveness query; also its timeout. */
  readonly heartbeatMs: number;
  /** First reconnect delay; doubles per failed attempt up to reconnectMaxMs. */
  readonly reconnectMinMs: number;
  readonly reconnectMaxMs: number;
  readonly onEvent: (event: InvalidationEvent) => void;
  /** A second channel, listened to on the same connection (the meter's settlements), and what hears it. */
  readonly settledChannel?: string;
  readonly onSettled?: (payload: string | undefined) => void;
  /** Connection state changes and failures, for logs and readiness. */
  readonly onState: (connected: boolean, error?: Error) => void;
}

/**
 * Delay before reconnect attempt `attempt` (0-based): exponential, capped, with jitter in
 * [50%, 100%] so replicas cut off by the same outage do not all reconnect in the same instant.
 */
export function reconnectDelay(attempt: number, minMs: number, maxMs: number, random = Math.random): number {
  const ceiling = Math.min(maxMs, minMs * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling * (0.5 + random() / 2));
}

/** Parses a notification payload; anything unexpected means "forget everything", never "ignore". */
export function parseInvalidation(payload: string | undefined): InvalidationEvent {
  try {
    const v = JSON.parse(payload ?? '') as Record<string, unknown>;
    if (v.kind === 'key' && typeof v.sha256 === 'string') {
      // A balance-only change (migration 3) carries the new balance as numeric text; anything else
      // about it (not a finite number) is a plain invalidation: look the key up again.
      if (v.balance === null) return { kind: 'key', sha256: v.sha256, balance: null };
      const balance = typeof v.balance === 'string' && v.balance.trim() !== '' ? Number(v.balance) : NaN;
      return Number.isFinite(balance) ? { kind: 'key', sha256: v.sha256, balance } : { kind: 'key', sha256: v.sha256 };
    }
    if (v.kind === 'group' && typeof v.name === 'string') return { kind: 'group', name: v.name };
    if (v.kind === 'webhooks') return { kind: 'webhooks' };
  } catch {
    // not JSON: forget everything (below)
  }
  return { kind: 'all' };
}

/** Owns one LISTEN connection at a time; start() once, close() once. */
export class PgListener {
  private client: pg.Client | null = null;
  private closed = false;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  private reconnectCount = 0;

  constructor(private readonly options: PgListenerOptions) {}

  /** true while LISTEN is active on a live connection. */
  get connected(): boolean {
    return this.client !== null;
  }

  /** Backend process id of the LISTEN connection (for diagnostics and tests), or null. */
  get pid(): number | null {
    return (this.client as (pg.Client & { processID?: number }) | null)?.processID ?? null;
  }

  /** How many times the connection was re-established after a drop. */
  get reconnects(): number {
    return this.reconnectCount;
  }

  start(): void {
    this.loop ??= this.run();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wake?.();
    await this.client?.end().catch(() => {});
    await this.loop;
  }

  private async run(): Promise<void> {
    let attempt = 0;
    let everConnected = false;
    while (!this.closed) {
      const client = new pg.Client({
        connectionString: this.options.connectionString,
        connectionTimeoutMillis: this.options.connectTimeoutMs,
        keepAlive: true,
        application_name: this.options.applicationName,
      });
      const lost = new Promise<Error>((resolve) => {
        client.on('error', resolve);
        client.on('end', () => resolve(new Error('LISTEN connection ended')));
      });
      try {
        await client.connect();
        // Named after connecting: an application_name in the URL overrides the one asked for at
        // connect time, and replicas are counted by this name (store.ts replicas()).
        await client.query('SELECT set_config($1, $2, false)', ['application_name', this.options.applicationName]);
        client.on('notification', (msg) => {
          if (msg.channel === this.options.channel) this.options.onEvent(parseInvalidation(msg.payload));
          else if (msg.channel === this.options.settledChannel) this.options.onSettled?.(msg.payload);
        });
        await client.query(`LISTEN ${client.escapeIdentifier(this.options.channel)}`);
        if (this.options.settledChannel)
          await client.query(`LISTEN ${client.escapeIdentifier(this.options.settledChannel)}`);
      } catch (err) {
        client.end().catch(() => {});
        if (this.closed) break;
        this.options.onState(false, err as Error);
        await this.sleep(reconnectDelay(attempt++, this.options.reconnectMinMs, this.options.reconnectMaxMs));
        continue;
      }
      if (this.closed) {
        await client.end().catch(() => {});
        break;
      }
      this.client = client;
      attempt = 0;
      if (everConnected) {
        this.reconnectCount++;
        this.options.onEvent({ kind: 'all' });
      }
      everConnected = true;
      this.options.onState(true);

      const heartbeat = setInterval(() => this.heartbeat(client), this.options.heartbeatMs);
      const error = await lost;
      clearInterval(heartbeat);
      this.client = null;
      client.end().catch(() => {});
      if (this.closed) break;
      this.options.onEvent({ kind: 'all' });
      this.options.onState(false, error);
      await this.sleep(reconnectDelay(attempt++, this.options.reconnectMinMs, this.options.reconnectMaxMs));
    }
  }

  private heartbeatInFlight = false;

  private heartbeat(client: pg.Client): void {
    if (this.heartbeatInFlight) return;
    this.heartbeatInFlight = true;
    client
      .query({ text: 'SELECT 1', query_timeout: this.options.heartbeatMs } as pg.QueryConfig)
      // No answer in time: treat the connection as dead. end() destroys the socket of a client
      // with a query in flight, which ends the wait in run().
      .catch(() => client.end().catch(() => {}))
      .finally(() => {
        this.heartbeatInFlight = false;
      });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}

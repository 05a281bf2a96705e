/**
 * Rate limits that hold across replicas (docs/rate-limits.md), with the global engine: two Envoys and two
 * modelgate replicas sharing one Redis (through one envoyproxy/ratelimit) and one PostgreSQL.
 * A key limited to N requests per minute gets exactly N across both; token limits stop a key after
 * the tokens it used; a limit changed in the store applies to the next request; each protocol's 429.
 */
import { createHash } from 'node:crypto';
import type { AdminDb } from '../../src/store/pg/admin';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import { migrate } from '../../src/store/pg/schema';
import { startGateway, type Gateway } from '../support/gateway';
import { describeGlobal, startGlobalEngine, type GlobalEngine } from '../support/global-engine';
import { openPool, startPgServer, type PgServer } from '../support/pg-server';
import { roomInMinute, sendAs, until } from '../support/rate-limit-cases';

async function seed(pool: AdminDb): Promise<void> {
  await migrate(pool);
  await pool.query("INSERT INTO modelgate.groups (name) VALUES ('pro')");
  let position = 0;
  for (const [model, protocols] of [
    ['gpt-4o', null],
    ['claude-sonnet-4-5', ['messages']],
    ['gemini-2.5-pro', ['generative']],
  ] as const) {
    await pool.query(
      'INSERT INTO modelgate.group_models (group_name, name, protocols, position) VALUES ($1, $2, $3, $4)',
      ['pro', model, protocols, position++],
    );
  }
}

async function newKey(pool: AdminDb, id: string, limits: object | null): Promise<string> {
  const key = generateKey();
  await pool.query('INSERT INTO modelgate.keys (id, sha256, group_name, limits) VALUES ($1, $2, $3, $4)', [
    id,
    createHash('sha256').update(key).digest('hex'),
    'pro',
    limits === null ? null : JSON.stringify(limits),
  ]);
  return key;
}

describeGlobal('rate limits across two Envoys and two replicas (Redis, envoyproxy/ratelimit, PostgreSQL)', () => {
  let server: PgServer;
  let pool: AdminDb;
  let engine: GlobalEngine;
  let a: Gateway;
  let b: Gateway;
  beforeAll(async () => {
    server = await startPgServer();
    pool = openPool(server.url);
    await seed(pool);
    engine = await startGlobalEngine();
    const config = (demo: string): string =>
      `${demo.replace(/\nrateLimits:\n(  .*\n)+/, '\n')}\nstore: ${server.url}\n${engine.configYaml()}`;
    [a, b] = await Promise.all([startGateway({ config }), startGateway({ config })]);
  }, 120_000);
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await engine?.close();
    await pool?.end();
    await server?.close();
  });

  it('serves exactly N of 60 concurrent requests of a key limited to N per minute, spread over both gateways', async () => {
    const key = await newKey(pool, 'rpm-across', { rpm: 17 });
    await roomInMinute(20);
    const replies = await Promise.all(Array.from({ length: 60 }, (_, i) => sendAs(i % 2 === 0 ? a : b, 'openai', key)));
    expect(replies.filter((r) => r.status === 200)).toHaveLength(17);
    expect(replies.filter((r) => r.status === 429 && r.headers['x-modelgate-reason'] === 'rate_limited')).toHaveLength(
      43,
    );
    const upstream = [...a.received, ...b.received].filter((r) => r.headers['x-modelgate-key-id'] === 'rpm-across');
    expect(upstream).toHaveLength(17);
    // Both gateways refused some: each counted against the one shared window, not its own.
    expect(replies.filter((r, i) => i % 2 === 0 && r.status === 429).length).toBeGreaterThan(0);
    expect(replies.filter((r, i) => i % 2 === 1 && r.status === 429).length).toBeGreaterThan(0);
  });

  it('stops a key after the tokens it used, charged on one replica and checked on the other', async () => {
    const key = await newKey(pool, 'tpm-across', { tpm: 40 });
    await roomInMinute(20);
    let used = 0;
    let i = 0;
    for (; used < 40 && i < 20; i++) {
      const gw = i % 2 === 0 ? a : b;
      const r = await sendAs(gw, 'openai', key);
      expect(r.status, r.text).toBe(200);
      used += r.json().usage.total_tokens as number;
      await until('the charge', () => gw.modelgate.service!.meter.settledAll);
      // The charge is one call to the service after the debit: wait until it was counted.
      await until('the token charge', async () => (await fetchCharged(gw)) >= Math.ceil((i + 1) / 2));
    }
    expect(used).toBeGreaterThanOrEqual(40);
    for (const gw of [a, b]) {
      const r = await sendAs(gw, 'anthropic', key, 'claude-sonnet-4-5');
      expect(r.status).toBe(429);
      expect(r.headers['x-modelgate-reason']).toBe('tokens_rate_limited');
      expect(r.headers).toMatchObject({
        'anthropic-ratelimit-tokens-limit': '40',
        'anthropic-ratelimit-tokens-remaining': '0',
      });
      expect(r.json()).toEqual({
        type: 'error',
        error: { type: 'rate_limit_error', message: expect.stringContaining('40 tokens per minute') },
      });
    }
  });

  it('applies a limit changed in the store to the next request, on both replicas', async () => {
    const key = await newKey(pool, 'changed', { rpm: 1000 });
    await roomInMinute(20);
    expect((await sendAs(a, 'openai', key)).status).toBe(200);
    expect((await sendAs(b, 'openai', key)).status).toBe(200);
    const heard = [a, b].map(
      (gw) =>
        new Promise<void>((resolve) => {
          const off = gw.modelgate.service!.store.onInvalidate((e) => {
            if (e.kind === 'key') {
              off();
              resolve();
            }
          });
        }),
    );
    await pool.query("UPDATE modelgate.keys SET limits = '{\"rpm\": 2}' WHERE id = 'changed'");
    await Promise.all(heard);
    // Two were served this minute: the new limit of 2 refuses the next one at once, on either gateway.
    for (const gw of [a, b]) {
      const r = await sendAs(gw, 'gemini', key, 'gemini-2.5-pro');
      expect(r.status).toBe(429);
      expect(r.json().error).toMatchObject({
        code: 429,
        status: 'RESOURCE_EXHAUSTED',
        message: expect.stringContaining('2 requests per minute'),
      });
      expect(r.json().error.details[0]).toMatchObject({
        '@type': 'type.googleapis.com/google.rpc.RetryInfo',
        retryDelay: `${r.headers['retry-after']}s`,
      });
    }
    await pool.query("UPDATE modelgate.keys SET limits = NULL WHERE id = 'changed'");
  });

  it('counts per model of a group, on top of the key-wide limit', async () => {
    const key = await newKey(pool, 'per-model', { rpm: 100 });
    const heard = [a, b].map((gw) => heardGroup(gw, 'pro'));
    await pool.query(
      `UPDATE modelgate.group_models SET limits = '{"rpm": 2}' WHERE group_name = 'pro' AND name = 'claude-sonnet-4-5'`,
    );
    await Promise.all(heard);
    await roomInMinute(20);
    const claude = await Promise.all([a, b, a, b].map((gw) => sendAs(gw, 'anthropic', key, 'claude-sonnet-4-5')));
    expect(claude.filter((r) => r.status === 200)).toHaveLength(2);
    expect(claude.filter((r) => r.status === 429)[0].json().error.message).toContain(
      '2 requests per minute on claude-sonnet-4-5',
    );
    expect((await sendAs(b, 'openai', key)).status).toBe(200);
    await pool.query(`UPDATE modelgate.group_models SET limits = NULL WHERE group_name = 'pro'`);
  });
});

/** Resolves when a gateway's modelgate heard that a group changed (its cache forgot it). */
function heardGroup(gw: Gateway, name: string): Promise<void> {
  return new Promise((resolve) => {
    const off = gw.modelgate.service!.store.onInvalidate((e) => {
      if (e.kind === 'group' && e.name === name) {
        off();
        resolve();
      }
    });
  });
}

/** The token charges a gateway's modelgate made (its /metrics). */
async function fetchCharged(gw: Gateway): Promise<number> {
  const text = await (await fetch(`http://${gw.modelgate.httpAddress}/metrics`)).text();
  return Number(/modelgate_rate_limit_token_charges_total\{result="charged"\} (\d+)/.exec(text)?.[1] ?? 0);
}

/**
 * Balances that move (docs/metering.md), through a real Envoy, modelgate and the demo upstream, on the
 * file store (the demo): every protocol's answer and stream debits exactly tokens x price; a key
 * driven to zero is denied; a chat stream without usage, or cut short, is debited an estimate; the
 * state file keeps what was spent. (Every money attack: money.test.ts.) (PostgreSQL, concurrency, strict mode and
 * replicas: meter-pg.test.ts.)
 */
import { existsSync, readFileSync } from 'node:fs';
import * as http from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { meterStatePath } from '../../src/server/service';
import type { FileStore } from '../../src/store/file-store';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway, type Reply } from '../support/gateway';
import { hashKey } from '../../src/contract/key-format';
import { expectedUsage, sendProtocol, PROTOCOL_CASES, priceOf, waitFor } from '../support/meter-cases';

describeE2E('metering through Envoy (file store)', () => {
  let gw: Gateway;
  let store: FileStore;
  beforeAll(async () => {
    gw = await startGateway();
    store = gw.modelgate.service!.store as FileStore;
  }, 60_000);
  afterAll(() => gw?.close());

  const balance = async (key: string): Promise<number> => (await store.findKey(hashKey(key)))!.balance as number;
  const ledger = () => store.meter!.usage({ limit: 10_000 });

  for (const c of PROTOCOL_CASES) {
    it(`debits exactly tokens x price for ${c.name}`, async () => {
      const before = await balance(DEMO_KEYS.alice);
      const entries = (await ledger()).length;
      const reply: Reply = await sendProtocol(gw, c, DEMO_KEYS.alice);
      expect(reply.status, reply.text).toBe(200);
      const usage = expectedUsage(c, reply);
      expect(usage.input).toBeGreaterThan(0);
      await waitFor('the debit', async () => (await ledger()).length === entries + 1);
      const [entry] = await ledger();
      expect(entry).toMatchObject({
        keyId: 'alice',
        group: 'basic',
        model: c.model,
        protocol: c.protocol,
        inputTokens: usage.input,
        outputTokens: usage.output,
        priced: true,
      });
      const price = priceOf(gw.modelgate.service!.config(), 'basic', c.model);
      const cost = (usage.input * price.input + usage.output * price.output) / 1e6;
      expect(entry.cost).toBeCloseTo(cost, 10);
      expect(await balance(DEMO_KEYS.alice)).toBeCloseTo(before - cost, 10);
    });
  }

  it('debits twice for two requests that carry the same client x-request-id (Envoy makes its own)', async () => {
    const before = (await ledger()).length;
    const send = () =>
      gw.send('POST', '/v1/chat/completions', {
        headers: [
          ['authorization', `Bearer ${DEMO_KEYS.alice}`],
          ['content-type', 'application/json'],
          ['x-request-id', 'chosen-by-the-client'],
        ],
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'same id twice' }] }),
      });
    expect((await send()).status).toBe(200);
    expect((await send()).status).toBe(200);
    await waitFor('two debits', async () => (await ledger()).length === before + 2);
    const [a, b] = await ledger();
    expect(a.requestId).not.toBe(b.requestId);
    expect([a.requestId, b.requestId]).not.toContain('chosen-by-the-client');
  });

  it('debits an estimate for a chat stream without include_usage (stream_without_usage), and logs why', async () => {
    const before = await balance(DEMO_KEYS.alice);
    const entries = (await ledger()).length;
    const reply = await gw.send('POST', '/v1/chat/completions', {
      headers: [
        ['authorization', `Bearer ${DEMO_KEYS.alice}`],
        ['content-type', 'application/json'],
      ],
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        stream: true,
        messages: [{ role: 'user', content: 'no usage please' }],
      }),
    });
    expect(reply.status).toBe(200);
    await waitFor('the estimated debit', async () => (await ledger()).length === entries + 1);
    const [entry] = await ledger();
    expect(entry).toMatchObject({
      keyId: 'alice',
      model: 'gpt-4o-mini',
      estimated: 'stream_without_usage',
      priced: true,
    });
    expect(entry.inputTokens).toBeGreaterThan(0);
    expect(entry.outputTokens).toBeGreaterThan(0);
    expect(await balance(DEMO_KEYS.alice)).toBeCloseTo(before - entry.cost, 10);
    const line = JSON.parse(
      gw.modelgate.logLines().find((l) => l.includes('"estimated":"stream_without_usage"'))!,
    ) as Record<string, unknown>;
    expect(line).toMatchObject({
      msg: 'usage',
      keyId: 'alice',
      model: 'gpt-4o-mini',
      protocol: 'chat',
      hint: expect.stringContaining('include_usage'),
    });
    const metrics = await (await fetch(`http://${gw.modelgate.httpAddress}/metrics`)).text();
    expect(metrics).toMatch(
      /modelgate_meter_responses_total\{result="estimated",reason="stream_without_usage"\} [1-9]/,
    );
  });

  it('debits an estimate for a stream the client walked away from (incomplete), never nothing', async () => {
    const before = await balance(DEMO_KEYS.alice);
    const entries = (await ledger()).length;
    const body = JSON.stringify({
      model: 'gpt-4o-mini',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'I will hang up' }],
    });
    await new Promise<void>((resolve, reject) => {
      const url = new URL(gw.baseUrl);
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          method: 'POST',
          path: '/v1/chat/completions',
          headers: {
            authorization: `Bearer ${DEMO_KEYS.alice}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          res.once('data', () => {
            req.destroy();
            resolve();
          });
        },
      );
      req.on('error', () => {});
      req.on('close', () => resolve());
      req.once('error', reject);
      req.end(body);
    });
    await waitFor('the estimated debit', async () => (await ledger()).length === entries + 1, 15_000);
    const [entry] = await ledger();
    expect(entry).toMatchObject({ keyId: 'alice', estimated: 'incomplete' });
    expect(entry.cost).toBeGreaterThan(0);
    expect(await balance(DEMO_KEYS.alice)).toBeCloseTo(before - entry.cost, 10);
  });

  it('drives the trial key to zero, then denies it balance_insufficient on its next request', async () => {
    let served = 0;
    for (let i = 0; i < 50; i++) {
      const reply = await sendProtocol(gw, PROTOCOL_CASES[0], DEMO_KEYS.trial);
      if (reply.status === 403) {
        expect(reply.headers['x-modelgate-reason']).toBe('balance_insufficient');
        break;
      }
      expect(reply.status).toBe(200);
      served++;
      // Soft mode: the next request is decided on the balance after this response's debit.
      await waitFor(
        'the debit',
        async () => (await store.meter!.usage({ keyId: 'trial', limit: 100 })).length === served,
      );
    }
    expect(served).toBeGreaterThan(1);
    expect(served).toBeLessThan(50);
    expect(await balance(DEMO_KEYS.trial)).toBeLessThanOrEqual(0);
    const denied = await sendProtocol(gw, PROTOCOL_CASES[0], DEMO_KEYS.trial);
    expect(denied.status).toBe(403);
    expect(denied.headers['x-modelgate-reason']).toBe('balance_insufficient');
  });

  it('serves unpriced models, metered in tokens at no cost, and does not meter model lists or token counts', async () => {
    const reply = await gw.send('POST', '/v1/chat/completions', {
      headers: [
        ['authorization', `Bearer ${DEMO_KEYS.bob}`],
        ['content-type', 'application/json'],
      ],
      body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'free model' }] }),
    });
    expect(reply.status).toBe(200);
    await waitFor('the ledger row', async () => (await store.meter!.usage({ keyId: 'bob', limit: 5 })).length === 1);
    expect((await store.meter!.usage({ keyId: 'bob', limit: 5 }))[0]).toMatchObject({
      model: 'gpt-4o',
      cost: 0,
      priced: false,
      inputTokens: reply.json().usage.prompt_tokens,
    });
    const rows = (await ledger()).length;
    const list = await gw.send('GET', '/v1/models', { headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]] });
    expect(list.status).toBe(200);
    const count = await gw.send('POST', '/v1/messages/count_tokens', {
      headers: [
        ['x-api-key', DEMO_KEYS.alice],
        ['content-type', 'application/json'],
        ['anthropic-version', '2023-06-01'],
      ],
      body: JSON.stringify({ model: 'claude-3-5-haiku-latest', messages: [{ role: 'user', content: 'count me' }] }),
    });
    expect(count.status).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    expect((await ledger()).length).toBe(rows);
  });

  it('keeps what keys spent in the state file beside the config, written atomically', async () => {
    const path = meterStatePath(gw.configPath, null);
    await store.meter!.flush();
    expect(existsSync(path)).toBe(true);
    const state = JSON.parse(readFileSync(path, 'utf8')) as {
      version: number;
      spent: Record<string, number>;
      usage: unknown[];
    };
    expect(state.version).toBe(1);
    expect(state.spent.alice).toBeGreaterThan(0);
    expect(state.spent.trial).toBeGreaterThanOrEqual(0.00006);
    expect(state.usage.length).toBeGreaterThan(5);
  });
});

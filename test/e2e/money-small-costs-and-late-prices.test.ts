/**
 * The money arithmetic and the ledger (docs/metering.md): what a request costs when its cost is
 * tiny (at least a grain, never nothing), which price a request pays when its report comes after
 * the config or the price changed (the price it was admitted at), what a key that left the config
 * and came back has spent, and whether a client's own request id makes two requests one. Each case
 * goes through a real Envoy and modelgate (file store, or PostgreSQL where named) to the stand-in
 * provider (support/money-upstream.ts).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey, hashKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import { setPrice } from '../../src/store/pg/groups';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { request, withMoneyGateway } from '../support/money-client';
import { withPgReplicas, type PgReplicas } from '../support/money-pg';
import { startMoneyUpstream, type MoneyUpstream } from '../support/money-upstream';

const KEYS = ['tiny', 'late', 'gone', 'restart', 'tinyStrict', 'sameId'] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
const bearer = (key: KeyName): Record<string, string> => ({ authorization: `Bearer ${keys[key]}` });

/**
 * A price of 0.00000001 per million tokens (1e-14 a token): a balance counted in a large unit (a
 * credit worth a thousand dollars, a bitcoin). A chat of 1 input and 2 output tokens costs 3e-14.
 */
const TINY = { input: 0.00000001, output: 0.00000001 };
/** The demo's gpt-4o-mini. */
const MINI = { input: 0.15, output: 0.6 };

const GROUPS = `  rt11b-tiny:
    models:
      - name: gpt-4o-mini
        price: { input: ${TINY.input.toFixed(8)}, output: ${TINY.output.toFixed(8)} }
        maxOutputTokens: 16384
  rt11b-late:
    models:
      - name: gpt-4o-mini
        price: { input: ${MINI.input}, output: ${MINI.output} }
        maxOutputTokens: 16384
`;
/** The late group once its model's price is removed (the model stays: metered, costs nothing). */
const UNPRICED = `  rt11b-late:
    models:
      - name: gpt-4o-mini
        maxOutputTokens: 16384
`;

const BALANCES: Record<KeyName, number> = { tiny: 1e-9, late: 1, gone: 1, restart: 1, tinyStrict: 2e-11, sameId: 1 };
const GROUP_OF: Record<KeyName, string> = {
  tiny: 'rt11b-tiny',
  late: 'rt11b-late',
  gone: 'basic',
  restart: 'rt11b-late',
  tinyStrict: 'rt11b-tiny',
  sameId: 'basic',
};
const keyStanza = (k: KeyName): string =>
  `  - id: rt11b-${k}\n    sha256: ${hashKey(keys[k])}\n    group: ${GROUP_OF[k]}\n    balance: ${BALANCES[k]}\n`;

/** The demo config with this file's groups and keys (`without`: keys left out). */
function configOf(
  demo: string,
  o: { reservationSeconds?: number; unpriced?: boolean; without?: KeyName[]; strict?: boolean } = {},
): string {
  let text = demo.replace(
    /^groups:\n/m,
    `groups:\n${o.unpriced ? GROUPS.replace(/  rt11b-late:\n[\s\S]*$/, UNPRICED) : GROUPS}`,
  );
  text = text.replace(
    /^keys:\n/m,
    `keys:\n${KEYS.filter((k) => !o.without?.includes(k))
      .map(keyStanza)
      .join('')}`,
  );
  if (o.reservationSeconds)
    text = text.replace(/  reservationSeconds: 900 /, `  reservationSeconds: ${o.reservationSeconds} `);
  if (o.strict) text = text.replace('  mode: soft ', '  mode: strict ');
  return text;
}

/** The cost of some tokens at a price per million, as the provider bills it (in floats: exact to far below 1e-12). */
const exactCost = (input: number, output: number, price: { input: number; output: number }): number =>
  (input * price.input + output * price.output) / 1e6;

async function balanceOf(store: FileStore, k: KeyName): Promise<number | null | undefined> {
  return (await store.findKey(hashKey(keys[k])))?.balance;
}

/** In a describe block: a money gateway (file store) on this file's config, `o` applied (withMoneyGateway). */
function started(o: { reservationSeconds?: number; strict?: boolean } = {}): {
  readonly gw: () => Gateway;
  readonly up: () => MoneyUpstream;
  readonly store: () => FileStore;
  readonly demo: () => string;
} {
  let g: { up: MoneyUpstream; gw: Gateway; store: FileStore };
  let demo = '';
  withMoneyGateway(
    (d) => {
      demo = d;
      return configOf(d, o);
    },
    (s) => (g = s),
  );
  return { gw: () => g.gw, up: () => g.up, store: () => g.store, demo: () => demo };
}

describeE2E(
  'money, small costs and late prices: small costs, and a key that leaves the config (soft, file store)',
  () => {
    const g = started();

    it('a price of 1e-14 a token (a balance in a large unit): 30 chats of 3e-14 each: each pays at least what it cost (a grain, 1e-12), never nothing', async () => {
      const store = g.store();
      const before = (await balanceOf(store, 'tiny')) as number;
      let billed = 0;
      for (let i = 0; i < 30; i++) {
        const sent = await request(g.gw(), '/v1/chat/completions', bearer('tiny'), {
          model: 'gpt-4o-mini',
          max_tokens: 2,
          messages: [{ role: 'user', content: 'hi' }],
        });
        expect(sent.status, sent.text).toBe(200);
        const usage = (JSON.parse(sent.text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
        billed += exactCost(usage.prompt_tokens, usage.completion_tokens, TINY);
      }
      let rows: UsageEntry[] = [];
      await waitFor(
        '30 ledger rows',
        async () => (rows = await store.meter!.usage({ keyId: 'rt11b-tiny', limit: 100 })).length === 30,
        60_000,
      );
      const after = (await balanceOf(store, 'tiny')) as number;
      expect(
        rows.every((r) => r.cost > 0),
        `costs ${rows.map((r) => r.cost).join(', ')}`,
      ).toBe(true);
      expect(before - after, `spent ${before - after} for ${billed} billed`).toBeGreaterThanOrEqual(billed);
    }, 120_000);

    it('defended: one client x-request-id on two requests that claim to be internal (x-envoy-internal: true, x-forwarded-for and x-real-ip of a private address): Envoy makes its own ids, two rows, both paid', async () => {
      const store = g.store();
      const headers = {
        ...bearer('sameId'),
        'x-request-id': 'rt11b-same',
        'x-envoy-internal': 'true',
        'x-forwarded-for': '10.0.0.7',
        'x-real-ip': '10.0.0.7',
      };
      const body = { model: 'gpt-4o-mini', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] };
      let billed = 0;
      for (let i = 0; i < 2; i++) {
        const sent = await request(g.gw(), '/v1/chat/completions', headers, body);
        expect(sent.status, sent.text).toBe(200);
        const usage = (JSON.parse(sent.text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
        billed += exactCost(usage.prompt_tokens, usage.completion_tokens, MINI);
      }
      let rows: UsageEntry[] = [];
      await waitFor(
        'two ledger rows',
        async () => (rows = await store.meter!.usage({ keyId: 'rt11b-sameId', limit: 10 })).length === 2,
        60_000,
      );
      expect(new Set(rows.map((r) => r.requestId)).size).toBe(2);
      expect(rows.some((r) => r.requestId === 'rt11b-same')).toBe(false);
      expect(BALANCES.sameId - ((await balanceOf(store, 'sameId')) as number)).toBeCloseTo(billed, 12);
    }, 120_000);

    it('a key removed from the config while its request runs, then put back: what the request cost stays spent', async () => {
      const store = g.store();
      const body = { model: 'gpt-4o-mini', max_tokens: 200, messages: [{ role: 'user', content: 'write' }] };
      const pending = request(g.gw(), '/v1/chat/completions', { ...bearer('gone'), 'x-stand-in-gate': 'gone' }, body);
      await waitFor(
        'the request to reach the provider',
        () => g.up().received.some((r) => r.headers['x-stand-in-gate'] === 'gone'),
        60_000,
      );
      writeFileSync(g.gw().configPath, configOf(g.demo(), { without: ['gone'] }));
      await waitFor(
        'the reload that removes the key',
        async () => (await store.findKeyById('rt11b-gone')) === null,
        60_000,
      );
      g.up().open('gone');
      const sent = await pending;
      expect(sent.status, sent.text).toBe(200);
      const usage = (JSON.parse(sent.text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
      const billed = exactCost(usage.prompt_tokens, usage.completion_tokens, MINI);
      await waitFor(
        'its ledger row',
        async () => (await store.meter!.usage({ keyId: 'rt11b-gone', limit: 10 })).length === 1,
        60_000,
      );
      writeFileSync(g.gw().configPath, configOf(g.demo()));
      await waitFor(
        'the reload that puts the key back',
        async () => (await store.findKeyById('rt11b-gone')) !== null,
        60_000,
      );
      const spent = BALANCES.gone - ((await balanceOf(store, 'gone')) as number);
      expect(spent, `spent ${spent} for ${billed} billed`).toBeCloseTo(billed, 12);
    }, 120_000);
  },
);

describeE2E('money, small costs and late prices: small costs in strict mode (file store)', () => {
  const g = started({ strict: true });

  it('a price of 1e-14 a token, 50 chats at once on a balance of 2e-11 (each reserves under 1e-12 and is charged at least 1e-12): every one served is paid, and the balance never goes below zero', async () => {
    const store = g.store();
    const body = { model: 'gpt-4o-mini', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] };
    const sent = await Promise.all(
      Array.from({ length: 50 }, () => request(g.gw(), '/v1/chat/completions', bearer('tinyStrict'), body)),
    );
    const served = sent.filter((s) => s.status === 200);
    expect(
      sent.every((s) => s.status === 200 || s.status === 403),
      sent.map((s) => s.status).join(' '),
    ).toBe(true);
    const billed = served.reduce((sum, s) => {
      const u = (JSON.parse(s.text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
      return sum + exactCost(u.prompt_tokens, u.completion_tokens, TINY);
    }, 0);
    await waitFor(
      'a ledger row for every request served',
      async () => (await store.meter!.usage({ keyId: 'rt11b-tinyStrict', limit: 100 })).length === served.length,
      60_000,
    );
    const after = (await balanceOf(store, 'tinyStrict')) as number;
    const spent = BALANCES.tinyStrict - after;
    expect(spent, `${served.length} served, spent ${spent} for ${billed} billed`).toBeGreaterThanOrEqual(billed);
    expect(after, `${served.length} served`).toBeGreaterThanOrEqual(0);
  }, 120_000);
});

describeE2E(
  'money, small costs and late prices: the price a request pays when its report comes after the config changed (soft, file store)',
  () => {
    // Every request below is held by the stand-in until the test opens its gate: its deadline (1 s)
    // passes while it runs, and it is settled provisionally at its maximum first.
    const g = started({ reservationSeconds: 1 });

    it('the price removed from a model while a request runs past its deadline: the late report debits it at the price it was admitted at', async () => {
      const store = g.store();
      const body = { model: 'gpt-4o-mini', max_tokens: 200, messages: [{ role: 'user', content: 'write' }] };
      const pending = request(g.gw(), '/v1/chat/completions', { ...bearer('late'), 'x-stand-in-gate': 'late' }, body);
      await waitFor(
        'the provisional debit at the deadline',
        async () => (await store.meter!.usage({ keyId: 'rt11b-late', limit: 10 })).some((r) => r.provisional),
        60_000,
      );
      writeFileSync(g.gw().configPath, configOf(g.demo(), { reservationSeconds: 1, unpriced: true }));
      await waitFor(
        'the reload that removes the price',
        async () => (await store.findGroup('rt11b-late'))?.models.get('gpt-4o-mini')?.price === null,
        60_000,
      );
      g.up().open('late');
      const sent = await pending;
      expect(sent.status, sent.text).toBe(200);
      const usage = (JSON.parse(sent.text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
      const billed = exactCost(usage.prompt_tokens, usage.completion_tokens, MINI);
      let row: UsageEntry | undefined;
      await waitFor(
        'the report to replace the provisional debit',
        async () => {
          row = (await store.meter!.usage({ keyId: 'rt11b-late', limit: 10 })).find((r) => !r.provisional);
          return row !== undefined;
        },
        60_000,
      );
      const spent = BALANCES.late - ((await balanceOf(store, 'late')) as number);
      expect(row!.cost, `row ${JSON.stringify(row)}`).toBeCloseTo(billed, 12);
      expect(spent).toBeCloseTo(billed, 12);
    }, 120_000);
  },
);

describeE2E(
  'money, small costs and late prices: modelgate serve killed (SIGKILL) with a request in flight, started again on a config without its price (file store)',
  () => {
    let up: MoneyUpstream;
    let gw: Gateway;
    let demo = '';
    beforeAll(async () => {
      up = await startMoneyUpstream();
      const at = { host: '127.0.0.1', port: up.port };
      gw = await startGateway({
        modelgate: 'process',
        config: (d) => {
          demo = d;
          return configOf(d, { reservationSeconds: 8 });
        },
        upstreamTargets: { chat: at, messages: at, generative: at, alt: at },
      });
    }, 120_000);
    afterAll(async () => {
      up?.open('restart');
      await gw?.close();
      await up?.close();
    });

    type State = { spent: Record<string, number>; usage: UsageEntry[]; pending?: Array<{ keyId: string }> };
    const state = (): State | undefined => {
      try {
        return JSON.parse(readFileSync(join(dirname(gw.configPath), 'modelgate.state.json'), 'utf8')) as State;
      } catch {
        return undefined; // not written yet, or being replaced
      }
    };

    it('the request restored after the kill, past its deadline with no report, is settled at its maximum at the price it was admitted at', async () => {
      const body = { model: 'gpt-4o-mini', max_tokens: 200, messages: [{ role: 'user', content: 'write' }] };
      const maximum = exactCost(Buffer.byteLength(JSON.stringify(body)), 200, MINI);
      // Held by the stand-in: no report of it can come before its deadline (8 s after it was admitted).
      const pending = request(gw, '/v1/chat/completions', { ...bearer('restart'), 'x-stand-in-gate': 'restart' }, body);
      await waitFor(
        'the state file to hold the request in flight',
        () => state()?.pending?.some((p) => p.keyId === 'rt11b-restart') === true,
        30_000,
      );
      gw.modelgate.kill('SIGKILL');
      writeFileSync(gw.configPath, configOf(demo, { reservationSeconds: 8, unpriced: true }));
      await gw.modelgate.restart();
      let row: UsageEntry | undefined;
      await waitFor(
        'the provisional debit at the deadline',
        () => (row = state()?.usage.find((u) => u.keyId === 'rt11b-restart' && u.provisional)) !== undefined,
        60_000,
      );
      expect(row!.cost, `row ${JSON.stringify(row)}`).toBeCloseTo(maximum, 12);
      expect(state()!.spent['rt11b-restart']).toBeCloseTo(maximum, 12);
      up.open('restart');
      const sent = await pending;
      expect(sent.status, sent.text).toBe(200);
      const usage = (JSON.parse(sent.text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
      const billed = exactCost(usage.prompt_tokens, usage.completion_tokens, MINI);
      await waitFor(
        'the report to replace the provisional debit',
        () => state()?.usage.some((u) => u.keyId === 'rt11b-restart' && !u.provisional) === true,
        60_000,
      );
      expect(state()!.spent['rt11b-restart']).toBeCloseTo(billed, 12);
    }, 180_000);
  },
);

describeE2E(
  'money, small costs and late prices: the price a request pays when its report comes after the price was removed (soft, PostgreSQL)',
  () => {
    let rig: PgReplicas;
    withPgReplicas(
      {
        mode: 'soft',
        models: { 'gpt-4o-mini': { ...MINI, cap: 16384 } },
        edit: (c) => c.replace(/  reservationSeconds: 900 /, '  reservationSeconds: 1 '),
      },
      (r) => (rig = r),
    );
    // Registered after the rig: run before it closes (hooks in stack order), so a failed test leaves no request held.
    afterAll(() => rig?.up.open('pg-late'));

    const rows = async (): Promise<Array<{ cost: number; provisional: boolean; priced: boolean }>> =>
      (
        await rig.pool.query<{ cost: string; provisional: boolean; priced: boolean }>(
          "SELECT cost::text AS cost, provisional, priced FROM modelgate.usage WHERE key_id = 'rt11b-pg-late'",
        )
      ).rows.map((r) => ({ ...r, cost: Number(r.cost) }));

    it('the price removed (`groups price --none`) while a request runs past its deadline: the late report debits it at the price it was admitted at', async () => {
      const key = await rig.newKey('rt11b-pg-late', '1');
      const body = { model: 'gpt-4o-mini', max_tokens: 200, messages: [{ role: 'user', content: 'write' }] };
      const pending = request(
        rig.a,
        '/v1/chat/completions',
        { authorization: `Bearer ${key}`, 'x-stand-in-gate': 'pg-late' },
        body,
      );
      await waitFor(
        'the provisional debit at the deadline',
        async () => (await rows()).some((r) => r.provisional),
        60_000,
      );
      await setPrice(rig.pool, 'basic', 'gpt-4o-mini', { price: null });
      // What the meter looks prices up in: the service's cache, told by PostgreSQL's notification.
      await waitFor(
        'the cache to hear the price is gone',
        async () => {
          const g = await rig.a.modelgate.service!.cache.groups.get('basic');
          return g.status === 'found' && g.value.models.get('gpt-4o-mini')?.price == null;
        },
        60_000,
      );
      rig.up.open('pg-late');
      const sent = await pending;
      expect(sent.status, sent.text).toBe(200);
      const usage = (JSON.parse(sent.text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
      const billed = exactCost(usage.prompt_tokens, usage.completion_tokens, MINI);
      await waitFor(
        'the report to replace the provisional debit',
        async () => (await rows()).some((r) => !r.provisional),
        60_000,
      );
      const [row] = await rows();
      const spent = 1 - (await rig.balanceOf('rt11b-pg-late'));
      expect(row, JSON.stringify(row)).toMatchObject({ provisional: false, priced: true });
      expect(row.cost).toBeCloseTo(billed, 12);
      expect(spent).toBeCloseTo(billed, 12);
    }, 120_000);
  },
);

/**
 * Anthropic streams longer than the meter's tail (tool prompts, cumulative message_delta counts, a
 * 1-hour cache write, a stream cut after message_start), the maxima a report at another replica
 * uses, and soft mode's per-replica share of the balance while replicas' LISTEN connections drop
 * and replicas join (docs/metering.md; soft: balance + R x M; strict: zero). Every request goes
 * through the real Envoy to the stand-in provider (support/money-upstream.ts), which bills exactly.
 */
import * as http from 'node:http';
import { expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import { PROVIDER_TOOL_TOKENS } from '../../src/meter/request-shape';
import type { AdminDb } from '../../src/store/pg/admin';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { REPLICA_COUNT_MS } from '../../src/store/pg/store';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { balanceOfKey, inMode, request, withMoneyGateway, withMoneyKeys, type Sent } from '../support/money-client';
import { CLIENT_TOOL_TOKENS, TOOL_PROMPT_TOKENS, type MoneyUpstream } from '../support/money-upstream';
import { withPgReplicas, type PgReplicas } from '../support/money-pg';
import { issueKey } from '../support/pg-keys';

type Counts = Record<string, number>;
const statuses = (sent: Sent[]): Counts =>
  sent.reduce<Counts>((c, s) => ({ ...c, [s.status]: (c[s.status] ?? 0) + 1 }), {});

// ================================================================================================
// One gateway, file store, strict mode: Anthropic's own prompts and cache writes
// ================================================================================================

const KEYS = ['longTools', 'goneTools', 'long1h', 'unlisted', 'toolsCached', 'escaped', 'cut1h'] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
const BALANCES: Record<KeyName, number> = {
  longTools: 10,
  goneTools: 10,
  long1h: 10,
  unlisted: 0.0002,
  toolsCached: 0.0035,
  escaped: 0.0013,
  cut1h: 10,
};
const withKeys = withMoneyKeys(keys, (k) => BALANCES[k as KeyName], 'rt8');

/** claude-3-5-haiku-latest as the demo config prices it (Anthropic's list price), per million tokens. */
const HAIKU = { input: 0.8, output: 4, cap: 8192 };
const claude = (key: KeyName, extra: Record<string, string> = {}): Record<string, string> => ({
  'x-api-key': keys[key],
  'anthropic-version': '2023-06-01',
  ...extra,
});

/** Anthropic's client tools (computer use, bash, the text editor): a 300-byte body billed about 2,500 input tokens. */
const TOOLS = [
  { type: 'computer_20250124', name: 'computer', display_width_px: 1024, display_height_px: 768 },
  { type: 'bash_20250124', name: 'bash' },
  { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' },
];
const TOOLS_HEADERS = { 'anthropic-beta': 'computer-use-2025-01-24', 'x-stand-in-tool-prompts': 'on' };
const HIDDEN_TOOL_TOKENS = TOOL_PROMPT_TOKENS + CLIENT_TOOL_TOKENS.reduce((s, [, n]) => s + n, 0);
/** Output tokens whose stream is well over the meter's 16 KiB tail (about 110 bytes an event). */
const LONG = 400;

/**
 * The input the provider billed, in input tokens at the input price (a cache write's premium included), from the
 * message_start the client received.
 */
function billedInput(text: string): { tokens: number; written: number; ttl: string } {
  const start = /event: message_start\ndata: (.*)\n/.exec(text);
  const u = (
    start
      ? (JSON.parse(start[1]) as { message: { usage: Record<string, unknown> } }).message.usage
      : (JSON.parse(text) as { usage: Record<string, unknown> }).usage
  ) as {
    input_tokens: number;
    cache_creation_input_tokens?: number;
    cache_read_input_tokens?: number;
    cache_creation?: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
  };
  const m5 = u.cache_creation?.ephemeral_5m_input_tokens ?? 0;
  const h1 = u.cache_creation?.ephemeral_1h_input_tokens ?? 0;
  return {
    tokens: u.input_tokens + (u.cache_read_input_tokens ?? 0) + m5 * 1.25 + h1 * 2,
    written: m5 + h1,
    ttl: h1 > 0 ? '1h' : m5 > 0 ? '5m' : 'none',
  };
}

/** A request with a body sent as given (escapes and all), over HTTP/1.1. */
function rawRequest(gw: Gateway, path: string, headers: Record<string, string>, body: string): Promise<Sent> {
  const url = new URL(gw.baseUrl);
  const data = Buffer.from(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': data.length, ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

describeE2E(
  "money, long streams and replica shares: Anthropic's own prompts and cache writes (one gateway, file store, strict)",
  () => {
    let up: MoneyUpstream;
    let gw: Gateway;
    let store: FileStore;

    withMoneyGateway(
      (demo) => inMode('strict')(withKeys(demo)),
      (started) => ({ up, gw, store } = started),
    );

    const rowsOf = async (key: KeyName): Promise<UsageEntry[]> =>
      store.meter!.usage({ keyId: `rt8-${key}`, limit: 100 });
    const balanceOf = (key: KeyName): Promise<number> => balanceOfKey(store, keys[key]);
    const upstreamWith = (tag: string): number => up.received.filter((r) => r.body.includes(tag)).length;
    /**
     * Up to `n` requests one after another, each sent once the previous one's row is in, until one is refused; then the
     * meter has let go of all.
     */
    const inTurn = async (key: KeyName, n: number, send: () => Promise<Sent>): Promise<Sent[]> => {
      const sent: Sent[] = [];
      for (let i = 0; i < n; i++) {
        const s = await send();
        sent.push(s);
        if (s.status !== 200) break;
        await waitFor('its row', async () => (await rowsOf(key)).length === i + 1, 30_000);
      }
      await waitFor('the meter to let go of every request', () => gw.modelgate.service!.meter.settledAll, 30_000);
      return sent;
    };
    const oneRow = async (key: KeyName): Promise<UsageEntry> => {
      await waitFor('its row', async () => (await rowsOf(key)).length === 1, 30_000);
      await waitFor('the meter to let go of every request', () => gw.modelgate.service!.meter.settledAll, 30_000);
      return (await rowsOf(key))[0];
    };

    it("an Anthropic stream longer than the meter's 16 KiB tail, with client tools, is debited the input the provider billed (its tool prompts): message_start is no longer in the tail", async () => {
      const body = {
        model: 'claude-3-5-haiku-latest',
        max_tokens: LONG,
        stream: true,
        tools: TOOLS,
        messages: [{ role: 'user', content: 'rt8 long tools' }],
      };
      const sent = await request(
        gw,
        '/v1/messages',
        claude('longTools', { ...TOOLS_HEADERS, 'x-stand-in-delay-ms': '0' }),
        body,
      );
      expect(sent.status).toBe(200);
      expect(sent.text).toContain('message_stop');
      const row = await oneRow('longTools');
      const billed = billedInput(sent.text);
      const why = `a stream of ${Buffer.byteLength(sent.text)} bytes; billed ${billed.tokens} input tokens (${HIDDEN_TOOL_TOKENS} of them Anthropic's tool prompts) and ${LONG} output: ${(billed.tokens * HAIKU.input + LONG * HAIKU.output) / 1e6}; debited ${row.inputTokens} input, ${row.outputTokens} output (${row.estimated ?? 'exact'}): ${row.cost}`;
      console.log(`rt8 long tools: ${why}`);
      // The tail (the last 16 KiB) holds message_delta's usage, not message_start's: the debit still counts
      // the input the provider billed, Anthropic's tool prompts included.
      expect(row.inputTokens, why).toBeGreaterThanOrEqual(billed.tokens);
    }, 60_000);

    it('an Anthropic request with client tools whose client leaves before a byte of the answer came back is debited its tool prompts too (the provider billed them)', async () => {
      const tag = 'rt8 gone tools';
      const url = new URL(gw.baseUrl);
      const data = Buffer.from(
        JSON.stringify({
          model: 'claude-3-5-haiku-latest',
          max_tokens: 5,
          tools: TOOLS,
          messages: [{ role: 'user', content: tag }],
        }),
      );
      const req = http.request({
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: '/v1/messages',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'content-length': data.length,
          ...claude('goneTools', { ...TOOLS_HEADERS, 'x-stand-in-hold-ms': '3000' }),
        },
      });
      req.on('error', () => {});
      req.end(data);
      await waitFor('the request at the provider', () => upstreamWith(tag) === 1, 30_000);
      req.destroy();
      const row = await oneRow('goneTools');
      const why = `debited ${row.inputTokens} input, ${row.outputTokens} output (${row.estimated ?? 'exact'}): ${row.cost}; the provider bills ${HIDDEN_TOOL_TOKENS} input tokens of tool prompts alone`;
      console.log(`rt8 gone tools: ${why}`);
      expect(row.estimated).toBe('incomplete');
      expect(row.inputTokens, why).toBeGreaterThanOrEqual(HIDDEN_TOOL_TOKENS);
    }, 60_000);

    it("a 1-hour cache write in an Anthropic stream longer than the tail, whose message_delta reports the cumulative input counts (as the SDKs' MessageDeltaUsage has them, without message_start's breakdown by TTL), is debited at 2x, as billed", async () => {
      const body = {
        model: 'claude-3-5-haiku-latest',
        max_tokens: LONG,
        stream: true,
        system: [{ type: 'text', text: 'the '.repeat(2000), cache_control: { type: 'ephemeral', ttl: '1h' } }],
        messages: [{ role: 'user', content: 'rt8 long 1h' }],
      };
      const sent = await request(
        gw,
        '/v1/messages',
        claude('long1h', { 'x-stand-in-delay-ms': '0', 'x-stand-in-delta-usage': 'cumulative' }),
        body,
      );
      expect(sent.status).toBe(200);
      const row = await oneRow('long1h');
      const billed = billedInput(sent.text);
      const billedCost = (billed.tokens * HAIKU.input + LONG * HAIKU.output) / 1e6;
      const why = `${billed.written} tokens written to the ${billed.ttl} cache (message_start's breakdown), billed ${billed.tokens} input tokens at the input price and ${LONG} output: ${billedCost}; debited ${row.inputTokens} input (${row.estimated ?? 'exact'}): ${row.cost}`;
      console.log(`rt8 long 1h: ${why}`);
      expect(billed.ttl).toBe('1h');
      expect(row.cost, why).toBeGreaterThanOrEqual(billedCost - 1e-12);
    }, 60_000);

    it('strict: a request whose only tool is an Anthropic tool type outside the list (the tool search tool) is held the tool use system prompt the provider bills: the balance never goes below zero', async () => {
      const body = {
        model: 'claude-3-5-haiku-latest',
        max_tokens: 5,
        tools: [{ type: 'tool_search_tool_regex_20251119', name: 'tool_search_tool_regex' }],
        messages: [{ role: 'user', content: 'rt8 unlisted' }],
      };
      const bytes = Buffer.byteLength(JSON.stringify(body));
      const reserved = (bytes * HAIKU.input + 5 * HAIKU.output) / 1e6;
      const sent = await inTurn('unlisted', 3, () =>
        request(gw, '/v1/messages', claude('unlisted', { 'x-stand-in-tool-prompts': 'on' }), body),
      );
      const rows = await rowsOf('unlisted');
      const after = await balanceOf('unlisted');
      const why = `statuses ${JSON.stringify(statuses(sent))}; reserved ${reserved} (${bytes} bytes, no tool prompt: ${PROVIDER_TOOL_TOKENS.input_schema} is added only for input_schema and the listed client tools); billed ${rows.map((r) => `${r.inputTokens} in, ${r.cost}`).join('; ')}; balance ${BALANCES.unlisted} -> ${after}`;
      console.log(`rt8 unlisted tool: ${why}`);
      // Refusing it (an unknown Anthropic tool type) keeps the bound too.
      // Strict mode's bound is zero: the tool use system prompt is held too.
      expect(after, why).toBeGreaterThanOrEqual(0);
    }, 60_000);

    it('strict: client tools with a 1-hour cache breakpoint (Anthropic writes its tool prompts to the cache with the tools, at 2x) are held at what the provider bills: the balance never goes below zero', async () => {
      const body = {
        model: 'claude-3-5-haiku-latest',
        max_tokens: 5,
        tools: [TOOLS[0], TOOLS[1], { ...TOOLS[2], cache_control: { type: 'ephemeral', ttl: '1h' } }],
        messages: [{ role: 'user', content: 'rt8 tools cached' }],
      };
      const bytes = Buffer.byteLength(JSON.stringify(body));
      const allowance =
        PROVIDER_TOOL_TOKENS.input_schema +
        PROVIDER_TOOL_TOKENS.computer_ +
        PROVIDER_TOOL_TOKENS.bash_ +
        PROVIDER_TOOL_TOKENS.text_editor_;
      const held = ((Math.ceil(bytes * 2) + allowance) * HAIKU.input + 5 * HAIKU.output) / 1e6;
      const sent = await inTurn('toolsCached', 3, () =>
        request(gw, '/v1/messages', claude('toolsCached', TOOLS_HEADERS), body),
      );
      const rows = await rowsOf('toolsCached');
      const after = await balanceOf('toolsCached');
      const billed = sent[0].status === 200 ? billedInput(sent[0].text) : undefined;
      const why = `statuses ${JSON.stringify(statuses(sent))}; held ${held} (${bytes} bytes x 2 + ${allowance} tool prompt tokens x 1); billed ${billed?.tokens} input tokens (${billed?.written} written to the ${billed?.ttl} cache, tool prompts included); debited ${rows.map((r) => `${r.inputTokens} in, ${r.cost}`).join('; ')}; balance ${BALANCES.toolsCached} -> ${after}`;
      console.log(`rt8 tools cached: ${why}`);
      expect(after, why).toBeGreaterThanOrEqual(0);
    }, 60_000);

    it('defended: a 1-hour cache breakpoint whose keys are written with escapes ("cache_contro\\u006c", "t\\u0074l", as Anthropic\'s JSON parser reads them) is held at 2x: refused on a balance between the 1.25x and the 2x hold', async () => {
      const tag = 'rt8 escaped';
      const text = 'the '.repeat(200);
      const body = `{"model":"claude-3-5-haiku-latest","max_tokens":5,"system":[{"type":"text","text":"${text}","cache_contro\\u006c":{"type":"ephemeral","t\\u0074l":"1h"}}],"messages":[{"role":"user","content":"${tag}"}]}`;
      const bytes = Buffer.byteLength(body);
      const at = (factor: number): number => (Math.ceil(bytes * factor) * HAIKU.input + 5 * HAIKU.output) / 1e6;
      expect(at(1.25)).toBeLessThan(BALANCES.escaped);
      expect(at(2)).toBeGreaterThan(BALANCES.escaped);
      const sent = await rawRequest(gw, '/v1/messages', claude('escaped'), body);
      expect(sent.status, sent.text).toBe(403);
      expect(sent.text).toContain('balance_insufficient');
      expect(upstreamWith(tag)).toBe(0);
    }, 60_000);

    it('an Anthropic stream with client tools and a 1-hour cache write, cut by the client after message_start, is debited at least the input message_start reported (docs/metering.md: it stands as a floor)', async () => {
      const body = {
        model: 'claude-3-5-haiku-latest',
        max_tokens: 200,
        stream: true,
        tools: [TOOLS[0], TOOLS[1], { ...TOOLS[2], cache_control: { type: 'ephemeral', ttl: '1h' } }],
        messages: [{ role: 'user', content: 'rt8 cut 1h' }],
      };
      const sent = await request(
        gw,
        '/v1/messages',
        claude('cut1h', { ...TOOLS_HEADERS, 'x-stand-in-delay-ms': '20' }),
        body,
        (t) => (t.match(/content_block_delta/g)?.length ?? 0) >= 3,
      );
      expect(sent.status).toBe(200);
      const row = await oneRow('cut1h');
      const billed = billedInput(sent.text);
      const why = `message_start reported ${billed.tokens} input tokens at the input price (${billed.written} written to the ${billed.ttl} cache, Anthropic's tool prompts included); debited ${row.inputTokens} input, ${row.outputTokens} output (${row.estimated ?? 'exact'}): ${row.cost}`;
      console.log(`rt8 cut 1h: ${why}`);
      expect(billed.ttl).toBe('1h');
      expect(row.estimated).toBe('incomplete');
      // The meter's tail of a cut stream starts at the body's first byte; message_start's input count stands
      // as a floor of the estimate.
      expect(row.inputTokens, why).toBeGreaterThanOrEqual(billed.tokens);
      expect(row.outputTokens, why).toBeGreaterThanOrEqual(3);
    }, 60_000);
  },
);

// ================================================================================================
// Replicas on one PostgreSQL, soft mode: the share of the balance while the count changes
// ================================================================================================

describeE2E(
  "money, long streams and replica shares: soft mode's share of the balance while replicas come and go (PostgreSQL)",
  () => {
    const FLAT = 'rt8-flat';
    /**
     * rt8-flat: 0.001 a token out, nothing in; cap 100 tokens. A request of max_tokens 100 is held and billed exactly M
     * = 0.1.
     */
    const M = 0.1;
    let rig: PgReplicas;
    let pool: AdminDb;
    let up: MoneyUpstream;
    let a: Gateway;
    let b: Gateway;

    withPgReplicas(
      {
        mode: 'soft',
        models: {
          [FLAT]: { input: 0, output: 1000, cap: 100 },
          'gpt-4o-mini': { input: 0.15, output: 0.6, cap: 16384 },
        },
      },
      (started) => {
        rig = started;
        ({ pool, up, a, b } = started);
      },
    );

    const listenPid = (g: Gateway): number | null =>
      (g.modelgate.service!.store as unknown as { listener: { pid: number | null } }).listener.pid;
    const replicasSeen = (g: Gateway): number =>
      (g.modelgate.service!.store as unknown as { replicas(): number }).replicas();
    const finalRows = (id: string): Promise<number> => rig.finalRows(id);
    const balanceOf = (id: string): Promise<number> => rig.balanceOf(id);
    const upstreamWith = (tag: string): number => up.received.filter((r) => r.body.includes(tag)).length;
    const settledAll = (gs: Gateway[]): boolean => gs.every((g) => g.modelgate.service!.meter.settledAll);

    /**
     * `n` requests at once through `gw`, each held at the provider until the gate `gate` opens: those
     * allowed stay in flight as long as the test needs. Resolves once each one is either refused or
     * at the provider; `done` when all have answered.
     */
    async function heldBurst(
      gw: Gateway,
      key: string,
      tag: string,
      n: number,
      gate: string,
    ): Promise<{ done: Promise<Sent[]>; allowed: number }> {
      let refused = 0;
      const done = Promise.all(
        Array.from({ length: n }, (_, i) =>
          request(
            gw,
            '/v1/chat/completions',
            { authorization: `Bearer ${key}`, 'x-stand-in-gate': gate, 'x-stand-in-delay-ms': '0' },
            {
              model: FLAT,
              max_tokens: 100,
              stream: true,
              stream_options: { include_usage: true },
              messages: [{ role: 'user', content: `${tag} ${i} .` }],
            },
          ).then((s) => {
            if (s.status !== 200) refused++;
            return s;
          }),
        ),
      );
      await waitFor(
        `each of ${n} requests refused or at the provider`,
        () => refused + upstreamWith(`${tag} `) === n,
        60_000,
      );
      return { done, allowed: upstreamWith(`${tag} `) };
    }

    /**
     * One Envoy whose Checks go to a modelgate of its own and whose reports go to replica `to` (as
     * money-two-replicas.test.ts).
     */
    async function reportingTo(to: Gateway): Promise<Gateway> {
      const gw = await rig.replica({ reportsTo: to });
      // Past its grace (6 s after it starts, counting the others): until then it holds one request at a time.
      await waitFor('the new replica to count the others', () => replicasSeen(gw) > 1, 30_000);
      return gw;
    }

    it("soft, two replicas: one replica's LISTEN connection drops while its share of a key's balance is in flight; the other keeps counting two while those requests may run: the key spends at most balance + 2 x M", async () => {
      await waitFor('both replicas counting two', () => replicasSeen(a) === 2 && replicasSeen(b) === 2, 30_000);
      const id = 'rt8-drop-mid';
      const initial = '1.05';
      const { key } = await issueKey(pool, { group: 'basic', id, balance: initial });
      // Each replica holds to half the balance: 5 + 5 in flight, held at the provider.
      const onA = await heldBurst(a, key, `${id} a1`, 20, `${id} 1`);
      const onB = await heldBurst(b, key, `${id} b1`, 20, `${id} 1`);
      // A's LISTEN connection is cut (and again whenever it is back): B counts one replica.
      let cutting = true;
      const cutter = (async () => {
        while (cutting) {
          const pid = listenPid(a);
          if (pid !== null) await pool.query('SELECT pg_terminate_backend($1)', [pid]);
          await new Promise((r) => setTimeout(r, 5));
        }
      })();
      let later: Awaited<ReturnType<typeof heldBurst>>;
      try {
        // B's counts see one LISTEN session now: three of them (6 s). It still counts two (a count that
        // falls is believed only after meter.reservationSeconds: A's requests may still run).
        const until = Date.now() + 3 * REPLICA_COUNT_MS + 500;
        while (Date.now() < until) await new Promise((r) => setTimeout(r, 100));
        expect(replicasSeen(b)).toBeGreaterThanOrEqual(2);
        later = await heldBurst(b, key, `${id} b2`, 20, `${id} 2`);
      } finally {
        cutting = false;
        await cutter;
      }
      up.open(`${id} 1`);
      up.open(`${id} 2`);
      const sent = [...(await onA.done), ...(await onB.done), ...(await later.done)];
      const served = sent.filter((s) => s.status === 200).length;
      await waitFor(
        `a final row for each of the ${served} served`,
        async () => (await finalRows(id)) === served,
        60_000,
      );
      await waitFor('both replicas to let go of every request', () => settledAll([a, b]), 30_000);
      const spent = Number(initial) - (await balanceOf(id));
      const why = `in flight before the drop: ${onA.allowed} on A, ${onB.allowed} on B; then B (counting one) allowed ${later.allowed} more; statuses ${JSON.stringify(statuses(sent))}; each billed ${M}; spent ${spent} on ${initial}; bound balance + 2 x M = ${Number(initial) + 2 * M}`;
      console.log(`rt8 drop mid-burst: ${why}`);
      expect(served, why).toBeGreaterThan(0);
      expect(spent, why).toBeLessThanOrEqual(Number(initial) + 2 * M + 1e-12);
    }, 150_000);

    let c: Gateway | undefined;

    it("soft: a third replica joins while the two others' shares of a key's balance are in flight; it holds to its third beside them: the key spends at most balance + 3 x M plus one share (balance / 3), the bound docs/metering.md states for a join", async () => {
      // Counting two or more (A may count a LISTEN session the previous test cut, and remembers the larger
      // count for meter.reservationSeconds: it then holds less, never more).
      await waitFor('both replicas counting two or more', () => replicasSeen(a) >= 2 && replicasSeen(b) >= 2, 60_000);
      const id = 'rt8-join-mid';
      const initial = '3.05';
      const { key } = await issueKey(pool, { group: 'basic', id, balance: initial });
      const onA = await heldBurst(a, key, `${id} a1`, 25, `${id} 1`);
      const onB = await heldBurst(b, key, `${id} b1`, 25, `${id} 1`);
      // A third replica (its Envoy reports to B) joins, and waits out its grace (it holds none until every other
      // counted it).
      c = await reportingTo(b);
      await waitFor('the new replica counting three or more, its grace over', () => replicasSeen(c!) >= 3, 60_000);
      const later = await heldBurst(c, key, `${id} c2`, 25, `${id} 2`);
      up.open(`${id} 1`);
      up.open(`${id} 2`);
      const sent = [...(await onA.done), ...(await onB.done), ...(await later.done)];
      const served = sent.filter((s) => s.status === 200).length;
      // (Once, on a loaded machine, the rows of 34 served did not all come within 60 s: the wait says what it saw.)
      let rows = 0;
      await waitFor(
        `a final row for each of the ${served} served (A allowed ${onA.allowed}, B ${onB.allowed}, the new replica ${later.allowed})`,
        async () => (rows = await finalRows(id)) === served,
        90_000,
      ).catch((err: unknown) => {
        throw new Error(`${err instanceof Error ? err.message : String(err)}: ${rows} final rows for ${served} served`);
      });
      await waitFor('the replicas to let go of every request', () => settledAll([a, b, c!]), 30_000);
      const spent = Number(initial) - (await balanceOf(id));
      const why = `in flight before the join: ${onA.allowed} on A, ${onB.allowed} on B (each counting two); then the new replica (counting three) allowed ${later.allowed}; statuses ${JSON.stringify(statuses(sent))}; each billed ${M}; spent ${spent} on ${initial}; bound balance + 3 x M + balance / 3 = ${Number(initial) + 3 * M + Number(initial) / 3}`;
      console.log(`rt8 join mid-burst: ${why}`);
      expect(served, why).toBeGreaterThan(0);
      // docs/metering.md states the join's bound: one share more (balance / R) while the requests the
      // others admitted before they counted it run.
      expect(spent, why).toBeLessThanOrEqual(Number(initial) + 3 * M + Number(initial) / 3 + 1e-12);
    }, 180_000);

    it("defended: the maxima a report at another replica uses are each request's own, whatever the response cache answered before it (the same key and model with max_tokens 1 first; another key; the alternate prefix; a query the Check removes)", async () => {
      c ??= await reportingTo(b);
      const id = 'rt8-cached-max';
      const { key } = await issueKey(pool, { group: 'basic', id, balance: '100' });
      const other = await issueKey(pool, { group: 'basic', id: `${id}-other`, balance: '100' });
      const send = (
        path: string,
        k: string,
        max: number,
        tag: string,
        extraHeaders: Record<string, string> = {},
      ): Promise<Sent> =>
        request(
          c!,
          path,
          { authorization: `Bearer ${k}`, ...extraHeaders },
          { model: 'gpt-4o-mini', max_tokens: max, messages: [{ role: 'user', content: tag }] },
        );
      /**
       * A request whose client leaves before a byte of its answer: debited its maximum output, as the Check's metadata
       * carries it.
       */
      async function leave(path: string, k: string, max: number, tag: string): Promise<void> {
        const url = new URL(c!.baseUrl);
        const data = Buffer.from(
          JSON.stringify({ model: 'gpt-4o-mini', max_tokens: max, messages: [{ role: 'user', content: tag }] }),
        );
        const req = http.request({
          host: url.hostname,
          port: url.port,
          method: 'POST',
          path,
          agent: false,
          headers: {
            'content-type': 'application/json',
            'content-length': data.length,
            authorization: `Bearer ${k}`,
            'x-stand-in-hold-ms': '3000',
          },
        });
        req.on('error', () => {});
        req.end(data);
        await waitFor('the request at the provider', () => upstreamWith(tag) === 1, 30_000);
        req.destroy();
      }
      // Cheap answers first: the response cache keeps the bytes of this key, group, model and endpoint.
      for (const [path, k, tag] of [
        ['/v1/chat/completions', key, `${id} warm`],
        ['/v1/chat/completions', other.key, `${id} warm other`],
        ['/alt/v1/chat/completions', key, `${id} warm alt`],
        ['/v1/chat/completions?api-key=', key, `${id} warm query`],
      ] as const) {
        expect((await send(path, k, 1, tag)).status).toBe(200);
      }
      const cases = [
        ['/v1/chat/completions', 7001, `${id} gone`],
        ['/alt/v1/chat/completions', 7002, `${id} gone alt`],
        ['/v1/chat/completions?api-key=', 7003, `${id} gone query`],
      ] as const;
      for (const [path, max, tag] of cases) await leave(path, key, max, tag);
      await waitFor('a row for each', async () => (await finalRows(id)) === 3 + cases.length, 60_000);
      const rows = (
        await pool.query<{ output: number; estimated: string | null }>(
          "SELECT output_tokens::int AS output, estimated FROM modelgate.usage WHERE key_id = $1 AND estimated = 'incomplete' ORDER BY output_tokens",
          [id],
        )
      ).rows;
      console.log(`rt8 cached maxima: ${JSON.stringify(rows)}`);
      expect(rows.map((r) => r.output)).toEqual(cases.map(([, max]) => max));
    }, 120_000);
  },
);

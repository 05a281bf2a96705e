/**
 * Anthropic's own tool prompts and cache writes, bodies over gateway.maxRequestBytes, background
 * mode's spellings, large embeddings in strict mode, and strict mode without leases on two replicas
 * (docs/metering.md; soft: balance + R x M; strict: zero). Every request goes through the real Envoy
 * to the stand-in provider (support/money-upstream.ts), which bills exactly.
 *
 * The file-store gateway runs the demo config with keys of its own, a request body limit of 64 KiB
 * (gateway.maxRequestBytes, so a body over it is cheap to send), and claude-3-5-haiku-latest at
 * Anthropic's list price (input 0.8, output 4: cache writes are billed by the meter at 1.25x or 2x of
 * it, as Anthropic bills them). It starts in strict mode; the soft cases switch it by a reload.
 */
import * as http from 'node:http';
import * as http2 from 'node:http2';
import { readFileSync, writeFileSync } from 'node:fs';
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
import { withPgReplicas } from '../support/money-pg';
import { issueKey } from '../support/pg-keys';

const KEYS = [
  'toolsStrict',
  'toolsSoft',
  'cache1h',
  'cache5m',
  'chunkedBig',
  'h2Big',
  'expect',
  'background',
  'embeds',
] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
const BALANCES: Record<KeyName, number> = {
  toolsStrict: 0.003,
  toolsSoft: 0.01,
  cache1h: 10,
  cache5m: 10,
  chunkedBig: 10,
  h2Big: 10,
  expect: 10,
  background: 10,
  embeds: 0.0003,
};
const withKeys = withMoneyKeys(keys, (k) => BALANCES[k as KeyName], 'rt7');

/** Anthropic's list price of claude-3-5-haiku (per million tokens), the gateway's too (the demo config's). */
const HAIKU_LIST = { input: 0.8, output: 4 };
const HAIKU = { input: 0.8, output: 4, cap: 8192 };
const EMBED = { input: 0.02 };
const BODY_LIMIT = 65_536;

const config = (demo: string): string =>
  inMode('strict')(withKeys(demo)).replace(/maxRequestBytes: \d+/, `maxRequestBytes: ${BODY_LIMIT}`);

const claude = (key: KeyName, extra: Record<string, string> = {}): Record<string, string> => ({
  'x-api-key': keys[key],
  'anthropic-version': '2023-06-01',
  ...extra,
});
const bearer = (key: KeyName): Record<string, string> => ({ authorization: `Bearer ${keys[key]}` });
type Counts = Record<string, number>;
const statuses = (sent: Sent[]): Counts =>
  sent.reduce<Counts>((c, s) => ({ ...c, [s.status]: (c[s.status] ?? 0) + 1 }), {});

/**
 * A coding agent's request with Anthropic's client tools (computer use, bash, the text editor): a
 * 300-byte body that Anthropic bills about 2,500 input tokens (its hidden tool prompts).
 */
const TOOLS_BODY = (tag: string) => ({
  model: 'claude-3-5-haiku-latest',
  max_tokens: 5,
  tools: [
    { type: 'computer_20250124', name: 'computer', display_width_px: 1024, display_height_px: 768 },
    { type: 'bash_20250124', name: 'bash' },
    { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' },
  ],
  messages: [{ role: 'user', content: tag }],
});
const TOOLS_HEADERS = { 'anthropic-beta': 'computer-use-2025-01-24', 'x-stand-in-tool-prompts': 'on' };
const HIDDEN_TOOL_TOKENS = TOOL_PROMPT_TOKENS + CLIENT_TOOL_TOKENS.reduce((s, [, n]) => s + n, 0);

describeE2E('money, tool prompts and body limits: one gateway, file store', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;

  withMoneyGateway(config, (started) => ({ up, gw, store } = started));

  const rowsOf = async (key: KeyName): Promise<UsageEntry[]> =>
    store.meter!.usage({ keyId: `rt7-${key}`, limit: 2000 });
  const balanceOf = (key: KeyName): Promise<number> => balanceOfKey(store, keys[key]);
  const upstreamWith = (tag: string): number => up.received.filter((r) => r.body.includes(tag)).length;
  const settled = (): Promise<void> =>
    waitFor('the meter to let go of every request', () => gw.modelgate.service!.meter.settledAll, 30_000);
  async function mode(m: 'soft' | 'strict'): Promise<void> {
    writeFileSync(
      gw.configPath,
      readFileSync(gw.configPath, 'utf8').replace(/ {2}mode: (soft|strict) /, `  mode: ${m} `),
    );
    await waitFor(`the gateway in ${m} mode`, () => gw.modelgate.service!.config().meter.mode === m, 30_000);
  }

  // --- Anthropic's hidden tool prompts ---------------------------------------------------------

  it("strict: a request with Anthropic's client tools (computer, bash, text editor), billed about 2,500 input tokens for a 300-byte body, reserves Anthropic's own tool prompts too: the balance never goes below zero", async () => {
    const sent: Sent[] = [];
    for (let i = 0; i < 4; i++) {
      const s = await request(
        gw,
        '/v1/messages',
        claude('toolsStrict', TOOLS_HEADERS),
        TOOLS_BODY(`rt7 tools strict ${i}`),
      );
      sent.push(s);
      if (s.status !== 200) break;
      await waitFor('its row', async () => (await rowsOf('toolsStrict')).length === i + 1, 30_000);
    }
    await settled();
    const rows = await rowsOf('toolsStrict');
    const after = await balanceOf('toolsStrict');
    const bytes = Buffer.byteLength(JSON.stringify(TOOLS_BODY('rt7 tools strict 0')));
    const reserved = (bytes * HAIKU.input + 5 * HAIKU.output) / 1e6;
    const why = `statuses ${JSON.stringify(statuses(sent))}; reservation ${reserved} (${bytes} bytes as input); rows ${JSON.stringify(rows.map((r) => ({ in: r.inputTokens, out: r.outputTokens, cost: r.cost })))}; balance after ${after} on ${BALANCES.toolsStrict}`;
    console.log(`rt7 tools strict: ${why}`);
    expect(sent[0].status, why).toBe(200);
    // The ledger has what the provider billed (its hidden tool prompts included): the key is not served free.
    expect(rows[rows.length - 1].inputTokens, why).toBeGreaterThan(HIDDEN_TOOL_TOKENS);
    // Strict mode's bound is zero: held at what the provider bills (its tool prompts included), the first is
    // served and the second refused.
    expect(after, why).toBeGreaterThanOrEqual(0);
  }, 60_000);

  // --- Anthropic's prompt caching --------------------------------------------------------------

  /**
   * A 2,000-word system prompt marked for caching with `ttl`; Anthropic bills its write at 1.25x (5m) or 2x (1h) the
   * list input price.
   */
  async function cacheWrite(
    key: KeyName,
    ttl: '5m' | '1h',
  ): Promise<{ sent: Sent; row: UsageEntry; billed: number; why: string }> {
    const body = {
      model: 'claude-3-5-haiku-latest',
      max_tokens: 5,
      system: [{ type: 'text', text: 'the '.repeat(2000), cache_control: { type: 'ephemeral', ttl } }],
      messages: [{ role: 'user', content: `rt7 cache ${ttl}` }],
    };
    const sent = await request(gw, '/v1/messages', claude(key), body);
    await waitFor('its row', async () => (await rowsOf(key)).length === 1, 30_000);
    const [row] = await rowsOf(key);
    const write = ttl === '1h' ? 2 : 1.25;
    // What the provider reported writing (its answer's usage), billed at `write` times the list price.
    const usage = (JSON.parse(sent.text) as { usage: { cache_creation_input_tokens: number; output_tokens: number } })
      .usage;
    const billed =
      (usage.cache_creation_input_tokens * HAIKU_LIST.input * write + usage.output_tokens * HAIKU_LIST.output) / 1e6;
    const why = `status ${sent.status}; ${usage.cache_creation_input_tokens} input tokens written to the ${ttl} cache, billed ${billed} (${write}x the list price ${HAIKU_LIST.input}); debited ${row.cost} (${row.inputTokens} input tokens: the write's premium counts as input) at the configured ${HAIKU.input}`;
    console.log(`rt7 cache ${ttl}: ${why}`);
    return { sent, row, billed, why };
  }

  it('a 5-minute cache write (Anthropic: 1.25x the input price) is debited what the provider billed, at the list price', async () => {
    const { sent, row, billed, why } = await cacheWrite('cache5m', '5m');
    expect(sent.status, why).toBe(200);
    expect(row.estimated ?? null).toBeNull();
    // Within one input token of rounding (the premium is counted in whole tokens, rounded up).
    expect(row.cost, why).toBeGreaterThanOrEqual(billed - 1e-12);
    expect(row.cost, why).toBeLessThanOrEqual(billed + HAIKU.input / 1e6 + 1e-12);
  }, 60_000);

  it('a 1-hour cache write (`cache_control.ttl: "1h"`, chosen by the client; Anthropic bills 2x the input price) is debited what the provider billed', async () => {
    const { sent, row, billed, why } = await cacheWrite('cache1h', '1h');
    expect(sent.status, why).toBe(200);
    expect(row.cost, why).toBeGreaterThanOrEqual(billed - 1e-12);
    expect(row.cost, why).toBeLessThanOrEqual(billed + HAIKU.input / 1e6 + 1e-12);
  }, 60_000);

  // --- bodies over the limit, however they are framed --------------------------------------------

  const bigBody = (tag: string): Buffer =>
    Buffer.from(
      JSON.stringify({
        model: 'gpt-4o-mini',
        max_tokens: 5,
        messages: [{ role: 'user', content: `${tag} ${'the '.repeat(BODY_LIMIT / 2)}` }],
      }),
    );

  it('defended: HTTP/1.1, a body over gateway.maxRequestBytes sent chunked (no content-length) in small pieces: 413, nothing upstream, nothing debited', async () => {
    const tag = 'rt7 chunked big';
    const body = bigBody(tag);
    const url = new URL(gw.baseUrl);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          method: 'POST',
          path: '/v1/chat/completions',
          agent: false,
          headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked', ...bearer('chunkedBig') },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      let at = 0;
      const next = (): void => {
        while (at < body.length) {
          const piece = body.subarray(at, at + 4096);
          at += piece.length;
          if (!req.write(piece)) return void req.once('drain', next);
        }
        req.end();
      };
      next();
    });
    expect(body.length).toBeGreaterThan(BODY_LIMIT);
    expect(status).toBe(413);
    expect(upstreamWith(tag)).toBe(0);
    expect(await rowsOf('chunkedBig')).toEqual([]);
    expect(await balanceOf('chunkedBig')).toBe(BALANCES.chunkedBig);
  }, 60_000);

  it('defended: HTTP/2, a body over gateway.maxRequestBytes in DATA frames without content-length: 413, nothing upstream, nothing debited', async () => {
    const tag = 'rt7 h2 big';
    const body = bigBody(tag);
    const session = http2.connect(gw.baseUrl);
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const stream = session.request({
          ':method': 'POST',
          ':path': '/v1/chat/completions',
          'content-type': 'application/json',
          ...bearer('h2Big'),
        });
        let got = 0;
        stream.on('response', (h) => (got = Number(h[':status'])));
        stream.on('error', (e) => (got ? resolve(got) : reject(e)));
        stream.on('close', () => resolve(got));
        stream.resume();
        for (let at = 0; at < body.length; at += 8192) stream.write(body.subarray(at, at + 8192));
        stream.end();
      });
      expect(status).toBe(413);
    } finally {
      session.close();
    }
    expect(upstreamWith(tag)).toBe(0);
    expect(await rowsOf('h2Big')).toEqual([]);
    expect(await balanceOf('h2Big')).toBe(BALANCES.h2Big);
  }, 60_000);

  it('defended: HTTP/1.1 with `Expect: 100-continue` and a chunked body under the limit: served once, and debited exactly what the provider billed', async () => {
    const tag = 'rt7 expect';
    const body = Buffer.from(
      JSON.stringify({
        model: 'gpt-4o-mini',
        max_tokens: 7,
        messages: [{ role: 'user', content: `${tag} ${'the '.repeat(5000)}` }],
      }),
    );
    const url = new URL(gw.baseUrl);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          method: 'POST',
          path: '/v1/chat/completions',
          agent: false,
          headers: {
            'content-type': 'application/json',
            'transfer-encoding': 'chunked',
            expect: '100-continue',
            ...bearer('expect'),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.on('continue', () => {
        for (let at = 0; at < body.length; at += 1000) req.write(body.subarray(at, at + 1000));
        req.end();
      });
    });
    expect(status).toBe(200);
    expect(upstreamWith(tag)).toBe(1);
    await waitFor('its row', async () => (await rowsOf('expect')).length === 1, 30_000);
    const [row] = await rowsOf('expect');
    // The stand-in bills one token a word of every string: 5,000 + "rt7 expect" + "user" + the model's name in, 7 out.
    expect(row).toMatchObject({ inputTokens: 5004, outputTokens: 7 });
    expect(row.estimated ?? null).toBeNull();
    expect(await balanceOf('expect')).toBeCloseTo(BALANCES.expect - (5004 * 0.15 + 7 * 0.6) / 1e6, 12);
  }, 60_000);

  // --- the Responses API's background mode, spelled otherwise -------------------------------------

  it('defended: background mode spelled "Background", "BACKGROUND" or with a lax value (" True ", 1) is refused before anything goes upstream', async () => {
    const tag = 'rt7 background';
    const bodies = [
      { Background: true },
      { BACKGROUND: true },
      { background: ' True ' },
      { background: 1 },
      { background: 'yes' },
    ];
    const sent: Sent[] = [];
    for (const [i, extra] of bodies.entries()) {
      sent.push(
        await request(gw, '/v1/responses', bearer('background'), {
          model: 'gpt-4o-mini',
          input: `${tag} ${i}`,
          max_output_tokens: 5,
          ...extra,
        }),
      );
    }
    expect(
      sent.map((s) => s.status),
      JSON.stringify(sent.map((s) => s.text.slice(0, 200))),
    ).toEqual(Array(bodies.length).fill(400));
    expect(sent.every((s) => /background_unsupported|body_invalid/.test(s.text))).toBe(true);
    expect(upstreamWith(tag)).toBe(0);
  }, 60_000);

  // --- embeddings: 2,048 inputs in one request ---------------------------------------------------

  it("defended: strict, embeddings with 2,048 inputs on a balance just above the request's reservation: served, debited what was billed, the balance never below zero", async () => {
    const input = Array.from({ length: 2048 }, (_, i) => (i === 0 ? 'rt7 embeds' : 'the'));
    const body = { model: 'text-embedding-3-small', input, dimensions: 256 };
    const bytes = Buffer.byteLength(JSON.stringify(body));
    const sent = await request(gw, '/v1/embeddings', bearer('embeds'), body);
    expect((bytes * EMBED.input) / 1e6).toBeLessThan(BALANCES.embeds);
    expect(sent.status).toBe(200);
    await waitFor('its row', async () => (await rowsOf('embeds')).length === 1, 30_000);
    const [row] = await rowsOf('embeds');
    // One token a word of every string: the 2,048 inputs ("rt7 embeds" is two) and the model's name.
    expect(row.inputTokens).toBe(2050);
    expect(row.cost).toBeCloseTo((2050 * EMBED.input) / 1e6, 15);
    // A second one at once finds the balance reserved... and in turn the balance never goes below zero.
    const again = await Promise.all([0, 1, 2].map(() => request(gw, '/v1/embeddings', bearer('embeds'), body)));
    await waitFor(
      'the rows of those served',
      async () => (await rowsOf('embeds')).length === 1 + again.filter((s) => s.status === 200).length,
      30_000,
    );
    await settled();
    expect(await balanceOf('embeds')).toBeGreaterThanOrEqual(0);
  }, 60_000);

  // --- soft mode ---------------------------------------------------------------------------------

  it("soft: 100 requests at once with Anthropic's client tools on a balance of 0.01: each held with Anthropic's own tool prompts, the key spends at most balance + M", async () => {
    await mode('soft');
    const tag = 'rt7 tools soft';
    // Every request waits 3 s at the provider before answering: all of those allowed are in flight together.
    const sent = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        request(
          gw,
          '/v1/messages',
          claude('toolsSoft', { ...TOOLS_HEADERS, 'x-stand-in-hold-ms': '3000' }),
          TOOLS_BODY(`${tag} ${i}`),
        ),
      ),
    );
    const served = sent.filter((s) => s.status === 200).length;
    await waitFor(
      `a row for each of the ${served} served`,
      async () => (await rowsOf('toolsSoft')).length === served,
      60_000,
    );
    await settled();
    const bytes = Math.max(
      ...Array.from({ length: 100 }, (_, i) => Buffer.byteLength(JSON.stringify(TOOLS_BODY(`${tag} ${i}`)))),
    );
    // M: the largest single-answer request's maximum: its body's bytes as input, Anthropic's own tool
    // prompts at most (PROVIDER_TOOL_TOKENS: docs/metering.md), plus the model's cap.
    const allowance =
      PROVIDER_TOOL_TOKENS.input_schema +
      PROVIDER_TOOL_TOKENS.computer_ +
      PROVIDER_TOOL_TOKENS.bash_ +
      PROVIDER_TOOL_TOKENS.text_editor_;
    const M = ((bytes + allowance) * HAIKU.input + HAIKU.cap * HAIKU.output) / 1e6;
    const spent = BALANCES.toolsSoft - (await balanceOf('toolsSoft'));
    const rows = await rowsOf('toolsSoft');
    const why = `statuses ${JSON.stringify(statuses(sent))}; each held at ${(bytes * HAIKU.input + 5 * HAIKU.output) / 1e6}, billed ${rows[0]?.cost} (${rows[0]?.inputTokens} input tokens); spent ${spent} on ${BALANCES.toolsSoft}; bound balance + M = ${BALANCES.toolsSoft + M}`;
    console.log(`rt7 tools soft: ${why}`);
    expect(served, why).toBeGreaterThan(0);
    expect(spent, why).toBeLessThanOrEqual(BALANCES.toolsSoft + M + 1e-12);
  }, 120_000);
});

/**
 * Strict mode without leases on PostgreSQL (`meter.leases: false`: one reservation statement per
 * request, a row lock on the key), two replicas, 100 requests at once on a balance for ten.
 */
describeE2E('money, tool prompts and body limits: strict without leases, two replicas on one PostgreSQL', () => {
  const FLAT = 'rt7-flat';
  /** 0.001 a token out, nothing in; cap 100. A request of max_tokens 50 is reserved and billed exactly 0.05. */
  const PER = 0.05;
  let pool: AdminDb;
  let a: Gateway;
  let b: Gateway;

  withPgReplicas(
    { mode: 'strict', leases: false, models: { [FLAT]: { input: 0, output: 1000, cap: 100 } } },
    (started) => ({ pool, a, b } = started),
  );

  it('defended: 100 streams at once split 50/50 over both replicas on a balance for 10: at most 10 served, balance >= 0, the ledger is what the provider billed', async () => {
    expect(a.modelgate.service!.config().meter.leases).toBe(false);
    const id = 'rt7-noleases';
    const initial = String(10 * PER);
    const { key } = await issueKey(pool, { group: 'basic', id, balance: initial });
    const sent = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        request(
          i < 50 ? a : b,
          '/v1/chat/completions',
          { authorization: `Bearer ${key}`, 'x-stand-in-delay-ms': '20' },
          {
            model: FLAT,
            max_tokens: 50,
            stream: true,
            stream_options: { include_usage: true },
            messages: [{ role: 'user', content: `${id} ${i}` }],
          },
        ),
      ),
    );
    const served = sent.filter((s) => s.status === 200).length;
    const rows = async () =>
      (
        await pool.query<{ cost: number; output: number; estimated: string | null; provisional: boolean }>(
          'SELECT cost::float8 AS cost, output_tokens::int AS output, estimated, provisional FROM modelgate.usage WHERE key_id = $1',
          [id],
        )
      ).rows;
    await waitFor(
      `a final row for each of the ${served} served`,
      async () => (await rows()).filter((r) => !r.provisional).length === served,
      60_000,
    );
    await waitFor(
      'both replicas to let go of every request',
      () => a.modelgate.service!.meter.settledAll && b.modelgate.service!.meter.settledAll,
      30_000,
    );
    const after = Number(
      (await pool.query<{ b: string }>('SELECT balance::text AS b FROM modelgate.keys WHERE id = $1', [id])).rows[0].b,
    );
    const open = (
      await pool
        .query<{ n: number }>('SELECT count(*)::int AS n FROM modelgate.reservations WHERE key_id = $1', [id])
        .catch(() => ({ rows: [{ n: 0 }] }))
    ).rows[0].n;
    const why = `statuses ${JSON.stringify(statuses(sent))}; served ${served}; balance after ${after} on ${initial}; reservations left ${open}`;
    console.log(`rt7 no leases: ${why}`);
    expect(served, why).toBeGreaterThan(0);
    expect(served, why).toBeLessThanOrEqual(10);
    expect(after, why).toBeGreaterThanOrEqual(0);
    expect((await rows()).map((r) => `${r.estimated ?? 'exact'} ${r.output}`)).toEqual(Array(served).fill('exact 50'));
    expect(
      sent.filter((s) => s.status !== 200).every((s) => s.status === 403 && s.text.includes('balance_insufficient')),
      why,
    ).toBe(true);
  }, 120_000);

  /** A replica's LISTEN connection's backend pid (white box: the store's listener). */
  const listenPid = (g: Gateway): number | null =>
    (g.modelgate.service!.store as unknown as { listener: { pid: number | null } }).listener.pid;
  const replicasSeen = (g: Gateway): number =>
    (g.modelgate.service!.store as unknown as { replicas(): number }).replicas();

  it("soft: while one replica's LISTEN connection keeps dropping (it still answers Checks), the other keeps counting it (it remembers the larger count while that replica's requests may run): 100 streams over both spend at most balance + 2 x M", async () => {
    for (const g of [a, b])
      writeFileSync(g.configPath, readFileSync(g.configPath, 'utf8').replace('  mode: strict ', '  mode: soft '));
    await waitFor(
      'both replicas in soft mode',
      () => a.modelgate.service!.config().meter.mode === 'soft' && b.modelgate.service!.config().meter.mode === 'soft',
      30_000,
    );
    await waitFor('both replicas counting two', () => replicasSeen(a) === 2 && replicasSeen(b) === 2, 30_000);
    const id = 'rt7-listen-drop';
    // M: rt7-flat's cap (100 tokens) at 0.001, no input price. The balance pays for ten and a half:
    // with each replica holding to half of it, 5 + 5 are served (1, within balance + 2 x M = 1.25);
    // one holding to all of it serves 10 and the other 5 (1.5).
    const M = 0.1;
    const initial = '1.05';
    const { key } = await issueKey(pool, { group: 'basic', id, balance: initial });
    // A's LISTEN connection is cut as soon as it is back (a flapping connection: a proxy or firewall
    // that drops it, a database at max_connections): B's count of LISTEN sessions finds itself alone.
    let cutting = true;
    let cuts = 0;
    const cutter = (async () => {
      while (cutting) {
        const pid = listenPid(a);
        if (pid !== null)
          cuts += (
            await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM (SELECT pg_terminate_backend($1)) t', [pid])
          ).rows[0].n;
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    let sent: Sent[] = [];
    try {
      // B's counts see one LISTEN session now: three of them (6 s). It keeps counting two: it remembers
      // the larger count while A's requests may run (meter.reservationSeconds).
      const until = Date.now() + 3 * REPLICA_COUNT_MS + 500;
      while (Date.now() < until) await new Promise((r) => setTimeout(r, 100));
      expect(replicasSeen(b)).toBeGreaterThanOrEqual(2);
      const seen = `A counts ${replicasSeen(a)}, B counts ${replicasSeen(b)}`;
      sent = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          request(
            i < 50 ? a : b,
            '/v1/chat/completions',
            { authorization: `Bearer ${key}`, 'x-stand-in-delay-ms': '20' },
            {
              model: FLAT,
              max_tokens: 100,
              stream: true,
              stream_options: { include_usage: true },
              messages: [{ role: 'user', content: `${id} ${i}` }],
            },
          ),
        ),
      );
      console.log(`rt7 listen drop: at the burst ${seen}`);
    } finally {
      cutting = false;
      await cutter;
    }
    const served = sent.filter((s) => s.status === 200).length;
    const servedA = sent.slice(0, 50).filter((s) => s.status === 200).length;
    await waitFor(
      `a final row for each of the ${served} served`,
      async () =>
        (
          await pool.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM modelgate.usage WHERE key_id = $1 AND NOT provisional',
            [id],
          )
        ).rows[0].n === served,
      60_000,
    );
    await waitFor(
      'both replicas to let go of every request',
      () => a.modelgate.service!.meter.settledAll && b.modelgate.service!.meter.settledAll,
      30_000,
    );
    const after = Number(
      (await pool.query<{ b: string }>('SELECT balance::text AS b FROM modelgate.keys WHERE id = $1', [id])).rows[0].b,
    );
    const spent = Number(initial) - after;
    const why = `${cuts} cuts of A's LISTEN connection; statuses ${JSON.stringify(statuses(sent))}; served ${servedA} by A, ${served - servedA} by B (each billed ${M}); spent ${spent} on ${initial}; bound ${Number(initial) + 2 * M}`;
    console.log(`rt7 listen drop: ${why}`);
    expect(served, why).toBeGreaterThan(0);
    expect(servedA, why).toBeGreaterThan(0);
    expect(spent, why).toBeLessThanOrEqual(Number(initial) + 2 * M + 1e-12);
  }, 120_000);
});

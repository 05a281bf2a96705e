/**
 * Paths where the Check's classification (billable, or free as token counting is) could differ from
 * what the upstream serves, and Gemini field masks that hide the usage (docs/metering.md,
 * "Overspend"): count_tokens look-alikes, dot segments, escapes, case, other versions and unserved
 * endpoints never reach a provider without a ledger row; websocket upgrades never reach one; a
 * masked answer is debited its maximum output, in soft and strict mode. Each case goes through a
 * real Envoy and modelgate to the stand-in provider (support/money-upstream.ts), on its own key.
 */
import * as net from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { balanceOfKey, inMode, request, startMoneyGateway, withMoneyKeys } from '../support/money-client';
import type { MoneyUpstream } from '../support/money-upstream';

const KEYS = ['probe', 'upgrade', 'maskSoft', 'maskStrict'] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
/** The probes pay what they send; the mask cases have 0.0001 (soft) and one request's reservation (strict). */
const BALANCES: Record<KeyName, number> = { probe: 10, upgrade: 10, maskSoft: 0.0001, maskStrict: 0.004 };
const withKeys = withMoneyKeys(keys, (k) => BALANCES[k as KeyName], 'rt4');

/**
 * A Gemini model outside meter.reasoningModels (gemini-2.0-flash: 0.10 / 0.40 per million, output
 * cap 8,192), made available and priced in the demo's group basic.
 */
const FLASH_2 = { input: 0.1, output: 0.4, cap: 8192 };
const withFlash2 = (demo: string): string =>
  demo.replace(
    /      - name: gemini-2\.0-flash\n        protocols: \[generative\]\n        available: false[^\n]*\n/,
    `      - name: gemini-2.0-flash\n        protocols: [generative]\n        price: { input: ${FLASH_2.input}, output: ${FLASH_2.output} }\n        maxOutputTokens: ${FLASH_2.cap}\n`,
  );

async function rows(store: FileStore, key: KeyName): Promise<UsageEntry[]> {
  return store.meter!.usage({ keyId: `rt4-${key}`, limit: 1000 });
}

const balanceOf = (store: FileStore, key: KeyName): Promise<number> => balanceOfKey(store, keys[key]);

/** A path the provider answers without generating (token counting): free, not metered. */
const counts = (upstreamPath: string): boolean => /(?:\/count_tokens|:countTokens)(?:\?|$)/.test(upstreamPath);

type Family = 'openai' | 'anthropic' | 'gemini';
const CHAT = { model: 'gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'write' }] };
const CLAUDE = { model: 'claude-3-5-haiku-latest', max_tokens: 50, messages: [{ role: 'user', content: 'write' }] };
const GEMINI = { contents: [{ role: 'user', parts: [{ text: 'write' }] }], generationConfig: { maxOutputTokens: 50 } };
function credentials(family: Family, key: string): [string, string][] {
  if (family === 'anthropic')
    return [
      ['x-api-key', key],
      ['anthropic-version', '2023-06-01'],
    ];
  if (family === 'gemini') return [['x-goog-api-key', key]];
  return [['authorization', `Bearer ${key}`]];
}
const BODY: Record<Family, unknown> = { openai: CHAT, anthropic: CLAUDE, gemini: GEMINI };

/**
 * Paths where the Check's view (billable, free token counting, unknown) could differ from the
 * provider's: dot segments and escapes around count_tokens/:countTokens, case, `;` parameters, a
 * second `:method`, double slashes, trailing slashes, other API versions, and the providers'
 * endpoints this gateway does not serve (batches, files, cached contents, audio, images, realtime,
 * conversations, ...), each at the root and under /alt.
 */
const PROBES: ReadonlyArray<readonly [Family, 'GET' | 'POST', string]> = [
  ['anthropic', 'POST', '/v1/messages/count_tokens/..'],
  ['anthropic', 'POST', '/v1/messages/count_tokens/../'],
  ['anthropic', 'POST', '/v1/messages/count_tokens/%2e%2e'],
  ['anthropic', 'POST', '/v1/messages/count_tokens/.'],
  ['anthropic', 'POST', '/v1/messages/./count_tokens'],
  ['anthropic', 'POST', '/v1/messages%2Fcount_tokens'],
  ['anthropic', 'POST', '/v1/messages/count_tokens;x'],
  ['anthropic', 'POST', '/v1/messages;/count_tokens'],
  ['anthropic', 'POST', '/v1/messages//count_tokens'],
  ['anthropic', 'POST', '/v1/messages/COUNT_TOKENS'],
  ['anthropic', 'POST', '/v1/messages/count_tokens?beta=true'],
  ['anthropic', 'POST', '/v1/messages/batches'],
  ['anthropic', 'POST', '/v1/messages/'],
  ['anthropic', 'POST', '/v1/complete'],
  ['anthropic', 'POST', '/v1/files'],
  ['anthropic', 'POST', '/v1/skills'],
  ['anthropic', 'POST', '/alt/v1/messages/count_tokens/..'],
  ['anthropic', 'POST', '/alt/v1/messages/batches'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:countTokens/..'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:generateContent%3AcountTokens'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash%3AgenerateContent:countTokens'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:streamGenerateContent:countTokens'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:countTokens;generateContent'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash;x:countTokens'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:GenerateContent'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:generateContent/'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:generateContent;'],
  ['gemini', 'POST', '/v1beta/models/./gemini-2.5-flash:generateContent'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:countTokens?alt=sse'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:batchGenerateContent'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:asyncBatchEmbedContent'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:predict'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:predictLongRunning'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:generateAnswer'],
  ['gemini', 'POST', '/v1beta/models/gemini-2.5-flash:bidiGenerateContent'],
  ['gemini', 'POST', '/v1beta/tunedModels/gemini-2.5-flash:generateContent'],
  ['gemini', 'POST', '/v1beta/cachedContents'],
  ['gemini', 'POST', '/v1beta/files'],
  ['gemini', 'POST', '/upload/v1beta/files'],
  ['gemini', 'POST', '/v1beta/batches'],
  ['gemini', 'POST', '/v1/models/gemini-2.5-flash:generateContent'],
  ['gemini', 'POST', '/v1alpha/models/gemini-2.5-flash:generateContent'],
  ['gemini', 'POST', '/alt/v1beta/models/gemini-2.5-flash:countTokens/..'],
  ['gemini', 'POST', '/alt/v1beta/cachedContents'],
  ['openai', 'POST', '/v1/chat/completions/'],
  ['openai', 'POST', '/v1/chat/completions/.'],
  ['openai', 'POST', '//v1/chat/completions'],
  ['openai', 'POST', '/v1/chat/completions;x'],
  ['openai', 'POST', '/V1/chat/completions'],
  ['openai', 'POST', '/v1/responses/compact'],
  ['openai', 'POST', '/v1/responses/resp_1/cancel'],
  ['openai', 'GET', '/v1/responses/resp_1'],
  ['openai', 'GET', '/v1/responses/resp_1/input_items'],
  ['openai', 'POST', '/v1/responses/input_tokens'],
  ['openai', 'POST', '/v1/conversations'],
  ['openai', 'POST', '/v1/conversations/conv_1/items'],
  ['openai', 'POST', '/v1/batches'],
  ['openai', 'POST', '/v1/files'],
  ['openai', 'POST', '/v1/uploads'],
  ['openai', 'POST', '/v1/completions'],
  ['openai', 'POST', '/v1/audio/speech'],
  ['openai', 'POST', '/v1/audio/transcriptions'],
  ['openai', 'POST', '/v1/images/generations'],
  ['openai', 'POST', '/v1/moderations'],
  ['openai', 'POST', '/v1/vector_stores'],
  ['openai', 'POST', '/v1/containers'],
  ['openai', 'POST', '/v1/realtime/sessions'],
  ['openai', 'POST', '/v1/realtime/client_secrets'],
  ['openai', 'POST', '/v1/fine_tuning/jobs'],
  ['openai', 'GET', '/v1/chat/completions/chatcmpl_1'],
  ['openai', 'POST', '/alt/v1/batches'],
  ['openai', 'POST', '/alt/v1/responses/compact'],
  ['openai', 'POST', '/alt/chat/completions/.'],
];

/**
 * Every request the stand-in received from `key` through Envoy: the ones it answers by generating
 * (not token counting) must each have their ledger row. The ledger's id is Envoy's minted
 * x-modelgate-request, which no provider receives, so rows are counted (the key makes these probes
 * alone): the generating requests past the row count are the ones served unmetered.
 */
async function unmetered(up: MoneyUpstream, store: FileStore, key: KeyName): Promise<string[]> {
  const generating = up.received.filter((r) => r.headers['x-rt4-key'] === key && !counts(r.path));
  // Each one's report settles it; a missing row after a generous wait is a request served unmetered.
  try {
    await waitFor(
      'a ledger row for every generating request',
      async () => (await rows(store, key)).length >= generating.length,
      30_000,
    );
  } catch {
    /* reported below */
  }
  return generating.slice((await rows(store, key)).length).map((r) => r.path);
}

/** One raw HTTP/1.1 exchange: the status line Envoy answers with (an upgrade the gateway forwarded would say 101). */
function rawExchange(gw: Gateway, text: string): Promise<string> {
  const url = new URL(gw.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => socket.write(text));
    let got = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      got += d;
      if (got.includes('\r\n\r\n')) {
        socket.destroy();
        resolve(got.slice(0, got.indexOf('\r\n')));
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(got.slice(0, Math.max(0, got.indexOf('\r\n'))) || '(closed)'));
  });
}

describeE2E('money, unbilled paths and field masks: soft mode', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;
  beforeAll(async () => {
    ({ up, gw, store } = await startMoneyGateway((demo) => withFlash2(withKeys(demo))));
  }, 60_000);
  afterAll(async () => {
    await gw?.close();
    await up?.close();
  });

  it('defended: no path reaches a provider to generate without its ledger row (count_tokens/:countTokens look-alikes, dot segments, escapes, case, ";", other versions, unserved endpoints, /alt), over HTTP/1.1 and HTTP/2', async () => {
    const seen: string[] = [];
    for (const http2 of [false, true]) {
      for (const [family, method, path] of PROBES) {
        const reply = await gw.send(method, path, {
          http2,
          headers: [...credentials(family, keys.probe), ['content-type', 'application/json'], ['x-rt4-key', 'probe']],
          ...(method === 'POST' ? { body: JSON.stringify(BODY[family]) } : {}),
        });
        seen.push(
          `${http2 ? 'h2' : 'h1'} ${method} ${path} -> ${reply.status} ${String(reply.headers['x-modelgate-reason'] ?? '')}`,
        );
      }
    }
    // Every look-alike is Envoy's 404/405 (path_unknown, prefix_wrong), 400 for an escaped slash, or 403
    // model_not_in_group (the Check reads the model up to the last ":"); dot segments and double slashes are
    // normalised before the route and the Check see the path.
    const served = up.received.filter((r) => r.headers['x-rt4-key'] === 'probe');
    const missing = await unmetered(up, store, 'probe');
    expect(missing, `served unmetered:\n${missing.join('\n')}\n\nall probes:\n${seen.join('\n')}`).toEqual([]);
    // What reached a provider at all: the paths the route table serves, normalised.
    for (const r of served)
      expect(r.path, seen.join('\n')).toMatch(
        /^(?:\/alt)?(?:\/v1\/chat\/completions|\/v1\/messages(?:\/count_tokens(?:\?beta=true)?)?|\/v1beta\/models\/gemini-2\.5-flash:(?:generateContent|countTokens(?:\?alt=sse)?))$/,
      );
  }, 240_000);

  it('defended: a websocket upgrade (Responses API websocket mode, /v1/realtime) never reaches a provider', async () => {
    const headers = (path: string, method: string, extra = ''): string =>
      `${method} ${path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${keys.upgrade}\r\nx-rt4-key: upgrade\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n${extra}\r\n`;
    const body = JSON.stringify(CHAT);
    const answers = [
      await rawExchange(gw, headers('/v1/responses', 'GET')),
      await rawExchange(gw, headers('/v1/realtime?model=gpt-4o-mini', 'GET')),
      await rawExchange(
        gw,
        headers(
          '/v1/chat/completions',
          'POST',
          `content-type: application/json\r\ncontent-length: ${body.length}\r\n`,
        ) + body,
      ),
    ];
    // Envoy answers each 403 itself (no upgrade is configured on the listener).
    for (const a of answers) expect(a).not.toMatch(/ 101 /);
    const upgraded = up.received.filter((r) => r.headers['x-rt4-key'] === 'upgrade' && r.headers.upgrade !== undefined);
    expect(
      upgraded.map((r) => r.path),
      answers.join('\n'),
    ).toEqual([]);
    expect(await unmetered(up, store, 'upgrade')).toEqual([]);
  }, 60_000);

  it("gemini: a field mask that drops the answer's usage and text (?fields=modelVersion, x-goog-fieldmask) on a model outside meter.reasoningModels spends within balance + M: a balance of 0.0001 buys no unbounded output", async () => {
    // Google's system parameter `fields` (or the x-goog-fieldmask header) trims the answer, usage and text
    // included; the provider still generates, and bills, every output token, so a masked request is debited
    // its maximum output. Each request here asks for the model's cap (8,192 tokens).
    const body = {
      contents: [{ role: 'user', parts: [{ text: 'write a long story' }] }],
      generationConfig: { maxOutputTokens: FLASH_2.cap },
    };
    const billed: number[] = [];
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const viaHeader = i % 2 === 1;
      const path = `/v1beta/models/gemini-2.0-flash:generateContent${viaHeader ? '' : '?fields=modelVersion'}`;
      const sent = await request(
        gw,
        path,
        { 'x-goog-api-key': keys.maskSoft, ...(viaHeader ? { 'x-goog-fieldmask': 'modelVersion' } : {}) },
        body,
      );
      statuses.push(sent.status);
      if (sent.status !== 200) break;
      // What the provider billed: the prompt's words and the cap's output tokens.
      billed.push((4 * FLASH_2.input + FLASH_2.cap * FLASH_2.output) / 1e6);
      await waitFor('its ledger row', async () => (await rows(store, 'maskSoft')).length === billed.length, 30_000);
    }
    const spentByProvider = billed.reduce((a, b) => a + b, 0);
    const bound =
      BALANCES.maskSoft +
      (Buffer.byteLength(JSON.stringify(body)) * FLASH_2.input + FLASH_2.cap * FLASH_2.output) / 1e6;
    const ledger = (await rows(store, 'maskSoft')).map(
      (e) => `${e.outputTokens} out, ${e.estimated ?? 'exact'}, cost ${e.cost}`,
    );
    expect(
      spentByProvider,
      `statuses ${statuses.join(',')}; balance now ${await balanceOf(store, 'maskSoft')}; ledger:\n${ledger.join('\n')}`,
    ).toBeLessThanOrEqual(bound);
  }, 120_000);
});

describeE2E('money, unbilled paths and field masks: strict mode', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;
  beforeAll(async () => {
    ({ up, gw, store } = await startMoneyGateway((demo) => withFlash2(withKeys(inMode('strict')(demo)))));
  }, 60_000);
  afterAll(async () => {
    await gw?.close();
    await up?.close();
  });

  it("gemini: strict mode's bound of zero holds under a field mask (?fields=modelVersion) on a model outside meter.reasoningModels", async () => {
    // The balance covers one request's reservation (0.0033); the provider honours the maximum.
    const body = {
      contents: [{ role: 'user', parts: [{ text: 'write a long story' }] }],
      generationConfig: { maxOutputTokens: FLASH_2.cap },
    };
    let billed = 0;
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const sent = await request(
        gw,
        '/v1beta/models/gemini-2.0-flash:generateContent?fields=modelVersion',
        { 'x-goog-api-key': keys.maskStrict },
        body,
      );
      statuses.push(sent.status);
      if (sent.status !== 200) break;
      billed += (4 * FLASH_2.input + FLASH_2.cap * FLASH_2.output) / 1e6;
      await waitFor('its ledger row', async () => (await rows(store, 'maskStrict')).length === statuses.length, 30_000);
    }
    expect(
      billed,
      `statuses ${statuses.join(',')}; balance now ${await balanceOf(store, 'maskStrict')}`,
    ).toBeLessThanOrEqual(BALANCES.maskStrict);
  }, 120_000);
});

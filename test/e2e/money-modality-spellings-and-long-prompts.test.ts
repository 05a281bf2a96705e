/**
 * Long-context prices, audio and image prices (modality_unpriced) and the admitted price in the
 * Check's metadata, through the real Envoy and modelgate (file store) to the stand-in provider
 * (support/money-upstream.ts). A key holder with a small balance tries to get audio or image served
 * at the text price (spellings, escapes, enum numbers, duplicate keys, parts nested where Gemini
 * reads them) and a long prompt held at the short price (a small body referencing a cached context,
 * a prompt at the threshold); what real clients send must still be served.
 */
import { expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { balanceOfKey, inMode, request, withMoneyGateway, withMoneyKeys } from '../support/money-client';
import type { MoneyUpstream } from '../support/money-upstream';

const PREFIX = 'rt13';
const KEYS = ['evade', 'client', 'dup'] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
const BALANCE = 1;
const MARK = 'x-rt13-key';
const WAV = Buffer.alloc(48, 0).toString('base64');
/** gemini-3.8-flash in the demo config: text prices only (no audioInput, audioOutput, imageOutput). */
const FLASH = '/v1beta/models/gemini-3.8-flash:generateContent';
const gemini = (k: KeyName): Record<string, string> => ({ 'x-goog-api-key': keys[k], [MARK]: k });
const chat = (k: KeyName): Record<string, string> => ({ authorization: `Bearer ${keys[k]}`, [MARK]: k });
const upstreamOf = (up: MoneyUpstream, name: string, from: number): number =>
  up.received.slice(from).filter((r) => r.headers[MARK] === name).length;

/** One request whose body is the exact text given. */
async function rawRequest(
  gw: Gateway,
  path: string,
  headers: Record<string, string>,
  text: string,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${gw.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: text,
  });
  return { status: res.status, text: await res.text() };
}

describeE2E(
  'money, modality spellings and long prompts: audio and image the price does not name, spelled every way a provider reads them',
  () => {
    let up: MoneyUpstream;
    let gw: Gateway;
    let store: FileStore;
    withMoneyGateway(
      withMoneyKeys(keys, () => BALANCE, PREFIX),
      (started) => ({ up, gw, store } = started),
    );

    it('defended: media types with parameters, leading spaces and escapes, parts in systemInstruction and functionResponse.parts, enum numbers, modalities as a string, escaped keys: all 400 modality_unpriced, nothing upstream', async () => {
      const gen = (g: string): string => `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":${g}}`;
      const part = (p: string): string => `{"contents":[{"parts":[${p}]}]}`;
      const geminiBodies = [
        part(`{"inlineData":{"mimeType":"audio/mpeg; codecs=mp3","data":"${WAV}"}}`),
        part(`{"inlineData":{"mimeType":" AUDIO/wav","data":"${WAV}"}}`),
        part(`{"inlineData":{"mimeType":"\\u0061udio/wav","data":"${WAV}"}}`),
        part(`{"inline\\u0044ata":{"mime\\u0054ype":"audio/wav","data":"${WAV}"}}`),
        part(`{"inlineData":{"mimeType":"application/ogg","data":"${WAV}"}}`),
        part('{"fileData":{"fileUri":"https://www.youtube.com/watch?v=x"}}'),
        part('{"file_data":{"file_uri":"https://www.youtube.com/watch?v=x"}}'),
        `{"systemInstruction":{"parts":[{"inlineData":{"mimeType":"audio/wav","data":"${WAV}"}}]},"contents":[{"parts":[{"text":"hi"}]}]}`,
        part(
          `{"functionResponse":{"name":"f","response":{},"parts":[{"inlineData":{"mimeType":"audio/wav","data":"${WAV}"}}]}}`,
        ),
        gen('{"responseModalities":"AUDIO"}'),
        gen('{"responseModalities":[3]}'),
        gen('{"responseModalities":["2"]}'),
        gen('{"responseModalities":["3.0"]}'),
        gen('{"response\\u004dodalities":["AUDIO"]}'),
        gen('{"speechConfig":{}}'),
        `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"responseModalities":["TEXT"]},"generation_config":{"response_modalities":["IMAGE"]}}`,
      ];
      const chatBodies = [
        '{"model":"gpt-4o-mini","modalities":"audio","messages":[{"role":"user","content":"hi"}]}',
        '{"model":"gpt-4o-mini","modalities":["TEXT"," Audio"],"messages":[{"role":"user","content":"hi"}]}',
        '{"model":"gpt-4o-mini","\\u0061udio":{},"messages":[{"role":"user","content":"hi"}]}',
        `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"input\\u005faudio","input_audio":{"data":"${WAV}","format":"wav"}}]}]}`,
        '{"model":"gpt-4o-mini","audio":null,"messages":[{"role":"assistant","\\u0061udio":{"id":"audio_1"}},{"role":"user","content":"again"}]}',
      ];
      const from = up.received.length;
      for (const b of geminiBodies) {
        const sent = await rawRequest(gw, FLASH, gemini('evade'), b);
        expect(sent.status, b.slice(0, 200)).toBe(400);
        expect(sent.text, b.slice(0, 200)).toContain('modality_unpriced');
      }
      for (const b of chatBodies) {
        const sent = await rawRequest(gw, '/v1/chat/completions', chat('evade'), b);
        expect(sent.status, b.slice(0, 200)).toBe(400);
        expect(sent.text, b.slice(0, 200)).toContain('modality_unpriced');
      }
      // Sent twice or in another case: refused as a body the meter cannot read as the provider would.
      for (const b of [
        gen('{"responseModalities":["TEXT"],"responseModalities":["AUDIO"]}'),
        gen('{"ResponseModalities":["AUDIO"]}'),
        '{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"responseModalities":["TEXT"]},"generationConfig":{"responseModalities":["AUDIO"]}}',
      ]) {
        const sent = await rawRequest(gw, FLASH, gemini('evade'), b);
        expect(sent.status, b).toBe(400);
        expect(sent.text, b).toContain('body_invalid');
      }
      const twice = await rawRequest(
        gw,
        '/v1/chat/completions',
        chat('evade'),
        '{"model":"gpt-4o-mini","modalities":["audio"],"modalities":["text"],"messages":[{"role":"user","content":"hi"}]}',
      );
      expect(twice.status).toBe(400);
      expect(twice.text).toContain('body_invalid');
      expect(upstreamOf(up, 'evade', from)).toBe(0);
      expect(await balanceOfKey(store, keys.evade)).toBe(BALANCE);
    }, 120_000);

    it('a part key sent twice, the first a YouTube video (no mimeType: its sound billed as audio), the second an image: refused (a reader that keeps the first sees the video)', async () => {
      const from = up.received.length;
      const body =
        '{"contents":[{"parts":[{"text":"describe"},{"fileData":{"fileUri":"https://www.youtube.com/watch?v=x"},"fileData":{"mimeType":"image/png","fileUri":"https://example.com/a.png"}}]}],"generationConfig":{"maxOutputTokens":5}}';
      const sent = await rawRequest(gw, FLASH, gemini('dup'), body);
      expect(sent.status, sent.text.slice(0, 300)).toBe(400);
      expect(sent.text).toContain('modality_unpriced');
      expect(upstreamOf(up, 'dup', from)).toBe(0);
    }, 60_000);

    it('false positives: a gemini-cli turn on gemini-3.8-flash (no audio price) with an MCP tool whose parameter is named file_data, a call whose arguments name an audio mimeType, and image and PDF parts: served', async () => {
      const turn = {
        contents: [
          {
            role: 'user',
            parts: [
              { text: 'convert talk.wav to mp3, then upload the slides' },
              { inlineData: { mimeType: 'image/png', data: WAV } },
              { inlineData: { mimeType: 'application/pdf', data: WAV } },
            ],
          },
          {
            role: 'model',
            parts: [{ functionCall: { name: 'convert', args: { path: 'talk.wav', mimeType: 'audio/mpeg' } } }],
          },
          {
            role: 'user',
            parts: [{ functionResponse: { name: 'convert', response: { output: 'talk.mp3 written' } } }],
          },
        ],
        tools: [
          {
            functionDeclarations: [
              {
                name: 'convert',
                description: 'Converts a file',
                parametersJsonSchema: {
                  type: 'object',
                  properties: { path: { type: 'string' }, mimeType: { type: 'string' } },
                },
              },
              {
                name: 'upload',
                description: 'Uploads a file',
                parametersJsonSchema: {
                  type: 'object',
                  properties: { file_data: { type: 'string', description: 'base64' }, fileData: { type: 'object' } },
                },
              },
            ],
          },
        ],
        generationConfig: { maxOutputTokens: 20 },
      };
      const from = up.received.length;
      const sent = await request(gw, FLASH, gemini('client'), turn);
      expect(sent.status, sent.text.slice(0, 300)).toBe(200);
      expect(upstreamOf(up, 'client', from)).toBe(1);
      await waitFor(
        'its row',
        async () => (await store.meter!.usage({ keyId: `${PREFIX}-client`, limit: 10 })).length === 1,
      );
    }, 60_000);
  },
);

/** gemini-3.1-pro-preview in the demo config: 2/12 per million, 4/18 over 200,000 input tokens. */
const PRO = '/v1beta/models/gemini-3.1-pro-preview:generateContent';
const BASE = { input: 2, output: 12 };
const LONG = { input: 4, output: 18 };
const cost = (input: number, output: number, p: { input: number; output: number }): number =>
  (input * p.input + output * p.output) / 1e6;
const lcKeys = { ref: generateKey(), edge: generateKey() };

describeE2E(
  'money, modality spellings and long prompts: long prompts held by what a small body references, and the threshold itself',
  () => {
    let gw: Gateway;
    let store: FileStore;
    // A 150-byte body naming a cached context: its maximum input is its bytes plus 200,000 referenced
    // tokens, over the threshold, so it is held at the long price.
    const cached = {
      cachedContent: 'cachedContents/rt13-huge',
      contents: [{ parts: [{ text: 'summarise it' }] }],
      generationConfig: { maxOutputTokens: 100 },
    };
    const bytes = Buffer.byteLength(JSON.stringify(cached));
    const baseMax = cost(200_000 + bytes, 100, BASE);
    const longMax = cost(200_000 + bytes, 100, LONG);
    const between = (baseMax + longMax) / 2;
    const balances: Record<string, number> = { ref: between, edge: 10 };
    withMoneyGateway(
      (d) => inMode('strict')(withMoneyKeys(lcKeys, (k) => balances[k], 'rt13lc')(d)),
      (s) => ({ gw, store } = s),
    );

    it('defended: a small body naming a cachedContent, on a balance between its maximum at the base price and at the long price: refused 403 balance_insufficient', async () => {
      const sent = await request(gw, PRO, { 'x-goog-api-key': lcKeys.ref }, cached);
      console.log(
        `cachedContent body of ${bytes} bytes: maximum ${baseMax} at 2/12, ${longMax} at 4/18; balance ${between}: ${sent.status}`,
      );
      expect(sent.status, sent.text.slice(0, 300)).toBe(403);
      expect(sent.text).toContain('balance_insufficient');
      expect(await balanceOfKey(store, lcKeys.ref)).toBe(between);
    }, 60_000);

    it('defended: a prompt of exactly 200,000 tokens pays the base price, 200,001 the long price (over, not at, the threshold)', async () => {
      // The stand-in counts a prompt's words as its tokens ("user" is none here: no role).
      const prompt = (words: number) => ({
        contents: [{ parts: [{ text: 'a '.repeat(words).trimEnd() }] }],
        generationConfig: { maxOutputTokens: 10 },
      });
      for (const words of [200_000, 200_001]) {
        const sent = await request(gw, PRO, { 'x-goog-api-key': lcKeys.edge }, prompt(words));
        expect(sent.status, sent.text.slice(0, 300)).toBe(200);
      }
      let rows: UsageEntry[] = [];
      await waitFor(
        'two rows',
        async () => (rows = await store.meter!.usage({ keyId: 'rt13lc-edge', limit: 10 })).length === 2,
        60_000,
      );
      const at = rows.find((r) => r.inputTokens === 200_000) as UsageEntry;
      const over = rows.find((r) => r.inputTokens === 200_001) as UsageEntry;
      expect(at.cost).toBe(cost(200_000, 10, BASE));
      expect(over.cost).toBe(cost(200_001, 10, LONG));
      console.log(`200,000 tokens: ${at.cost}; 200,001 tokens: ${over.cost}`);
      expect(await balanceOfKey(store, lcKeys.edge)).toBeCloseTo(10 - at.cost - over.cost, 9);
    }, 120_000);
  },
);

describeE2E('money, modality spellings and long prompts: a Gemini turn of many parts', () => {
  let gw: Gateway;
  const many = generateKey();
  // Its maximum: 3.6 MB of body as tokens at gemini-3.8-flash's 0.3 a million, plus an image's 200,000.
  withMoneyGateway(
    withMoneyKeys({ many }, () => 10, 'rt13many'),
    (started) => ({ gw } = started),
  );

  it('300,000 text parts and an image part: served (the body walk never spreads the parts array into one call)', async () => {
    const parts = [
      { inlineData: { mimeType: 'image/png', data: WAV } },
      ...Array.from({ length: 300_000 }, () => ({ text: 'a' })),
    ];
    const sent = await request(
      gw,
      FLASH,
      { 'x-goog-api-key': many },
      { contents: [{ role: 'user', parts }], generationConfig: { maxOutputTokens: 5 } },
    );
    expect(sent.status, sent.text.slice(0, 300)).toBe(200);
  }, 120_000);
});

/**
 * Gemini usage with enums as numbers, through the real Envoy (issue 36, finding 1). Google's own REST
 * client (GAPIC) sends `$alt=json;enum-encoding=int` on every generateContent and
 * streamGenerateContent, and Google then writes `{"modality":4,"tokenCount":1920}` for AUDIO. The
 * meter had kept only string modalities: an audio prompt to gemini-2.5-flash (audio 1.00, text 0.30
 * per million) was debited at the text price and marked exact, an image answer (30 per million)
 * at 2.50. The stand-in provider (support/money-upstream.ts) answers numeric enums as Google does
 * when asked; the ledger is checked against the priced modalities, for the unary answer, the
 * streamed JSON array and SSE. A modality no enum names is debited at the highest price of its
 * direction and marked `unknown_modality`; an answer format the meter cannot read (alt=proto) is
 * refused before anything goes upstream.
 */
import { expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { balanceOfKey, request, withMoneyGateway, withMoneyKeys } from '../support/money-client';
import { AUDIO_TOKENS, MODALITY_NUMBER, type MoneyUpstream } from '../support/money-upstream';

const PREFIX = 'rtenum';
const KEYS = ['audio', 'image', 'unknown', 'proto'] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
const BALANCE = 1;
/** gemini-2.5-flash in the demo config, and an image model added here, per million tokens. */
const FLASH = { input: 0.3, audioInput: 1.0, output: 2.5 };
const IMAGE = { input: 0.3, output: 2.5, imageOutput: 30 };
const WAV = Buffer.alloc(64, 0).toString('base64');
const MARK = 'x-rtenum-key';

const withImageModel = (demo: string): string => {
  // After gemini-2.5-flash's price line, whatever else that line names; a demo without it fails here.
  const line = /^ {8}price: \{ input: 0\.3, output: 2\.5, audioInput: 1\.0\b.*\n/m;
  if (!line.test(demo))
    throw new Error('the demo config has no gemini-2.5-flash price line to add the image model after');
  return demo.replace(
    line,
    (l) =>
      `${l}      - name: gemini-2.5-flash-image\n        protocols: [generative]\n        price: { input: 0.3, output: 2.5, imageOutput: 30 }\n`,
  );
};

/**
 * The three ways a Gemini answer comes. google-ai-generativelanguage 0.12.1's REST transport sends
 * exactly `?%24alt=json%3Benum-encoding%3Dint` (and request enums as numbers: responseModalities [1]).
 */
const FORMS = [
  { name: 'generateContent', method: 'generateContent', query: '?%24alt=json%3Benum-encoding%3Dint' },
  { name: 'streamed JSON array', method: 'streamGenerateContent', query: '?$alt=json;enum-encoding=int' },
  { name: 'SSE', method: 'streamGenerateContent', query: '?$alt=sse;enum-encoding=int' },
] as const;

interface GeminiUsage {
  promptTokenCount: number;
  candidatesTokenCount: number;
  promptTokensDetails?: { modality: unknown; tokenCount: number }[];
  candidatesTokensDetails?: { modality: unknown; tokenCount: number }[];
}

/** The last usageMetadata the client received (an answer, a JSON array, or SSE events). */
function lastUsage(text: string): GeminiUsage {
  const found = [...text.matchAll(/"usageMetadata":(\{[^{}]*(?:\[[^\]]*\][^{}]*)*\})/g)].map(
    (m) => JSON.parse(m[1]) as GeminiUsage,
  );
  return found.filter((u) => u.candidatesTokenCount !== undefined).pop() ?? found.pop()!;
}

async function rowsOf(store: FileStore, keyId: string): Promise<UsageEntry[]> {
  return (await store.meter!.usage({ limit: 100_000 })).filter((e) => e.keyId === keyId);
}

describeE2E('money: Gemini usage with enums as numbers ($alt=json;enum-encoding=int)', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;
  withMoneyGateway(
    (demo) => withImageModel(withMoneyKeys(keys, () => BALANCE, PREFIX)(demo)),
    (started) => ({ up, gw, store } = started),
  );

  it('debits audio input at its price in the answer, the streamed JSON array and SSE (modality 4)', async () => {
    const log: string[] = [];
    for (const [i, form] of FORMS.entries()) {
      const sent = await request(
        gw,
        `/v1beta/models/gemini-2.5-flash:${form.method}${form.query}`,
        { 'x-goog-api-key': keys.audio, [MARK]: 'audio' },
        {
          contents: [
            {
              role: 'user',
              parts: [{ text: 'transcribe this' }, { inlineData: { mimeType: 'audio/wav', data: WAV } }],
            },
          ],
          generationConfig: { maxOutputTokens: 20 },
        },
      );
      expect(sent.status, sent.text).toBe(200);
      const usage = lastUsage(sent.text);
      // As Google writes it with enum-encoding=int: numbers, not names.
      expect(usage.promptTokensDetails).toContainEqual({ modality: MODALITY_NUMBER.AUDIO, tokenCount: AUDIO_TOKENS });
      await waitFor(`the row of ${form.name}`, async () => (await rowsOf(store, `${PREFIX}-audio`)).length === i + 1);
      const row = (await rowsOf(store, `${PREFIX}-audio`)).sort((a, b) => a.time - b.time)[i];
      const billed =
        ((usage.promptTokenCount - AUDIO_TOKENS) * FLASH.input +
          AUDIO_TOKENS * FLASH.audioInput +
          usage.candidatesTokenCount * FLASH.output) /
        1e6;
      const atText = (usage.promptTokenCount * FLASH.input + usage.candidatesTokenCount * FLASH.output) / 1e6;
      expect(row.estimated, form.name).toBeUndefined();
      expect(row.cost, form.name).toBeGreaterThanOrEqual(billed - 1e-12);
      expect(row.cost - billed, form.name).toBeLessThan(FLASH.input / 1e6 + 1e-12);
      log.push(
        `${form.name}: ${usage.promptTokenCount} input (${AUDIO_TOKENS} audio), ${usage.candidatesTokenCount} output: billed ${billed}, debited ${row.cost} (at the text price ${atText})`,
      );
    }
    const rows = await rowsOf(store, `${PREFIX}-audio`);
    expect(BALANCE - (await balanceOfKey(store, keys.audio))).toBeCloseTo(
      rows.reduce((a, r) => a + r.cost, 0),
      12,
    );
    console.log(log.join('\n'));
  });

  it('debits image output at its price (modality 2) in all three forms, the request naming IMAGE by number too', async () => {
    for (const [i, form] of FORMS.entries()) {
      const sent = await request(
        gw,
        `/v1beta/models/gemini-2.5-flash-image:${form.method}${form.query}`,
        { 'x-goog-api-key': keys.image, [MARK]: 'image' },
        {
          contents: [{ role: 'user', parts: [{ text: 'draw a cat' }] }],
          generationConfig: { maxOutputTokens: 20, responseModalities: [1, 2] },
        },
      );
      expect(sent.status, sent.text).toBe(200);
      const usage = lastUsage(sent.text);
      expect(usage.candidatesTokensDetails).toEqual([
        { modality: MODALITY_NUMBER.IMAGE, tokenCount: usage.candidatesTokenCount },
      ]);
      await waitFor(`the row of ${form.name}`, async () => (await rowsOf(store, `${PREFIX}-image`)).length === i + 1);
      const row = (await rowsOf(store, `${PREFIX}-image`)).sort((a, b) => a.time - b.time)[i];
      const billed = (usage.promptTokenCount * IMAGE.input + usage.candidatesTokenCount * IMAGE.imageOutput) / 1e6;
      expect(row.estimated, form.name).toBeUndefined();
      expect(row.cost, form.name).toBeGreaterThanOrEqual(billed - 1e-12);
      expect(row.cost - billed, form.name).toBeLessThan(IMAGE.output / 1e6 + 1e-12);
      console.log(
        `image, ${form.name}: ${usage.candidatesTokenCount} image tokens: billed ${billed}, debited ${row.cost} (at the text price ${(usage.promptTokenCount * IMAGE.input + usage.candidatesTokenCount * IMAGE.output) / 1e6})`,
      );
    }
  });

  it('debits a modality no enum names (9) at the highest input price and marks the row unknown_modality', async () => {
    for (const [i, form] of FORMS.entries()) {
      const sent = await request(
        gw,
        `/v1beta/models/gemini-2.5-flash:${form.method}${form.query}`,
        { 'x-goog-api-key': keys.unknown, [MARK]: 'unknown', 'x-stand-in-audio-modality': '9' },
        {
          contents: [
            {
              role: 'user',
              parts: [{ text: 'transcribe this' }, { inlineData: { mimeType: 'audio/wav', data: WAV } }],
            },
          ],
          generationConfig: { maxOutputTokens: 20 },
        },
      );
      expect(sent.status, sent.text).toBe(200);
      const usage = lastUsage(sent.text);
      expect(usage.promptTokensDetails).toContainEqual({ modality: 9, tokenCount: AUDIO_TOKENS });
      await waitFor(`the row of ${form.name}`, async () => (await rowsOf(store, `${PREFIX}-unknown`)).length === i + 1);
      const row = (await rowsOf(store, `${PREFIX}-unknown`)).sort((a, b) => a.time - b.time)[i];
      const highest =
        ((usage.promptTokenCount - AUDIO_TOKENS) * FLASH.input +
          AUDIO_TOKENS * Math.max(FLASH.input, FLASH.audioInput) +
          usage.candidatesTokenCount * FLASH.output) /
        1e6;
      expect(row.estimated, form.name).toBe('unknown_modality');
      expect(row.cost, form.name).toBeGreaterThanOrEqual(highest - 1e-12);
      expect(row.cost - highest, form.name).toBeLessThan(FLASH.input / 1e6 + 1e-12);
    }
    expect(
      gw.modelgate
        .logLines()
        .some((l) => l.includes('"estimated":"unknown_modality"') && l.includes(`${PREFIX}-unknown`)),
    ).toBe(true);
  });

  it('refuses an answer format the meter cannot read (alt=proto, $alt=proto) with 400 response_format_unsupported, nothing upstream', async () => {
    const from = up.received.length;
    for (const query of ['?alt=proto', '?$alt=proto;enum-encoding=int', '?alt=sse&alt=proto']) {
      const sent = await request(
        gw,
        `/v1beta/models/gemini-2.5-flash:streamGenerateContent${query}`,
        { 'x-goog-api-key': keys.proto, [MARK]: 'proto' },
        { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
      );
      expect(sent.status, query).toBe(400);
      expect(sent.text, query).toContain('response_format_unsupported');
      expect(sent.text).toContain('enum-encoding=int');
    }
    expect(up.received.slice(from).filter((r) => r.headers[MARK] === 'proto')).toHaveLength(0);
    expect(await balanceOfKey(store, keys.proto)).toBe(BALANCE);
  });
});

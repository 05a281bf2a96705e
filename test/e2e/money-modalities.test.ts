/**
 * Audio and image tokens at their own prices (docs/metering.md, "Prices"), through the real Envoy to
 * the stand-in provider (support/money-upstream.ts), which reports audio input by modality as each
 * provider does. Before: every token was debited at the model's text price, so an audio prompt to
 * gemini-2.5-flash (audio input billed 1.00 per million, text 0.30) paid less than a third of its
 * audio. Now a request for a modality its model's price does not name is refused before anything goes
 * upstream (400 modality_unpriced), and one whose price names it is debited at that price.
 */
import { expect, it } from 'vitest';
import { generateKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import type { UsageEntry } from '../../src/store/store';
import { describeE2E, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { balanceOfKey, request, withMoneyGateway, withMoneyKeys } from '../support/money-client';
import { AUDIO_TOKENS, type MoneyUpstream } from '../support/money-upstream';

const PREFIX = 'rtmod';
const KEYS = ['audioPriced', 'audioUnpriced', 'chatAudio', 'audioOut'] as const;
type KeyName = (typeof KEYS)[number];
const keys = Object.fromEntries(KEYS.map((k) => [k, generateKey()])) as Record<KeyName, string>;
const BALANCE = 1;
/** gemini-2.5-flash in the demo config: text and audio input, output, per million tokens. */
const FLASH = { input: 0.3, audioInput: 1.0, output: 2.5 };
/** Half a second of silence as WAV, base64: any audio bytes do; the stand-in counts AUDIO_TOKENS a part. */
const WAV = Buffer.alloc(64, 0).toString('base64');
const MARK = 'x-rtmod-key';

async function rowsOf(store: FileStore, keyId: string): Promise<UsageEntry[]> {
  return (await store.meter!.usage({ limit: 100_000 })).filter((e) => e.keyId === keyId);
}
const upstreamOf = (up: MoneyUpstream, name: string, from: number): number =>
  up.received.slice(from).filter((r) => r.headers[MARK] === name).length;

const audioPrompt = (generationConfig: Record<string, unknown> = {}): unknown => ({
  contents: [
    { role: 'user', parts: [{ text: 'transcribe this' }, { inlineData: { mimeType: 'audio/wav', data: WAV } }] },
  ],
  generationConfig: { maxOutputTokens: 20, ...generationConfig },
});

describeE2E('money: audio and image tokens at their own prices', () => {
  let up: MoneyUpstream;
  let gw: Gateway;
  let store: FileStore;
  withMoneyGateway(
    withMoneyKeys(keys, () => BALANCE, PREFIX),
    (started) => ({ up, gw, store } = started),
  );

  it('gemini: an audio prompt to a model whose price names no audio (gemini-3.8-flash) is refused, 400 modality_unpriced naming the part, nothing upstream', async () => {
    const from = up.received.length;
    const sent = await request(
      gw,
      '/v1beta/models/gemini-3.8-flash:generateContent',
      { 'x-goog-api-key': keys.audioUnpriced, [MARK]: 'audioUnpriced' },
      audioPrompt(),
    );
    expect(sent.status, sent.text).toBe(400);
    expect(sent.text).toContain('modality_unpriced');
    expect(sent.text).toContain('mimeType');
    expect(upstreamOf(up, 'audioUnpriced', from)).toBe(0);
    expect(await balanceOfKey(store, keys.audioUnpriced)).toBe(BALANCE);
    // Spelled otherwise (snake case, upper case, a video's sound): refused the same.
    for (const part of [
      { inline_data: { mime_type: 'AUDIO/MPEG', data: WAV } },
      { fileData: { mimeType: 'video/mp4', fileUri: 'https://example.com/v.mp4' } },
    ]) {
      const again = await request(
        gw,
        '/v1beta/models/gemini-3.8-flash:generateContent',
        { 'x-goog-api-key': keys.audioUnpriced, [MARK]: 'audioUnpriced' },
        { contents: [{ role: 'user', parts: [part] }] },
      );
      expect(again.status, JSON.stringify(part)).toBe(400);
      expect(again.text).toContain('modality_unpriced');
    }
    expect(upstreamOf(up, 'audioUnpriced', from)).toBe(0);
    // An image part is text-priced at Gemini: served.
    const image = await request(
      gw,
      '/v1beta/models/gemini-3.8-flash:generateContent',
      { 'x-goog-api-key': keys.audioUnpriced, [MARK]: 'audioUnpriced' },
      {
        contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'image/png', data: WAV } }] }],
        generationConfig: { maxOutputTokens: 5 },
      },
    );
    expect(image.status, image.text).toBe(200);
  });

  it('gemini: an audio prompt to gemini-2.5-flash (audioInput 1.0) is debited its audio tokens at 1.0, its text at 0.3', async () => {
    const sent = await request(
      gw,
      '/v1beta/models/gemini-2.5-flash:generateContent',
      { 'x-goog-api-key': keys.audioPriced, [MARK]: 'audioPriced' },
      audioPrompt(),
    );
    expect(sent.status, sent.text).toBe(200);
    const usage = (
      JSON.parse(sent.text) as {
        usageMetadata: {
          promptTokenCount: number;
          candidatesTokenCount: number;
          promptTokensDetails: { modality: string; tokenCount: number }[];
        };
      }
    ).usageMetadata;
    const audio = usage.promptTokensDetails.find((d) => d.modality === 'AUDIO')!.tokenCount;
    expect(audio).toBe(AUDIO_TOKENS);
    await waitFor('the row', async () => (await rowsOf(store, `${PREFIX}-audioPriced`)).length === 1);
    const [row] = await rowsOf(store, `${PREFIX}-audioPriced`);
    const billed =
      ((usage.promptTokenCount - audio) * FLASH.input +
        audio * FLASH.audioInput +
        usage.candidatesTokenCount * FLASH.output) /
      1e6;
    const atText = (usage.promptTokenCount * FLASH.input + usage.candidatesTokenCount * FLASH.output) / 1e6;
    expect(row.estimated).toBeUndefined();
    // Debited at least what the provider billed, and by less than one text token's price more (the premium rounds up to
    // a token).
    expect(row.cost).toBeGreaterThanOrEqual(billed - 1e-12);
    expect(row.cost - billed).toBeLessThan(FLASH.input / 1e6 + 1e-12);
    expect(BALANCE - (await balanceOfKey(store, keys.audioPriced))).toBeCloseTo(row.cost, 12);
    console.log(
      `audio prompt: ${usage.promptTokenCount} input (${audio} audio), ${usage.candidatesTokenCount} output: billed ${billed}, debited ${row.cost} (at the text price it was ${atText})`,
    );
    // Audio output (responseModalities AUDIO, speechConfig) has no price on this model: refused.
    for (const gen of [
      { responseModalities: ['AUDIO'] },
      { response_modalities: ['TEXT', 'IMAGE'] },
      { speechConfig: { voiceConfig: {} } },
    ]) {
      const from = up.received.length;
      const out = await request(
        gw,
        '/v1beta/models/gemini-2.5-flash:generateContent',
        { 'x-goog-api-key': keys.audioOut, [MARK]: 'audioOut' },
        { contents: [{ role: 'user', parts: [{ text: 'say hi' }] }], generationConfig: gen },
      );
      expect(out.status, JSON.stringify(gen)).toBe(400);
      expect(out.text).toContain('modality_unpriced');
      expect(upstreamOf(up, 'audioOut', from)).toBe(0);
    }
  });

  it('chat: an input_audio part, "modalities": ["text", "audio"] and an "audio" object to gpt-4o-mini (no audio price) are refused, nothing upstream', async () => {
    const from = up.received.length;
    const bodies = [
      {
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: WAV, format: 'wav' } }] }],
      },
      { model: 'gpt-4o-mini', modalities: ['text', 'audio'], messages: [{ role: 'user', content: 'hi' }] },
      { model: 'gpt-4o-mini', audio: { voice: 'alloy', format: 'wav' }, messages: [{ role: 'user', content: 'hi' }] },
    ];
    for (const body of bodies) {
      const sent = await request(
        gw,
        '/v1/chat/completions',
        { authorization: `Bearer ${keys.chatAudio}`, [MARK]: 'chatAudio' },
        body,
      );
      expect(sent.status, JSON.stringify(body)).toBe(400);
      expect(sent.text).toContain('modality_unpriced');
    }
    expect(upstreamOf(up, 'chatAudio', from)).toBe(0);
    expect(await balanceOfKey(store, keys.chatAudio)).toBe(BALANCE);
    // "modalities": ["text"] is text: served.
    const text = await request(
      gw,
      '/v1/chat/completions',
      { authorization: `Bearer ${keys.chatAudio}`, [MARK]: 'chatAudio' },
      { model: 'gpt-4o-mini', modalities: ['text'], max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
    );
    expect(text.status, text.text).toBe(200);
  });
});

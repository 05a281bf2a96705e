/**
 * Audio and image tokens (docs/metering.md, "Prices"): what a request sends or asks for beyond text
 * (src/meter/request-shape.ts `modalities`), the tokens a provider reports by modality
 * (src/meter/body-usage.ts, usage-reader.ts), and what they are debited (src/meter/modal-cost.ts).
 */
import { describe, expect, it } from 'vitest';
import { extractFields, extractModel } from '../../src/check/extract-model';
import { REQUEST_FIELDS, REQUEST_MARKS } from '../../src/check/request-fields';
import { bodyUsage } from '../../src/meter/body-usage';
import { tailUsage } from '../../src/meter/tail-usage';
import { UsageReader } from '../../src/meter/usage-reader';
import { highestPrice, modalCharge } from '../../src/meter/modal-cost';
import { requestShape } from '../../src/meter/request-shape';
import type { ModelPrice, Protocol } from '../../src/store/store';

function modalities(body: unknown, protocol: Protocol = 'chat', path = '/v1/chat/completions') {
  const bytes = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const found = protocol === 'generative' ? undefined : extractModel(bytes, 256, REQUEST_FIELDS, REQUEST_MARKS);
  const fields = found?.ok ? found.fields : extractFields(bytes, 256, REQUEST_FIELDS, REQUEST_MARKS);
  return requestShape(protocol, path, bytes, fields)
    .modalities.map(([m]) => m)
    .sort();
}
const gemini = (body: unknown) => modalities(body, 'generative', '/v1beta/models/gemini-2.5-flash:generateContent');
const part = (p: unknown) => ({ contents: [{ role: 'user', parts: [{ text: 'hi' }, p] }] });

describe('modalities a request sends or asks for', () => {
  it("chat: input_audio parts, a message's audio, modalities other than text, an audio object", () => {
    expect(modalities({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })).toEqual([]);
    expect(modalities({ model: 'm', modalities: ['text'], messages: [] })).toEqual([]);
    expect(
      modalities({
        model: 'm',
        messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] }],
      }),
    ).toEqual(['audioInput']);
    expect(modalities({ model: 'm', messages: [{ role: 'assistant', audio: { id: 'audio_1' } }] })).toEqual([
      'audioInput',
    ]);
    expect(
      modalities({ model: 'm', modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' }, messages: [] }),
    ).toEqual(['audioOutput']);
    expect(modalities({ model: 'm', audio: { voice: 'alloy' }, messages: [] })).toEqual(['audioOutput']);
    // A tool's parameter named audio is no audio.
    expect(
      modalities({
        model: 'm',
        messages: [],
        tools: [
          {
            type: 'function',
            function: { name: 'f', parameters: { type: 'object', properties: { audio: { type: 'string' } } } },
          },
        ],
      }),
    ).toEqual([]);
    // Not a known word, not a string: counted as audio (fail closed).
    expect(modalities({ model: 'm', modalities: ['TEXT', 7], messages: [] })).toEqual(['audioOutput']);
    expect(modalities({ model: 'm', modalities: 'audio', messages: [] })).toEqual(['audioOutput']);
    // Escaped spellings are read as a provider's parser reads them.
    expect(
      modalities(
        '{"model":"m","messages":[{"role":"user","content":[{"type":"input\\u005faudio","input_audio":{}}]}]}',
      ),
    ).toEqual(['audioInput']);
  });

  it('gemini: parts of media type audio/* or video/* (any case, snake or camel, escaped), responseModalities, speechConfig', () => {
    expect(gemini(part({ inlineData: { mimeType: 'image/png', data: 'AAAA' } }))).toEqual([]);
    expect(gemini(part({ inlineData: { mimeType: 'audio/wav', data: 'AAAA' } }))).toEqual(['audioInput']);
    expect(gemini(part({ inline_data: { mime_type: ' Audio/MPEG ', data: 'AAAA' } }))).toEqual(['audioInput']);
    expect(gemini(part({ fileData: { mimeType: 'video/mp4', fileUri: 'https://x/v.mp4' } }))).toEqual(['audioInput']);
    expect(gemini(part({ fileData: { mimeType: `audio/wav;${'x'.repeat(100)}`, fileUri: 'u' } }))).toEqual([
      'audioInput',
    ]);
    expect(
      gemini('{"contents":[{"parts":[{"inlineData":{"mime\\u0054ype":"\\u0061udio/wav","data":"AAAA"}}]}]}'),
    ).toEqual(['audioInput']);
    // A part naming no media type (a YouTube fileData needs none) or another one may carry sound.
    expect(gemini(part({ fileData: { fileUri: 'https://www.youtube.com/watch?v=x' } }))).toEqual(['audioInput']);
    expect(gemini(part({ file_data: { file_uri: 'u', mime_type: 'application/ogg' } }))).toEqual(['audioInput']);
    expect(gemini(part({ fileData: { fileUri: 'u', mimeType: 'application/pdf' } }))).toEqual([]);
    // A media type sent twice: either one that is audio counts.
    expect(
      gemini('{"contents":[{"parts":[{"inlineData":{"mimeType":"audio/wav","mimeType":"image/png","data":"AAAA"}}]}]}'),
    ).toEqual(['audioInput']);
    expect(gemini({ contents: [], generationConfig: { responseModalities: ['TEXT'] } })).toEqual([]);
    expect(gemini({ contents: [], generationConfig: { responseModalities: ['AUDIO'] } })).toEqual(['audioOutput']);
    expect(gemini({ contents: [], generation_config: { response_modalities: ['text', 'image'] } })).toEqual([
      'imageOutput',
    ]);
    expect(gemini({ contents: [], generationConfig: { responseModalities: [3] } })).toEqual(['audioOutput']);
    expect(gemini({ contents: [], generationConfig: { responseModalities: ['VIDEO'] } })).toEqual([
      'audioOutput',
      'imageOutput',
    ]);
    expect(gemini({ contents: [], generationConfig: { speechConfig: { voiceConfig: {} } } })).toEqual(['audioOutput']);
    expect(gemini({ contents: [], generation_config: { speech_config: {} } })).toEqual(['audioOutput']);
  });

  it('gemini: only parts are read: a tool parameter named file_data, a call argument mimeType audio/mpeg are no audio; a part key or mimeType sent twice is (fail closed); a parts array of 300,000 is walked', () => {
    const tool = {
      name: 'upload',
      parametersJsonSchema: {
        type: 'object',
        properties: { file_data: { type: 'string' }, inlineData: { type: 'object' } },
      },
    };
    expect(
      gemini({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }], tools: [{ functionDeclarations: [tool] }] }),
    ).toEqual([]);
    expect(
      gemini({
        contents: [
          {
            role: 'model',
            parts: [
              { functionCall: { name: 'convert', args: { mimeType: 'audio/mpeg', fileData: { path: 'a.wav' } } } },
            ],
          },
        ],
      }),
    ).toEqual([]);
    // In a functionResponse's parts, and in systemInstruction, parts are read.
    expect(
      gemini({
        contents: [
          {
            role: 'user',
            parts: [
              {
                functionResponse: {
                  name: 'f',
                  response: {},
                  parts: [{ inlineData: { mimeType: 'audio/wav', data: 'AA' } }],
                },
              },
            ],
          },
        ],
      }),
    ).toEqual(['audioInput']);
    expect(
      gemini({ systemInstruction: { parts: [{ file_data: { file_uri: 'https://youtu.be/x' } }] }, contents: [] }),
    ).toEqual(['audioInput']);
    expect(
      gemini(
        '{"contents":[{"parts":[{"fileData":{"fileUri":"https://youtu.be/x"},"fileData":{"mimeType":"image/png","fileUri":"gs://b/a.png"}}]}]}',
      ),
    ).toEqual(['audioInput']);
    expect(
      gemini('{"contents":[{"parts":[{"inlineData":{"mimeType":"audio/wav","mimeType":"image/png","data":"AA"}}]}]}'),
    ).toEqual(['audioInput']);
    expect(
      gemini(
        '{"contents":[{"parts":[{"inlineData":{"mimeType":"audio/wav","data":"AA"}}]}],"contents":[{"parts":[{"text":"hi"}]}]}',
      ),
    ).toEqual(['audioInput']);
    expect(
      gemini({
        contents: [
          {
            parts: [
              { inlineData: { mimeType: 'image/png', data: 'AA' } },
              ...Array.from({ length: 300_000 }, () => ({ text: 'a' })),
            ],
          },
        ],
      }),
    ).toEqual([]);
    // A media type elsewhere means nothing to the other providers.
    expect(
      modalities({
        model: 'm',
        messages: [
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }],
          },
        ],
        metadata: { mimeType: 'audio/wav' },
      }),
    ).toEqual([]);
  });

  it('gemini: responseModalities sent twice with different values, or in another case, is refused as the other fields are', () => {
    const bytes = Buffer.from(
      '{"contents":[],"generationConfig":{"responseModalities":["AUDIO"],"responseModalities":["TEXT"]}}',
    );
    const s = requestShape(
      'generative',
      '/v1beta/models/m:generateContent',
      bytes,
      extractFields(bytes, 256, REQUEST_FIELDS, REQUEST_MARKS),
    );
    expect(s.twice).toBe('responseModalities');
    const cased = Buffer.from('{"contents":[],"generationConfig":{"ResponseModalities":["AUDIO"]}}');
    expect(
      requestShape(
        'generative',
        '/v1beta/models/m:generateContent',
        cased,
        extractFields(cased, 256, REQUEST_FIELDS, REQUEST_MARKS),
      ).caseVariant,
    ).toEqual(['ResponseModalities', 'responseModalities']);
  });
});

describe('tokens reported by modality', () => {
  it('gemini: promptTokensDetails and candidatesTokensDetails by modality', () => {
    const answer = {
      candidates: [],
      usageMetadata: {
        promptTokenCount: 2000,
        candidatesTokenCount: 300,
        promptTokensDetails: [
          { modality: 'TEXT', tokenCount: 80 },
          { modality: 'AUDIO', tokenCount: 1920 },
        ],
        candidatesTokensDetails: [
          { modality: 'AUDIO', tokenCount: 250 },
          { modality: 'IMAGE', tokenCount: 40 },
          { tokenCount: 10 },
        ],
      },
    };
    const u = bodyUsage('generative', Buffer.from(JSON.stringify(answer)), false);
    expect(u).toEqual({
      inputTokens: 2000,
      outputTokens: 300,
      cachedInputTokens: 0,
      modal: { audioInput: 1920, audioOutput: 250, imageOutput: 40 },
    });
    const bad = {
      usageMetadata: { promptTokenCount: 10, promptTokensDetails: [{ modality: 'AUDIO', tokenCount: '1920' }] },
    };
    expect(bodyUsage('generative', Buffer.from(JSON.stringify(bad)), false)?.implausible).toBe(true);
  });

  it("gemini with enum-encoding=int (Google's REST client): modalities by number, in an answer, a streamed JSON array, SSE, a tail and the streaming reader", async () => {
    // Modality: 0 MODALITY_UNSPECIFIED, 1 TEXT, 2 IMAGE, 3 VIDEO, 4 AUDIO, 5 DOCUMENT
    // (google.ai.generativelanguage.v1beta).
    const usageMetadata = {
      promptTokenCount: 2000,
      candidatesTokenCount: 300,
      cachedContentTokenCount: 500,
      toolUsePromptTokenCount: 100,
      promptTokensDetails: [
        { modality: 1, tokenCount: 80 },
        { modality: 4, tokenCount: 1920 },
      ],
      cacheTokensDetails: [{ modality: 4, tokenCount: 500 }],
      toolUsePromptTokensDetails: [
        { modality: 4, tokenCount: 60 },
        { modality: 1, tokenCount: 40 },
      ],
      candidatesTokensDetails: [
        { modality: 4, tokenCount: 250 },
        { modality: 2, tokenCount: 40 },
        { modality: 1, tokenCount: 10 },
      ],
    };
    const expected = {
      inputTokens: 2100,
      outputTokens: 300,
      cachedInputTokens: 500,
      modal: { audioInput: 1980, audioOutput: 250, imageOutput: 40 },
    };
    const answer = { candidates: [{ content: { parts: [{ text: 'hi' }] } }], usageMetadata };
    expect(bodyUsage('generative', Buffer.from(JSON.stringify(answer)), false)).toEqual(expected);
    const array = JSON.stringify([{ candidates: [] }, answer]);
    expect(bodyUsage('generative', Buffer.from(array), false)).toEqual(expected);
    const sse = `data: ${JSON.stringify({ candidates: [] })}\r\n\r\ndata: ${JSON.stringify(answer)}\r\n\r\n`;
    expect(bodyUsage('generative', Buffer.from(sse), true)).toEqual(expected);
    // The streaming reader (compressed bodies) and the tail of a long body read the same.
    const reader = new UsageReader('generative', 'application/json', '');
    for (const b of Buffer.from(array)) reader.push(Uint8Array.of(b));
    expect(await reader.end(true)).toEqual({ usage: expected });
    const long = JSON.stringify([
      ...Array.from({ length: 400 }, () => ({ candidates: [{ content: { parts: [{ text: 'x'.repeat(100) }] } }] })),
      answer,
    ]);
    expect(
      (await tailUsage('generative', Buffer.from(long).subarray(-16_384), false, 'application/json', '')).usage,
    ).toEqual(expected);
    // Names in any case, and numbers, read alike; TEXT, VIDEO, DOCUMENT and images sent are text-priced.
    const named = {
      usageMetadata: {
        ...usageMetadata,
        promptTokensDetails: [
          { modality: 'text', tokenCount: 80 },
          { modality: 'AUDIO', tokenCount: 1920 },
        ],
        toolUsePromptTokensDetails: [{ modality: 'Audio', tokenCount: 60 }],
      },
    };
    expect(bodyUsage('generative', Buffer.from(JSON.stringify(named)), false)?.modal).toEqual(expected.modal);
    const textLike = {
      usageMetadata: {
        promptTokenCount: 100,
        candidatesTokenCount: 5,
        promptTokensDetails: [
          { modality: 2, tokenCount: 30 },
          { modality: 3, tokenCount: 30 },
          { modality: 5, tokenCount: 30 },
          { modality: 0, tokenCount: 5 },
          { tokenCount: 5 },
        ],
      },
    };
    expect(bodyUsage('generative', Buffer.from(JSON.stringify(textLike)), false)).toEqual({
      inputTokens: 100,
      outputTokens: 5,
      cachedInputTokens: 0,
    });
  });

  it('gemini: a modality the meter cannot name (a number past DOCUMENT, a name it does not know) is kept apart, by direction, summed', () => {
    const u = bodyUsage(
      'generative',
      Buffer.from(
        JSON.stringify({
          usageMetadata: {
            promptTokenCount: 1000,
            candidatesTokenCount: 200,
            promptTokensDetails: [
              { modality: 9, tokenCount: 300 },
              { modality: 'HOLOGRAM', tokenCount: 100 },
              { modality: 1, tokenCount: 600 },
            ],
            toolUsePromptTokensDetails: [{ modality: 2.5, tokenCount: 10 }],
            candidatesTokensDetails: [
              { modality: -1, tokenCount: 150 },
              { modality: 4, tokenCount: 50 },
            ],
          },
        }),
      ),
      false,
    );
    expect(u).toEqual({
      inputTokens: 1000,
      outputTokens: 200,
      cachedInputTokens: 0,
      modal: { audioOutput: 50 },
      unnamed: { input: 410, output: 150 },
    });
  });

  it('chat: prompt_tokens_details.audio_tokens and completion_tokens_details.audio_tokens', () => {
    const answer = {
      choices: [],
      usage: {
        prompt_tokens: 500,
        completion_tokens: 100,
        prompt_tokens_details: { cached_tokens: 0, audio_tokens: 400 },
        completion_tokens_details: { audio_tokens: 90 },
      },
    };
    expect(bodyUsage('chat', Buffer.from(JSON.stringify(answer)), false)?.modal).toEqual({
      audioInput: 400,
      audioOutput: 90,
    });
    expect(
      bodyUsage('chat', Buffer.from(JSON.stringify({ usage: { prompt_tokens: 5, completion_tokens: 1 } })), false)
        ?.modal,
    ).toBeUndefined();
  });
});

describe('what they are debited', () => {
  /** gemini-2.5-flash: text 0.30, audio 1.00 in; 2.50 out. */
  const flash: ModelPrice = { input: 0.3, output: 2.5, cachedInput: null, audioInput: 1 };
  const costOf = (u: { inputTokens: number; outputTokens: number; cachedInputTokens: number }, p: ModelPrice): number =>
    ((u.inputTokens - u.cachedInputTokens) * p.input +
      u.cachedInputTokens * (p.cachedInput ?? p.input) +
      u.outputTokens * p.output) /
    1e6;

  it("a priced modality's tokens pay its price (written as text tokens, rounded up to one)", () => {
    const usage = { inputTokens: 2000, outputTokens: 20, cachedInputTokens: 0, modal: { audioInput: 1920 } };
    const c = modalCharge(usage, flash, false);
    expect(c.unpriced).toEqual([]);
    const billed = (80 * 0.3 + 1920 * 1 + 20 * 2.5) / 1e6;
    expect(costOf(c.usage, flash)).toBeGreaterThanOrEqual(billed - 1e-15);
    expect(costOf(c.usage, flash) - billed).toBeLessThan(0.3 / 1e6);
    // Before: every token at the text price.
    expect(costOf(usage, flash)).toBeCloseTo((2000 * 0.3 + 20 * 2.5) / 1e6, 15);
    expect(costOf(usage, flash) / billed).toBeLessThan(0.34);
  });

  it('an unpriced modality that got through pays the highest price of its direction, and is named', () => {
    const c = modalCharge(
      { inputTokens: 100, outputTokens: 1000, cachedInputTokens: 0, modal: { imageOutput: 1000 } },
      { input: 0.3, output: 2.5, cachedInput: null, audioOutput: 10 },
      false,
    );
    expect(c.unpriced).toEqual(['imageOutput']);
    expect(costOf(c.usage, { input: 0.3, output: 2.5, cachedInput: null })).toBeCloseTo(
      (100 * 0.3 + 1000 * 10) / 1e6,
      12,
    );
    // Text-only price: its text price is the highest; named all the same (the meter logs it).
    const text = modalCharge(
      { inputTokens: 100, outputTokens: 5, cachedInputTokens: 0, modal: { audioInput: 90 } },
      { input: 0.3, output: 2.5, cachedInput: null },
      false,
    );
    expect(text.unpriced).toEqual(['audioInput']);
    expect(text.usage.inputTokens).toBe(100);
  });

  it('an estimate or a maximum on a model with modality prices pays the highest prices (no breakdown to go by)', () => {
    const c = modalCharge({ inputTokens: 1000, outputTokens: 10, cachedInputTokens: 0 }, flash, true);
    const top = (1000 * 1 + 10 * 2.5) / 1e6;
    expect(costOf(c.usage, flash)).toBeGreaterThanOrEqual(top - 1e-15);
    expect(costOf(c.usage, flash) - top).toBeLessThan(0.3 / 1e6);
    expect(highestPrice(flash)).toEqual({ ...flash, input: 1, output: 2.5 });
    expect(
      modalCharge(
        { inputTokens: 1000, outputTokens: 10, cachedInputTokens: 0 },
        { input: 0.3, output: 2.5, cachedInput: null },
        true,
      ).usage.inputTokens,
    ).toBe(1000);
  });

  it('tokens of a modality the meter cannot name pay the highest price of their direction, and the charge says so', () => {
    const image: ModelPrice = { input: 0.3, output: 2.5, cachedInput: null, imageOutput: 30, audioInput: 1 };
    const usage = { inputTokens: 1000, outputTokens: 200, cachedInputTokens: 0, unnamed: { input: 400, output: 150 } };
    const c = modalCharge(usage, image, false);
    expect(c.unnamed).toBe(true);
    const billed = (600 * 0.3 + 400 * 1 + 50 * 2.5 + 150 * 30) / 1e6;
    expect(costOf(c.usage, image)).toBeGreaterThanOrEqual(billed - 1e-15);
    expect(costOf(c.usage, image) - billed).toBeLessThan(2.5 / 1e6);
    // On a text-only price the highest is the text price: nothing more, still marked.
    const text = modalCharge(usage, { input: 0.3, output: 2.5, cachedInput: null }, false);
    expect(text).toMatchObject({ usage: { inputTokens: 1000, outputTokens: 200 }, unnamed: true });
    // Without such tokens, no mark.
    expect(
      modalCharge({ inputTokens: 1, outputTokens: 1, cachedInputTokens: 0 }, image, false).unnamed,
    ).toBeUndefined();
  });

  it('a text price of 0 carries the premium in the other direction; both 0 cannot carry it', () => {
    const c = modalCharge(
      { inputTokens: 100, outputTokens: 10, cachedInputTokens: 0, modal: { audioInput: 100 } },
      { input: 0, output: 2, cachedInput: null, audioInput: 1 },
      false,
    );
    expect(c.inexpressible).toBeUndefined();
    expect(c.usage.outputTokens).toBe(10 + 50);
    expect(
      modalCharge(
        { inputTokens: 100, outputTokens: 10, cachedInputTokens: 0, modal: { audioInput: 100 } },
        { input: 0, output: 0, cachedInput: null, audioInput: 1 },
        false,
      ).inexpressible,
    ).toBe(true);
  });
});

/**
 * The stock `@google/genai` SDK, unchanged, through the real Envoy, configured as the spec's Base URL
 * table says for a client that appends the version part itself (docs/spec.md §4.1: the command-line
 * generative client → {base_url}; alternate route → {base_url}/alt): `httpOptions.baseUrl` is the
 * root address, the key is `apiKey`. generateContent, generateContentStream, countTokens,
 * embedContent and the model list work; every denial surfaces as the SDK's `ApiError` with its
 * status and our hint in its message.
 *
 * What the SDK sends (recorded from its fetch calls): POST {baseUrl}/{apiVersion}/models/{model}:
 * generateContent, :streamGenerateContent?alt=sse, :countTokens, :batchEmbedContents (for
 * embedContent), GET {baseUrl}/{apiVersion}/models, the key in `x-goog-api-key`, never `?key=`.
 *
 * The API version: this SDK (3.x) defaults to `v1`, but the spec's generative protocol is `/v1beta`
 * (docs/spec.md §4.2, §9). The gateway keeps the spec: a client must be set to v1beta (`apiVersion:
 * 'v1beta'`, or GOOGLE_GENAI_API_VERSION=beta), exactly as it must be given the Base URL; left at
 * its default, the SDK gets 404 prefix_wrong with a hint that says so (tested below).
 * Its error message is the JSON body, so the hint appears JSON-escaped inside it.
 */
import type * as GenAI from '@google/genai' with { 'resolution-mode': 'import' };
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { recordFetch, type FetchRecorder } from '../support/fetch-recorder';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

const { alice, carol, dave, frank } = DEMO_KEYS;

/** The demo config plus a generative embedding model in group basic (the demo has none). */
const WITH_EMBEDDING = (demo: string): string => {
  const out = demo.replace(
    '      - name: gemini-2.0-flash\n',
    '      - name: gemini-embedding-001\n        protocols: [generative]\n      - name: gemini-2.0-flash\n',
  );
  if (out === demo) throw new Error('the demo config changed: cannot add gemini-embedding-001 to group basic');
  return out;
};

describeE2E('the stock @google/genai SDK through a real Envoy', () => {
  let gw: Gateway;
  let fetches: FetchRecorder;
  let genai: typeof GenAI;
  beforeAll(async () => {
    genai = await import('@google/genai'); // ESM only
    gw = await startGateway({ config: WITH_EMBEDDING });
    fetches = recordFetch();
  });
  afterAll(async () => {
    fetches?.restore();
    await gw?.close();
  });

  /** The client as a user configures it: the root (or alternate) address, the key, API version v1beta. */
  const client = (prefix: '' | '/alt', apiKey = alice, apiVersion: string | null = 'v1beta'): GenAI.GoogleGenAI =>
    new genai.GoogleGenAI({
      apiKey,
      httpOptions: { baseUrl: `${gw.baseUrl}${prefix}`, ...(apiVersion ? { apiVersion } : {}) },
    });

  const lastSent = () => fetches.sent.at(-1)!;

  for (const prefix of ['', '/alt'] as const) {
    const family = prefix ? 'alt' : 'generative';
    const where = prefix ? '{base_url}/alt' : '{base_url}';

    it(`generateContent with baseUrl ${where}`, async () => {
      const r = await client(prefix).models.generateContent({ model: 'gemini-2.5-flash', contents: 'hi' });
      expect(r.text).toBe(
        'Hello from the demo upstream. You asked gemini-2.5-flash as key alice; no client key header reached me.',
      );
      expect(r.usageMetadata?.totalTokenCount).toBeGreaterThan(0);
      expect(lastSent()).toMatchObject({
        method: 'POST',
        url: `${gw.baseUrl}${prefix}/v1beta/models/gemini-2.5-flash:generateContent`,
      });
      expect(lastSent().headers['x-goog-api-key']).toBe(alice);
      expect(lastSent().headers.authorization).toBeUndefined();
      expect(gw.received.at(-1)).toMatchObject({
        family,
        url: `${prefix}/v1beta/models/gemini-2.5-flash:generateContent`,
      });
      expect(gw.received.at(-1)!.headers['x-goog-api-key']).toBeUndefined();
    });

    it(`generateContentStream with baseUrl ${where}: many chunks, the whole text`, async () => {
      let text = '';
      let chunks = 0;
      for await (const c of await client(prefix).models.generateContentStream({
        model: 'gemini-2.5-flash',
        contents: 'hi',
      })) {
        chunks++;
        text += c.text ?? '';
      }
      expect(chunks).toBeGreaterThan(5);
      expect(text).toContain('as key alice');
      expect(lastSent().url).toBe(
        `${gw.baseUrl}${prefix}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`,
      );
      expect(gw.received.at(-1)!.url).toBe(`${prefix}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`);
    });

    it(`countTokens with baseUrl ${where}`, async () => {
      const r = await client(prefix).models.countTokens({ model: 'gemini-2.5-flash', contents: 'hello there' });
      expect(r.totalTokens).toBeGreaterThan(0);
      expect(gw.received.at(-1)!.url).toBe(`${prefix}/v1beta/models/gemini-2.5-flash:countTokens`);
    });

    it(`embedContent with baseUrl ${where} (sent as :batchEmbedContents)`, async () => {
      const r = await client(prefix).models.embedContent({ model: 'gemini-embedding-001', contents: ['one', 'two'] });
      expect(r.embeddings).toHaveLength(2);
      expect(r.embeddings![0].values!.length).toBe(8);
      expect(gw.received.at(-1)).toMatchObject({
        family,
        url: `${prefix}/v1beta/models/gemini-embedding-001:batchEmbedContents`,
      });
      expect(gw.received.at(-1)!.headers['x-modelgate-model']).toBe('gemini-embedding-001');
    });

    it(`models.list with baseUrl ${where}: the key's group only, in Gemini's shape`, async () => {
      const names: string[] = [];
      for await (const m of await client(prefix).models.list()) names.push(m.name ?? '');
      expect(names).toEqual([
        'models/gpt-4o-mini',
        'models/gemini-2.5-flash',
        'models/gemini-embedding-001',
        'models/gemini-3.1-pro-preview',
        'models/gemini-3.8-flash',
        'models/gemini-3.5-flash-lite',
      ]);
      expect(lastSent().url.split('?')[0]).toBe(`${gw.baseUrl}${prefix}/v1beta/models`);
    });

    for (const [why, key, model, status, reason] of [
      ['a model whose channel is down', alice, 'gemini-2.0-flash', 403, 'model_unavailable'],
      ["another group's model", alice, 'gemini-2.5-pro', 403, 'model_not_in_group'],
      ['a key with balance 0', carol, 'gemini-2.5-flash', 403, 'balance_insufficient'],
      ['a key of an unavailable group', frank, 'gemini-2.5-flash', 403, 'group_unavailable'],
      ['a disabled key', dave, 'gemini-2.5-flash', 401, 'key_disabled'],
      ['a key cut short', alice.slice(0, -3), 'gemini-2.5-flash', 401, 'key_incomplete'],
    ] as const) {
      it(`raises ApiError ${status} with the hint for ${why}, with baseUrl ${where}`, async () => {
        const err = await client(prefix, key)
          .models.generateContent({ model, contents: 'hi' })
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(genai.ApiError);
        const e = err as GenAI.ApiError;
        expect(e.status).toBe(status);
        const body = JSON.parse(e.message) as { error: { code: number; message: string; status: string } };
        expect(body.error.code).toBe(status);
        expect(body.error.message).toMatch(new RegExp(`^.{10,} \\[modelgate: ${reason}\\]$`));
        expect(e.message).not.toContain(alice.slice(6, 30));
      });
    }

    it(`left at its default API version (v1), gets ApiError 404 prefix_wrong saying to set it to v1beta, with baseUrl ${where}`, async () => {
      const err = await client(prefix, alice, null)
        .models.generateContent({ model: 'gemini-2.5-flash', contents: 'hi' })
        .catch((e: unknown) => e);
      expect(lastSent().url).toBe(`${gw.baseUrl}${prefix}/v1/models/gemini-2.5-flash:generateContent`);
      expect(err).toBeInstanceOf(genai.ApiError);
      expect((err as GenAI.ApiError).status).toBe(404);
      const message = (JSON.parse((err as Error).message) as { error: { message: string } }).error.message;
      expect(message).toMatch(
        /^wrong prefix: generative calls are under \/v1beta, not \/v1\. A client that adds the API version itself must be set to v1beta/,
      );
      expect(message).toMatch(/\[modelgate: prefix_wrong\]$/);
    });
  }

  it('never let a client key reach an upstream', () => {
    expect(gw.received.length).toBeGreaterThanOrEqual(8);
    for (const r of gw.received) expect(JSON.stringify(r.rawHeaders) + r.url).not.toContain(alice);
  });
});

/**
 * The protocol table (src/providers/providers.ts): one module per protocol, each consistent with
 * its key, and the endpoint table derived from them.
 */
import { describe, expect, it } from 'vitest';
import { ENDPOINTS } from '../../src/providers/endpoints';
import { PROVIDERS, byProtocol } from '../../src/providers/providers';
import { PROTOCOLS } from '../../src/store/store';

describe('PROVIDERS', () => {
  it('has one module per protocol, each under its own protocol', () => {
    expect(Object.keys(PROVIDERS).sort()).toEqual([...PROTOCOLS].sort());
    for (const p of PROTOCOLS) expect(PROVIDERS[p].protocol).toBe(p);
  });

  it("lists each module's endpoints under its own style, and nowhere else", () => {
    for (const p of PROTOCOLS) {
      const own = PROVIDERS[p].endpoints;
      expect(own.length, p).toBeGreaterThan(0);
      for (const e of own) expect(e.style, e.name).toBe(p);
      expect(ENDPOINTS.filter((e) => e.style === p)).toEqual(own);
    }
  });

  it("puts each protocol's canonical endpoint first among those of its style", () => {
    for (const p of PROTOCOLS) expect(ENDPOINTS.find((e) => e.style === p)?.name).toBe(PROVIDERS[p].endpoints[0].name);
  });

  it('names endpoints once', () => {
    const names = ENDPOINTS.map((e) => e.name);
    expect(new Set(names).size).toBe(names.length);
  });

  it('ends every usage target of a protocol in the same key', () => {
    for (const p of PROTOCOLS) {
      const keys = new Set(PROVIDERS[p].usage.targets.map((t) => t.split('.').pop()));
      expect(keys.size, p).toBe(1);
    }
  });

  it('derives a table by protocol from the modules', () => {
    expect(byProtocol((m) => m.family)).toEqual({
      chat: 'openai',
      responses: 'openai',
      embeddings: 'openai',
      messages: 'anthropic',
      generative: 'gemini',
    });
  });
});

describe('shape rules that read the path', () => {
  it('reads a Gemini stream and embedding by method, with or without a query', () => {
    const g = PROVIDERS.generative.shape;
    expect(g.streamsByPath('/v1beta/models/m:streamGenerateContent')).toBe(true);
    expect(g.streamsByPath('/v1beta/models/m:streamGenerateContent?alt=sse')).toBe(true);
    expect(g.streamsByPath('/v1beta/models/m:generateContent')).toBe(false);
    expect(g.embeds('/v1beta/models/m:embedContent')).toBe(true);
    expect(g.embeds('/v1beta/models/m:batchEmbedContents?x=1')).toBe(true);
    expect(g.embeds('/v1beta/models/m:generateContent')).toBe(false);
  });

  it('holds every embeddings request as one and no other protocol path', () => {
    expect(PROVIDERS.embeddings.shape.embeds('/v1/embeddings')).toBe(true);
    for (const p of ['chat', 'responses', 'messages'] as const)
      expect(PROVIDERS[p].shape.embeds(PROVIDERS[p].endpoints[0].path)).toBe(false);
  });
});

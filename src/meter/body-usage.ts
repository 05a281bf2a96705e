/**
 * The usage a whole, uncompressed response body reports, read at once: the meter's fast path (a
 * body the meter's filter kept whole, which is every answer and stream up to 16 KiB). JSON.parse
 * does the reading natively; of an SSE stream only the events that mention a usage key are parsed.
 * The same protocol paths and the same normalisation as the streaming reader (usage-reader.ts), which
 * still reads compressed bodies and the tails of long ones.
 */
import type { Protocol } from '../store/store';
import { absorb, normalise, type Bag, type Usage } from './usage-reader';

/** Where each protocol reports usage in one parsed document (an answer, or one stream event). */
function usageObjects(protocol: Protocol, doc: unknown, out: unknown[]): void {
  if (!doc || typeof doc !== 'object') return;
  if (Array.isArray(doc)) {
    // Gemini's streamed JSON array: its elements are the chunks.
    for (const d of doc) usageObjects(protocol, d, out);
    return;
  }
  const o = doc as Record<string, unknown>;
  switch (protocol) {
    case 'chat':
    case 'embeddings':
      if (o.usage) out.push(o.usage);
      break;
    case 'responses':
      if (o.usage) out.push(o.usage);
      if (o.response && typeof o.response === 'object' && (o.response as Record<string, unknown>).usage) out.push((o.response as Record<string, unknown>).usage);
      break;
    case 'messages':
      if (o.message && typeof o.message === 'object' && (o.message as Record<string, unknown>).usage) out.push((o.message as Record<string, unknown>).usage);
      if (o.usage) out.push(o.usage);
      break;
    case 'generative':
      if (o.usageMetadata) out.push(o.usageMetadata);
      break;
  }
}

const USAGE_KEY: Readonly<Record<Protocol, string>> = { chat: '"usage"', embeddings: '"usage"', responses: '"usage"', messages: '"usage"', generative: '"usageMetadata"' };

/**
 * The usage of a whole body (`sse`: an event stream), or undefined when it reports none or cannot be
 * parsed. Later reports overwrite earlier ones field by field (Anthropic's message_delta carries the
 * output so far), as in the streaming reader.
 */
export function bodyUsage(protocol: Protocol, body: Uint8Array, sse: boolean, hourWrites = false): Usage | undefined {
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  const key = USAGE_KEY[protocol];
  if (!text.includes(key)) return undefined;
  const found: unknown[] = [];
  if (!sse) {
    try {
      usageObjects(protocol, JSON.parse(text), found);
    } catch {
      return undefined;
    }
  } else {
    for (const event of text.split(/\r?\n\r?\n|\r\r/)) {
      if (!event.includes(key)) continue;
      const data: string[] = [];
      for (const line of event.split(/\r?\n|\r/)) if (line.startsWith('data:')) data.push(line.slice(line[5] === ' ' ? 6 : 5));
      try {
        usageObjects(protocol, JSON.parse(data.join('\n')), found);
      } catch { /* a malformed event reports nothing */ }
    }
  }
  if (found.length === 0) return undefined;
  const bag: Bag = new Map();
  for (const u of found) absorb(bag, u);
  return normalise(protocol, bag, hourWrites);
}

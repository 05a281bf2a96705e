/**
 * The usage a whole, uncompressed response body reports, read at once: the meter's fast path (a
 * body the meter's filter kept whole, which is every answer and stream up to 16 KiB). JSON.parse
 * does the reading natively; of an SSE stream only the events that mention a usage key are parsed.
 * The same protocol paths and the same normalisation as the streaming reader (usage-reader.ts), which
 * still reads compressed bodies and the tails of long ones.
 */
import { byProtocol } from '../providers/providers';
import { sseData, sseEvents } from '../providers/sse';
import type { Protocol } from '../store/store';
import { absorb, normalise, type Bag, type Usage } from './usage-reader';

/** The usage objects of one parsed document (an answer, or one stream event), at the protocol's targets in order. */
function usageObjects(targets: readonly (readonly string[])[], doc: unknown, out: unknown[]): void {
  if (!doc || typeof doc !== 'object') return;
  if (Array.isArray(doc)) {
    // Gemini's streamed JSON array: its elements are the chunks.
    for (const d of doc) usageObjects(targets, d, out);
    return;
  }
  for (const path of targets) {
    let v: unknown = doc;
    for (const k of path) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined;
    if (v) out.push(v);
  }
}

/** Each protocol's target paths as segments, and the keys they end in (quoted, as a body holds them). */
const TARGET_PATHS = byProtocol((p) => p.usage.targets.map((t) => t.split('.')));
const USAGE_KEYS = byProtocol((p) => [...new Set(p.usage.targets.map((t) => `"${t.slice(t.lastIndexOf('.') + 1)}"`))]);

/**
 * The usage of a whole body (`sse`: an event stream), or undefined when it reports none or cannot be
 * parsed. Later reports overwrite earlier ones field by field (Anthropic's message_delta carries the
 * output so far), as in the streaming reader.
 */
export function bodyUsage(protocol: Protocol, body: Uint8Array, sse: boolean, hourWrites = false): Usage | undefined {
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  const keys = USAGE_KEYS[protocol];
  const mentions = (t: string): boolean => keys.some((k) => t.includes(k));
  if (!mentions(text)) return undefined;
  const targets = TARGET_PATHS[protocol];
  const found: unknown[] = [];
  if (!sse) {
    try {
      usageObjects(targets, JSON.parse(text), found);
    } catch {
      // A cut or malformed answer holds no usage to read: the caller estimates it.
      return undefined;
    }
  } else {
    for (const event of sseEvents(text)) {
      if (!mentions(event)) continue;
      const data = sseData(event);
      if (data === undefined) continue;
      try {
        usageObjects(targets, JSON.parse(data), found);
      } catch {
        /* a malformed event reports nothing */
      }
    }
  }
  if (found.length === 0) return undefined;
  const bag: Bag = new Map();
  for (const u of found) absorb(bag, u);
  return normalise(protocol, bag, hourWrites);
}

/**
 * The usage a response reported, from what the meter's filter kept of its body (meter/access-log.ts):
 * the whole body when it was at most the filter's tail size, read exactly as the stream reader
 * reads a whole response (usage-reader.ts), else its last bytes, of which only what is whole is
 * read: SSE events after the first blank line, or the last usage object of a JSON document.
 */
import type { Protocol } from '../store/store';
import { absorb, isIdentity, isSse, normalise, TARGETS, UsageReader, type Bag, type Usage } from './usage-reader';

export interface TailUsage {
  /** What the provider reported (possibly a partial count when the stream was cut). */
  readonly usage: Usage | undefined;
  /** The body was in an encoding the meter cannot read. */
  readonly undecodable: boolean;
}

/** Usage from a whole body. */
async function wholeBody(protocol: Protocol, body: Uint8Array, contentType: string, contentEncoding: string): Promise<TailUsage> {
  const reader = new UsageReader(protocol, contentType, contentEncoding);
  reader.push(body);
  const out = await reader.end(true);
  return 'usage' in out ? { usage: out.usage, undecodable: false } : { usage: undefined, undecodable: out.reason === 'undecodable' };
}

/** The index after the first blank line (an SSE event boundary), or -1. */
function afterFirstEvent(b: Uint8Array): number {
  for (let i = 0; i + 1 < b.length; i++) {
    if (b[i] === 0x0a && (b[i + 1] === 0x0a || (b[i + 1] === 0x0d && b[i + 2] === 0x0a))) return b[i + 1] === 0x0a ? i + 2 : i + 3;
  }
  return -1;
}

/**
 * The last `"<key>": {...}` object in a piece of JSON text, for one of `keys` (the last segment of
 * a target path: `usage`, `usageMetadata`). A key pattern outside a string is a real key: inside
 * a JSON string every quote is escaped, so `"usage":` cannot appear there.
 */
export function lastObjectFor(text: string, keys: readonly string[]): unknown {
  let best = -1;
  for (const k of keys) {
    const re = new RegExp(`"${k}"\\s*:\\s*\\{`, 'g');
    for (let m = re.exec(text); m; m = re.exec(text)) if (m.index > best) best = m.index + m[0].length - 1;
  }
  if (best < 0) return undefined;
  let depth = 0;
  let inString = false;
  let escape = false;
  for (let i = best; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (escape) escape = false;
      else if (c === 0x5c) escape = true;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b) depth++;
    else if (c === 0x7d && --depth === 0) {
      try {
        return JSON.parse(text.slice(best, i + 1));
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/**
 * @param whole the capture is the whole body
 */
export async function tailUsage(protocol: Protocol, captured: Uint8Array, whole: boolean, contentType: string, contentEncoding: string): Promise<TailUsage> {
  if (whole) return wholeBody(protocol, captured, contentType, contentEncoding);
  // A compressed stream cannot be read from its middle.
  if (!isIdentity(contentEncoding)) return { usage: undefined, undecodable: true };
  if (isSse(contentType)) {
    const from = afterFirstEvent(captured);
    if (from < 0) return { usage: undefined, undecodable: false };
    return wholeBody(protocol, captured.subarray(from), contentType, '');
  }
  const keys = [...new Set([...TARGETS[protocol]].map((t) => t.split('.').pop() as string))];
  const found = lastObjectFor(Buffer.from(captured.buffer, captured.byteOffset, captured.byteLength).toString('utf8'), keys);
  if (found === undefined) return { usage: undefined, undecodable: false };
  const bag: Bag = new Map();
  absorb(bag, found);
  return { usage: normalise(protocol, bag), undecodable: false };
}

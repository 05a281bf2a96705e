/**
 * The usage a response reported, from what the meter's filter kept of its body (meter/access-log.ts):
 * the whole body when it was at most the filter's tail size, read exactly as the stream reader
 * reads a whole response (usage-reader.ts), else its last bytes, of which only what is whole is
 * read: SSE events after the first blank line (else, for a stream that ended, the last usage object
 * of the event cut at the tail's start), or the last usage object of a JSON document.
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
async function wholeBody(
  protocol: Protocol,
  body: Uint8Array,
  contentType: string,
  contentEncoding: string,
  hourWrites: boolean,
): Promise<TailUsage> {
  const reader = new UsageReader(protocol, contentType, contentEncoding, false, hourWrites);
  reader.push(body);
  const out = await reader.end(true);
  return 'usage' in out
    ? { usage: out.usage, undecodable: false }
    : { usage: undefined, undecodable: out.reason === 'undecodable' };
}

/** The SSE fields a provider's stream starts with. */
const FIELD_STARTS = ['event:', 'data:'].map((f) => Buffer.from(f));

/**
 * Where the whole events of a capture start: at 0 when it starts with an SSE field line (the body's
 * first bytes, as a stream cut before the filter's tail was full leaves them: Anthropic's
 * message_start with the input count; a cut inside a JSON string cannot look like one, its quotes
 * being escaped), else after the first blank line, or -1.
 */
function firstWholeEvent(b: Uint8Array): number {
  for (const f of FIELD_STARTS) if (b.length >= f.length && f.every((c, i) => b[i] === c)) return 0;
  return afterFirstEvent(b);
}

/** The index after the first blank line (an SSE event boundary), or -1. */
function afterFirstEvent(b: Uint8Array): number {
  for (let i = 0; i + 1 < b.length; i++) {
    if (b[i] === 0x0a && (b[i + 1] === 0x0a || (b[i + 1] === 0x0d && b[i + 2] === 0x0a)))
      return b[i + 1] === 0x0a ? i + 2 : i + 3;
  }
  return -1;
}

/**
 * For the JSON object that starts at `open` (a `{`, outside any string): the index after it, and how
 * many containers close between its end and the end of the value it is in (the end of the text, or
 * of its SSE event: a blank line). Undefined if the object, or that value, does not end.
 */
function objectAndCloses(text: string, open: number): { end: number; closes: number } | undefined {
  let depth = 0;
  let end = -1;
  let inString = false;
  let escape = false;
  for (let i = open; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (escape) escape = false;
      else if (c === 0x5c) escape = true;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      if (--depth === 0 && end < 0) end = i + 1;
    } else if (end >= 0 && c === 0x0a && (text.charCodeAt(i + 1) === 0x0a || text.charCodeAt(i + 1) === 0x0d)) break;
  }
  return end >= 0 && depth < 0 ? { end, closes: -depth } : undefined;
}

/**
 * Containers a usage object may close on its way to the end of its document or event: 1 when it is
 * a member of the document (an answer, a chat chunk, Anthropic's message_delta, a Gemini chunk), 2
 * when of an object in it (the Responses API's `response`, a Gemini chunk in a streamed array).
 * A `"usage": {...}` deeper in (a tool's parameter schema a response echoes) is not the provider's.
 */
const MAX_CLOSES = 2;

/**
 * The last `"<key>": {...}` object in a piece of JSON text, for one of `keys` (the last segment of
 * a target path: `usage`, `usageMetadata`), that is at most MAX_CLOSES containers deep counted from
 * the end of its document or SSE event. A key pattern outside a string is a real key: inside a
 * JSON string every quote is escaped, so `"usage":` cannot appear there.
 */
export function lastObjectFor(text: string, keys: readonly string[]): unknown {
  const opens: number[] = [];
  for (const k of keys) {
    const re = new RegExp(`"${k}"\\s*:\\s*\\{`, 'g');
    for (let m = re.exec(text); m; m = re.exec(text)) opens.push(m.index + m[0].length - 1);
  }
  opens.sort((a, b) => b - a);
  for (const open of opens) {
    const found = objectAndCloses(text, open);
    if (!found || found.closes > MAX_CLOSES) continue;
    try {
      return JSON.parse(text.slice(open, found.end));
    } catch {
      // The last usage object is malformed: no usage read, so the answer is estimated rather than an earlier one taken.
      return undefined;
    }
  }
  return undefined;
}

/** The usage of the last usage object of a tail (lastObjectFor), normalised. */
function lastUsage(protocol: Protocol, captured: Uint8Array, hourWrites: boolean): Usage | undefined {
  const keys = [...new Set([...TARGETS[protocol]].map((t) => t.split('.').pop() as string))];
  const found = lastObjectFor(
    Buffer.from(captured.buffer, captured.byteOffset, captured.byteLength).toString('utf8'),
    keys,
  );
  if (found === undefined) return undefined;
  const bag: Bag = new Map();
  absorb(bag, found);
  return normalise(protocol, bag, hourWrites);
}

/**
 * @param whole the capture is the whole body
 * @param hourWrites Anthropic cache writes reported without their breakdown by ttl were 1-hour ones
 *   (the request named a ttl): a stream's tail keeps message_delta, whose usage has no breakdown
 */
export async function tailUsage(
  protocol: Protocol,
  captured: Uint8Array,
  whole: boolean,
  contentType: string,
  contentEncoding: string,
  ended = true,
  hourWrites = false,
): Promise<TailUsage> {
  if (whole) return wholeBody(protocol, captured, contentType, contentEncoding, hourWrites);
  // A compressed stream cannot be read from its middle.
  if (!isIdentity(contentEncoding)) return { usage: undefined, undecodable: true };
  if (isSse(contentType)) {
    const from = firstWholeEvent(captured);
    const events =
      from < 0
        ? { usage: undefined, undecodable: false }
        : await wholeBody(protocol, captured.subarray(from), contentType, '', hourWrites);
    // The event that reports usage may be longer than the tail (the Responses API's response.completed
    // repeats the request's instructions and tools): its end, with the usage, is still here.
    return events.usage !== undefined || !ended
      ? events
      : { usage: lastUsage(protocol, captured, hourWrites), undecodable: false };
  }
  return { usage: lastUsage(protocol, captured, hourWrites), undecodable: false };
}

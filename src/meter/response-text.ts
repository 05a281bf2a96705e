/**
 * The text a response carried, for estimating its output tokens when the provider's own usage is
 * missing, cut short, undecodable or implausible. Reads what the meter's filter kept of the body
 * (the last bytes, meter/access-log.ts): the whole body when it was small, else its tail, of which
 * whole SSE events or the whole JSON answer are read. Pure and bounded: the input is at most the
 * filter's tail (16 KiB).
 *
 * What counts as text is every string a model writes, whatever the protocol: message and delta
 * contents, tool-call arguments (OpenAI `arguments`, Anthropic `partial_json`, Gemini
 * `functionCall.args`), thinking and reasoning text, refusals. Envelope fields (ids, roles, finish
 * reasons, model names) are not text.
 */
import { sseData, sseEvents } from '../providers/sse';

/** Keys whose string values are text a model wrote. */
const TEXT_KEYS = new Set([
  'content',
  'text',
  'delta',
  'arguments',
  'partial_json',
  'thinking',
  'reasoning_content',
  'reasoning',
  'refusal',
  'summary_text',
  'output_text',
]);
/** Keys whose object values a model wrote as JSON (tool inputs): counted as their JSON text. */
const JSON_KEYS = new Set(['args', 'input']);
/** Envelope keys whose subtrees never hold text (a usage object, ids). */
const SKIP_KEYS = new Set([
  'usage',
  'usageMetadata',
  'id',
  'model',
  'role',
  'object',
  'type',
  'index',
  'finish_reason',
  'stop_reason',
  'system_fingerprint',
  'logprobs',
  'embedding',
  'values',
]);

function collect(value: unknown, out: string[], key: string | undefined, depth: number): void {
  if (depth > 64 || value === null || value === undefined) return;
  if (typeof value === 'string') {
    if (key !== undefined && TEXT_KEYS.has(key)) out.push(value);
    return;
  }
  if (typeof value !== 'object') return;
  if (key !== undefined && JSON_KEYS.has(key) && !Array.isArray(value)) {
    out.push(JSON.stringify(value));
    return;
  }
  if (Array.isArray(value)) {
    for (const v of value) collect(v, out, key, depth + 1);
    return;
  }
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (!SKIP_KEYS.has(k)) collect(v, out, k, depth + 1);
  }
}

/** The text of parsed JSON values (answers or stream events). */
export function textOf(values: readonly unknown[]): string {
  const out: string[] = [];
  for (const v of values) collect(v, out, undefined, 0);
  return out.join('');
}

export interface CapturedText {
  /** The text found. */
  readonly text: string;
  /** Body bytes that text was read from (whole events or the whole answer). */
  readonly bytes: number;
}

const decoder = new TextDecoder('utf-8', { fatal: false });

/**
 * The text in a captured body (or its tail).
 * @param whole the capture is the whole body (else it starts somewhere inside it)
 */
export function capturedText(captured: Uint8Array, sse: boolean, whole: boolean): CapturedText {
  const body = decoder.decode(captured);
  if (sse) return sseText(body, whole);
  // A JSON answer, or Gemini's streamed JSON array.
  const parsed = parseJson(body);
  if (parsed !== undefined) return { text: textOf([parsed]), bytes: captured.length };
  // A cut JSON document: the complete objects of a streamed array, if any.
  const parts = arrayElements(body);
  return { text: textOf(parts.values), bytes: parts.bytes };
}

function parseJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    // A cut or streamed body: the caller reads the complete objects of it instead.
    return undefined;
  }
}

/** SSE: the data of each complete event (the first one is skipped when the capture starts inside the body). */
function sseText(body: string, whole: boolean): CapturedText {
  const events = sseEvents(body);
  if (!whole) events.shift();
  // The last piece is an event only if the body ended with a blank line.
  const values: unknown[] = [];
  let bytes = 0;
  for (const event of events) {
    const data = sseData(event);
    if (data === undefined) continue;
    const v = parseJson(data);
    if (v === undefined) continue;
    values.push(v);
    bytes += Buffer.byteLength(event) + 2;
  }
  return { text: textOf(values), bytes };
}

/** The complete top-level `{...}` objects in a piece of a JSON array (each parsed on its own). */
function arrayElements(body: string): { values: unknown[]; bytes: number } {
  const values: unknown[] = [];
  let bytes = 0;
  let depth = 0;
  let start = -1;
  let inString = false;
  let escape = false;
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    if (inString) {
      if (escape) escape = false;
      else if (c === 0x5c) escape = true;
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = depth > 0 ? true : inString;
    else if (c === 0x7b) {
      if (depth === 0) start = i;
      depth++;
    } else if (c === 0x7d && depth > 0) {
      depth--;
      if (depth === 0 && start >= 0) {
        const v = parseJson(body.slice(start, i + 1));
        if (v !== undefined) {
          values.push(v);
          bytes += Buffer.byteLength(body.slice(start, i + 1));
        }
        start = -1;
      }
    }
  }
  return { values, bytes };
}

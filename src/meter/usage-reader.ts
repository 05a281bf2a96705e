/**
 * Reads the usage a response reports, as its bytes pass (docs/metering.md, "What is read from each response"):
 *
 * | protocol | JSON answer | stream |
 * |---|---|---|
 * | chat, embeddings | `usage` {prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens} | SSE: the final
 * chunk's `usage` (only with `stream_options.include_usage`) |
 * | responses | `usage` {input_tokens, output_tokens, input_tokens_details.cached_tokens} | SSE: `response.usage` of
 * `response.completed` |
 * | messages | `usage` {input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens,
 * cache_creation.ephemeral_5m/1h_input_tokens} | SSE: `message.usage` of `message_start`, then `usage` of
 * `message_delta` (output so far) |
 * | generative | `usageMetadata` {promptTokenCount, candidatesTokenCount, thoughtsTokenCount, cachedContentTokenCount;
 * *TokensDetails by modality, named or numbered} | SSE (`alt=sse`) or a streamed JSON array: the last `usageMetadata` |
 *
 * Each protocol's module (src/providers/) names its targets and normalises its counts.
 * Tokens are normalised to: input (all of it, cached included), cached input, output (reasoning
 * and thinking tokens included, as providers bill them). Memory is bounded whatever the body's
 * size (json-capture.ts); gzip, deflate and br bodies are decompressed as they stream.
 */
import * as zlib from 'node:zlib';
import { UNNAMED_MODALITY, USAGE_MODALITIES } from '../providers/gemini-generative';
import { PROVIDERS, byProtocol } from '../providers/providers';
import type { HostedTool, Modality, Protocol } from '../store/store';
import { JsonCapture } from './json-capture';

export interface Usage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedInputTokens: number;
  /**
   * Of those, the tokens the provider reported in modalities billed at prices of their own (OpenAI
   * `prompt_tokens_details.audio_tokens`, `completion_tokens_details.audio_tokens`; Gemini's
   * `promptTokensDetails`, `toolUsePromptTokensDetails` and `candidatesTokensDetails` by modality):
   * meter/modal-cost.ts prices them.
   */
  readonly modal?: Readonly<Partial<Record<Modality, number>>>;
  /**
   * Of those, the tokens the provider reported in a modality the meter cannot name (a Gemini
   * `modality` number or name it does not know), by direction: debited at the model's highest price
   * of that direction, and the ledger row marked `unknown_modality` (meter/modal-cost.ts).
   */
  readonly unnamed?: Readonly<{ input?: number; output?: number }>;
  /** The provider's usage held a count that is not a finite number >= 0: not to be trusted. */
  readonly implausible?: true;
  /** Calls of hosted tools the usage reports (Anthropic `server_tool_use.web_search_requests`). */
  readonly toolCalls?: Readonly<Partial<Record<HostedTool, number>>>;
}

/** Why a response could not be metered (a label of modelgate_meter_unmetered_total). */
export type UnmeteredReason =
  | 'no_usage'
  | 'stream_without_usage'
  | 'upstream_error'
  | 'incomplete'
  | 'undecodable'
  | 'meter_disabled'
  | 'store_unavailable'
  | 'price_invalid';

export type UsageOutcome = { readonly usage: Usage } | { readonly reason: UnmeteredReason };

/** Where each protocol reports usage (its module's usage targets, providers/). */
export const TARGETS: Readonly<Record<Protocol, ReadonlySet<string>>> = byProtocol((p) => new Set(p.usage.targets));

export type Bag = Map<string, number>;

export { UNNAMED_MODALITY, USAGE_MODALITIES };

/**
 * A count's modality as its enum name: by name (any case) or number; UNNAMED_MODALITY for anything
 * else; undefined when there is none (proto3's JSON leaves out the default, MODALITY_UNSPECIFIED).
 */
function modalityName(m: unknown): string | undefined {
  if (m === undefined || m === null) return undefined;
  const name = typeof m === 'number' ? USAGE_MODALITIES[m] : typeof m === 'string' ? m.toUpperCase() : undefined;
  return name !== undefined && (USAGE_MODALITIES as readonly string[]).includes(name) ? name : UNNAMED_MODALITY;
}

/** Flattens a usage object's numbers into `a.b` keys (later values overwrite earlier ones). */
export function absorb(bag: Bag, value: unknown, prefix = ''): void {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return;
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (Array.isArray(v)) {
      // Gemini's counts by modality: [{modality: "AUDIO" or 4, tokenCount: 120}, ...] as `k.AUDIO`;
      // counts of one modality in one list add up (so do those of modalities the meter cannot name).
      const counts = new Map<string, number>();
      for (const d of v) {
        const o = d && typeof d === 'object' ? (d as Record<string, unknown>) : undefined;
        if (!o || o.tokenCount === undefined) continue;
        const count = o.tokenCount;
        if (typeof count !== 'number' || !Number.isFinite(count) || count < 0) bag.set(IMPLAUSIBLE, 1);
        else {
          // No modality (the enum's default, MODALITY_UNSPECIFIED, left out): counted as text.
          const name = modalityName(o.modality);
          if (name !== undefined) counts.set(name, (counts.get(name) ?? 0) + Math.floor(count));
        }
      }
      for (const [name, n] of counts) bag.set(`${prefix}${k}.${name}`, n);
    } else if (typeof v === 'number' && Number.isFinite(v) && v >= 0) bag.set(prefix + k, Math.floor(v));
    else if (v && typeof v === 'object') absorb(bag, v, `${prefix}${k}.`);
    // A count that is not a finite number >= 0 (negative, a string, NaN written as a string):
    // the provider's figures cannot be trusted; the meter estimates instead (IMPLAUSIBLE).
    else if (/tokens?|count/i.test(k) && v !== null && typeof v !== 'boolean') bag.set(IMPLAUSIBLE, 1);
  }
}

/** Set in a bag when a usage object held a count that is not a finite number >= 0. */
export const IMPLAUSIBLE = '!implausible';

/**
 * The normalised usage from what was read, or undefined when the input count is missing.
 * `hourWrites`: Anthropic cache writes reported without their breakdown by ttl (a stream's
 * message_delta, when its message_start is not in what was kept) were 1-hour ones (the request
 * named a `ttl`); else 5-minute ones.
 */
export function normalise(protocol: Protocol, bag: Bag, hourWrites = false): Usage | undefined {
  const rules = PROVIDERS[protocol].usage;
  const { input, output, cached } = rules.tokens(bag, hourWrites);
  if (bag.has(IMPLAUSIBLE))
    return {
      inputTokens: input ?? 0,
      outputTokens: output,
      cachedInputTokens: Math.min(cached, input ?? 0),
      implausible: true,
    };
  if (input === undefined) return undefined;
  const usage: Usage = { inputTokens: input, outputTokens: output, cachedInputTokens: Math.min(cached, input) };
  const { modal, unnamed, toolCalls } = rules.extras(bag);
  return modal || unnamed || toolCalls
    ? { ...usage, ...(modal ? { modal } : {}), ...(unnamed ? { unnamed } : {}), ...(toolCalls ? { toolCalls } : {}) }
    : usage;
}

/** Splits an SSE stream into events and feeds each event's data to a fresh JsonCapture. */
class SseReader {
  #field: number[] = [];
  /** 'field': reading the field name; 'data': streaming a data line; 'skip': ignoring the rest of the line. */
  #state: 'field' | 'data' | 'skip' = 'field';
  #afterColon = false;
  #event: JsonCapture | undefined;
  #lineHadBytes = false;
  #lastWasCr = false;

  constructor(private readonly open: () => JsonCapture) {}

  push(chunk: Uint8Array): void {
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i];
      if (b === 0x0a || b === 0x0d) {
        // CRLF is one line end.
        const crlf = b === 0x0a && this.#lastWasCr;
        this.#lastWasCr = b === 0x0d;
        if (!crlf) {
          if (this.#state === 'data' && i > start) this.#data(chunk.subarray(start, i));
          this.#endLine();
        }
        start = i + 1;
        continue;
      }
      this.#lastWasCr = false;
      if (this.#state === 'field') {
        this.#lineHadBytes = true;
        if (b === 0x3a) {
          const name = String.fromCharCode(...this.#field);
          this.#field.length = 0;
          this.#state = name === 'data' ? 'data' : 'skip';
          this.#afterColon = true;
          start = i + 1;
        } else if (this.#field.length < 16) this.#field.push(b);
        else this.#state = 'skip';
        continue;
      }
      if (this.#state === 'data' && this.#afterColon) {
        this.#afterColon = false;
        // One space after the colon is not part of the data (the SSE spec).
        if (b === 0x20) start = i + 1;
      }
    }
    if (this.#state === 'data' && start < chunk.length) this.#data(chunk.subarray(start));
  }

  #data(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    if (this.#afterColon) {
      this.#afterColon = false;
      if (bytes[0] === 0x20) bytes = bytes.subarray(1);
    }
    this.#event ??= this.open();
    this.#event.push(bytes);
  }

  #endLine(): void {
    // An empty line ends the event.
    if (!this.#lineHadBytes && this.#state === 'field') {
      this.#event = undefined;
    } else if (this.#state === 'data' && this.#event) {
      // Lines of one event's data join with a newline.
      this.#event.push(NEWLINE);
    }
    this.#lineHadBytes = false;
    this.#field.length = 0;
    this.#state = 'field';
    this.#afterColon = false;
  }
}

const NEWLINE = new Uint8Array([0x0a]);

/** The usage of one response, fed chunk by chunk. */
/** A body served as server-sent events (content-type text/event-stream, any case). */
export function isSse(contentType: string): boolean {
  return /^text\/event-stream/i.test(contentType);
}

/** A content-encoding that leaves the body as it is ('' or identity, any case or spacing). */
export function isIdentity(contentEncoding: string): boolean {
  const enc = contentEncoding.trim().toLowerCase();
  return enc === '' || enc === 'identity';
}

export class UsageReader {
  readonly #bag: Bag = new Map();
  #found = false;
  #sink: { push(b: Uint8Array): void };
  #inflate: zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress | undefined;
  #broken = false;
  readonly #stream: boolean;

  /**
   * @param contentType the response's content-type (text/event-stream: SSE)
   * @param encoding its content-encoding ('' or identity: none)
   * @param streamRequested the request asked for a stream (a chat stream without usage is then named as such)
   * @param hourWrites cache writes without a breakdown by ttl were 1-hour ones (normalise)
   */
  constructor(
    readonly protocol: Protocol,
    contentType: string,
    encoding: string,
    streamRequested = false,
    readonly hourWrites = false,
  ) {
    const onValue = (_path: string, json: string): void => {
      try {
        absorb(this.#bag, JSON.parse(json));
        this.#found = true;
      } catch {
        // A cut or malformed usage object counts as none.
      }
    };
    const capture = (): JsonCapture => new JsonCapture(TARGETS[protocol], onValue);
    const sse = isSse(contentType);
    this.#stream = sse || streamRequested;
    this.#sink = sse ? new SseReader(capture) : capture();
    if (!isIdentity(encoding)) {
      const enc = encoding.trim().toLowerCase();
      const make =
        enc === 'gzip' || enc === 'x-gzip'
          ? zlib.createGunzip
          : enc === 'deflate'
            ? zlib.createInflate
            : enc === 'br'
              ? zlib.createBrotliDecompress
              : undefined;
      if (!make) this.#broken = true;
      else {
        const z = make();
        z.on('data', (b: Buffer) => this.#sink.push(b));
        z.on('error', () => (this.#broken = true));
        this.#inflate = z;
      }
    }
  }

  push(chunk: Uint8Array): void {
    if (this.#broken) return;
    if (this.#inflate) this.#inflate.write(chunk);
    else this.#sink.push(chunk);
  }

  /** Ends the body (complete: Envoy said end_of_stream) and tells what was found. */
  async end(complete: boolean): Promise<UsageOutcome> {
    if (this.#inflate && !this.#broken) {
      const z = this.#inflate;
      await new Promise<void>((resolve) => {
        z.once('end', resolve);
        z.once('error', () => resolve());
        z.end();
      });
    }
    const usage = this.#found ? normalise(this.protocol, this.#bag, this.hourWrites) : undefined;
    if (usage) return { usage };
    if (this.#broken) return { reason: 'undecodable' };
    if (!complete) return { reason: 'incomplete' };
    return {
      reason: this.#stream && PROVIDERS[this.protocol].usage.streamUsageOptIn ? 'stream_without_usage' : 'no_usage',
    };
  }
}

/**
 * Token estimates for responses whose provider usage is missing, cut short, undecodable or
 * implausible (the meter debits an estimate then, never nothing; docs/metering.md).
 *
 * Counting is done with a real tokenizer, `gpt-tokenizer`'s o200k_base (the encoding of OpenAI's
 * current models), in a worker thread: loading its ranks takes about 0.4 s and 70 MB, and counting
 * a few kilobytes takes a few hundred microseconds, none of which may stall a Check on the main
 * thread. The worker starts with the first estimate and stays. No tokenizer is published for
 * Anthropic's or Google's current models; their counts are o200k_base's times a per-family factor
 * (FAMILY_FACTOR), a documented approximation.
 *
 * Inputs:
 * - output: the text the response carried (response-text.ts), extrapolated to the whole body by
 *   bytes when only the body's tail was kept; a body the meter cannot read counts one token per byte;
 * - input: the request body's whole JSON text (its keys, numbers and punctuation too: a tool's
 *   schema is billed by its property names and enums; an embedding's token ids count a token each
 *   at least), inline media apart, when the Check kept the whole body (at most INPUT_SAMPLE_BYTES
 *   bytes); a larger body, or
 *   one whose sample is not here (another replica allowed it), counts one token per byte, an upper
 *   bound (a client chooses what the first bytes say of the rest). Input the body only references
 *   (a stored conversation, a cached context, an image by URL) adds meter.referencedInputTokens.
 */
import { Worker } from 'node:worker_threads';
import type { Protocol } from '../store/store';

/** Bytes of a request body the Check keeps for an input estimate. */
export const INPUT_SAMPLE_BYTES = 4096;

/**
 * o200k_base count times this, by protocol family (no published tokenizer for Anthropic's and Google's current models).
 */
export const FAMILY_FACTOR: Readonly<Record<Protocol, number>> = {
  chat: 1,
  responses: 1,
  embeddings: 1,
  messages: 1.2,
  generative: 1,
};

/** An inline image or file (a data: URL): counted as this many tokens instead of its base64 text. */
export const INLINE_MEDIA_TOKENS = 1000;

/**
 * Body bytes per output token where no text could be read to measure it: a chat stream's chunk is
 * about 150-200 bytes of JSON per token or two of text (so 32 errs high); an answer is mostly its text.
 */
export const SSE_BYTES_PER_TOKEN = 32;
export const JSON_BYTES_PER_TOKEN = 4;

/** Counts tokens of texts. */
export interface TokenCounter {
  count(texts: readonly string[]): Promise<number[]>;
  close(): Promise<void>;
}

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { countTokens } = require(workerData.tokenizer);
parentPort.on('message', (m) => {
  try {
    parentPort.postMessage({ id: m.id, counts: m.texts.map((t) => countTokens(t)) });
  } catch (err) {
    parentPort.postMessage({ id: m.id, error: String(err && err.message || err) });
  }
});
`;

/** Texts one message to the worker carries at most (counts asked for in one turn of the event loop share messages). */
export const TEXTS_PER_MESSAGE = 64;

/**
 * The o200k_base counter in a worker thread, started on first use. The counts asked for in one
 * turn of the event loop go in one message (up to TEXTS_PER_MESSAGE texts): a message costs the
 * main thread and the worker a few microseconds whatever it carries, and on a shared core wakes the
 * worker once instead of once per text.
 */
export function workerTokenCounter(): TokenCounter {
  type Asked = { readonly texts: readonly string[]; resolve: (n: number[]) => void; reject: (e: Error) => void };
  let worker: Worker | undefined;
  let nextId = 0;
  let queued: Asked[] = [];
  let scheduled = false;
  const waiting = new Map<number, Asked[]>();
  const start = (): Worker => {
    const w = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { tokenizer: require.resolve('gpt-tokenizer/encoding/o200k_base') },
    });
    w.unref();
    w.on('message', (m: { id: number; counts?: number[]; error?: string }) => {
      const batch = waiting.get(m.id);
      waiting.delete(m.id);
      if (!batch) return;
      let at = 0;
      for (const a of batch) {
        if (m.counts) a.resolve(m.counts.slice(at, at + a.texts.length));
        else a.reject(new Error(m.error ?? 'tokenizer failed'));
        at += a.texts.length;
      }
    });
    const fail = (err: Error): void => {
      worker = undefined;
      for (const batch of waiting.values()) for (const a of batch) a.reject(err);
      waiting.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`tokenizer worker exited (${code})`)));
    return w;
  };
  const send = (batch: Asked[]): void => {
    const id = nextId++;
    waiting.set(id, batch);
    worker!.postMessage({ id, texts: batch.flatMap((a) => a.texts) });
  };
  const flush = (): void => {
    scheduled = false;
    const all = queued;
    queued = [];
    if (all.length === 0) return;
    worker ??= start();
    let batch: Asked[] = [];
    let texts = 0;
    for (const a of all) {
      if (batch.length > 0 && texts + a.texts.length > TEXTS_PER_MESSAGE) {
        send(batch);
        batch = [];
        texts = 0;
      }
      batch.push(a);
      texts += a.texts.length;
    }
    send(batch);
  };
  return {
    count(texts) {
      return new Promise((resolve, reject) => {
        queued.push({ texts, resolve, reject });
        if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
    async close() {
      const w = worker;
      worker = undefined;
      for (const a of queued) a.reject(new Error('tokenizer closed'));
      queued = [];
      if (w) await w.terminate();
    },
  };
}

const DATA_URL = /^data:[^,;]{0,100}(;[^,]{0,100})?,/;

/**
 * A request body's JSON text as its input is counted: the whole text (keys, numbers and punctuation
 * too: a tool's schema is billed by its property names and its enums, which are keys and numbers),
 * each inline image or file (a data: URL string) cut out and counted apart as `media`. Works on a
 * cut document too (a sample): an unterminated last string is taken as it is.
 */
export function jsonInputText(text: string): { text: string; media: number } {
  if (!text.includes('data')) return { text, media: 0 };
  const out: string[] = [];
  let media = 0;
  let from = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const q = text.indexOf('"', i);
    if (q < 0) break;
    let j = q + 1;
    let escaped = false;
    while (j < n) {
      const c = text.charCodeAt(j);
      if (c === 0x5c) {
        escaped = true;
        j += 2;
        continue;
      }
      if (c === 0x22) break;
      j++;
    }
    let value = text.slice(q + 1, Math.min(j, n));
    if (escaped) {
      try {
        value = JSON.parse(`"${value}"`) as string;
      } catch {
        /* a cut escape at the end of a sample: the raw text */
      }
    }
    if (DATA_URL.test(value)) {
      media++;
      out.push(text.slice(from, q + 1));
      from = Math.min(j, n);
    }
    i = j + 1;
  }
  out.push(text.slice(from));
  return { text: out.join(''), media };
}

export interface InputEstimateSource {
  /** The first bytes of the request body (absent: not kept here). */
  readonly sample?: Uint8Array;
  /** The whole body's length in bytes. */
  readonly bodyBytes: number;
  readonly referencedInput: boolean;
}

export interface Estimator {
  /** Input tokens of a request. */
  input(protocol: Protocol, source: InputEstimateSource, referencedInputTokens: number): Promise<number>;
  /**
   * Output tokens of a response: `text` read from `textBytes` bytes of a body of `bodyBytes`
   * (extrapolated by bytes); `undefined` text: the body could not be read (one token per byte).
   * Bytes sent beyond what was read, when what was read held no text, count at a stream's or an
   * answer's typical density (SSE_BYTES_PER_TOKEN, JSON_BYTES_PER_TOKEN).
   */
  output(
    protocol: Protocol,
    text: string | undefined,
    textBytes: number,
    bodyBytes: number,
    sse: boolean,
  ): Promise<number>;
}

export function createEstimator(counter: TokenCounter): Estimator {
  const scaled = (protocol: Protocol, n: number): number => Math.ceil(n * FAMILY_FACTOR[protocol]);
  return {
    async input(protocol, source, referencedInputTokens) {
      const referenced = source.referencedInput ? referencedInputTokens : 0;
      // A body larger than its sample is counted at one token per byte, an upper bound: what a
      // sample says of the rest is the client's to choose (a sample of digits before 200 KB of text).
      if (!source.sample || source.sample.length === 0 || source.bodyBytes > source.sample.length)
        return source.bodyBytes + referenced;
      // The whole JSON text: an embedding's token ids (`input: [[1, 2, ...]]`) count at least a token each in it.
      const { text, media } = jsonInputText(
        Buffer.from(source.sample.buffer, source.sample.byteOffset, source.sample.byteLength).toString('utf8'),
      );
      const [tokens] = await counter.count([text]);
      return scaled(protocol, tokens + media * INLINE_MEDIA_TOKENS) + referenced;
    },
    async output(protocol, text, textBytes, bodyBytes, sse) {
      if (text === undefined) return bodyBytes;
      const [tokens] = text.length === 0 ? [0] : await counter.count([text]);
      if (bodyBytes <= textBytes) return scaled(protocol, tokens);
      if (tokens > 0 && textBytes > 0) return scaled(protocol, Math.ceil((tokens * bodyBytes) / textBytes));
      return scaled(
        protocol,
        tokens + Math.ceil((bodyBytes - textBytes) / (sse ? SSE_BYTES_PER_TOKEN : JSON_BYTES_PER_TOKEN)),
      );
    },
  };
}

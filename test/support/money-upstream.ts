/**
 * A stand-in provider for the money tests and the money drill: it behaves as real providers do
 * where a hostile key holder could exploit the meter, and misbehaves on request.
 *
 * As real providers do: it reads `stream`, `n`, `candidateCount` and every max-tokens alias as lax
 * upstreams do (`"stream": "true"` streams, `"n": "3"` is 3, `"n": "1_6"` is 16: pydantic; `"candidateCount": "1.6e1"`
 * is 16: proto3 JSON), produces `n` answers, honours the
 * maximum (else the model's default of 30 tokens), reports usage where each provider does (a chat
 * stream only with `stream_options.include_usage`; Anthropic's message_start and message_delta;
 * Gemini's usageMetadata on every chunk, the last one complete; no usage from Gemini's embeddings),
 * and streams one token per event, TOKEN_DELAY_MS apart.
 *
 * On request (headers the client sends, which Envoy forwards):
 * - `x-stand-in-usage`: a JSON value put in place of every usage count (`1e300`, `-5`, `"12"`,
 *   `null`), or `omit` for no usage at all;
 * - `x-stand-in-encoding`: compress the answer with gzip and label it with this content-encoding
 *   whatever the request accepted (`zstd`: bytes no zstd decoder reads);
 * - `x-stand-in-delay-ms`: the delay between stream events;
 * - `x-stand-in-cut-inside: TEXT`: the body (JSON or a whole stream) written in pieces cut in the
 *   middle of every occurrence of TEXT, each write CUT_GAP_MS after the last, so Envoy's filters
 *   see TEXT split between two chunks;
 * - `x-stand-in-tokens`: output tokens per answer when the request names no maximum.
 * - `x-stand-in-hold-ms`: wait this long before answering at all (a provider slow to its first byte;
 *   a client may leave before any of the answer came back).
 * - `x-stand-in-headers-first: NAME`: a non-streaming answer's headers go at once, its body (the
 *   whole answer, produced and billed) once the test opens the gate (a provider that flushes its
 *   headers early, before a long generation ends).
 * - `x-stand-in-gate: NAME`: wait before answering at all until the test opens the gate
 *   (`MoneyUpstream.open(NAME)`): requests in flight for as long as a test needs, whatever the timing.
 * - `x-stand-in-delta-usage: cumulative`: Anthropic's message_delta reports the cumulative input
 *   counts too (`input_tokens`, `cache_creation_input_tokens`, `cache_read_input_tokens`, as the
 *   SDKs' MessageDeltaUsage has them), without message_start's `cache_creation` breakdown by TTL.
 *
 * - `x-stand-in-tool-prompts: on`: Anthropic's hidden tool prompts
 * (test/e2e/money-tool-prompts-and-body-limits.test.ts),
 *   billed as input beside the body's own tokens: TOOL_PROMPT_TOKENS when the request has `tools`,
 *   plus each Anthropic-defined client tool's (CLIENT_TOOL_TOKENS: bash, text editor, computer use).
 *
 * - `x-stand-in-reasoning`: hidden reasoning tokens a reasoning model produces before its answer
 *   and bills as output, never shown (chat: in `completion_tokens`; responses: in `output_tokens`;
 *   Gemini: `thoughtsTokenCount`).
 *
 * Gemini's field mask (the `fields` query parameter or `x-goog-fieldmask`) keeps only the
 * top-level fields it names, as Google's front end does.
 *
 * A request body sent with `content-encoding: gzip` is decompressed first, as Google's API front
 * end does. A chat or responses answer names the `service_tier` the request asked for, as OpenAI's
 * do (priority processing is billed at a higher price per token: test/e2e/money-request-shape-evasion.test.ts).
 *
 * Anthropic's prompt caching: a request with a `cache_control` breakpoint anywhere writes its whole
 * input to the cache, reported as Anthropic reports it (`input_tokens` 0, `cache_creation_input_tokens`,
 * and `cache_creation.ephemeral_5m_input_tokens` or `ephemeral_1h_input_tokens` by the `ttl` named;
 * Anthropic bills 5-minute writes at 1.25x the input price and 1-hour writes at 2x).
 *
 * An audio part (a Gemini `inlineData`/`fileData` of mimeType audio/*, a chat `input_audio`) is
 * AUDIO_TOKENS of input, reported by modality as each provider does (test/e2e/money-modalities.test.ts);
 * a Gemini request asking for images (`responseModalities` IMAGE or 2) has its output reported as
 * IMAGE. With `$alt=json;enum-encoding=int` (Google's REST client) Gemini's modalities are written
 * as numbers (MODALITY_NUMBER), as Google does; `x-stand-in-audio-modality: <json>` reports the audio
 * as that modality instead (a number no enum names). `alt`/`$alt` starting with `sse` streams SSE.
 *
 * Every output token is one of WORDS, each a single o200k_base token, so a test can compare an
 * estimate with what the client received.
 *
 * Input a body only points at, billed as providers bill it (test/e2e/money-input-from-elsewhere.test.ts): an image
 * part (chat `image_url`, responses `input_image`) is IMAGE_TOKENS, an Anthropic image by URL
 * ANTHROPIC_IMAGE_TOKENS, a Gemini `fileData` part (a YouTube video) VIDEO_TOKENS; each web search
 * of a hosted tool (Anthropic `web_search_*`, which searches up to its `max_uses`; responses
 * `web_search`/`web_search_preview`, one call) adds SEARCH_TOKENS of results as input, and is
 * reported where the provider reports it (`usage.server_tool_use.web_search_requests`; a
 * `web_search_call` output item).
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as zlib from 'node:zlib';

export const WORDS = [' the', ' of', ' and', ' to', ' in', ' is', ' that', ' for', ' it', ' on'];
export const DEFAULT_TOKENS = 30;
export const TOKEN_DELAY_MS = 2;
/** The gap between the pieces of a body cut by `x-stand-in-cut-inside`, so Envoy reads each alone. */
const CUT_GAP_MS = 20;

export interface MoneyRequest {
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

export interface MoneyUpstream {
  readonly port: number;
  readonly received: MoneyRequest[];
  /** Opens the gate NAME: requests waiting on it (`x-stand-in-gate`) are answered. */
  open(name: string): void;
  close(): Promise<void>;
}

/** The gates of one stand-in (`x-stand-in-gate`): each opens once. */
type Gates = Map<string, { readonly opened: Promise<void>; open(): void }>;
function gateOf(gates: Gates, name: string): { readonly opened: Promise<void>; open(): void } {
  let g = gates.get(name);
  if (!g) {
    let open = (): void => {};
    const opened = new Promise<void>((r) => (open = r));
    gates.set(name, (g = { opened, open }));
  }
  return g;
}

const TRUE = new Set(['true', '1', 'yes', 'on', 't', 'y']);
const lax = (v: unknown): boolean =>
  v === true || (typeof v === 'number' && v !== 0) || (typeof v === 'string' && TRUE.has(v.toLowerCase()));
/**
 * A count in a string as pydantic's lax int reads it (vLLM's and other OpenAI-compatible servers'
 * request models): `"8"`, `" +8 "`, `"8.00"`, `"1_6"` (16: underscores between digits, as Python's
 * int()), trimmed of Unicode white space as Rust's str::trim (U+0085 too); or as proto3's JSON
 * mapping reads an integer field (Google's APIs): a JSON number, exponent included (`"1.6e1"` is 16).
 */
const laxInt = (v: unknown): number | undefined => {
  const m = typeof v === 'string' ? /^[\s\u0085]*\+?(\d+(?:_\d+)*)(?:\.0+)?[\s\u0085]*$/.exec(v) : null;
  const proto = typeof v === 'string' && /^-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$/.test(v);
  const n = typeof v === 'number' ? v : m ? Number(m[1].replace(/_/g, '')) : proto ? Number(v) : NaN;
  return Number.isInteger(n) && n > 0 ? n : undefined;
};
const obj = (v: unknown): Record<string, unknown> =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

/** gpt-4o-mini's count of one high-detail image (2048x2048 scaled to 768x768, 4 tiles: 2,833 + 4 x 5,667). */
export const IMAGE_TOKENS = 25_501;
/** Claude's count of one image of about 1.15 megapixels (width x height / 750). */
export const ANTHROPIC_IMAGE_TOKENS = 1_600;
/** Gemini's count of a one-hour video by fileUri (263 tokens a second). */
export const VIDEO_TOKENS = 946_800;
/**
 * Gemini's count of one minute of audio (32 tokens a second), for an audio part (a Gemini
 * `inlineData`/`fileData` of mimeType audio/*, a chat `input_audio`): reported by modality
 * (Gemini `promptTokensDetails` AUDIO, OpenAI `prompt_tokens_details.audio_tokens`).
 */
export const AUDIO_TOKENS = 1_920;

/**
 * Gemini's ModalityTokenCount.modality by number (google.ai.generativelanguage.v1beta.Modality), for
 * `enum-encoding=int`.
 */
export const MODALITY_NUMBER = { MODALITY_UNSPECIFIED: 0, TEXT: 1, IMAGE: 2, VIDEO: 3, AUDIO: 4, DOCUMENT: 5 } as const;
/** One web search's results, billed as input (OpenAI bills gpt-4o-mini's as a fixed 8,000-token block). */
export const SEARCH_TOKENS = 8_000;

/** Audio input tokens of a request: AUDIO_TOKENS per audio part. */
function audioTokens(body: unknown): number {
  let n = 0;
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      const part = obj(o.inlineData ?? o.inline_data ?? o.fileData ?? o.file_data);
      const mime = part.mimeType ?? part.mime_type;
      if (o.type === 'input_audio' || (typeof mime === 'string' && /^audio\//i.test(mime))) n += AUDIO_TOKENS;
      Object.values(v).forEach(walk);
    }
  };
  walk(body);
  return n;
}

/** Input tokens as the provider counts them: the words of every string of the request, plus the media it points at. */
function inputTokens(body: unknown): number {
  let n = 0;
  const walk = (v: unknown): void => {
    if (typeof v === 'string') n += v.split(/\s+/).filter(Boolean).length;
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      if (o.type === 'image_url' || o.type === 'input_image') n += IMAGE_TOKENS;
      if (o.type === 'image' && obj(o.source).type === 'url') n += ANTHROPIC_IMAGE_TOKENS;
      if (typeof obj(o.fileData ?? o.file_data).fileUri === 'string' || typeof obj(o.file_data).file_uri === 'string')
        n += VIDEO_TOKENS;
      Object.values(v).forEach(walk);
    }
  };
  walk(body);
  return Math.max(1, n);
}

/**
 * Web searches a request's hosted tools make (Anthropic: up to max_uses, here all of them; OpenAI: one call, and one
 * for a stored prompt pmpt_search...).
 */
function webSearches(body: Record<string, unknown>, path: string): number {
  const tools = Array.isArray(body.tools) ? body.tools.map(obj) : [];
  let n = 0;
  for (const t of tools) {
    const type = typeof t.type === 'string' ? t.type : '';
    if (path === '/v1/messages' && type.startsWith('web_search_')) n += laxInt(t.max_uses) ?? 1;
    if (path === '/v1/responses' && (type === 'web_search' || type === 'web_search_preview')) n += 1;
  }
  // A stored prompt (Responses `prompt.id`) whose id starts pmpt_search holds a web_search tool of its own.
  const stored = obj(body.prompt).id;
  if (path === '/v1/responses' && typeof stored === 'string' && stored.startsWith('pmpt_search')) n += 1;
  return n;
}

/**
 * Anthropic's tool use system prompt (current models, tool_choice auto or none), billed as input whenever `tools` is
 * set.
 */
export const TOOL_PROMPT_TOKENS = 346;
/**
 * Anthropic-defined client tools' own prompts, by type prefix, billed as input: bash 245, text
 * editor 700, computer use 735 plus its system prompt (466-499: 499 here).
 */
export const CLIENT_TOOL_TOKENS: ReadonlyArray<readonly [string, number]> = [
  ['bash_', 245],
  ['text_editor_', 700],
  ['computer_', 735 + 499],
];

/** Anthropic's hidden tool prompts for a request's tools. */
function toolPromptTokens(body: Record<string, unknown>): number {
  const tools = Array.isArray(body.tools) ? body.tools.map(obj) : [];
  if (tools.length === 0) return 0;
  let n = TOOL_PROMPT_TOKENS;
  for (const t of tools) {
    const type = typeof t.type === 'string' ? t.type : '';
    n += CLIENT_TOOL_TOKENS.find(([p]) => type.startsWith(p))?.[1] ?? 0;
  }
  return n;
}

/** The cache TTL of a request's `cache_control` breakpoints ('1h' if any names it), or undefined without one. */
function cacheTtl(body: unknown): '5m' | '1h' | undefined {
  let ttl: '5m' | '1h' | undefined;
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      const cc = obj(o.cache_control);
      if (cc.type === 'ephemeral') ttl = cc.ttl === '1h' || ttl === '1h' ? '1h' : '5m';
      Object.values(o).forEach(walk);
    }
  };
  walk(body);
  return ttl;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function startMoneyUpstream(): Promise<MoneyUpstream> {
  const received: MoneyRequest[] = [];
  const gates: Gates = new Map();
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let text: string;
      try {
        text = (
          /^\s*gzip\s*$/i.test(String(req.headers['content-encoding'] ?? '')) ? zlib.gunzipSync(raw) : raw
        ).toString('utf8');
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'the body is not gzip' } }));
        return;
      }
      received.push({ path: req.url ?? '', headers: req.headers, body: text });
      void answer(req, res, text, gates).catch(() => res.destroy());
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as AddressInfo).port,
        received,
        open: (name: string) => gateOf(gates, name).open(),
        close: () =>
          new Promise<void>((r) => {
            for (const g of gates.values()) g.open();
            for (const s of sockets) s.destroy();
            server.close(() => r());
          }),
      }),
    ),
  );
}

/** Writes a body cut in the middle of every occurrence of `text`, each piece a moment after the last. */
async function writeCutInside(res: http.ServerResponse, payload: string, text: string): Promise<void> {
  const half = Math.max(1, Math.floor(text.length / 2));
  let from = 0;
  for (let at = payload.indexOf(text); at >= 0 && !res.destroyed; at = payload.indexOf(text, at + text.length)) {
    res.write(payload.slice(from, at + half));
    from = at + half;
    await sleep(CUT_GAP_MS);
  }
  if (!res.destroyed) res.end(payload.slice(from));
}

async function answer(req: http.IncomingMessage, res: http.ServerResponse, text: string, gates: Gates): Promise<void> {
  let body: Record<string, unknown> = {};
  try {
    body = obj(JSON.parse(text));
  } catch {
    /* an empty body: Gemini's model is in the path */
  }
  const url = new URL(req.url ?? '/', 'http://x');
  const path = url.pathname.replace(/^\/alt(?=\/)/, '');
  const h = (n: string): string | undefined =>
    typeof req.headers[n] === 'string' ? (req.headers[n] as string) : undefined;
  const gate = h('x-stand-in-gate');
  if (gate !== undefined) {
    await gateOf(gates, gate).opened;
    if (res.destroyed || req.socket.destroyed) return;
  }
  const hold = Number(h('x-stand-in-hold-ms') ?? 0);
  if (hold > 0) {
    await sleep(hold);
    if (res.destroyed || req.socket.destroyed) return;
  }
  const usageOverride = h('x-stand-in-usage');
  const delay = Number(h('x-stand-in-delay-ms') ?? TOKEN_DELAY_MS);
  const gen = { ...obj(body.generationConfig), ...obj(body.generation_config) };
  const max =
    laxInt(body.max_completion_tokens) ??
    laxInt(body.max_tokens) ??
    laxInt(body.max_output_tokens) ??
    laxInt(gen.maxOutputTokens) ??
    laxInt(gen.max_output_tokens);
  const tokens = max ?? Number(h('x-stand-in-tokens') ?? DEFAULT_TOKENS);
  const answers = laxInt(body.n) ?? laxInt(gen.candidateCount) ?? laxInt(gen.candidate_count) ?? 1;
  const searches = webSearches(body, path);
  const audio = audioTokens(body);
  const input = inputTokens(body) + searches * SEARCH_TOKENS + audio;
  const count = (n: number): unknown =>
    usageOverride === undefined || usageOverride === 'omit' ? n : JSON.parse(usageOverride);
  const omit = usageOverride === 'omit';
  const word = (i: number): string => WORDS[i % WORDS.length];
  const full = Array.from({ length: tokens }, (_, i) => word(i)).join('');
  const reasoning = Number(h('x-stand-in-reasoning') ?? 0);
  const out = tokens * answers + reasoning;
  const tier =
    typeof body.service_tier === 'string'
      ? { service_tier: body.service_tier === 'auto' ? 'default' : body.service_tier }
      : {};

  const encoding = h('x-stand-in-encoding');
  const headersFirst = h('x-stand-in-headers-first');
  const cutInside = h('x-stand-in-cut-inside');
  const send = (status: number, contentType: string, payload: string): void => {
    if (cutInside && !encoding) {
      res.writeHead(status, { 'content-type': contentType });
      void writeCutInside(res, payload, cutInside);
      return;
    }
    if (headersFirst !== undefined && !encoding) {
      res.writeHead(status, { 'content-type': contentType });
      res.flushHeaders();
      void gateOf(gates, headersFirst).opened.then(() => {
        if (!res.destroyed) res.end(payload);
      });
      return;
    }
    if (encoding) {
      res.writeHead(status, { 'content-type': contentType, 'content-encoding': encoding });
      res.end(zlib.gzipSync(payload));
    } else {
      res.writeHead(status, { 'content-type': contentType });
      res.end(payload);
    }
  };
  /** An SSE or JSON-array stream, one piece per token, written as it goes (a client may leave mid-way). */
  const stream = async (contentType: string, pieces: string[]): Promise<void> => {
    if (encoding || cutInside) return send(200, contentType, pieces.join(''));
    res.writeHead(200, { 'content-type': contentType });
    for (const p of pieces) {
      if (res.destroyed) return;
      res.write(p);
      if (delay > 0) await sleep(delay);
    }
    res.end();
  };
  const sse = (event: string | undefined, data: unknown): string =>
    `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;

  if (path === '/v1/chat/completions') {
    const usage = {
      prompt_tokens: count(input),
      completion_tokens: count(out),
      total_tokens: count(input + out),
      ...(audio > 0 ? { prompt_tokens_details: { cached_tokens: 0, audio_tokens: count(audio) } } : {}),
    };
    if (!lax(body.stream)) {
      const choices = Array.from({ length: answers }, (_, index) => ({
        index,
        message: { role: 'assistant', content: full },
        finish_reason: 'stop',
      }));
      return send(
        200,
        'application/json',
        JSON.stringify({
          id: 'chatcmpl-money',
          object: 'chat.completion',
          model: body.model,
          choices,
          ...tier,
          ...(omit ? {} : { usage }),
        }),
      );
    }
    const pieces: string[] = [];
    for (let i = 0; i < tokens; i++) {
      for (let index = 0; index < answers; index++)
        pieces.push(
          sse(undefined, {
            id: 'chatcmpl-money',
            object: 'chat.completion.chunk',
            choices: [{ index, delta: { content: word(i) }, finish_reason: null }],
          }),
        );
    }
    for (let index = 0; index < answers; index++)
      pieces.push(
        sse(undefined, {
          id: 'chatcmpl-money',
          object: 'chat.completion.chunk',
          choices: [{ index, delta: {}, finish_reason: 'stop' }],
        }),
      );
    if (lax(obj(body.stream_options).include_usage) && !omit)
      pieces.push(sse(undefined, { id: 'chatcmpl-money', object: 'chat.completion.chunk', choices: [], usage }));
    pieces.push('data: [DONE]\n\n');
    return stream('text/event-stream', pieces);
  }
  if (path === '/v1/responses') {
    const usage = {
      input_tokens: count(input),
      output_tokens: count(tokens + reasoning),
      total_tokens: count(input + tokens + reasoning),
    };
    // As OpenAI does, every response object (response.created, response.completed) echoes the request's instructions
    // and tools.
    const response = (status: string, withUsage: boolean) => ({
      id: 'resp_money',
      object: 'response',
      status,
      model: body.model,
      instructions: body.instructions ?? null,
      tools: body.tools ?? [],
      ...tier,
      output:
        status === 'completed'
          ? [
              ...Array.from({ length: searches }, (_, i) => ({
                type: 'web_search_call',
                id: `ws_${i}`,
                status: 'completed',
                action: { type: 'search', query: 'q' },
              })),
              { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: full }] },
            ]
          : [],
      usage: withUsage && !omit ? usage : null,
    });
    if (!lax(body.stream)) return send(200, 'application/json', JSON.stringify(response('completed', true)));
    const pieces = [sse('response.created', { type: 'response.created', response: response('in_progress', false) })];
    for (let i = 0; i < tokens; i++)
      pieces.push(sse('response.output_text.delta', { type: 'response.output_text.delta', delta: word(i) }));
    pieces.push(sse('response.output_text.done', { type: 'response.output_text.done', text: full }));
    pieces.push(sse('response.completed', { type: 'response.completed', response: response('completed', true) }));
    return stream('text/event-stream', pieces);
  }
  if (path === '/v1/embeddings') {
    return send(
      200,
      'application/json',
      JSON.stringify({
        object: 'list',
        data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2] }],
        ...(omit ? {} : { usage: { prompt_tokens: count(input), total_tokens: count(input) } }),
      }),
    );
  }
  if (path === '/v1/messages') {
    const billedIn = input + (h('x-stand-in-tool-prompts') === 'on' ? toolPromptTokens(body) : 0);
    const ttl = cacheTtl(body);
    const inputUsage =
      ttl === undefined
        ? { input_tokens: count(billedIn) }
        : {
            input_tokens: count(0),
            cache_creation_input_tokens: count(billedIn),
            cache_read_input_tokens: count(0),
            cache_creation: {
              ephemeral_5m_input_tokens: count(ttl === '5m' ? billedIn : 0),
              ephemeral_1h_input_tokens: count(ttl === '1h' ? billedIn : 0),
            },
          };
    const message = {
      id: 'msg_money',
      type: 'message',
      role: 'assistant',
      model: body.model,
      content: [{ type: 'text', text: full }],
      stop_reason: 'end_turn',
      usage: {
        ...inputUsage,
        output_tokens: count(tokens),
        ...(searches > 0 ? { server_tool_use: { web_search_requests: searches } } : {}),
      },
    };
    if (!lax(body.stream))
      return send(200, 'application/json', JSON.stringify(omit ? { ...message, usage: undefined } : message));
    const pieces = [
      sse('message_start', {
        type: 'message_start',
        message: {
          ...message,
          content: [],
          stop_reason: null,
          ...(omit ? { usage: undefined } : { usage: { ...inputUsage, output_tokens: count(1) } }),
        },
      }),
      sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
    ];
    for (let i = 0; i < tokens; i++)
      pieces.push(
        sse('content_block_delta', {
          type: 'content_block_delta',
          index: 0,
          delta: { type: 'text_delta', text: word(i) },
        }),
      );
    pieces.push(sse('content_block_stop', { type: 'content_block_stop', index: 0 }));
    // Cumulative counts on request (the SDKs' MessageDeltaUsage), without the breakdown by TTL.
    const deltaInput =
      h('x-stand-in-delta-usage') === 'cumulative'
        ? Object.fromEntries(Object.entries(inputUsage).filter(([k]) => k !== 'cache_creation'))
        : {};
    pieces.push(
      sse('message_delta', {
        type: 'message_delta',
        delta: { stop_reason: 'end_turn' },
        ...(omit ? {} : { usage: { ...deltaInput, output_tokens: count(tokens) } }),
      }),
    );
    pieces.push(sse('message_stop', { type: 'message_stop' }));
    return stream('text/event-stream', pieces);
  }
  const m = /^\/v1beta\/models\/[^/]+:(\w+)$/.exec(path);
  if (m) {
    const method = m[1];
    if (method === 'embedContent')
      return send(200, 'application/json', JSON.stringify({ embedding: { values: [0.1, 0.2] } }));
    if (method === 'batchEmbedContents')
      return send(
        200,
        'application/json',
        JSON.stringify({
          embeddings: (Array.isArray(body.requests) ? body.requests : [0]).map(() => ({ values: [0.1] })),
        }),
      );
    if (method === 'countTokens') return send(200, 'application/json', JSON.stringify({ totalTokens: input }));
    // `$alt` (or `alt`): `json;enum-encoding=int`, as Google's REST client sends, writes enums as numbers.
    const alt = url.searchParams.get('$alt') ?? url.searchParams.get('alt') ?? 'json';
    const intEnums = /;enum-encoding=int$/i.test(alt);
    const named = (name: keyof typeof MODALITY_NUMBER): string | number => (intEnums ? MODALITY_NUMBER[name] : name);
    const audioAs =
      h('x-stand-in-audio-modality') !== undefined
        ? (JSON.parse(h('x-stand-in-audio-modality') as string) as unknown)
        : named('AUDIO');
    const details =
      audio > 0
        ? {
            promptTokensDetails: [
              { modality: named('TEXT'), tokenCount: count(input - audio) },
              { modality: audioAs, tokenCount: count(audio) },
            ],
          }
        : {};
    // An answer with an image (responseModalities IMAGE, or 2): every output token is the image's.
    const gen = (body.generationConfig ?? {}) as Record<string, unknown>;
    const imageOut =
      Array.isArray(gen.responseModalities) && gen.responseModalities.some((m) => m === 'IMAGE' || m === 2);
    const outDetails = (done: number) =>
      imageOut ? { candidatesTokensDetails: [{ modality: named('IMAGE'), tokenCount: count(done - reasoning) }] } : {};
    const usageMetadata = (done: number) => ({
      promptTokenCount: count(input),
      ...details,
      ...(done > 0
        ? {
            candidatesTokenCount: count(done - reasoning),
            ...outDetails(done),
            ...(reasoning > 0 ? { thoughtsTokenCount: count(reasoning) } : {}),
          }
        : {}),
      totalTokenCount: count(input + done),
    });
    const mask = (url.searchParams.get('fields') ?? h('x-goog-fieldmask'))?.split(',').map((f) => f.trim());
    const masked = (o: Record<string, unknown>): Record<string, unknown> =>
      mask ? Object.fromEntries(Object.entries(o).filter(([k]) => mask.includes(k))) : o;
    // A request declaring Google Search grounding is grounded: its answer carries groundingMetadata
    // (in a stream, on the last chunk), which Google bills per grounded prompt.
    const grounded = (Array.isArray(body.tools) ? body.tools.map(obj) : []).some(
      (t) => t.googleSearch !== undefined || t.google_search !== undefined,
    );
    const grounding = {
      groundingMetadata: {
        webSearchQueries: ['q'],
        groundingChunks: [{ web: { uri: 'https://example.com', title: 'x' } }],
      },
    };
    const candidates = (t: string, last = true) =>
      Array.from({ length: answers }, (_, index) => ({
        index,
        content: { role: 'model', parts: [{ text: t }] },
        ...(grounded && last ? grounding : {}),
      }));
    if (method === 'generateContent')
      return send(
        200,
        'application/json',
        JSON.stringify(
          masked({
            candidates: candidates(full),
            ...(omit ? {} : { usageMetadata: usageMetadata(out) }),
            modelVersion: 'money',
          }),
        ),
      );
    // streamGenerateContent: SSE with alt=sse, else a JSON array. Each chunk reports the prompt;
    // only the last one the output (as Gemini does).
    const chunk = (i: number) =>
      masked({
        candidates: candidates(word(i), i === tokens - 1),
        ...(omit ? {} : { usageMetadata: usageMetadata(i === tokens - 1 ? out : 0) }),
      });
    const asSse = /^sse/i.test(alt);
    const pieces = Array.from({ length: tokens }, (_, i) =>
      asSse ? sse(undefined, chunk(i)) : `${i === 0 ? '[' : ','}${JSON.stringify(chunk(i))}`,
    );
    if (!asSse) pieces.push(']');
    return stream(asSse ? 'text/event-stream' : 'application/json', pieces);
  }
  send(404, 'application/json', JSON.stringify({ error: { message: `no such path ${path}` } }));
}

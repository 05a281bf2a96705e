/**
 * The demo upstream: a small stand-in model provider (plain HTTP, loopback) that answers the
 * endpoints of the spec in their providers' real response shapes, so stock SDKs work against the
 * gateway without a network: OpenAI chat completions, responses and embeddings; Anthropic messages
 * and count_tokens; Gemini generateContent, streamGenerateContent, countTokens, embedContent and
 * batchEmbedContents. Streams are SSE, chunk by chunk; every answer carries usage figures
 * (deterministic: about one token per four bytes of prompt), which the meter reads.
 *
 * It echoes what it received where that helps a user see the gateway at work: the reply text
 * names the model, the key id modelgate set, and whether any client key header arrived (it never
 * should); `x-demo-received-headers` lists the header names (never values) it got.
 *
 * It answers what a request asks for (reply.ts): JSON that fits the schema in JSON mode, a call of
 * the forced tool in the protocol's own shape, so that coding agents (gemini-cli's model router,
 * Claude Code, Codex CLI) complete a short task against it without retries.
 *
 * Used by `npm start` (modelgate up --demo-upstream), the end-to-end tests and the benchmarks.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HEADER } from '../contract/headers';
import { demoContent } from './reply';

/** One request as the upstream received it (for tests that check what crossed the gateway). */
export interface ReceivedRequest {
  readonly method: string;
  readonly url: string;
  /** Lowercase names; repeated headers as arrays, as node:http keeps them. */
  readonly headers: IncomingMessage['headers'];
  /** Names and values exactly as received, in order. */
  readonly rawHeaders: readonly string[];
  readonly body: Buffer;
  readonly trailers: Record<string, string | undefined>;
  readonly httpVersion: string;
}

export interface DemoUpstreamOptions {
  readonly host?: string;
  readonly port?: number;
  /** Delay between stream chunks (default 15 ms; 0 for benchmarks). */
  readonly chunkDelayMs?: number;
  /** Called for every request, after its body has arrived and before it is answered. */
  readonly onRequest?: (r: ReceivedRequest) => void;
  /**
   * Lets a test take over an answer: return true after writing the response yourself. Called
   * after onRequest.
   */
  readonly override?: (r: ReceivedRequest, res: ServerResponse) => boolean;
}

export interface DemoUpstream {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/** Header names that would carry a client's key; none should ever reach an upstream. */
const KEY_HEADERS = [
  'authorization',
  'x-api-key',
  'x-goog-api-key',
  'x-vendor-api-key',
  'api-key',
  'anthropic-api-key',
  'proxy-authorization',
];

type Json = Record<string, unknown>;

/** About one token per four bytes, at least one: deterministic, so tests can predict the debit. */
export function demoTokens(text: string): number {
  return Math.max(1, Math.ceil(Buffer.byteLength(text) / 4));
}

function parseJson(body: Buffer): Json {
  try {
    const v = JSON.parse(body.toString('utf8')) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {};
  } catch {
    // not JSON: the demo answers as for an empty request
    return {};
  }
}

/** All the text of a request body, whatever the protocol (for the token count). */
function promptText(body: Json): string {
  const out: string[] = [];
  const walk = (v: unknown, key: string): void => {
    if (typeof v === 'string') {
      if (['content', 'text', 'input', 'system', 'instructions', 'prompt'].includes(key)) out.push(v);
    } else if (Array.isArray(v)) v.forEach((x) => walk(x, key));
    else if (v && typeof v === 'object')
      for (const [k, x] of Object.entries(v))
        walk(x, typeof x === 'string' ? k : key === 'content' || key === 'input' ? key : k);
  };
  for (const [k, v] of Object.entries(body)) if (k !== 'model') walk(v, k);
  return out.join('\n');
}

function replyText(r: ReceivedRequest, model: string): string {
  const keyId = r.headers[HEADER.keyId] ?? '(none)';
  const leaked = KEY_HEADERS.filter((h) => r.headers[h] !== undefined);
  return (
    `Hello from the demo upstream. You asked ${model} as key ${String(keyId)}; ` +
    (leaked.length === 0 ? 'no client key header reached me.' : `client key headers reached me: ${leaked.join(', ')}!`)
  );
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function sendJson(res: ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...extra });
  res.end(text);
}

/** Writes SSE events one by one, with a pause between them. */
async function sendSse(
  res: ServerResponse,
  events: Array<{ event?: string; data: string }>,
  delayMs: number,
  extra: Record<string, string>,
): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...extra });
  for (let i = 0; i < events.length; i++) {
    if (i > 0 && delayMs > 0) await sleep(delayMs);
    if (res.destroyed) return;
    const e = events[i];
    res.write(`${e.event ? `event: ${e.event}\n` : ''}data: ${e.data}\n\n`);
  }
  res.end();
}

function words(text: string): string[] {
  return text.split(/(?<= )/);
}

function float32Base64(values: number[]): string {
  return Buffer.from(new Float32Array(values).buffer).toString('base64');
}

function embedding(text: string): number[] {
  const v = [0, 0, 0, 0, 0, 0, 0, 0];
  for (let i = 0; i < text.length; i++) v[i % 8] += text.charCodeAt(i) / 1000;
  return v.map((x) => Math.round(x * 1000) / 1000);
}

/** Answers one request; the path may carry any prefix before /v1 or /v1beta (the alternate route). */
async function answer(r: ReceivedRequest, res: ServerResponse, delayMs: number): Promise<void> {
  const url = new URL(r.url, 'http://upstream');
  const at = url.pathname.search(/\/v1(beta)?\//);
  const path = at === -1 ? url.pathname : url.pathname.slice(at);
  const body = parseJson(r.body);
  const extra = { 'x-demo-received-headers': Object.keys(r.headers).sort().join(',') };
  const created = Math.floor(Date.now() / 1000);
  const id = `demo-${Math.random().toString(36).slice(2, 10)}`;

  const gemini = /^\/v1beta\/models\/([^/]+):(\w+)$/.exec(path);
  if (r.method === 'POST' && gemini) {
    const [, modelSeg, method] = gemini;
    const model = decodeURIComponent(modelSeg);
    const input = demoTokens(promptText(body));
    const content = demoContent(body, replyText(r, model));
    const text = content.kind === 'text' ? content.text : '';
    const output = demoTokens(content.kind === 'text' ? text : JSON.stringify(content.args));
    const usageMetadata = { promptTokenCount: input, candidatesTokenCount: output, totalTokenCount: input + output };
    const candidate = (t: string, done: boolean): Json => ({
      content: {
        parts: [content.kind === 'tool' ? { functionCall: { name: content.name, args: content.args } } : { text: t }],
        role: 'model',
      },
      ...(done ? { finishReason: 'STOP' } : {}),
      index: 0,
    });
    switch (method) {
      case 'generateContent':
        return sendJson(
          res,
          200,
          { candidates: [candidate(text, true)], usageMetadata, modelVersion: model, responseId: id },
          extra,
        );
      case 'streamGenerateContent': {
        const parts = content.kind === 'tool' ? [''] : words(text);
        const chunks = parts.map((w, i) => ({
          candidates: [candidate(w, i === parts.length - 1)],
          // Gemini repeats usageMetadata on chunks; the last one holds the totals.
          usageMetadata: i === parts.length - 1 ? usageMetadata : { promptTokenCount: input, totalTokenCount: input },
          modelVersion: model,
          responseId: id,
        }));
        if (url.searchParams.get('alt') === 'sse')
          return sendSse(
            res,
            chunks.map((c) => ({ data: JSON.stringify(c) })),
            delayMs,
            extra,
          );
        // Without alt=sse Gemini streams one JSON array, element by element.
        res.writeHead(200, { 'content-type': 'application/json', ...extra });
        for (let i = 0; i < chunks.length; i++) {
          if (i > 0 && delayMs > 0) await sleep(delayMs);
          res.write(`${i === 0 ? '[' : ',\r\n'}${JSON.stringify(chunks[i])}`);
        }
        return void res.end(']');
      }
      case 'countTokens':
        return sendJson(res, 200, { totalTokens: input }, extra);
      case 'embedContent':
        return sendJson(res, 200, { embedding: { values: embedding(promptText(body)) } }, extra);
      case 'batchEmbedContents': {
        const requests = Array.isArray(body.requests) ? (body.requests as Json[]) : [];
        return sendJson(res, 200, { embeddings: requests.map((q) => ({ values: embedding(promptText(q)) })) }, extra);
      }
    }
  }

  const model = typeof body.model === 'string' ? body.model : '(no model)';
  const input = demoTokens(promptText(body));
  const content = demoContent(body, replyText(r, model));
  const text = content.kind === 'text' ? content.text : '';
  const args = content.kind === 'tool' ? JSON.stringify(content.args) : '';
  const output = demoTokens(content.kind === 'text' ? text : args);
  const stream = body.stream === true;

  if (r.method === 'POST' && path === '/v1/chat/completions') {
    const usage = { prompt_tokens: input, completion_tokens: output, total_tokens: input + output };
    const call =
      content.kind === 'tool'
        ? { id: `call_${id}`, type: 'function', function: { name: content.name, arguments: args } }
        : undefined;
    const finish = call ? 'tool_calls' : 'stop';
    if (!stream) {
      return sendJson(
        res,
        200,
        {
          id: `chatcmpl-${id}`,
          object: 'chat.completion',
          created,
          model,
          choices: [
            {
              index: 0,
              message: {
                role: 'assistant',
                content: call ? null : text,
                refusal: null,
                ...(call ? { tool_calls: [call] } : {}),
              },
              logprobs: null,
              finish_reason: finish,
            },
          ],
          usage,
          system_fingerprint: 'demo',
        },
        extra,
      );
    }
    const includeUsage = (body.stream_options as Json | undefined)?.include_usage === true;
    const chunk = (delta: Json, fin: string | null): Json => ({
      id: `chatcmpl-${id}`,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: fin }],
    });
    const deltas = call
      ? [
          chunk(
            {
              tool_calls: [
                { index: 0, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } },
              ],
            },
            null,
          ),
          chunk({ tool_calls: [{ index: 0, function: { arguments: args } }] }, null),
        ]
      : words(text).map((w) => chunk({ content: w }, null));
    const events = [chunk({ role: 'assistant', content: call ? null : '' }, null), ...deltas, chunk({}, finish)].map(
      (c) => ({ data: JSON.stringify(includeUsage ? { ...c, usage: null } : c) }),
    );
    if (includeUsage)
      events.push({
        data: JSON.stringify({
          id: `chatcmpl-${id}`,
          object: 'chat.completion.chunk',
          created,
          model,
          choices: [],
          usage,
        }),
      });
    events.push({ data: '[DONE]' });
    return sendSse(res, events, delayMs, extra);
  }

  if (r.method === 'POST' && path === '/v1/responses') {
    const usage = {
      input_tokens: input,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: input + output,
    };
    const message = (t: string, status: string): Json => ({
      type: 'message',
      id: `msg_${id}`,
      status,
      role: 'assistant',
      content: t === '' ? [] : [{ type: 'output_text', text: t, annotations: [] }],
    });
    const response = (status: string, out: Json[], u: Json | null): Json => ({
      id: `resp_${id}`,
      object: 'response',
      created_at: created,
      status,
      model,
      output: out,
      usage: u,
      error: null,
      incomplete_details: null,
      instructions: null,
      metadata: {},
      parallel_tool_calls: true,
      temperature: 1,
      tool_choice: 'auto',
      tools: [],
      top_p: 1,
    });
    let seq = 0;
    const ev = (type: string, data: Json): { event: string; data: string } => ({
      event: type,
      data: JSON.stringify({ type, sequence_number: seq++, ...data }),
    });
    // A request declaring the hosted web_search tool (Codex, in every turn) gets one search first, as
    // OpenAI answers it: a web_search_call output item, and in a stream the events of the call.
    const search = hostedWebSearch(body);
    const ws = (status: string): Json => ({
      type: 'web_search_call',
      id: `ws_${id}`,
      status,
      action: { type: 'search', query: 'modelgate demo' },
    });
    const searched: Json[] = search ? [ws('completed')] : [];
    const at = searched.length;
    const searchEvents = search
      ? [
          ev('response.output_item.added', { output_index: 0, item: ws('in_progress') }),
          ev('response.web_search_call.in_progress', { output_index: 0, item_id: `ws_${id}` }),
          ev('response.web_search_call.searching', { output_index: 0, item_id: `ws_${id}` }),
          ev('response.web_search_call.completed', { output_index: 0, item_id: `ws_${id}` }),
          ev('response.output_item.done', { output_index: 0, item: ws('completed') }),
        ]
      : [];
    if (content.kind === 'tool') {
      const fc = (a: string, status: string): Json => ({
        type: 'function_call',
        id: `fc_${id}`,
        call_id: `call_${id}`,
        name: content.name,
        arguments: a,
        status,
      });
      if (!stream) return sendJson(res, 200, response('completed', [...searched, fc(args, 'completed')], usage), extra);
      return sendSse(
        res,
        [
          ev('response.created', { response: response('in_progress', [], null) }),
          ...searchEvents,
          ev('response.output_item.added', { output_index: at, item: fc('', 'in_progress') }),
          ev('response.function_call_arguments.delta', { item_id: `fc_${id}`, output_index: at, delta: args }),
          ev('response.function_call_arguments.done', { item_id: `fc_${id}`, output_index: at, arguments: args }),
          ev('response.output_item.done', { output_index: at, item: fc(args, 'completed') }),
          ev('response.completed', { response: response('completed', [...searched, fc(args, 'completed')], usage) }),
        ],
        delayMs,
        extra,
      );
    }
    if (!stream)
      return sendJson(res, 200, response('completed', [...searched, message(text, 'completed')], usage), extra);
    const events = [
      ev('response.created', { response: response('in_progress', [], null) }),
      ...searchEvents,
      ev('response.output_item.added', { output_index: at, item: message('', 'in_progress') }),
      ...words(text).map((w) =>
        ev('response.output_text.delta', { item_id: `msg_${id}`, output_index: at, content_index: 0, delta: w }),
      ),
      ev('response.output_text.done', { item_id: `msg_${id}`, output_index: at, content_index: 0, text }),
      ev('response.output_item.done', { output_index: at, item: message(text, 'completed') }),
      ev('response.completed', { response: response('completed', [...searched, message(text, 'completed')], usage) }),
    ];
    return sendSse(res, events, delayMs, extra);
  }

  if (r.method === 'POST' && path === '/v1/embeddings') {
    const inputs = Array.isArray(body.input) ? body.input.map(String) : [String(body.input ?? '')];
    const base64 = body.encoding_format === 'base64';
    return sendJson(
      res,
      200,
      {
        object: 'list',
        model,
        data: inputs.map((t, index) => ({
          object: 'embedding',
          index,
          embedding: base64 ? float32Base64(embedding(t)) : embedding(t),
        })),
        usage: { prompt_tokens: input, total_tokens: input },
      },
      extra,
    );
  }

  if (r.method === 'POST' && path === '/v1/messages/count_tokens')
    return sendJson(res, 200, { input_tokens: input }, extra);

  if (r.method === 'POST' && path === '/v1/messages') {
    const usage = {
      input_tokens: input,
      output_tokens: output,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    };
    const msg = (content: Json[], u: Json, stop: string | null): Json => ({
      id: `msg_${id}`,
      type: 'message',
      role: 'assistant',
      model,
      content,
      stop_reason: stop,
      stop_sequence: null,
      usage: u,
    });
    const tool =
      content.kind === 'tool'
        ? { type: 'tool_use', id: `toolu_${id}`, name: content.name, input: content.args }
        : undefined;
    const stop = tool ? 'tool_use' : 'end_turn';
    if (!stream) return sendJson(res, 200, msg([tool ?? { type: 'text', text }], usage, stop), extra);
    const ev = (type: string, data: Json): { event: string; data: string } => ({
      event: type,
      data: JSON.stringify({ type, ...data }),
    });
    return sendSse(
      res,
      [
        ev('message_start', { message: msg([], { ...usage, output_tokens: 1 }, null) }),
        ev('content_block_start', {
          index: 0,
          content_block: tool ? { ...tool, input: {} } : { type: 'text', text: '' },
        }),
        ev('ping', {}),
        ...(tool
          ? [ev('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: args } })]
          : words(text).map((w) => ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: w } }))),
        ev('content_block_stop', { index: 0 }),
        ev('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: output } }),
        ev('message_stop', {}),
      ],
      delayMs,
      extra,
    );
  }

  sendJson(res, 404, { error: { message: `the demo upstream has no ${r.method} ${path}`, type: 'not_found' } }, extra);
}

/** Starts the demo upstream; resolves once it listens. */
export function startDemoUpstream(opts: DemoUpstreamOptions = {}): Promise<DemoUpstream> {
  const delayMs = opts.chunkDelayMs ?? 15;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: ReceivedRequest = {
        method: req.method ?? '',
        url: req.url ?? '/',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks),
        trailers: { ...req.trailers },
        httpVersion: req.httpVersion,
      };
      opts.onRequest?.(r);
      if (opts.override?.(r, res)) return;
      answer(r, res, delayMs).catch(() => res.destroy());
    });
  });
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => {
      const { port, address } = server.address() as AddressInfo;
      resolve({
        port,
        url: `http://${address.includes(':') ? `[${address}]` : address}:${port}`,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

/** Whether a Responses request declares the hosted web_search tool (web_search, web_search_preview...). */
function hostedWebSearch(body: Json): boolean {
  const tools = Array.isArray(body.tools) ? (body.tools as unknown[]) : [];
  return tools.some(
    (t) =>
      t !== null &&
      typeof t === 'object' &&
      typeof (t as Json).type === 'string' &&
      ((t as Json).type as string).startsWith('web_search'),
  );
}

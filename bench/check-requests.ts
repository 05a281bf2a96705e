/**
 * The FIXED request mixes of the benchmark, as the CheckRequests Envoy would send for them
 * (shape: Envoy's ext_authz check_request_utils.cc, as src/envoy/check-request.ts builds them): lowercase `headers`
 * including `:path` (with query), `:method`, `:authority`, `:scheme`, `x-request-id` and
 * `x-envoy-auth-partial-body`; the body as `raw_body` bytes (`pack_as_bytes: true`).
 *
 * Nothing here is tuned to the service: the bodies are what an SDK sends, and the 1 MiB body puts
 * `model` last because that is where OpenAI SDKs serialise it after `messages`.
 */
import { DEMO_KEYS } from '../test/support/demo-keys';
import type { CheckRequest } from '../src/envoy/protos';

/** What the service must answer for a request: allow, or deny with this `x-modelgate-reason`. */
export type Expectation = { readonly allowed: true } | { readonly allowed: false; readonly reason: string };

/** One request of a mix, with the decision it must get and its share of the load generators. */
export interface MixPart {
  readonly name: string;
  readonly request: CheckRequest;
  readonly expect: Expectation;
  /** Relative number of load-generator clients driving this request (9:1 for the mixed case). */
  readonly clientShare: number;
}

export interface Mix {
  readonly id: 'small_chat' | 'body_1mib_model_last' | 'generative_path' | 'mixed_90_10';
  readonly title: string;
  readonly parts: readonly MixPart[];
}

export interface HttpRequestSpec {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

const AUTHORITY = 'gw.example';
/** A fixed stream start time so every run encodes byte-identical requests. */
const REQUEST_TIME = { seconds: '1767225600', nanos: 123000000 };

/** Headers an OpenAI-style Python SDK sends, as Envoy forwards them (lowercase). */
export function sdkHeaders(extra: Record<string, string>, bodyLength: number): Record<string, string> {
  return {
    accept: 'application/json',
    'content-type': 'application/json',
    'content-length': String(bodyLength),
    'user-agent': 'OpenAI/Python 1.54.0',
    'x-stainless-lang': 'python',
    'x-stainless-package-version': '1.54.0',
    'x-stainless-runtime': 'CPython',
    'x-forwarded-proto': 'http',
    ...extra,
  };
}

/** The CheckRequest Envoy builds for an HTTP/1.1 request (with_request_body, pack_as_bytes). */
export function checkRequestFor(spec: HttpRequestSpec, requestId: string): CheckRequest {
  const headers: Record<string, string> = {
    ':authority': AUTHORITY,
    ':method': spec.method,
    ':path': spec.path,
    ':scheme': 'http',
    ...spec.headers,
    'x-request-id': requestId,
    'x-envoy-auth-partial-body': 'false',
  };
  return {
    attributes: {
      source: { address: { socket_address: { address: '10.0.0.7', port_value: 53122 } } },
      destination: { address: { socket_address: { address: '10.0.0.2', port_value: 8080 } } },
      request: {
        time: REQUEST_TIME,
        http: {
          id: '9812093475619283746',
          method: spec.method,
          path: spec.path,
          host: AUTHORITY,
          scheme: 'http',
          protocol: 'HTTP/1.1',
          size: String(spec.body.length),
          headers,
          raw_body: spec.body,
        },
      },
    },
  };
}

/** A chat completion as SDKs send it for a short prompt. */
export function smallChatBody(model: string): Buffer {
  return Buffer.from(
    JSON.stringify({
      model,
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'Write a haiku about API gateways.' },
      ],
      temperature: 0.7,
      max_tokens: 256,
    }),
  );
}

const SENTENCES = [
  'The gateway checks every request before it reaches the model.',
  'Keys are hashed with SHA-256 and never stored in plain text.',
  'A "quoted" word, a tab\tand a newline\nkeep the JSON escapes honest.',
  'Ünïcödé text and emoji 🚀 are part of real prompts too.',
  'Balances are checked in the same pass as the group and the model.',
];

/** Exactly `size` bytes of chat JSON with many messages and `"model"` as the very last field. */
export function largeChatBodyModelLast(size: number, model: string): Buffer {
  const tail = `],"model":${JSON.stringify(model)}}`;
  const messages: string[] = [];
  let used = '{"messages":['.length + tail.length;
  let i = 0;
  for (;;) {
    const text = Array.from({ length: 12 }, (_, k) => SENTENCES[(i + k) % SENTENCES.length]).join(' ');
    const msg = JSON.stringify({ role: i % 2 === 0 ? 'user' : 'assistant', content: text });
    const add = Buffer.byteLength(msg) + (messages.length > 0 ? 1 : 0);
    if (used + add > size - 64) break;
    messages.push(msg);
    used += add;
    i++;
  }
  // Pad the last message so the body is exactly `size` bytes.
  const padding = size - used - Buffer.byteLength(',{"role":"user","content":""}');
  messages.push(JSON.stringify({ role: 'user', content: 'x'.repeat(padding) }));
  const body = Buffer.from('{"messages":[' + messages.join(',') + tail);
  if (body.length !== size) throw new Error(`large body is ${body.length} bytes, wanted ${size}`);
  return body;
}

/** A generateContent body: the model is in the path, not in the body. */
export function generativeBody(): Buffer {
  return Buffer.from(
    JSON.stringify({
      contents: [{ role: 'user', parts: [{ text: 'Write a haiku about API gateways.' }] }],
      generationConfig: { temperature: 0.7, maxOutputTokens: 256 },
    }),
  );
}

function chatSpec(key: string, body: Buffer): HttpRequestSpec {
  return {
    method: 'POST',
    path: '/v1/chat/completions',
    headers: sdkHeaders({ authorization: `Bearer ${key}` }, body.length),
    body,
  };
}

/** A chat request with this key and a small body for `model` (used by the memory benchmark). */
export function smallChatRequest(key: string, model: string, requestId: string): CheckRequest {
  return checkRequestFor(chatSpec(key, smallChatBody(model)), requestId);
}

const ONE_MIB = 1024 * 1024;

/** The four fixed mixes. alice is group `basic` (gpt-4o-mini any protocol, gemini-2.5-flash generative). */
export function fixedMixes(): Mix[] {
  const smallValid = checkRequestFor(chatSpec(DEMO_KEYS.alice, smallChatBody('gpt-4o-mini')), 'bench-small-valid');
  const smallDenied = checkRequestFor(chatSpec(DEMO_KEYS.alice, smallChatBody('gpt-4o')), 'bench-small-denied');
  const large = largeChatBodyModelLast(ONE_MIB, 'gpt-4o-mini');
  const genBody = generativeBody();
  const generative = checkRequestFor(
    {
      method: 'POST',
      path: '/v1beta/models/gemini-2.5-flash:generateContent',
      headers: sdkHeaders(
        { 'x-vendor-api-key': DEMO_KEYS.alice, 'user-agent': 'google-genai-sdk/1.2.0' },
        genBody.length,
      ),
      body: genBody,
    },
    'bench-generative',
  );
  return [
    {
      id: 'small_chat',
      title: '(a) small chat body, valid key',
      parts: [{ name: 'valid', request: smallValid, expect: { allowed: true }, clientShare: 1 }],
    },
    {
      id: 'body_1mib_model_last',
      title: '(b) 1 MiB chat body, `model` last',
      parts: [
        {
          name: 'valid',
          request: checkRequestFor(chatSpec(DEMO_KEYS.alice, large), 'bench-1mib'),
          expect: { allowed: true },
          clientShare: 1,
        },
      ],
    },
    {
      id: 'generative_path',
      title: '(c) generative, model in the path',
      parts: [{ name: 'valid', request: generative, expect: { allowed: true }, clientShare: 1 }],
    },
    {
      id: 'mixed_90_10',
      title: '(d) 90% valid / 10% denied (`model_not_in_group`)',
      parts: [
        { name: 'valid', request: smallValid, expect: { allowed: true }, clientShare: 9 },
        {
          name: 'denied',
          request: smallDenied,
          expect: { allowed: false, reason: 'model_not_in_group' },
          clientShare: 1,
        },
      ],
    },
  ];
}

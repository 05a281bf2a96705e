/**
 * The FIXED request mixes of the end-to-end benchmark, as HTTP requests a client sends to Envoy
 * (bench/README.md): a small chat body, a 256 KiB chat body with `model` last, a generative request
 * (model in the path, key in x-vendor-api-key) and a 90/10 valid/denied mix. The bodies and headers
 * are the in-process benchmark's (check-requests.ts), so both benchmarks send the same requests.
 * Not tuned to any setup: change them only with a note in RESULTS-e2e.md.
 *
 * `small_chat_stream` (the same chat request with `stream: true` and usage in the stream) is used only by
 * the metering rows, for time to first byte versus total time; `small_chat_stream_estimated` (no
 * `stream_options.include_usage`, so no usage in the stream) by the soft meter row and its reference
 * without the meter: what an estimate costs.
 */
import { DEMO_KEYS } from '../../test/support/demo-keys';
import { generativeBody, largeChatBodyModelLast, sdkHeaders, smallChatBody } from '../check-requests';

export type Expect =
  | { readonly allowed: true; readonly family: 'chat' | 'generative' }
  | { readonly allowed: false; readonly reason: string };

export interface HttpKind {
  readonly name: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly expect: Expect;
}

export type MixId =
  | 'small_chat'
  | 'body_256k_model_last'
  | 'generative_path'
  | 'mixed_90_10'
  | 'small_chat_stream'
  | 'small_chat_stream_estimated';

export interface HttpMix {
  readonly id: MixId;
  readonly title: string;
  readonly kinds: readonly HttpKind[];
  /** Kind names in sending order, repeated (9 valid then 1 denied for the mixed case). */
  readonly sequence: readonly string[];
}

/** What a client's SDK sends (check-requests.ts sdkHeaders) minus what Envoy sets itself. */
function clientHeaders(extra: Record<string, string>, length: number): Record<string, string> {
  const h = sdkHeaders(extra, length);
  delete h['x-forwarded-proto'];
  return h;
}

function chat(name: string, body: Buffer, expect: Expect): HttpKind {
  return {
    name,
    path: '/v1/chat/completions',
    headers: clientHeaders({ authorization: `Bearer ${DEMO_KEYS.alice}` }, body.length),
    body,
    expect,
  };
}

export const BODY_256K = 256 * 1024;

export function httpMixes(): HttpMix[] {
  const allowChat: Expect = { allowed: true, family: 'chat' };
  const small = chat('valid', smallChatBody('gpt-4o-mini'), allowChat);
  const denied = chat('denied', smallChatBody('gpt-4o'), { allowed: false, reason: 'model_not_in_group' });
  const genBody = generativeBody();
  const streamBody = Buffer.from(
    JSON.stringify({
      ...JSON.parse(smallChatBody('gpt-4o-mini').toString()),
      stream: true,
      stream_options: { include_usage: true },
    }),
  );
  const estimatedBody = Buffer.from(
    JSON.stringify({ ...JSON.parse(smallChatBody('gpt-4o-mini').toString()), stream: true }),
  );
  return [
    { id: 'small_chat', title: 'small chat body, valid key', kinds: [small], sequence: ['valid'] },
    {
      id: 'body_256k_model_last',
      title: '256 KiB chat body, `model` last',
      kinds: [chat('valid', largeChatBodyModelLast(BODY_256K, 'gpt-4o-mini'), allowChat)],
      sequence: ['valid'],
    },
    {
      id: 'generative_path',
      title: 'generative, model in the path',
      kinds: [
        {
          name: 'valid',
          path: '/v1beta/models/gemini-2.5-flash:generateContent',
          headers: clientHeaders(
            { 'x-vendor-api-key': DEMO_KEYS.alice, 'user-agent': 'google-genai-sdk/1.2.0' },
            genBody.length,
          ),
          body: genBody,
          expect: { allowed: true, family: 'generative' },
        },
      ],
      sequence: ['valid'],
    },
    {
      id: 'mixed_90_10',
      title: '90% valid / 10% denied (`model_not_in_group`)',
      kinds: [small, denied],
      sequence: ['valid', 'valid', 'valid', 'valid', 'valid', 'valid', 'valid', 'valid', 'valid', 'denied'],
    },
    {
      id: 'small_chat_stream',
      title: 'small chat, streamed (SSE, usage in the stream)',
      kinds: [chat('valid', streamBody, allowChat)],
      sequence: ['valid'],
    },
    {
      id: 'small_chat_stream_estimated',
      title: 'small chat, streamed without usage (the meter estimates: tokenizer)',
      kinds: [chat('valid', estimatedBody, allowChat)],
      sequence: ['valid'],
    },
  ];
}

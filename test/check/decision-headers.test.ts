/**
 * The decoder keeps only `decisionHeaders(routes)` (read-request.ts): a decision that read
 * any other header would silently see it as absent on the gRPC path. This runs `decide` over a
 * corpus covering every route kind and reason family with a view whose headers object records
 * every name read, and checks each read name is in the list, for the demo routes and for routes
 * with custom key headers.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import type { CheckRequest__Output } from '../../proto/types/envoy/service/auth/v3/CheckRequest';
import { parseConfig, type Config } from '../../src/config/load';
import { decide } from '../../src/check/decide';
import { buildCheckRequest, type HttpRequestLine } from '../../src/envoy/check-request';
import { authorizationService } from '../../src/envoy/protos';
import { FileStore } from '../../src/store/file-store';
import { decisionHeaders } from '../../src/contract/headers';
import type { RequestView } from '../../src/check/request-view';
import { StoreCache } from '../../src/store/cache';
import { DEMO_KEYS } from '../support/demo-keys';
import { readCheckRequest } from '../support/reference-view';
import { DEMO_CONFIG } from '../support/service-harness';

const def = authorizationService().Check;

function corpus(keyHeader: string, vendorHeader: string): HttpRequestLine[] {
  const k = DEMO_KEYS.alice;
  const chat = JSON.stringify({ model: 'gpt-4o-mini', messages: [] });
  const paths = [
    '/v1/chat/completions',
    '/v1/responses',
    '/v1/embeddings',
    '/v1/messages',
    '/v1/messages/count_tokens',
    '/v1beta/models/gemini-2.5-flash:generateContent',
    '/v1/models',
    '/v1/models/gpt-4o-mini',
    '/v1beta/models',
    '/alt/v1/chat/completions',
    '/alt/v1beta/models/gemini-2.5-flash:streamGenerateContent',
    '/v1/v1/chat/completions',
    '/nope',
    '/v2/chat/completions',
  ];
  const headerSets: [string, string][][] = [
    [],
    [[keyHeader, keyHeader === 'authorization' ? `Bearer ${k}` : k]],
    [[vendorHeader, k]],
    [
      ['authorization', `Bearer ${k}`],
      [vendorHeader, DEMO_KEYS.bob],
    ],
    [['authorization', 'Basic abc']],
    [['authorization', `Bearer ${k.slice(0, 20)}`]],
    [
      ['x-api-key', k],
      ['anthropic-version', '2023-06-01'],
    ],
    [
      ['authorization', `Bearer ${k}`],
      ['content-encoding', 'gzip'],
    ],
    [['authorization', `Bearer ${DEMO_KEYS.dave}`]],
    [['authorization', `Bearer ${DEMO_KEYS.frank}`]],
    [['authorization', `Bearer ${DEMO_KEYS.carol}`]],
    [
      ['user-agent', 'sdk'],
      ['x-modelgate-group', 'pro'],
      ['authorization', `Bearer ${k}`],
    ],
  ];
  const bodies = [
    chat,
    '',
    '{',
    '{"messages":[]}',
    JSON.stringify({ model: 'gpt-4.1' }),
    JSON.stringify({ model: DEMO_KEYS.bob }),
    JSON.stringify({ model: 'claude-3-5-haiku-latest' }),
  ];
  const out: HttpRequestLine[] = [];
  for (const path of paths) {
    for (const headers of headerSets) {
      for (const body of bodies) {
        out.push({
          method: path.includes('models') && !path.includes(':') ? 'GET' : 'POST',
          path,
          headers,
          body,
          maxRequestBytes: body === chat ? 10 : undefined,
        });
        out.push({ method: 'POST', path, headers, body });
      }
    }
    out.push({ method: 'DELETE', path, headers: [['authorization', `Bearer ${k}`]] });
    out.push({ method: 'POST', path: `${path}?key=${k}`, headers: [['authorization', `Bearer ${k}`]], body: chat });
  }
  return out;
}

async function readNames(config: Config, lines: HttpRequestLine[]): Promise<Set<string>> {
  const cache = new StoreCache(new FileStore(config.groups, config.keys), config.cache);
  const read = new Set<string>();
  for (const line of lines) {
    const full = readCheckRequest(
      def.requestDeserialize(def.requestSerialize(buildCheckRequest(line)) as Buffer) as CheckRequest__Output,
    );
    const headers = new Proxy(
      { ...full.headers },
      {
        get: (t, name) => (typeof name === 'string' && read.add(name), Reflect.get(t, name)),
        has: (t, name) => (typeof name === 'string' && read.add(name), Reflect.has(t, name)),
        getOwnPropertyDescriptor: (t, name) => (
          typeof name === 'string' && read.add(name),
          Reflect.getOwnPropertyDescriptor(t, name)
        ),
        ownKeys: () => {
          throw new Error('a decision enumerated the headers: it must read them by name');
        },
      },
    );
    const view: RequestView = { ...full, headers };
    await decide(view, config, cache, Date.parse('2026-06-01T00:00:00Z'));
  }
  cache.close();
  return read;
}

describe('decisions read only decisionHeaders()', () => {
  test('demo routes', async () => {
    const config = parseConfig(readFileSync(DEMO_CONFIG, 'utf8'));
    const read = await readNames(config, corpus('authorization', 'x-goog-api-key'));
    const allowed = new Set(decisionHeaders(config.routes));
    expect([...read].filter((n) => !allowed.has(n))).toEqual([]);
    // The corpus does reach the reads that matter.
    for (const n of ['authorization', 'x-api-key', 'x-goog-api-key', 'anthropic-version', 'content-encoding'])
      expect(read.has(n), n).toBe(true);
  });

  test('custom key headers', async () => {
    const text = readFileSync(DEMO_CONFIG, 'utf8')
      .replace(/^  bearerHeaders: .*$/m, '  bearerHeaders: [authorization, x-corp-key]')
      .replace(/^  vendorHeaders: .*$/m, '  vendorHeaders: [x-corp-vendor-key]');
    const config = parseConfig(text);
    expect(config.routes.bearerHeaders).toEqual(['authorization', 'x-corp-key']);
    const read = await readNames(config, corpus('x-corp-key', 'x-corp-vendor-key'));
    const allowed = new Set(decisionHeaders(config.routes));
    expect([...read].filter((n) => !allowed.has(n))).toEqual([]);
    expect(read.has('x-corp-vendor-key')).toBe(true);
  });
});

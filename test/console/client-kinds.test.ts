/**
 * The Base URL table (docs/spec.md §4.1) as data, checked against the spec's text and against both route
 * tables: for every client kind, Base URL + the path the client appends is an endpoint of the
 * kind's protocol style for the service (src/check/routes.ts) and is routed by Envoy's table
 * (src/envoy/render-routes.ts, read by src/console/gateway-answer.ts) to the right cluster.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { classify } from '../../src/check/routes';
import { parseConfig } from '../../src/config/load';
import { CLIENT_KINDS, setupFor } from '../../src/console/client-kinds';
import { gatewayAnswer, normalizedPath } from '../../src/console/gateway-answer';
import { snippetsFor } from '../../src/console/snippets';

const ROOT = join(__dirname, '..', '..');
const CONFIG = parseConfig(readFileSync(join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8'));
const BASE = 'https://llm.example.com';

/** The spec's table rows (docs/spec.md §4.1, copied word for word): [client kind, Base URL]. */
const SPEC_ROWS: Array<[string, string]> = [
  ['Coding-agent clients of the chat/responses kind', '{base_url}'],
  ['Generic chat-completion-compatible clients (chat apps, editors, assistants)', '{base_url}/v1'],
  ['Chat-completion HTTP or SDK use', '{base_url}/v1'],
  ['Responses HTTP or SDK use', '{base_url}/v1'],
  ['Embeddings', '{base_url}/v1'],
  ['Messages-style desktop and coding clients', '{base_url}'],
  ['Generative-content command-line client', '{base_url}'],
  ['Generative-content hand-written HTTP or editor provider', '{base_url}/v1beta'],
  ['Alternate route, messages style and command-line generative client', '{base_url}/alt'],
  ['Alternate route, chat-completion style', '{base_url}/alt/v1'],
  ['Alternate route, generative HTTP or editor provider', '{base_url}/alt/v1beta'],
];

test("every row of the spec's Base URL table is a client kind with the spec's Base URL", () => {
  for (const [spec, baseUrl] of SPEC_ROWS) {
    const kinds = CLIENT_KINDS.filter((k) => k.spec === spec);
    expect(kinds.length, spec).toBeGreaterThan(0);
    for (const k of kinds) expect(setupFor(k, '{base_url}', CONFIG.routes).baseUrl).toBe(baseUrl);
  }
  expect(new Set(CLIENT_KINDS.map((k) => k.spec))).toEqual(new Set(SPEC_ROWS.map(([s]) => s)));
});

describe.each(CLIENT_KINDS.map((k) => [k.id, k] as const))('%s', (_id, kind) => {
  const s = setupFor(kind, BASE, CONFIG.routes, 'gemini-2.5-flash');
  const path = new URL(s.endpoint).pathname;

  test('Base URL + appended path is an endpoint of its style for the service', () => {
    const route = classify('POST', path, CONFIG.routes.altPrefix, false);
    expect(route).toMatchObject({ kind: 'protocol', style: kind.style, alt: kind.alt });
    expect(s.path).toBe(path);
  });

  test("and Envoy's route table sends it to the right cluster", () => {
    const cluster = kind.alt
      ? 'upstream_alt'
      : kind.style === 'messages'
        ? 'upstream_messages'
        : kind.style === 'generative'
          ? 'upstream_generative'
          : 'upstream_chat';
    expect(gatewayAnswer('POST', path, CONFIG.routes.altPrefix).cluster).toBe(cluster);
  });

  test('its model list is a model-list route', () => {
    const list = new URL(s.listUrl).pathname;
    expect(classify('GET', list, CONFIG.routes.altPrefix, false).kind).toBe('models');
    expect(gatewayAnswer('GET', list, CONFIG.routes.altPrefix).cluster).toBe('modelgate_http');
  });

  test('its header is the one the spec names (docs/spec.md §5.2, §5.3)', () => {
    expect(s.header).toBe(
      kind.style === 'generative' && !kind.alt ? 'x-vendor-api-key: <API_KEY>' : 'Authorization: Bearer <API_KEY>',
    );
  });

  test('its snippets hold the Base URL and <API_KEY>, never a real key', () => {
    const snippets = snippetsFor(s, 'gemini-2.5-flash');
    expect(snippets[0].id).toBe('curl');
    expect(snippets[0].code).toContain(s.endpoint);
    // Settings files hold no key (the key goes in the environment beside them); gemini-cli's holds no
    // address either, and Codex's environment only the key (its address is in config.toml).
    const keyless = new Set(['codex-config', 'gemini-settings']);
    for (const sn of snippets) {
      if (!keyless.has(sn.id)) expect(sn.code, sn.id).toContain('<API_KEY>');
      expect(sn.code).not.toMatch(/sk-mg-/);
      if (!['curl', 'gemini-settings', 'codex-env'].includes(sn.id)) expect(sn.code, sn.id).toContain(s.baseUrl);
    }
  });
});

test('the Google SDK snippets ask for API version v1beta (@google/genai 3.x would send /v1, which the spec does not serve)', () => {
  const kind = CLIENT_KINDS.find((k) => k.id === 'generative-cli')!;
  const snippets = snippetsFor(setupFor(kind, BASE, CONFIG.routes, 'gemini-2.5-flash'), 'gemini-2.5-flash');
  expect(snippets.find((x) => x.id === 'google-ts')!.code).toContain(`apiVersion: 'v1beta'`);
  expect(snippets.find((x) => x.id === 'google-py')!.code).toContain('api_version="v1beta"');
});

test('a model name with quotes cannot break a snippet out of its string', () => {
  const kind = CLIENT_KINDS.find((k) => k.id === 'chat-sdk')!;
  const model = `it's "odd"`;
  const snippets = snippetsFor(setupFor(kind, BASE, CONFIG.routes, model), model);
  expect(snippets.find((x) => x.id === 'curl')!.code).toContain(`'\\''`);
  expect(snippets.find((x) => x.id === 'openai-ts')!.code).toContain(JSON.stringify(model));
  expect(snippets.find((x) => x.id === 'openai-py')!.code).toContain(JSON.stringify(model));
});

test("the gateway's answers follow Envoy's path normalisation and first-match order", () => {
  expect(normalizedPath('//v1//chat/completions')).toBe('/v1/chat/completions');
  expect(normalizedPath('/v1/./models')).toBe('/v1/models');
  expect(gatewayAnswer('POST', '/v1/v1/responses', '/alt')).toMatchObject({
    status: 404,
    reason: 'path_repeated',
    route: 'repeated_v1',
  });
  expect(gatewayAnswer('POST', '/embeddings', '/alt')).toMatchObject({ status: 404, reason: 'prefix_wrong' });
  // A coding agent's own path at the root address (docs/spec.md §4.1 row 1): the endpoint, checked.
  expect(gatewayAnswer('POST', '/chat/completions', '/alt')).toMatchObject({
    route: 'agent_chat_completions',
    cluster: 'upstream_chat',
  });
  expect(gatewayAnswer('GET', '/responses', '/alt')).toMatchObject({ status: 405, reason: 'method_not_allowed' });
  expect(gatewayAnswer('GET', '/v1/chat/completions', '/alt')).toMatchObject({
    status: 405,
    reason: 'method_not_allowed',
  });
  expect(gatewayAnswer('GET', '/console/api/info', '/alt')).toMatchObject({
    route: 'console',
    cluster: 'modelgate_http',
  });
  expect(gatewayAnswer('GET', '/nothing', '/alt')).toMatchObject({
    status: 404,
    reason: 'path_unknown',
    route: 'unknown',
  });
});

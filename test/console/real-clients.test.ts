/**
 * docs/clients.md's table of real clients is the code's (src/console/real-clients.ts), and every
 * request line in it is an endpoint: routed by Envoy's table to an upstream or the catalog, and
 * known to modelgate's own route table. (What each client really sends is checked by its
 * end-to-end test.)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { classify } from '../../src/check/routes';
import { clientKind } from '../../src/console/client-kinds';
import { gatewayAnswer } from '../../src/console/gateway-answer';
import { REAL_CLIENTS, realClientsMarkdown } from '../../src/console/real-clients';

const DOC = readFileSync(join(__dirname, '..', '..', 'docs', 'clients.md'), 'utf8');

test('docs/clients.md holds exactly the table of the code', () => {
  const m = /<!-- real-clients:start -->\n([\s\S]*?)\n<!-- real-clients:end -->/.exec(DOC);
  expect(m, 'docs/clients.md has no real-clients block').not.toBeNull();
  expect(m![1]).toBe(realClientsMarkdown('/alt'));
});

test.each(REAL_CLIENTS.flatMap((c) => c.sends.map((line) => [c.name, c.kind, line] as const)))(
  '%s (%s): %s is an endpoint of the gateway',
  (_name, kind, line) => {
    expect(clientKind(kind)).toBeDefined();
    const [method, path] = line.split(' ');
    const p = path.replace('{model}', 'gemini-2.5-flash');
    expect(gatewayAnswer(method, p, '/alt').cluster).toMatch(/^(upstream_|modelgate_http$)/);
    expect(['protocol', 'models']).toContain(classify(method, p, '/alt', false).kind);
  },
);

test('every row of the Base URL table has a real client in the tests', () => {
  const kinds = new Set(REAL_CLIENTS.map((c) => c.kind));
  for (const k of [
    'coding-agent',
    'chat-app',
    'chat-sdk',
    'responses-sdk',
    'embeddings',
    'messages-client',
    'generative-cli',
    'generative-http',
    'alt-messages',
    'alt-generative-cli',
    'alt-chat',
    'alt-generative-http',
  ])
    expect(kinds.has(k), k).toBe(true);
});

/**
 * Hints that send a person to the console name its address (docs/spec.md §2, §7 check 5): the configured
 * `gateway.publicBaseUrl` + `/console/`, else `{base_url}/console/`; computed once per config.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { consoleHints } from '../../src/check/console-address';
import { decide, type Lookups } from '../../src/check/decide';
import { generateKey } from '../../src/contract/key-format';
import type { RequestView } from '../../src/check/request-view';
import { parseConfig, type Config } from '../../src/config/load';
import { FileStore } from '../../src/store/file-store';
import { DEMO_KEYS } from '../support/demo-keys';

const DEMO = readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8');
const PLAIN = parseConfig(DEMO);
const PUBLIC = parseConfig(
  DEMO.replace('# publicBaseUrl: https://llm.example.com', 'publicBaseUrl: https://llm.example.com'),
);

function lookups(config: Config): Lookups {
  const store = new FileStore(config.groups, config.keys);
  return {
    keys: {
      get: async (h) => {
        const v = await store.findKey(h);
        return v ? { status: 'found', value: v, stale: false } : { status: 'not_found', stale: false };
      },
    },
    groups: {
      get: async (n) => {
        const v = await store.findGroup(n);
        return v ? { status: 'found', value: v, stale: false } : { status: 'not_found', stale: false };
      },
    },
  };
}

function chat(key: string): RequestView {
  return {
    method: 'POST',
    path: '/v1/chat/completions',
    query: '',
    headers: { authorization: `Bearer ${key}` },
    body: Buffer.from('{"model":"gpt-4o-mini"}'),
    partialBody: false,
    requestId: '',
  };
}

test.each([
  ['no public address', PLAIN, '{base_url}/console/'],
  ['gateway.publicBaseUrl', PUBLIC, 'https://llm.example.com/console/'],
])('with %s, key_unknown and group_unavailable name %s', async (_name, config, address) => {
  const unknown = await decide(chat(generateKey()), config, lookups(config), Date.now());
  expect(unknown.reason).toBe('key_unknown');
  expect(unknown.hint).toBe(
    `no key matches: check that the whole key was copied from the console (${address}), and that it is a key for this gateway`,
  );
  const paused = await decide(chat(DEMO_KEYS.frank), config, lookups(config), Date.now());
  expect(paused.reason).toBe('group_unavailable');
  expect(paused.hint).toBe(`the key's group "paused" is marked unavailable in the console (${address})`);
});

test('the hints are built once per config: the same strings for every Check', () => {
  expect(consoleHints(PUBLIC)).toBe(consoleHints(PUBLIC));
  expect(consoleHints(PUBLIC).keyUnknown).toBe(consoleHints(PUBLIC).keyUnknown);
  expect(consoleHints(PLAIN)).not.toBe(consoleHints(PUBLIC));
});

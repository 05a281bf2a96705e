/**
 * The Check's scan of a body collects the meter's watched fields and marked strings
 * (check/request-fields.ts) only when the meter is on: they are the meter's admission's, and
 * collecting them is most of a small body's scan. Either way the decision is the same.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { decide, type Lookups } from '../../src/check/decide';
import type { Decision } from '../../src/check/decision';
import { generateKey, hashKey } from '../../src/contract/key-format';
import type { RequestView } from '../../src/check/request-view';
import { parseConfig, type Config } from '../../src/config/load';
import type { KeyRecord } from '../../src/store/store';

const demo = readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8');
const withMeter = (on: boolean): Config =>
  parseConfig(demo.replace(/^meter:\n {2}enabled: \w+/m, `meter:\n  enabled: ${on}`));
const key = generateKey();
const record: KeyRecord = {
  id: 'k',
  sha256: hashKey(key),
  group: 'basic',
  balance: 10,
  disabled: false,
  expiresAt: null,
};

function decideOn(config: Config, body: object): Decision {
  const lookups: Lookups = {
    keys: {
      get: (sha) =>
        sha === record.sha256
          ? { status: 'found', value: record, stale: false }
          : { status: 'not_found', stale: false },
    },
    groups: { get: (name) => ({ status: 'found', value: config.groups.get(name)!, stale: false }) },
  };
  const view: RequestView = {
    method: 'POST',
    path: '/v1/chat/completions',
    query: '',
    headers: { authorization: `Bearer ${key}` },
    body: Buffer.from(JSON.stringify(body)),
    partialBody: false,
    requestId: 'r',
  };
  return decide(view, config, lookups, Date.now()) as Decision;
}

const BODY = {
  model: 'gpt-4o-mini',
  stream: true,
  max_tokens: 50,
  messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }],
};

it('reads the watched fields and marks with the meter on, and not with it off', () => {
  const on = withMeter(true);
  const off = withMeter(false);
  expect(on.meter.enabled).toBe(true);
  expect(off.meter.enabled).toBe(false);
  const metered = decideOn(on, BODY);
  expect(metered.bodyFields?.has('max_tokens')).toBe(true);
  expect(metered.bodyFields?.marks?.size).toBeGreaterThan(0);
  expect(decideOn(off, BODY).bodyFields).toBeUndefined();
});

it.each([
  ['allowed', BODY],
  ['a model outside the group', { ...BODY, model: 'gpt-4o' }],
  ['no model', { messages: [] }],
  ['a model in another case', { MODEL: 'gpt-4o-mini' }],
])('decides %s the same with the meter on and off', (_what, body) => {
  const { bodyFields: _on, ...a } = decideOn(withMeter(true), body);
  const { bodyFields: _off, ...b } = decideOn(withMeter(false), body);
  expect(b).toEqual(a);
});

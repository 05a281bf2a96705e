/**
 * The serialised-response cache must be invisible: the bytes always decode to exactly what
 * writeCheckResponse builds for that decision, and no two decisions that differ in anything the
 * response carries ever share bytes.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { allowPlan, writeCheckResponse } from '../../src/check/write-response';
import { parseConfig } from '../../src/config/load';
import type { Decision } from '../../src/check/decision';
import { authorizationService } from '../../src/envoy/protos';
import { ResponseEncoder } from '../../src/check/response-encoder';
import { classify } from '../../src/check/routes';
import { logPath } from '../../src/check/decision-log';

const def = authorizationService().Check;
const config = parseConfig(readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8'));
const chat = classify('POST', '/v1/chat/completions', '/alt', false);
const messages = classify('POST', '/v1/messages', '/alt', false);
const allow = (over: Partial<Decision> = {}): Decision => ({ allowed: true, reason: 'allowed', status: 200, hint: '', route: chat, keyId: 'alice', group: 'basic', model: 'gpt-4o-mini', modelKnown: true, ...over });
const deny = (over: Partial<Decision> = {}): Decision => ({ allowed: false, reason: 'model_not_in_group', status: 403, hint: 'no such model "x"', route: chat, keyId: 'alice', group: 'basic', model: 'x', ...over });

const decisions: Decision[] = [
  allow(), allow({ keyId: 'bob' }), allow({ group: 'pro' }), allow({ model: 'gpt-4o' }), allow({ route: messages }),
  allow({ route: classify('GET', '/v1/models', '/alt', false), model: undefined, modelKnown: undefined }),
  deny(), deny({ hint: 'no such model "y"' }), deny({ route: messages }), deny({ keyId: undefined, group: undefined }),
  deny({ reason: 'key_unknown', status: 401, hint: 'no key matches' }),
  deny({ reason: 'method_not_allowed', status: 405, hint: 'takes POST', route: classify('GET', '/v1/chat/completions', '/alt', false) }),
  deny({ reason: 'method_not_allowed', status: 405, hint: 'takes POST', route: classify('POST', '/v1/models', '/alt', false) }),
  allow({ removeQuery: ['key'] }), allow({ removeQuery: ['KEY'] }), deny({ model: 'sk-mg-x', modelIsKey: true }),
];
/** The path of each decision's request (the metadata carries it as logged). */
const PATHS = ['/v1/chat/completions', '/alt/v1/chat/completions'];

test('cached bytes decode to exactly the response built for each decision, first time and again', () => {
  const encoder = new ResponseEncoder((r) => def.responseSerialize(r));
  const plan = allowPlan(config);
  for (let round = 0; round < 2; round++) {
    for (const d of decisions) {
      for (const path of PATHS) {
        const expected = def.responseDeserialize(def.responseSerialize(writeCheckResponse(d, config, plan, d.modelKnown ? d.model : undefined, logPath(d, path))));
        expect(def.responseDeserialize(encoder.encode(d, config, path))).toEqual(expected);
      }
    }
  }
});

test('decisions that differ in anything the response carries never share bytes', () => {
  const encoder = new ResponseEncoder((r) => def.responseSerialize(r));
  const plan = allowPlan(config);
  const cases = decisions.flatMap((d) => PATHS.map((path) => ({ d, path })));
  const built = new Set(cases.map(({ d, path }) => def.responseSerialize(writeCheckResponse(d, config, plan, d.modelKnown ? d.model : undefined, logPath(d, path))).toString('base64')));
  const seen = new Set(cases.map(({ d, path }) => encoder.encode(d, config, path).toString('base64')));
  // (A path that holds a key is logged as one redacted text: those responses are the same.)
  expect(built.size).toBeGreaterThan(decisions.length);
  expect(seen.size).toBe(built.size);
});

test('a new config (a reload) gets answers built from it, not the old cache', () => {
  const encoder = new ResponseEncoder((r) => def.responseSerialize(r));
  const before = def.responseDeserialize(encoder.encode(allow(), config)) as any;
  const withCredential = parseConfig(readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8') + 'upstream:\n  credentials:\n    chat: { header: authorization, prefix: "Bearer ", env: UP }\n', { UP: 'upstream-secret' });
  const after = def.responseDeserialize(encoder.encode(allow(), withCredential)) as any;
  expect(before.ok_response.headers.map((h: any) => h.header.key)).not.toContain('authorization');
  expect(after.ok_response.headers.find((h: any) => h.header.key === 'authorization').header.value).toBe('Bearer upstream-secret');
  expect(after.ok_response.headers_to_remove).not.toContain('authorization');
});

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
import { withUpstreamCredentials } from '../support/upstream-credentials';
import type { AllowedDecision, Decision, DeniedDecision } from '../../src/check/decision';
import { authorizationService } from '../../src/envoy/protos';
import { ResponseEncoder, UNWRITTEN_FIELDS } from '../../src/check/response-encoder';
import { classify } from '../../src/check/routes';
import { loggedModel, logPath } from '../../src/check/decision-log';

const def = authorizationService().Check;
const config = parseConfig(readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8'));
/** The decisions of requests under a prefix ('' or '/alt'), each with its path (the metadata carries it as logged). */
function cases(prefix: string): Array<{ d: Decision; path: string }> {
  const p = (path: string) => `${prefix}${path}`;
  const chat = classify('POST', p('/v1/chat/completions'), '/alt', false);
  const messages = classify('POST', p('/v1/messages'), '/alt', false);
  const countTokens = classify('POST', p('/v1/messages/count_tokens'), '/alt', false);
  const models = classify('GET', p('/v1/models'), '/alt', false);
  const allow = (over: Partial<AllowedDecision> = {}): AllowedDecision => ({
    allowed: true,
    reason: 'allowed',
    hint: '',
    route: chat,
    keyId: 'alice',
    keySha256: 'sha-alice',
    group: 'basic',
    model: 'gpt-4o-mini',
    modelKnown: true,
    stale: false,
    balance: null,
    ...over,
  });
  const deny = (over: Partial<DeniedDecision> = {}): DeniedDecision => ({
    allowed: false,
    reason: 'model_not_in_group',
    hint: 'no such model "x"',
    route: chat,
    keyId: 'alice',
    group: 'basic',
    model: 'x',
    ...over,
  });
  const gen = (method: string) => {
    const path = p(`/v1beta/models/gemini-2.5-flash:${method}`);
    return { d: allow({ route: classify('POST', path, '/alt', false), model: 'gemini-2.5-flash' }), path };
  };
  return [
    ...[
      allow(),
      allow({ keyId: 'bob' }),
      allow({ group: 'pro' }),
      allow({ model: 'gpt-4o' }),
      deny(),
      deny({ hint: 'no such model "y"' }),
      deny({ keyId: undefined, group: undefined }),
      deny({ reason: 'key_unknown', hint: 'no key matches' }),
      allow({ removeQuery: ['key'] }),
      allow({ removeQuery: ['KEY'] }),
      deny({ model: 'sk-mg-x', modelIsKey: true }),
      // The rate limit metadata (its values change with the second and the limits) and a 429's own retry-after.
      allow({ rateLimit: { fields: { requests_limit: { stringValue: '3' } }, stamp: 1 } }),
      allow({ rateLimit: { fields: { requests_limit: { stringValue: '4' } }, stamp: 1 } }),
      deny({ reason: 'concurrency_limited', hint: 'in flight', retryAfter: 1 }),
      deny({ reason: 'concurrency_limited', hint: 'in flight', retryAfter: 2 }),
    ].map((d) => ({ d, path: p('/v1/chat/completions') })),
    { d: allow({ route: messages }), path: p('/v1/messages') },
    { d: deny({ route: messages }), path: p('/v1/messages') },
    // Same route fields as messages, another path: the metadata differs.
    { d: allow({ route: countTokens }), path: p('/v1/messages/count_tokens') },
    { d: allow({ route: models, model: undefined, modelKnown: undefined }), path: p('/v1/models') },
    {
      d: deny({
        reason: 'method_not_allowed',
        hint: 'takes POST',
        route: classify('GET', p('/v1/chat/completions'), '/alt', false),
      }),
      path: p('/v1/chat/completions'),
    },
    {
      d: deny({
        reason: 'method_not_allowed',
        hint: 'takes POST',
        route: classify('POST', p('/v1/models'), '/alt', false),
      }),
      path: p('/v1/models'),
    },
    // A model in the path: keyed by the path itself.
    gen('generateContent'),
    gen('streamGenerateContent'),
  ];
}
const CASES = [...cases(''), ...cases('/alt')];

test('cached bytes decode to exactly the response built for each decision, first time and again', () => {
  const encoder = new ResponseEncoder((r) => def.responseSerialize(r));
  const plan = allowPlan(config);
  for (let round = 0; round < 2; round++) {
    for (const { d, path } of CASES) {
      const expected = def.responseDeserialize(
        def.responseSerialize(writeCheckResponse(d, config, plan, loggedModel(d), logPath(d, path))),
      );
      expect(def.responseDeserialize(encoder.encode(d, config, path))).toEqual(expected);
    }
  }
});

test('decisions that differ in anything the response carries never share bytes', () => {
  const encoder = new ResponseEncoder((r) => def.responseSerialize(r));
  const plan = allowPlan(config);
  const built = CASES.map(({ d, path }) =>
    def.responseSerialize(writeCheckResponse(d, config, plan, loggedModel(d), logPath(d, path))).toString('base64'),
  );
  const seen = CASES.map(({ d, path }) => encoder.encode(d, config, path).toString('base64'));
  // Equal bytes exactly where the responses are equal (a path that holds a key is logged as one redacted text).
  expect(seen).toEqual(built);
  expect(new Set(built).size).toBeGreaterThan(CASES.length - 4);
});

test('the fields the cache key leaves out never change a response (the key is every other field of the Decision)', () => {
  // A Decision has no status: the status is its reason's (reasons.ts statusOf).
  expect([...UNWRITTEN_FIELDS].sort()).toEqual([
    'balance',
    'bodyFields',
    'budget',
    'inFlightLimit',
    'keySha256',
    'modelBudget',
    'stale',
  ]);
  const plan = allowPlan(config);
  const variants: Record<string, unknown[]> = {
    balance: [undefined, null, 0, 12.5, -1],
    budget: [undefined, null, { amount: 1, period: 'day', timeZone: 'UTC' }],
    modelBudget: [undefined, { amount: 2, period: 'week', timeZone: 'Asia/Tokyo' }],
    stale: [undefined, false, true],
    inFlightLimit: [undefined, 1, 4],
    keySha256: [undefined, 'a'.repeat(64), '0'.repeat(64)],
    bodyFields: [
      undefined,
      new Map(),
      new Map([
        ['max_tokens', [10, 14]],
        ['stream', [20, 24]],
      ]),
    ],
  };
  for (const { d, path } of CASES) {
    const bytes = (x: Decision) =>
      def.responseSerialize(writeCheckResponse(x, config, plan, loggedModel(x), logPath(x, path))).toString('base64');
    const original = bytes(d);
    for (const field of UNWRITTEN_FIELDS) {
      for (const value of variants[field])
        expect(bytes({ ...d, [field]: value }), `${field}: ${String(value)}`).toBe(original);
    }
  }
});

test('a new config (a reload) gets answers built from it, not the old cache', () => {
  const encoder = new ResponseEncoder((r) => def.responseSerialize(r));
  const allow = cases('')[0].d;
  const before = def.responseDeserialize(encoder.encode(allow, config)) as any;
  const withCredential = parseConfig(
    withUpstreamCredentials(readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8'), {
      chat: { header: 'authorization', prefix: 'Bearer ', env: 'UP', secret: 'upstream-secret' },
    }),
    { UP: 'upstream-secret' },
  );
  const after = def.responseDeserialize(encoder.encode(allow, withCredential)) as any;
  expect(before.ok_response.headers.map((h: any) => h.header.key)).not.toContain('authorization');
  expect(after.ok_response.headers.find((h: any) => h.header.key === 'authorization').header.value).toBe(
    'Bearer upstream-secret',
  );
  expect(after.ok_response.headers_to_remove).not.toContain('authorization');
});

test("a metered request's own marks (its maxima) are in its answer, never in another's: the cache appends them to the bytes it keeps", () => {
  const encoder = new ResponseEncoder((r) => def.responseSerialize(r));
  const plan = allowPlan(config);
  const chat = classify('POST', '/v1/chat/completions', '/alt', false);
  const allow = (meterMarks: AllowedDecision['meterMarks'], over: Partial<AllowedDecision> = {}): AllowedDecision => ({
    allowed: true,
    reason: 'allowed',
    hint: '',
    route: chat,
    keyId: 'alice',
    keySha256: 'sha-alice',
    group: 'basic',
    model: 'gpt-4o-mini',
    modelKnown: true,
    stale: false,
    balance: null,
    meterMarks,
    ...over,
  });
  const marks: AllowedDecision['meterMarks'][] = [
    undefined,
    { maxInput: 83, maxOutput: 50 },
    { maxInput: 110, maxOutput: 4000 },
    { maxInput: 83, maxOutput: 50, hiddenOutput: 50 },
    { maxInput: 2_000_000, maxOutput: 16384, referencedInput: true },
    { maxInput: 0, maxOutput: 0 },
    { maxInput: 0.5 },
    // The price it was admitted at (meter/price-mark.ts): a string, whose entry's lengths are its own.
    { maxInput: 83, maxOutput: 50, price: '{"input":0.15,"output":0.6,"cachedInput":0.075}' },
    { maxInput: 83, maxOutput: 50, price: '{"input":2,"output":12,"cachedInput":null}' },
  ];
  const path = '/v1/chat/completions';
  for (let round = 0; round < 2; round++) {
    for (const m of marks) {
      for (const d of [
        allow(m),
        allow(m, { rateLimit: { fields: { requests_limit: { stringValue: '3' } }, stamp: 1 } }),
        allow(m, { removeQuery: ['key'] }),
      ]) {
        const expected = def.responseDeserialize(
          def.responseSerialize(writeCheckResponse(d, config, plan, loggedModel(d), logPath(d, path))),
        );
        const got = def.responseDeserialize(encoder.encode(d, config, path));
        expect(got, JSON.stringify(m)).toEqual(expected);
        expect(
          got.dynamic_metadata?.fields?.maxOutput?.number_value ?? got.dynamic_metadata?.fields?.maxOutput?.numberValue,
        ).toBe(m?.maxOutput);
      }
    }
  }
  // Token counting is not metered: no marks, whatever the decision holds.
  const count = allow(
    { maxInput: 9, maxOutput: 9 },
    { route: classify('POST', '/v1/messages/count_tokens', '/alt', false) },
  );
  expect(
    def.responseDeserialize(encoder.encode(count, config, '/v1/messages/count_tokens')).dynamic_metadata?.fields
      ?.maxInput,
  ).toBeUndefined();
});

test("marks appended to every kind of answer decode as the full encode (strict mode's replica, long metadata, odd numbers), hit or miss", () => {
  const strict = parseConfig(
    readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8').replace('mode: soft ', 'mode: strict'),
  );
  expect([strict.meter.mode, strict.meter.leases]).toEqual(['strict', true]);
  const plan = allowPlan(strict);
  const encoder = new ResponseEncoder((r) => def.responseSerialize(r), 10_000, 'replica-a');
  const paths = [
    '/v1/chat/completions',
    '/v1/messages',
    '/v1/messages/count_tokens',
    '/v1/responses',
    '/v1/embeddings',
    '/v1/models',
    '/alt/v1/chat/completions',
    `/v1beta/models/${'g'.repeat(60)}:generateContent`,
    `/v1beta/models/${'g'.repeat(300)}:streamGenerateContent`,
    '/nope',
    '/v1beta/models/gemini-2.5-flash:countTokens',
  ];
  const marks: AllowedDecision['meterMarks'][] = [
    undefined,
    {},
    { maxInput: 83, maxOutput: 50 },
    { maxInput: NaN },
    { maxInput: -0, maxOutput: Infinity },
    { hiddenOutput: 0 },
    { referencedInput: false as unknown as true },
    { referencedInput: true, maxInput: 1e15 },
    { inputExtra: 3100, inputFactor: 2 },
    // String marks of every length class (a varint of 1, 2 and 3 bytes), multibyte, empty.
    { maxInput: 9, price: '{"input":1,"output":2,"cachedInput":null}' },
    { price: 'p'.repeat(127) },
    { price: 'é'.repeat(100) },
    { price: 'x'.repeat(20_000) },
    { price: '' },
  ];
  // Each side's own fields: an allow's removals and rate limits, a denial's model that is a key.
  const allowedExtras: Partial<AllowedDecision>[] = [
    {},
    { removeQuery: ['key'] },
    { rateLimit: { fields: { requests_limit: { stringValue: '3' }, x: { stringValue: 'y'.repeat(200) } }, stamp: 1 } },
    { stale: true },
    { keyId: 'k'.repeat(120) },
  ];
  const deniedExtras: Partial<DeniedDecision>[] = [
    {},
    { stale: true },
    { modelIsKey: true, model: 'sk-x' },
    { keyId: 'k'.repeat(120) },
  ];
  let marked = 0;
  for (const path of paths) {
    for (const method of ['POST', 'GET']) {
      const route = classify(method, path, '/alt', false);
      for (const m of marks) {
        const decisions: Decision[] = [
          ...allowedExtras.map((extra): AllowedDecision => ({
            allowed: true,
            reason: 'allowed',
            hint: '',
            route,
            keyId: 'alice',
            keySha256: 'sha-alice',
            group: 'basic',
            model: 'gpt-4o-mini',
            modelKnown: true,
            stale: false,
            balance: null,
            meterMarks: m,
            ...extra,
          })),
          ...deniedExtras.map((extra): DeniedDecision => ({
            allowed: false,
            reason: 'model_not_in_group',
            hint: 'h',
            route,
            keyId: 'alice',
            group: 'basic',
            model: 'gpt-4o-mini',
            modelKnown: true,
            ...extra,
          })),
        ];
        for (const d of decisions) {
          const expected = def.responseDeserialize(
            def.responseSerialize(writeCheckResponse(d, strict, plan, loggedModel(d), logPath(d, path), 'replica-a')),
          );
          for (let round = 0; round < 2; round++)
            expect(
              def.responseDeserialize(encoder.encode(d, strict, path)),
              `${method} ${path} ${JSON.stringify(d)}`,
            ).toEqual(expected);
          if ((expected as any).dynamic_metadata?.fields?.maxInput) marked++;
        }
      }
    }
  }
  expect(marked).toBeGreaterThan(100);
});

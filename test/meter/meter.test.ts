/**
 * The Meter's lifecycle around the money policy (src/meter/meter.ts): a report of each kind of
 * answer settles once, with the debit the policy says, on an in-memory store, a fixed estimator and
 * a fake clock; a request never reported settles at its maximum, provisionally, at its deadline.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load';
import type { MeterReport } from '../../src/meter/access-log';
import { InFlight, type InFlightRequest } from '../../src/meter/in-flight';
import { Meter, type Settlement } from '../../src/meter/meter';
import { costOf } from '../../src/store/file-meter';
import type { DebitRequest, MeterStore, ModelPrice } from '../../src/store/store';
import { DEMO_CONFIG } from '../support/service-harness';

const CONFIG = parseConfig(readFileSync(DEMO_CONFIG, 'utf8'));
const PRICE: ModelPrice = { input: 0.15, output: 0.6, cachedInput: null };
const MAX_IN = 400;
const MAX_OUT = 1000;

function harness() {
  let now = 1_000_000;
  const debits: DebitRequest[] = [];
  const released: string[] = [];
  const store = {
    async debit(r: DebitRequest) {
      debits.push(r);
      return { applied: true, cost: costOf(r), balance: 1 };
    },
    async release(id: string) {
      released.push(id);
    },
  } as unknown as MeterStore;
  const inFlight = new InFlight();
  const settled: Settlement[] = [];
  const meter = new Meter({
    config: () => CONFIG,
    groups: { get: () => ({ status: 'not_found', stale: false }) },
    store,
    inFlight,
    // As estimate.ts: text it could not read counts one token a byte.
    estimator: {
      input: async () => 77,
      output: async (_p, text, _textBytes, bodyBytes) => (text === undefined ? bodyBytes : 33),
    },
    logger: { info() {}, warn() {}, error() {} },
    now: () => now,
    retryDelaysMs: [],
  });
  meter.onSettled = (s) => settled.push(s);
  const hold = (requestId: string, over: Partial<InFlightRequest> = {}): void => {
    inFlight.add({
      requestId,
      keyId: 'k1',
      group: 'basic',
      model: 'gpt-4o-mini',
      protocol: 'chat',
      limited: true,
      maxInputTokens: MAX_IN,
      maxOutputTokens: MAX_OUT,
      maxCost: 1,
      bodyBytes: 120,
      referencedInput: false,
      stream: false,
      price: PRICE,
      reserved: false,
      since: now,
      deadline: now + 60_000,
      ...over,
    });
  };
  return { meter, debits, released, settled, hold, inFlight, advance: (ms: number) => (now += ms) };
}

const JSON_ANSWER = Buffer.from(
  '{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}',
);
const JSON_NO_USAGE = Buffer.from(
  '{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}',
);

function report(requestId: string, over: Partial<MeterReport> = {}): MeterReport {
  return {
    requestId,
    path: '/v1/chat/completions',
    authz: { metered: true, keyId: 'k1', group: 'basic', model: 'gpt-4o-mini', style: 'chat' },
    status: 200,
    requestBodyBytes: 120,
    responseBodyBytes: JSON_ANSWER.length,
    contentType: 'application/json',
    contentEncoding: '',
    tail: JSON_ANSWER,
    ended: true,
    upstreamSent: true,
    upstreamAnswered: true,
    ...over,
  };
}

describe('Meter.report', () => {
  it.each([
    ['a complete JSON answer with usage: its usage, exact', {}, { estimated: null, inputTokens: 12, outputTokens: 5 }],
    [
      'a complete JSON answer without usage: an estimate (no_usage)',
      { tail: JSON_NO_USAGE, responseBodyBytes: JSON_NO_USAGE.length },
      { estimated: 'no_usage', inputTokens: 77, outputTokens: 33 },
    ],
    [
      'a non-streaming answer cut after its headers: its maximum output (incomplete)',
      { ended: false, tail: undefined, responseBodyBytes: 0 },
      { estimated: 'incomplete', inputTokens: 77, outputTokens: MAX_OUT },
    ],
    [
      "Envoy's 504 after the request went upstream, no answer back: its maximum output (incomplete)",
      { status: 504, upstreamAnswered: false, tail: undefined, responseBodyBytes: 0 },
      { estimated: 'incomplete', inputTokens: 77, outputTokens: MAX_OUT },
    ],
    [
      'an answer in an encoding the meter cannot read: one token a byte, within the maximum (undecodable)',
      { contentEncoding: 'x-unknown', responseBodyBytes: 5000 },
      { estimated: 'undecodable', inputTokens: 77, outputTokens: MAX_OUT },
    ],
  ] as const)('%s', async (_name, over, want) => {
    const h = harness();
    h.hold('r1');
    h.meter.report(report('r1', over));
    await h.meter.idle();
    expect(h.debits).toHaveLength(1);
    expect(h.debits[0]).toMatchObject({ requestId: 'r1', keyId: 'k1', price: PRICE, provisional: false, ...want });
    expect(h.settled.map((s) => s.result)).toEqual([want.estimated ? 'estimated' : 'metered']);
    expect(h.inFlight.size).toBe(0);
  });

  it("releases the provider's own error: no debit, nothing left in flight", async () => {
    const h = harness();
    h.hold('r1');
    h.meter.report(report('r1', { status: 429 }));
    await h.meter.idle();
    expect(h.debits).toEqual([]);
    expect(h.settled).toMatchObject([{ result: 'released', reason: 'upstream_error' }]);
    expect(h.inFlight.size).toBe(0);
  });

  it('settles a request never reported at its maximum, provisionally, once its deadline passes', async () => {
    const h = harness();
    h.hold('r1');
    h.meter.expire();
    await h.meter.idle();
    expect(h.debits).toEqual([]);
    h.advance(60_001);
    h.meter.expire();
    await h.meter.idle();
    expect(h.debits).toMatchObject([
      { requestId: 'r1', inputTokens: MAX_IN, outputTokens: MAX_OUT, estimated: 'no_report', provisional: true },
    ]);
  });

  it("bounds a report that finds no entry by the Check's metadata, at the price it was admitted at", async () => {
    const h = harness();
    h.meter.report(
      report('late', {
        ended: false,
        tail: undefined,
        responseBodyBytes: 0,
        authz: {
          metered: true,
          keyId: 'k1',
          group: 'basic',
          model: 'gpt-4o-mini',
          style: 'chat',
          maxInput: 50,
          maxOutput: 64,
          price: JSON.stringify(PRICE),
        },
      }),
    );
    await h.meter.idle();
    expect(h.debits).toMatchObject([
      { requestId: 'late', estimated: 'incomplete', inputTokens: 50, outputTokens: 64, price: PRICE },
    ]);
  });
});

/**
 * The embedded rate limit engine and the rate limit service's wire format (docs/rate-limits.md): the same
 * counting as envoyproxy/ratelimit for descriptors that carry their limit, with a fake clock.
 */
import { describe, expect, it } from 'vitest';
import { EmbeddedEngine } from '../../src/ratelimit/embedded-engine';
import { InternalError } from '../../src/errors/internal-error';
import {
  CODE,
  UNIT,
  decodeRequest,
  decodeResponse,
  encodeRequest,
  encodeResponse,
  type Descriptor,
} from '../../src/ratelimit/rls-codec';
import { chargeDescriptors } from '../../src/ratelimit/charges';
import { ChargeBatcher } from '../../src/ratelimit/charge-batcher';
import { limitsLeft } from '../../src/ratelimit/left';
import { carriedLimit, descriptorEntries } from '../../src/ratelimit/limits';

const rpm = (key: string, limit: number, hits?: number): Descriptor => ({
  entries: [
    { key: 'limit', value: 'rpm' },
    { key: 'key', value: key },
  ],
  limit: { requestsPerUnit: limit, unit: UNIT.MINUTE },
  ...(hits === undefined ? {} : { hitsAddend: hits }),
});

describe('the embedded engine', () => {
  it('allows exactly the limit in a minute window, then refuses until the next window, with the seconds to the reset', () => {
    let now = Date.UTC(2026, 0, 1, 10, 0, 15);
    const e = new EmbeddedEngine({ now: () => now });
    const ask = () => e.decide({ domain: 'modelgate', descriptors: [rpm('k', 3)], hitsAddend: 0 });
    expect([ask(), ask(), ask()].map((r) => r.overallCode)).toEqual([CODE.OK, CODE.OK, CODE.OK]);
    const refused = ask();
    expect(refused).toEqual({
      overallCode: CODE.OVER_LIMIT,
      statuses: [
        { code: CODE.OVER_LIMIT, limit: { requestsPerUnit: 3, unit: UNIT.MINUTE }, remaining: 0, resetSeconds: 45 },
      ],
    });
    now = Date.UTC(2026, 0, 1, 10, 1, 0);
    expect(ask().statuses[0]).toMatchObject({ code: CODE.OK, remaining: 2, resetSeconds: 60 });
  });

  it("adds a descriptor's own hits (0: only looks), and counts keys, limits and units apart", () => {
    const e = new EmbeddedEngine({ now: () => Date.UTC(2026, 0, 1) });
    const tokens = (hits?: number): Descriptor => ({
      entries: [
        { key: 'limit', value: 'tpm' },
        { key: 'key', value: 'k' },
      ],
      limit: { requestsPerUnit: 99, unit: UNIT.MINUTE },
      ...(hits === undefined ? {} : { hitsAddend: hits }),
    });
    expect(e.decide({ domain: 'd', descriptors: [tokens(0)], hitsAddend: 0 }).statuses[0].remaining).toBe(99);
    expect(e.decide({ domain: 'd', descriptors: [tokens(60)], hitsAddend: 0 }).statuses[0].remaining).toBe(39);
    expect(e.decide({ domain: 'd', descriptors: [tokens(0)], hitsAddend: 0 }).overallCode).toBe(CODE.OK);
    expect(e.decide({ domain: 'd', descriptors: [tokens(40)], hitsAddend: 0 }).overallCode).toBe(CODE.OVER_LIMIT);
    expect(e.decide({ domain: 'd', descriptors: [tokens(0)], hitsAddend: 0 }).overallCode).toBe(CODE.OVER_LIMIT);
    // Another key, another domain, a day window: counted apart.
    expect(e.decide({ domain: 'd', descriptors: [rpm('other', 1)], hitsAddend: 0 }).overallCode).toBe(CODE.OK);
    expect(e.decide({ domain: 'e', descriptors: [tokens(0)], hitsAddend: 0 }).overallCode).toBe(CODE.OK);
    // A descriptor without a limit counts nothing and refuses nothing.
    expect(
      e.decide({ domain: 'd', descriptors: [{ entries: [{ key: 'limit', value: 'rpm' }] }], hitsAddend: 0 }),
    ).toEqual({ overallCode: CODE.OK, statuses: [{ code: CODE.OK, remaining: 0, resetSeconds: 0 }] });
  });

  it('keeps at most maxCounters counters', () => {
    const e = new EmbeddedEngine({ now: () => Date.UTC(2026, 0, 1), maxCounters: 10 });
    for (let i = 0; i < 100; i++) e.decide({ domain: 'd', descriptors: [rpm(`k${i}`, 5)], hitsAddend: 0 });
    expect(e.size).toBe(10);
  });
});

describe('the rate limit service wire format', () => {
  it('round-trips a request with per-descriptor hits (0 included) and limits, and a response', () => {
    const req = {
      domain: 'modelgate',
      descriptors: [rpm('alice', 3, 0), rpm('bob', 4000000000, 12345), rpm('carol', 1)],
      hitsAddend: 0,
    };
    expect(decodeRequest(encodeRequest(req))).toEqual(req);
    const res = {
      overallCode: CODE.OVER_LIMIT,
      statuses: [
        { code: CODE.OK, limit: { requestsPerUnit: 3, unit: UNIT.DAY }, remaining: 2, resetSeconds: 86399 },
        { code: CODE.OVER_LIMIT, remaining: 0, resetSeconds: 1 },
      ],
    };
    expect(decodeResponse(encodeResponse(res))).toEqual(res);
  });

  it('refuses a truncated message', () => {
    const bytes = encodeRequest({ domain: 'modelgate', descriptors: [rpm('alice', 3)], hitsAddend: 0 });
    expect(() => decodeRequest(bytes.subarray(0, bytes.length - 3))).toThrow(InternalError);
  });
});

describe('token charges', () => {
  it('names one descriptor per token limit that applies, each carrying the limit less one and the tokens as hits', () => {
    const d = chargeDescriptors(
      { key: { tpm: 1000, tpd: null }, model: { tpd: 50000 } },
      { keyId: 'k', group: 'g', model: 'm', tokens: 321 },
    );
    expect(d).toEqual([
      {
        entries: [
          { key: 'limit', value: 'tpm' },
          { key: 'key', value: 'k' },
        ],
        limit: { requestsPerUnit: 999, unit: UNIT.MINUTE },
        hitsAddend: 321,
      },
      {
        entries: [
          { key: 'limit', value: 'tpd_m' },
          { key: 'key', value: 'k' },
          { key: 'model', value: 'm' },
        ],
        limit: { requestsPerUnit: 49999, unit: UNIT.DAY },
        hitsAddend: 321,
      },
    ]);
  });
});

describe('batched charges', () => {
  it('sends the charges of one window in one request, each descriptor with its own hits', async () => {
    const sent: number[] = [];
    const engine = new EmbeddedEngine({ now: () => Date.UTC(2026, 0, 1) });
    const counting = {
      shouldRateLimit: (req: Parameters<EmbeddedEngine['shouldRateLimit']>[0]) => (
        sent.push(req.descriptors.length),
        engine.shouldRateLimit(req)
      ),
    };
    const b = new ChargeBatcher(counting, { windowMs: 5 });
    await Promise.all([
      b.shouldRateLimit({ domain: 'd', descriptors: [rpm('k', 100, 10)], hitsAddend: 0 }),
      b.shouldRateLimit({ domain: 'd', descriptors: [rpm('k', 100, 20), rpm('j', 100, 1)], hitsAddend: 0 }),
    ]);
    expect(sent).toEqual([3]);
    expect(engine.decide({ domain: 'd', descriptors: [rpm('k', 100, 0)], hitsAddend: 0 }).statuses[0].remaining).toBe(
      70,
    );
  });
});

describe("what is left of a key's windows (the console)", () => {
  it("counts a token window's last token: 99 of 100 used leaves 1, 100 leave 0", async () => {
    const e = new EmbeddedEngine({ now: () => Date.UTC(2026, 0, 1, 10, 0, 15) });
    const charge = (hits: number) =>
      e.decide({
        domain: 'modelgate',
        hitsAddend: 0,
        descriptors: [
          {
            entries: descriptorEntries('tpm', 'k', undefined),
            limit: { requestsPerUnit: carriedLimit('tpm', 100), unit: UNIT.MINUTE },
            hitsAddend: hits,
          },
        ],
      });
    const left = async () => (await limitsLeft(e, 'modelgate', { key: { tpm: 100 }, model: null }, 'k'))!.tpm;
    expect(await left()).toBe(100);
    charge(99);
    expect(await left()).toBe(1);
    charge(1);
    expect(await left()).toBe(0);
  });
});

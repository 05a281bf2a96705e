/**
 * The requests a replica allowed and has not settled (src/meter/in-flight.ts): held against their
 * key at their maximum, expired in the order they were allowed, bounded.
 */
import { describe, expect, it } from 'vitest';
import { InFlight, type InFlightRequest } from '../../src/meter/in-flight';

const req = (requestId: string, keyId: string, maxCost: number, since = 0, ttl = 1000): InFlightRequest => ({
  requestId,
  keyId,
  group: 'g',
  model: 'm',
  protocol: 'chat',
  limited: true,
  maxInputTokens: 1,
  maxOutputTokens: 1,
  maxCost,
  bodyBytes: 1,
  referencedInput: false,
  stream: false,
  since,
  deadline: since + ttl,
  reserved: false,
});

describe('InFlight', () => {
  it("holds each key's requests at their maximum until taken", () => {
    const f = new InFlight();
    f.add(req('a', 'k', 0.5));
    f.add(req('b', 'k', 0.25));
    f.add(req('c', 'other', 1));
    expect([f.count('k'), f.held('k'), f.count('other'), f.size]).toEqual([2, 0.75, 1, 3]);
    expect(f.take('a')?.requestId).toBe('a');
    expect(f.take('a')).toBeUndefined();
    expect([f.count('k'), f.held('k')]).toEqual([1, 0.25]);
    f.take('b');
    expect([f.count('k'), f.held('k')]).toEqual([0, 0]);
  });

  it('never holds a request that ended before its Check was decided (gone), and stays bounded', () => {
    const f = new InFlight();
    f.gone('late');
    expect(f.add(req('late', 'k', 0.5))).toBe(true);
    expect([f.get('late'), f.count('k'), f.size]).toEqual([undefined, 0, 0]);
    for (let i = 0; i < 20_000; i++) f.gone(`g${i}`);
    // The oldest marks are forgotten past 10,000: such a request is held again (and settles at its deadline).
    expect(f.add(req('late', 'k', 0.5))).toBe(true);
    expect(f.count('k')).toBe(1);
  });

  it('replaces a request id seen twice instead of holding it twice', () => {
    const f = new InFlight();
    f.add(req('a', 'k', 0.5));
    f.add(req('a', 'k', 0.5));
    expect([f.count('k'), f.held('k'), f.size]).toEqual([1, 0.5, 1]);
  });

  it('hands back the requests whose deadline passed, oldest first, and no others', () => {
    const f = new InFlight();
    f.add(req('a', 'k', 1, 0));
    f.add(req('b', 'k', 1, 10));
    f.add(req('c', 'k', 1, 20));
    expect(f.expired(1009).map((r) => r.requestId)).toEqual(['a']);
    expect(f.expired(1020).map((r) => r.requestId)).toEqual(['b', 'c']);
    expect(f.size).toBe(0);
  });

  it('refuses more than its bound (the Check then denies, fail closed)', () => {
    const f = new InFlight(2);
    expect([f.add(req('a', 'k', 1)), f.add(req('b', 'k', 1)), f.add(req('c', 'k', 1))]).toEqual([true, true, false]);
    expect(f.drainAll().map((r) => r.requestId)).toEqual(['a', 'b']);
    expect(f.size).toBe(0);
  });
});

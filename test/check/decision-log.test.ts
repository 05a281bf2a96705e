/**
 * Decision lines are written by a fixed-shape serialiser (the Check path); they must be exactly the
 * line pino would write for the same fields: same keys, same order, same values, valid JSON.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, test } from 'vitest';
import type { RequestView } from '../../src/check/request-view';
import {
  clientAddress,
  formatDecisionLine,
  loggedClient,
  loggedUserAgent,
  type DecisionLine,
} from '../../src/check/decision-log';

function pinoLine(line: DecisionLine): string {
  let out = '';
  const sink = new Writable({
    write(chunk, _e, done) {
      out += chunk.toString();
      done();
    },
  });
  const logger = pino({ base: { svc: 'modelgate' }, timestamp: () => ',"time":1700000000000' }, sink);
  logger.info(line, 'decision');
  return out;
}

const lines: DecisionLine[] = [
  {
    decision: 'allow',
    status: 200,
    reason: 'allowed',
    style: 'chat',
    method: 'POST',
    path: '/v1/chat/completions',
    keyId: 'alice',
    group: 'basic',
    model: 'gpt-4o-mini',
    requestId: 'r-1',
    durUs: 12,
  },
  {
    decision: 'deny',
    status: 403,
    reason: 'model_not_in_group',
    style: 'generative',
    method: 'POST',
    path: '/v1beta/models/x:generateContent',
    keyId: 'a"b',
    group: 'g\\h',
    model: 'quote " back \\ slash',
    hint: 'the key\'s group has no model "x": did you mean "y"?',
    stale: true,
    requestId: '',
    durUs: 0,
  },
  {
    decision: 'deny',
    status: 401,
    reason: 'key_missing',
    style: 'unknown',
    method: 'GET',
    path: '/[20 chars]',
    hint: 'no key',
    requestId: 'x'.repeat(128),
    durUs: 123456,
  },
  {
    decision: 'deny',
    status: 401,
    reason: 'key_unknown',
    style: 'chat',
    method: 'POST',
    path: '/v1/chat/completions',
    hint: 'unknown',
    client: '2001:db8::1',
    userAgent: 'claude-cli/2.0.31 (external, "cli")',
    requestId: 'r-2',
    durUs: 7,
  },
  {
    decision: 'allow',
    status: 200,
    reason: 'allowed',
    style: 'chat',
    method: 'POST',
    path: '/v1/chat/completions',
    keyId: 'bob',
    group: 'pro',
    model: 'gpt-4o',
    userAgent: 'curl/8.5.0',
    requestId: 'r-3',
    durUs: 9,
  },
];

test.each(lines.map((l) => [l.reason, l] as const))('a %s line is exactly what pino writes', (_r, line) => {
  const ours = formatDecisionLine(line, 1700000000000, '"svc":"modelgate"');
  expect(ours).toBe(pinoLine(line));
  expect(JSON.parse(ours)).toMatchObject({ level: 30, msg: 'decision', svc: 'modelgate', ...line });
});

describe('the client address of a decision line', () => {
  const view = (xff: string | undefined, client = '10.0.0.9'): RequestView => ({
    method: 'POST',
    path: '/',
    query: '',
    headers: xff === undefined ? {} : { 'x-forwarded-for': xff },
    body: undefined,
    partialBody: false,
    requestId: '',
    client,
  });
  test.each<[string | undefined, number, string | undefined]>([
    [undefined, 0, '10.0.0.9'], // no x-forwarded-for: the source address
    ['198.51.100.1, 192.0.2.2', 0, '10.0.0.9'], // no trusted hops: the peer (Envoy appends its local address for a loopback peer), never a client's entry
    ['198.51.100.1,203.0.113.5, 10.0.0.9', 1, '203.0.113.5'], // one trusted hop: the load balancer's entry
    ['192.0.2.2', 1, '10.0.0.9'], // fewer entries than hops: the peer, as Envoy
    ['2001:db8::1, 10.0.0.9', 1, '2001:db8::1'],
  ])('x-forwarded-for %s with %i trusted hops is %s', (xff, hops, want) => {
    expect(clientAddress(view(xff), hops)).toBe(want);
  });

  test('logs an address that is not an IP literal as bounded, key-redacted text', () => {
    expect(loggedClient('sk-mg-ef5sAY7BcoDYnpOLYuNoJgHQUQDHBO8GKd0R6uiC')).toBe('sk-mg-[redacted]');
    expect(loggedClient('203.0.113.7')).toBe('203.0.113.7');
    expect(loggedClient('')).toBeUndefined();
    expect(loggedUserAgent('agent%2F1.0%20%28x%29')).toBe('agent/1.0 (x)');
    expect(loggedUserAgent('x'.repeat(300))).toBe(`${'x'.repeat(128)}...`);
  });
});

/**
 * Decision lines are written by a fixed-shape serialiser (the Check path); they must be exactly the
 * line pino would write for the same fields: same keys, same order, same values, valid JSON.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { expect, test } from 'vitest';
import { formatDecisionLine, type DecisionLine } from '../../src/check/decision-log';

function pinoLine(line: DecisionLine): string {
  let out = '';
  const sink = new Writable({ write(chunk, _e, done) { out += chunk.toString(); done(); } });
  const logger = pino({ base: { svc: 'modelgate' }, timestamp: () => ',"time":1700000000000' }, sink);
  logger.info(line, 'decision');
  return out;
}

const lines: DecisionLine[] = [
  { decision: 'allow', status: 200, reason: 'allowed', style: 'chat', method: 'POST', path: '/v1/chat/completions', keyId: 'alice', group: 'basic', model: 'gpt-4o-mini', requestId: 'r-1', durUs: 12 },
  { decision: 'deny', status: 403, reason: 'model_not_in_group', style: 'generative', method: 'POST', path: '/v1beta/models/x:generateContent', keyId: 'a"b', group: 'g\\h', model: 'quote " back \\ slash', hint: 'the key\'s group has no model "x": did you mean "y"?', stale: true, requestId: '', durUs: 0 },
  { decision: 'deny', status: 401, reason: 'key_missing', style: 'unknown', method: 'GET', path: '/[20 chars]', hint: 'no key', requestId: 'x'.repeat(128), durUs: 123456 },
  { decision: 'deny', status: 401, reason: 'key_unknown', style: 'chat', method: 'POST', path: '/v1/chat/completions', hint: 'unknown', client: '2001:db8::1', userAgent: 'claude-cli/2.0.31 (external, "cli")', requestId: 'r-2', durUs: 7 },
  { decision: 'allow', status: 200, reason: 'allowed', style: 'chat', method: 'POST', path: '/v1/chat/completions', keyId: 'bob', group: 'pro', model: 'gpt-4o', userAgent: 'curl/8.5.0', requestId: 'r-3', durUs: 9 },
];

test.each(lines.map((l) => [l.reason, l] as const))('a %s line is exactly what pino writes', (_r, line) => {
  const ours = formatDecisionLine(line, 1700000000000, '"svc":"modelgate"');
  expect(ours).toBe(pinoLine(line));
  expect(JSON.parse(ours)).toMatchObject({ level: 30, msg: 'decision', svc: 'modelgate', ...line });
});

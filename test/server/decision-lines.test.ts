/**
 * The Check path writes each decision line from its shape's text, cached by the answer (pipeline.ts
 * shapeFor): Checks of one shape must still each log their own request id and duration, and a
 * shape that is not cached (another model outside the group, a stale answer) its own fields.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { startHarness, type Harness } from '../support/service-harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h.close());

const chat = (model: string, requestId: string, method = 'POST') => ({
  method,
  path: '/v1/chat/completions',
  headers: [
    ['authorization', `Bearer ${DEMO_KEYS.alice}`],
    ['content-type', 'application/json'],
    ['x-request-id', requestId],
  ] as [string, string][],
  body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
});

test("three Checks of one shape log the same fields with their own request ids, in pino's field order", async () => {
  for (const id of ['11111111-1111-4111-8111-111111111111', '22222222-2222-4222-8222-222222222222', 'not "a" uuid'])
    await h.check(chat('gpt-4o-mini', id));
  await h.service.logger.flush();
  const lines = h.logs.raw.filter((l) => l.includes('"msg":"decision"')).slice(-3);
  expect(lines.map((l) => JSON.parse(l).requestId)).toEqual([
    '11111111-1111-4111-8111-111111111111',
    '22222222-2222-4222-8222-222222222222',
    'not "a" uuid',
  ]);
  for (const l of lines) {
    expect(Object.keys(JSON.parse(l))).toEqual([
      'level',
      'time',
      'svc',
      'decision',
      'status',
      'reason',
      'style',
      'method',
      'path',
      'keyId',
      'group',
      'model',
      'client',
      'requestId',
      'durUs',
      'msg',
    ]);
    expect(JSON.parse(l)).toMatchObject({
      decision: 'allow',
      keyId: 'alice',
      group: 'basic',
      model: 'gpt-4o-mini',
      path: '/v1/chat/completions',
      method: 'POST',
    });
  }
});

test('Checks of one shape each log their own client address and user agent', async () => {
  const clients = ['192.0.2.1', '2001:db8::2', '198.51.100.3'];
  const agents = ['curl/8.5.0', 'OpenAI/Python 1.99.1', undefined];
  for (let i = 0; i < 3; i++) {
    const line = chat('gpt-4o-mini', `ua-${i}`);
    await h.check({
      ...line,
      client: clients[i],
      headers: [...line.headers, ...(agents[i] ? [['user-agent', agents[i]!] as [string, string]] : [])],
    });
  }
  await h.service.logger.flush();
  const lines = h.logs.raw
    .filter((l) => l.includes('"msg":"decision"'))
    .slice(-3)
    .map((l) => JSON.parse(l));
  expect(lines.map((l) => [l.requestId, l.client, l.userAgent])).toEqual([
    ['ua-0', clients[0], agents[0]],
    ['ua-1', clients[1], agents[1]],
    ['ua-2', clients[2], undefined],
  ]);
  expect(Object.keys(lines[0]).slice(-5)).toEqual(['client', 'userAgent', 'requestId', 'durUs', 'msg']);
});

test('two denials for different models outside the group each log their own model', async () => {
  await h.check(chat('model-one', 'r-1'));
  await h.check(chat('model-two', 'r-2'));
  await h.service.logger.flush();
  const lines = h.logs.raw
    .filter((l) => l.includes('"msg":"decision"'))
    .slice(-2)
    .map((l) => JSON.parse(l));
  expect(lines.map((l) => [l.requestId, l.model, l.reason])).toEqual([
    ['r-1', 'model-one', 'model_not_in_group'],
    ['r-2', 'model-two', 'model_not_in_group'],
  ]);
});

test('the same unknown path under different methods logs each method', async () => {
  for (const method of ['GET', 'PUT', 'DELETE'])
    await h.check({ method, path: '/nowhere', headers: [['x-request-id', `m-${method}`]] });
  await h.service.logger.flush();
  const lines = h.logs.raw
    .filter((l) => l.includes('"msg":"decision"'))
    .slice(-3)
    .map((l) => JSON.parse(l));
  expect(lines.map((l) => [l.method, l.requestId])).toEqual([
    ['GET', 'm-GET'],
    ['PUT', 'm-PUT'],
    ['DELETE', 'm-DELETE'],
  ]);
});

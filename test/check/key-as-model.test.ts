/**
 * A key pasted into the model field is refused as a model outside the group and never comes back:
 * not in the hint, not in the error body, whole, without its prefix, cut or with stray characters
 * inside (a real server, CheckRequests built as Envoy builds them).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { deniedHeader, reasonOf, startHarness, type Harness } from '../support/service-harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

const ALICE = DEMO_KEYS.alice;
const BOB = DEMO_KEYS.bob;
const BEARER: [string, string] = ['authorization', `Bearer ${ALICE}`];

describe('a key pasted as the model never comes back', () => {
  test.each([
    ['whole', BOB],
    ['without its prefix', BOB.slice(6)],
    ['with a stray quote inside', `${BOB.slice(0, 12)}"${BOB.slice(12)}`],
    ['with a space inside', `${BOB.slice(0, 20)} ${BOB.slice(20)}`],
    ['with a slash inside', `${BOB.slice(0, 9)}/${BOB.slice(9)}`],
    ['cut, without its prefix', BOB.slice(6, 30)],
  ])('%s', async (_why, model) => {
    const res = await h.check({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [BEARER],
      body: JSON.stringify({ model }),
    });
    expect(reasonOf(res)).toBe('model_not_in_group');
    const hint = deniedHeader(res, 'x-modelgate-hint')!;
    const body = JSON.stringify(res.denied_response);
    for (let i = 6; i + 8 <= BOB.length; i++) {
      expect(hint).not.toContain(BOB.slice(i, i + 8));
      expect(body).not.toContain(BOB.slice(i, i + 8));
    }
  });
});

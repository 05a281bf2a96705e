/**
 * The admin API and the key holder's /v1/me attacked, on the file store: idempotency keys that are
 * property names of every JS object, inputs no store takes (NUL, huge), secrets in answers and logs.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addTokenToFile, adminStatePath } from '../../src/admin/file-backend';
import { generateToken, hashToken } from '../../src/admin/tokens';
import { reasonOf, startHarness, tempConfig, type Harness } from '../support/service-harness';

let h: Harness;
const billing = generateToken();
const keysToken = generateToken();
let statePath = '';

beforeAll(async () => {
  const configPath = tempConfig();
  statePath = adminStatePath(configPath);
  addTokenToFile(
    statePath,
    { id: 'tok-billing', sha256: hashToken(billing), scope: 'billing', createdAt: 0 },
    { tokenId: 'cli', address: null, requestId: null },
  );
  addTokenToFile(
    statePath,
    { id: 'tok-keys', sha256: hashToken(keysToken), scope: 'keys', createdAt: 0 },
    { tokenId: 'cli', address: null, requestId: null },
  );
  h = await startHarness({ configPath });
});
afterAll(async () => {
  await h?.close();
});

const call = async (
  method: string,
  path: string,
  token: string | undefined,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any; text: string }> => {
  const res = await fetch(`http://${h.service.httpAddress}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, json, text };
};

describe('credits', () => {
  // Before: `s.credits["__proto__"] = credit` set the record's prototype instead of a property, so
  // the idempotency key was never found again: every retry credited once more (and the state file
  // lost it).
  it('an idempotency key named __proto__, constructor or toString credits once', async () => {
    const made = await call('POST', '/admin/v1/keys', keysToken, { id: 'proto-victim', group: 'basic', balance: 1 });
    expect(made.status, made.text).toBe(201);
    for (const idem of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
      const first = await call('POST', '/admin/v1/keys/proto-victim/credits', billing, {
        amount: 2,
        idempotencyKey: idem,
      });
      expect(first.status, first.text).toBe(200);
      expect(first.json.replayed, idem).toBe(false);
      const again = await call('POST', '/admin/v1/keys/proto-victim/credits', billing, {
        amount: 2,
        idempotencyKey: idem,
      });
      expect(again.json.replayed, idem).toBe(true);
      expect(again.json.balance, idem).toBe(first.json.balance);
    }
    const key = await call('GET', '/admin/v1/keys/proto-victim', billing);
    expect(key.json.balance).toBe(1 + 4 * 2);
    // The state file keeps them (a restart still knows them).
    const saved = JSON.parse(readFileSync(statePath, 'utf8')) as { credits: Record<string, unknown> };
    expect(Object.keys(saved.credits)).toEqual(expect.arrayContaining(['__proto__', 'constructor', 'toString']));
  });

  it('held: a credit to an unlimited key, an infinite or 0 amount, a body with NUL or 1 MB, an id with NUL: 4xx, never 5xx', async () => {
    expect(
      (await call('POST', '/admin/v1/keys/proto-victim/credits', billing, '{"amount":1e400,"idempotencyKey":"big"}'))
        .status,
    ).toBe(422);
    expect(
      (await call('POST', '/admin/v1/keys/proto-victim/credits', billing, { amount: 0, idempotencyKey: 'zero' }))
        .status,
    ).toBe(422);
    const nul = await call('POST', '/admin/v1/keys/proto-victim/credits', billing, {
      amount: 1,
      idempotencyKey: 'a\u0000b',
      reason: '\u0000',
    });
    expect(nul.status, nul.text).toBeLessThan(500);
    // Before: the handler stopped reading at 64 KiB and the connection was reset (fetch failed).
    const big = await call(
      'POST',
      '/admin/v1/keys/proto-victim/credits',
      billing,
      JSON.stringify({ amount: 1, idempotencyKey: 'x'.repeat(1_000_000) }),
    );
    expect(big.status).toBe(400);
    expect(big.json.error.code).toBe('body_too_large');
    expect(
      (await call('POST', '/admin/v1/keys/no%00such/credits', billing, { amount: 1, idempotencyKey: 'n' })).status,
    ).toBeLessThan(500);
    expect(
      (await call('POST', '/admin/v1/keys/%E0%A4%A/credits', billing, { amount: 1, idempotencyKey: 'n' })).status,
    ).toBeLessThan(500);
  });
});

describe('/v1/me', () => {
  it("held: answers without a key, with a management token and with a NUL key 401, never another key's data", async () => {
    for (const headers of [
      {},
      { authorization: `Bearer ${billing}` },
      { authorization: 'Bearer sk-\u0000' },
      { authorization: 'Bearer ' + 'a'.repeat(10_000) },
    ]) {
      let status = 0;
      let text = '';
      try {
        const res = await fetch(`http://${h.service.httpAddress}/v1/me`, {
          headers: headers as Record<string, string>,
        });
        status = res.status;
        text = await res.text();
      } catch {
        status = 400; // fetch refuses a NUL in a header before sending
      }
      expect(status, JSON.stringify(headers).slice(0, 60)).toBeGreaterThanOrEqual(400);
      expect(status).toBeLessThan(500);
      expect(text).not.toContain('proto-victim');
    }
    expect(
      reasonOf(
        await h.check({
          method: 'POST',
          path: '/v1/chat/completions',
          headers: [['authorization', `Bearer ${billing}`]],
          body: '{"model":"gpt-4o-mini"}',
        }),
      ),
    ).toBe('key_unknown');
  });
});

/**
 * Bad input always gets a clear answer (a reason and a hint), never a crash, never an allow by
 * accident, never a failed RPC that a fail-open Envoy would let through.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { authorizationClient } from '../../src/envoy/protos';
import { DEMO_KEYS } from '../support/demo-keys';
import { deniedHeader, reasonOf, startHarness, type Harness } from '../support/service-harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

const auth: [string, string] = ['authorization', `Bearer ${DEMO_KEYS.alice}`];

/** Sends raw bytes as the Check request message, bypassing protobuf encoding. */
function sendRawBytes(address: string, bytes: Buffer): Promise<{ err: grpc.ServiceError | null; reason?: string }> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const def = authorizationClient().service.Check;
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      '/envoy.service.auth.v3.Authorization/Check',
      (b: Buffer) => b,
      def.responseDeserialize,
      bytes,
      (err, res) => {
        client.close();
        const headers =
          (res as { denied_response?: { headers?: { header?: { key?: string; value?: string } }[] } } | undefined)
            ?.denied_response?.headers ?? [];
        resolve({ err, reason: headers.find((x) => x.header?.key === 'x-modelgate-reason')?.header?.value });
      },
    );
  });
}

test('denies undecodable CheckRequest bytes with check_request_malformed instead of failing the RPC', async () => {
  const r = await sendRawBytes(h.service.grpcAddress, Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]));
  expect(r.err).toBeNull();
  expect(r.reason).toBe('check_request_malformed');
});

test('denies an empty CheckRequest with path_unknown', async () => {
  const r = await sendRawBytes(h.service.grpcAddress, Buffer.alloc(0));
  expect(r.err).toBeNull();
  expect(r.reason).toBe('path_unknown');
});

test('decides a request with 10,000 headers', async () => {
  const headers: [string, string][] = [auth];
  for (let i = 0; i < 10_000; i++) headers.push([`x-filler-${i}`, 'v'.repeat(20)]);
  expect(
    reasonOf(await h.check({ method: 'POST', path: '/v1/chat/completions', headers, body: '{"model":"gpt-4o-mini"}' })),
  ).toBe('allowed');
});

test('denies a 100 KB key with key_malformed and a hint that gives its length, not its content', async () => {
  const big = 'A'.repeat(100 * 1024);
  const r = await h.check({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [['authorization', `Bearer ${big}`]],
    body: '{"model":"gpt-4o-mini"}',
  });
  expect(reasonOf(r)).toBe('key_malformed');
  expect(deniedHeader(r, 'x-modelgate-hint')).toContain(String(big.length));
  expect(r.denied_response!.body!.length).toBeLessThan(1000);
});

test('denies NUL bytes and control characters in a key with key_malformed', async () => {
  for (const bad of [
    `${DEMO_KEYS.alice}\u0000`,
    `${DEMO_KEYS.alice.slice(0, 10)}\u0001${DEMO_KEYS.alice.slice(10)}`,
    `${DEMO_KEYS.alice}\u00e9`,
  ]) {
    const r = await h.check({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['x-api-key', bad]],
      body: '{"model":"gpt-4o-mini"}',
    });
    expect(reasonOf(r)).toBe('key_malformed');
  }
});

test('denies a body with invalid UTF-8 with body_invalid', async () => {
  const body = Buffer.concat([
    Buffer.from('{"model":"gpt-4o-mini","x":"'),
    Buffer.from([0xc3, 0x28]),
    Buffer.from('"}'),
  ]);
  expect(reasonOf(await h.check({ method: 'POST', path: '/v1/chat/completions', headers: [auth], body }))).toBe(
    'body_invalid',
  );
});

test('denies a JSON body nested 10,000 levels deep with body_invalid, without a stack overflow', async () => {
  const body = '{"model":"gpt-4o-mini","x":' + '['.repeat(10_000) + ']'.repeat(10_000) + '}';
  const r = await h.check({ method: 'POST', path: '/v1/chat/completions', headers: [auth], body });
  expect(reasonOf(r)).toBe('body_invalid');
  expect(deniedHeader(r, 'x-modelgate-hint')).toContain('deeper');
});

test("decides a 20 MiB body (above grpc-js's 4 MiB default) with the model as its last field", async () => {
  const body = JSON.stringify({
    messages: [{ role: 'user', content: 'x'.repeat(20 * 1024 * 1024) }],
    model: 'gpt-4o-mini',
  });
  expect(reasonOf(await h.check({ method: 'POST', path: '/v1/chat/completions', headers: [auth], body }))).toBe(
    'allowed',
  );
});

test('a body with a NUL byte outside strings is invalid JSON', async () => {
  const r = await h.check({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [auth],
    body: '{"model":"gpt-4o-mini"}\u0000',
  });
  expect(reasonOf(r)).toBe('body_invalid');
});

test('the service still answers correctly after all of the above', async () => {
  expect(
    reasonOf(
      await h.check({ method: 'POST', path: '/v1/chat/completions', headers: [auth], body: '{"model":"gpt-4o-mini"}' }),
    ),
  ).toBe('allowed');
});

/**
 * Draining (what SIGTERM runs): health goes NOT_SERVING at once, a check in flight is still
 * answered, new connections are refused, and close() resolves.
 */
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { readFileSync } from 'node:fs';
import { expect, test, vi } from 'vitest';
import { parseConfig } from '../../src/config/load';
import { buildCheckRequest } from '../../src/envoy/check-request';
import { authorizationClient } from '../../src/envoy/protos';
import { DEMO_KEYS } from '../support/demo-keys';
import { FakeStore } from '../support/fake-store';
import { DEMO_CONFIG, startHarness, tempConfig } from '../support/service-harness';

test('a drain answers the check in flight and turns health NOT_SERVING first', async () => {
  const config = parseConfig(readFileSync(DEMO_CONFIG, 'utf8'));
  const store = new FakeStore(new Map(config.keys.map((k) => [k.sha256, k])), new Map(config.groups));
  const h = await startHarness({ configPath: tempConfig(), store });
  const address = h.service.grpcAddress;

  const pkg = grpc.loadPackageDefinition(
    loadSync(require.resolve('grpc-health-check/proto/health/v1/health.proto'), { enums: String }),
  ) as any;
  const health = new pkg.grpc.health.v1.Health(address, grpc.credentials.createInsecure());
  const statuses: string[] = [];
  const watch = health.Watch({ service: 'envoy.service.auth.v3.Authorization' });
  watch.on('data', (m: { status: string }) => statuses.push(m.status));
  watch.on('error', () => {});
  await vi.waitFor(() => expect(statuses).toEqual(['SERVING']));

  let release!: () => void;
  store.gate = new Promise<void>((r) => (release = r));
  const client = new (authorizationClient())(address, grpc.credentials.createInsecure());
  const inflight = new Promise<number>((resolve, reject) =>
    client.Check(
      buildCheckRequest({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
        body: '{"model":"gpt-4o-mini"}',
      }),
      (err, res) => (err ? reject(err) : resolve(res!.status?.code ?? 0)),
    ),
  );
  await vi.waitFor(() => expect(store.keyLookups).toBe(1));

  const closed = h.service.close(10_000);
  await vi.waitFor(() => expect(statuses).toContain('NOT_SERVING'));
  expect((await fetch(`http://${h.service.httpAddress}/readyz`).catch(() => ({ status: 0 }))).status).not.toBe(200);
  release();
  expect(await inflight).toBe(0);
  await closed;
  client.close();
  health.close();
});

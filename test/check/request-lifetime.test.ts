/**
 * The Check borrows its request's bytes (server/grpc-server.ts checkMethod, borrowsRequest): once
 * its answer is ready nothing of it may read them, since the gRPC server reuses them for the next
 * request. Each request's bytes are overwritten right after its answer, as the next request
 * cut across reads would overwrite them, and what the Check left behind (the meter's hold, the
 * decision line) must still be its own.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { buildCheckRequest } from '../../src/envoy/check-request';
import { authPackageDefinition } from '../../src/envoy/protos';
import { DEMO_KEYS } from '../support/demo-keys';
import { startHarness, type Harness } from '../support/service-harness';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const serialize = (
  authPackageDefinition()['envoy.service.auth.v3.Authorization'] as unknown as Record<
    string,
    { requestSerialize(v: unknown): Buffer }
  >
).Check.requestSerialize;

describe("the Check keeps no view of its request's bytes once it answered", () => {
  it('the meter holds its own copy of the body sample, for small and large bodies alike', async () => {
    h = await startHarness();
    for (const [i, size] of [200, 3_000, 300_000].entries()) {
      const text = `${i}`.repeat(size);
      const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: text }] });
      const bytes = serialize(
        buildCheckRequest({
          method: 'POST',
          path: '/v1/chat/completions',
          headers: [
            ['authorization', `Bearer ${DEMO_KEYS.alice}`],
            ['content-type', 'application/json'],
            ['x-request-id', `lifetime-${i}`],
          ],
          body,
        }),
      );
      await h.service.checkBytes(bytes);
      bytes.fill(0x7a);
      const line = h.logs.decisions().at(-1)!;
      expect(line.reason).toBe('allowed');
      expect(line.requestId).toBe(`lifetime-${i}`);
      const entry = h.service.meter.deps.inFlight.get(`lifetime-${i}`)!;
      expect(Buffer.from(entry.sample!).toString()).toBe(body.slice(0, 4096));
      expect(entry.model).toBe('gpt-4o-mini');
    }
  });
});

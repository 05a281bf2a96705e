/**
 * The Check pipeline's answers when it must not decide: while the process shuts down (the gRPC port
 * stays open for the meter's reports) every Check is denied 503 authz_unavailable with the
 * catalogue's hint, one error line, and no key or group is looked up.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import type { CheckResponse__Output } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import { buildCheckRequest } from '../../src/envoy/check-request';
import { createPipeline } from '../../src/check/pipeline';
import { HINTS } from '../../src/contract/reasons';
import { ResponseEncoder } from '../../src/check/response-encoder';
import { parseConfig } from '../../src/config/load';
import { authorizationService } from '../../src/envoy/protos';
import { DEMO_KEYS } from '../support/demo-keys';

const def = authorizationService().Check;
const config = parseConfig(readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8'));

test('while shutting down, a Check is denied authz_unavailable (503) without a lookup, with one error line', async () => {
  let draining = false;
  const lookedUp: string[] = [];
  const errors: object[] = [];
  const pipeline = createPipeline({
    config: () => config,
    lookups: {
      keys: { get: (sha) => (lookedUp.push(`key ${sha.slice(0, 8)}`), { status: 'not_found', stale: false }) },
      groups: { get: (name) => (lookedUp.push(`group ${name}`), { status: 'not_found', stale: false }) },
    },
    logger: { info: () => {}, error: (obj) => errors.push(obj) },
    encoder: new ResponseEncoder((r) => def.responseSerialize(r)),
    draining: () => draining,
  });
  const request = def.requestSerialize(
    buildCheckRequest({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [['authorization', `Bearer ${DEMO_KEYS.alice}`]],
      body: '{"model":"gpt-4o-mini"}',
    }),
  );
  const answer = async (): Promise<CheckResponse__Output> =>
    def.responseDeserialize(await pipeline.check(request)) as CheckResponse__Output;

  // Not draining: decided as usual (an unknown key here).
  const before = await answer();
  expect(before.denied_response?.headers?.find((h) => h.header?.key === 'x-modelgate-reason')?.header?.value).toBe(
    'key_unknown',
  );
  expect(lookedUp).toHaveLength(1);

  draining = true;
  lookedUp.length = 0;
  errors.length = 0;
  const during = await answer();
  const header = (k: string) => during.denied_response?.headers?.find((h) => h.header?.key === k)?.header?.value;
  expect(during.denied_response?.status?.code).toBe('ServiceUnavailable');
  expect(header('x-modelgate-reason')).toBe('authz_unavailable');
  expect(header('x-modelgate-hint')).toBe(HINTS.authz_unavailable.shuttingDown);
  expect(lookedUp).toEqual([]);
  expect(errors).toEqual([
    { decision: 'deny', status: 503, reason: 'authz_unavailable', hint: HINTS.authz_unavailable.shuttingDown },
  ]);
});

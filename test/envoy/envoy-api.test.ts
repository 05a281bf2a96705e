/**
 * proto/envoy-api/ holds the pinned Envoy's own ext_authz, access-log and rate limit service protos (and what
 * their types need), printed from the descriptors compiled into that binary by proto/envoy-api.js: they match
 * the checksums recorded when they were vendored, name the pinned version, and are exactly what the
 * pinned binary gives today. The service loads them (src/envoy/protos.ts; the meter reads the access
 * log's wire format itself, src/meter/access-log.ts; the rate limit codec, src/ratelimit/rls-codec.ts); proto/types/ is
 * generated from them
 * (test/envoy/proto-types.test.ts).
 */
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { expect, it } from 'vitest';
import { LOADER_OPTIONS } from '../../proto/include-dirs.js';
import { checksumProblems, differences, ROOTS } from '../../proto/envoy-api.js';
import { PINNED_ENVOY } from '../../src/envoy/ensure';
import { authorizationService } from '../../src/envoy/protos';
import { ACCESS_LOG_SERVICE_NAME } from '../../src/server/meter-service';
import { RLS_PATH } from '../../src/server/rls-service';
import { describeE2E } from '../support/gateway';

it('are the files whose SHA-256 SOURCE.json recorded, for the pinned Envoy version', () => {
  const { envoy, problems } = checksumProblems();
  expect(problems).toEqual([]);
  expect(envoy).toBe(PINNED_ENVOY);
});

it('define the services modelgate serves, from the three roots', () => {
  expect(ROOTS).toEqual([
    'envoy/service/auth/v3/external_auth.proto',
    'envoy/service/accesslog/v3/als.proto',
    'envoy/service/ratelimit/v3/rls.proto',
  ]);
  expect(authorizationService().Check.path).toBe('/envoy.service.auth.v3.Authorization/Check');
  // The meter's method (server/meter-service.ts names it by hand): the access log's, as this Envoy defines it.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const als = grpc.loadPackageDefinition(loadSync('envoy/service/accesslog/v3/als.proto', LOADER_OPTIONS)) as any;
  expect(als.envoy.service.accesslog.v3.AccessLogService.service.StreamAccessLogs.path).toBe(
    `/${ACCESS_LOG_SERVICE_NAME}/StreamAccessLogs`,
  );
  // The embedded rate limit service's method (server/rls-service.ts names it by hand).
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const rls = grpc.loadPackageDefinition(loadSync('envoy/service/ratelimit/v3/rls.proto', LOADER_OPTIONS)) as any;
  expect(rls.envoy.service.ratelimit.v3.RateLimitService.service.ShouldRateLimit.path).toBe(RLS_PATH);
});

describeE2E('the vendored Envoy API protos', () => {
  it("are exactly what the pinned Envoy binary's descriptors give (node proto/envoy-api.js --check)", () => {
    expect(differences()).toEqual([]);
  }, 120_000);
});

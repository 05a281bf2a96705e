/**
 * proto/envoy-api/ holds the pinned Envoy's own ext_authz and ext_proc protos (and what their types
 * need), printed from the descriptors compiled into that binary by proto/envoy-api.js: they match
 * the checksums recorded when they were vendored, name the pinned version, and are exactly what the
 * pinned binary gives today. The service loads them (src/envoy/protos.ts); proto/types/ is
 * generated from them (test/envoy/proto-types.test.ts).
 */
import { expect, it } from 'vitest';
import { checksumProblems, differences, ROOTS } from '../../proto/envoy-api.js';
import { PINNED_ENVOY } from '../../src/envoy/ensure';
import { authorizationService, externalProcessorService } from '../../src/envoy/protos';
import { describeE2E } from '../support/gateway';

it('are the files whose SHA-256 SOURCE.json recorded, for the pinned Envoy version', () => {
  const { envoy, problems } = checksumProblems();
  expect(problems).toEqual([]);
  expect(envoy).toBe(PINNED_ENVOY);
});

it('define the services modelgate serves, from the two roots', () => {
  expect(ROOTS).toEqual(['envoy/service/auth/v3/external_auth.proto', 'envoy/service/ext_proc/v3/external_processor.proto']);
  expect(authorizationService().Check.path).toBe('/envoy.service.auth.v3.Authorization/Check');
  expect(externalProcessorService().Process.path).toBe('/envoy.service.ext_proc.v3.ExternalProcessor/Process');
});

describeE2E('the vendored Envoy API protos', () => {
  it("are exactly what the pinned Envoy binary's descriptors give (node proto/envoy-api.js --check)", () => {
    expect(differences()).toEqual([]);
  }, 120_000);
});

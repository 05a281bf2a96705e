/**
 * Loads Envoy's ext_authz v3 service definition from the pinned Envoy's own API protos
 * (proto/envoy-api/, vendored from that binary by proto/envoy-api.js) once per process. Only this file knows about
 * proto loading (server/grpc-server.ts serves what it loads).
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { LOADER_OPTIONS } from '../../proto/include-dirs.js';
import type { ProtoGrpcType } from '../../proto/types/external_auth';
import type { CheckRequest, CheckRequest__Output } from '../../proto/types/envoy/service/auth/v3/CheckRequest';
import type { CheckResponse, CheckResponse__Output } from '../../proto/types/envoy/service/auth/v3/CheckResponse';

export type { CheckRequest, CheckRequest__Output, CheckResponse, CheckResponse__Output };

let cached: ProtoGrpcType | undefined;
let cachedDefinition: protoLoader.PackageDefinition | undefined;

/** The package definition of envoy/service/auth/v3/external_auth.proto. */
export function authPackageDefinition(): protoLoader.PackageDefinition {
  cachedDefinition ??= protoLoader.loadSync('envoy/service/auth/v3/external_auth.proto', { ...LOADER_OPTIONS });
  return cachedDefinition;
}

/** The loaded gRPC object tree (`envoy.service.auth.v3.Authorization` and its messages). */
export function authProto(): ProtoGrpcType {
  cached ??= grpc.loadPackageDefinition(authPackageDefinition()) as unknown as ProtoGrpcType;
  return cached;
}

/** The Authorization service definition, for `server.addService`. */
export function authorizationService(): grpc.ServiceDefinition {
  return authProto().envoy.service.auth.v3.Authorization.service;
}

/** A typed Authorization client constructor (used by `modelgate explain`, tests and benchmarks). */
export function authorizationClient(): ProtoGrpcType['envoy']['service']['auth']['v3']['Authorization'] {
  return authProto().envoy.service.auth.v3.Authorization;
}

// Original file: proto/envoy-api/envoy/service/ext_proc/v3/external_processor.proto

import type { HttpStatus as _envoy_type_v3_HttpStatus, HttpStatus__Output as _envoy_type_v3_HttpStatus__Output } from '../../../../envoy/type/v3/HttpStatus';
import type { HeaderMutation as _envoy_service_ext_proc_v3_HeaderMutation, HeaderMutation__Output as _envoy_service_ext_proc_v3_HeaderMutation__Output } from '../../../../envoy/service/ext_proc/v3/HeaderMutation';
import type { GrpcStatus as _envoy_service_ext_proc_v3_GrpcStatus, GrpcStatus__Output as _envoy_service_ext_proc_v3_GrpcStatus__Output } from '../../../../envoy/service/ext_proc/v3/GrpcStatus';

export interface ImmediateResponse {
  'status'?: (_envoy_type_v3_HttpStatus | null);
  'headers'?: (_envoy_service_ext_proc_v3_HeaderMutation | null);
  'body'?: (Buffer | Uint8Array | string);
  'grpc_status'?: (_envoy_service_ext_proc_v3_GrpcStatus | null);
  'details'?: (string);
}

export interface ImmediateResponse__Output {
  'status'?: (_envoy_type_v3_HttpStatus__Output);
  'headers'?: (_envoy_service_ext_proc_v3_HeaderMutation__Output);
  'body'?: (Buffer);
  'grpc_status'?: (_envoy_service_ext_proc_v3_GrpcStatus__Output);
  'details'?: (string);
}

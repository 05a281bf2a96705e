// Original file: proto/envoy-api/envoy/service/ext_proc/v3/external_processor.proto

import type { CommonResponse as _envoy_service_ext_proc_v3_CommonResponse, CommonResponse__Output as _envoy_service_ext_proc_v3_CommonResponse__Output } from '../../../../envoy/service/ext_proc/v3/CommonResponse';

export interface BodyResponse {
  'response'?: (_envoy_service_ext_proc_v3_CommonResponse | null);
}

export interface BodyResponse__Output {
  'response'?: (_envoy_service_ext_proc_v3_CommonResponse__Output);
}

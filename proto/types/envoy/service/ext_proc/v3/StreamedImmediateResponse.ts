// Original file: proto/envoy-api/envoy/service/ext_proc/v3/external_processor.proto

import type { HttpHeaders as _envoy_service_ext_proc_v3_HttpHeaders, HttpHeaders__Output as _envoy_service_ext_proc_v3_HttpHeaders__Output } from '../../../../envoy/service/ext_proc/v3/HttpHeaders';
import type { StreamedBodyResponse as _envoy_service_ext_proc_v3_StreamedBodyResponse, StreamedBodyResponse__Output as _envoy_service_ext_proc_v3_StreamedBodyResponse__Output } from '../../../../envoy/service/ext_proc/v3/StreamedBodyResponse';
import type { HeaderMap as _envoy_config_core_v3_HeaderMap, HeaderMap__Output as _envoy_config_core_v3_HeaderMap__Output } from '../../../../envoy/config/core/v3/HeaderMap';

export interface StreamedImmediateResponse {
  'headers_response'?: (_envoy_service_ext_proc_v3_HttpHeaders | null);
  'body_response'?: (_envoy_service_ext_proc_v3_StreamedBodyResponse | null);
  'trailers_response'?: (_envoy_config_core_v3_HeaderMap | null);
  'response'?: "headers_response"|"body_response"|"trailers_response";
}

export interface StreamedImmediateResponse__Output {
  'headers_response'?: (_envoy_service_ext_proc_v3_HttpHeaders__Output);
  'body_response'?: (_envoy_service_ext_proc_v3_StreamedBodyResponse__Output);
  'trailers_response'?: (_envoy_config_core_v3_HeaderMap__Output);
}

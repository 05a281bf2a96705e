// Original file: node_modules/@grpc/grpc-js-xds/deps/envoy-api/envoy/service/ext_proc/v3/external_processor.proto

import type { HeadersResponse as _envoy_service_ext_proc_v3_HeadersResponse, HeadersResponse__Output as _envoy_service_ext_proc_v3_HeadersResponse__Output } from '../../../../envoy/service/ext_proc/v3/HeadersResponse';
import type { BodyResponse as _envoy_service_ext_proc_v3_BodyResponse, BodyResponse__Output as _envoy_service_ext_proc_v3_BodyResponse__Output } from '../../../../envoy/service/ext_proc/v3/BodyResponse';
import type { TrailersResponse as _envoy_service_ext_proc_v3_TrailersResponse, TrailersResponse__Output as _envoy_service_ext_proc_v3_TrailersResponse__Output } from '../../../../envoy/service/ext_proc/v3/TrailersResponse';
import type { ImmediateResponse as _envoy_service_ext_proc_v3_ImmediateResponse, ImmediateResponse__Output as _envoy_service_ext_proc_v3_ImmediateResponse__Output } from '../../../../envoy/service/ext_proc/v3/ImmediateResponse';
import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../../../google/protobuf/Struct';
import type { ProcessingMode as _envoy_extensions_filters_http_ext_proc_v3_ProcessingMode, ProcessingMode__Output as _envoy_extensions_filters_http_ext_proc_v3_ProcessingMode__Output } from '../../../../envoy/extensions/filters/http/ext_proc/v3/ProcessingMode';
import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from '../../../../google/protobuf/Duration';

export interface ProcessingResponse {
  'request_headers'?: (_envoy_service_ext_proc_v3_HeadersResponse | null);
  'response_headers'?: (_envoy_service_ext_proc_v3_HeadersResponse | null);
  'request_body'?: (_envoy_service_ext_proc_v3_BodyResponse | null);
  'response_body'?: (_envoy_service_ext_proc_v3_BodyResponse | null);
  'request_trailers'?: (_envoy_service_ext_proc_v3_TrailersResponse | null);
  'response_trailers'?: (_envoy_service_ext_proc_v3_TrailersResponse | null);
  'immediate_response'?: (_envoy_service_ext_proc_v3_ImmediateResponse | null);
  'dynamic_metadata'?: (_google_protobuf_Struct | null);
  'mode_override'?: (_envoy_extensions_filters_http_ext_proc_v3_ProcessingMode | null);
  'override_message_timeout'?: (_google_protobuf_Duration | null);
  'response'?: "request_headers"|"response_headers"|"request_body"|"response_body"|"request_trailers"|"response_trailers"|"immediate_response";
}

export interface ProcessingResponse__Output {
  'request_headers'?: (_envoy_service_ext_proc_v3_HeadersResponse__Output);
  'response_headers'?: (_envoy_service_ext_proc_v3_HeadersResponse__Output);
  'request_body'?: (_envoy_service_ext_proc_v3_BodyResponse__Output);
  'response_body'?: (_envoy_service_ext_proc_v3_BodyResponse__Output);
  'request_trailers'?: (_envoy_service_ext_proc_v3_TrailersResponse__Output);
  'response_trailers'?: (_envoy_service_ext_proc_v3_TrailersResponse__Output);
  'immediate_response'?: (_envoy_service_ext_proc_v3_ImmediateResponse__Output);
  'dynamic_metadata'?: (_google_protobuf_Struct__Output);
  'mode_override'?: (_envoy_extensions_filters_http_ext_proc_v3_ProcessingMode__Output);
  'override_message_timeout'?: (_google_protobuf_Duration__Output);
}

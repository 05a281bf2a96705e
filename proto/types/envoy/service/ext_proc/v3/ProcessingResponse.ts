// Original file: proto/envoy-api/envoy/service/ext_proc/v3/external_processor.proto

import type { HeadersResponse as _envoy_service_ext_proc_v3_HeadersResponse, HeadersResponse__Output as _envoy_service_ext_proc_v3_HeadersResponse__Output } from '../../../../envoy/service/ext_proc/v3/HeadersResponse';
import type { BodyResponse as _envoy_service_ext_proc_v3_BodyResponse, BodyResponse__Output as _envoy_service_ext_proc_v3_BodyResponse__Output } from '../../../../envoy/service/ext_proc/v3/BodyResponse';
import type { TrailersResponse as _envoy_service_ext_proc_v3_TrailersResponse, TrailersResponse__Output as _envoy_service_ext_proc_v3_TrailersResponse__Output } from '../../../../envoy/service/ext_proc/v3/TrailersResponse';
import type { ImmediateResponse as _envoy_service_ext_proc_v3_ImmediateResponse, ImmediateResponse__Output as _envoy_service_ext_proc_v3_ImmediateResponse__Output } from '../../../../envoy/service/ext_proc/v3/ImmediateResponse';
import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../../../google/protobuf/Struct';
import type { ProcessingMode as _envoy_extensions_filters_http_ext_proc_v3_ProcessingMode, ProcessingMode__Output as _envoy_extensions_filters_http_ext_proc_v3_ProcessingMode__Output } from '../../../../envoy/extensions/filters/http/ext_proc/v3/ProcessingMode';
import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from '../../../../google/protobuf/Duration';
import type { StreamedImmediateResponse as _envoy_service_ext_proc_v3_StreamedImmediateResponse, StreamedImmediateResponse__Output as _envoy_service_ext_proc_v3_StreamedImmediateResponse__Output } from '../../../../envoy/service/ext_proc/v3/StreamedImmediateResponse';
import type { Any as _google_protobuf_Any, Any__Output as _google_protobuf_Any__Output } from '../../../../google/protobuf/Any';
import type { Long } from '@grpc/proto-loader';

export interface _envoy_service_ext_proc_v3_ProcessingResponse_ServerWindowUpdate {
  'window_increment_downstream_to_sidestream'?: (number | string | Long);
  'window_increment_upstream_to_sidestream'?: (number | string | Long);
}

export interface _envoy_service_ext_proc_v3_ProcessingResponse_ServerWindowUpdate__Output {
  'window_increment_downstream_to_sidestream'?: (string);
  'window_increment_upstream_to_sidestream'?: (string);
}

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
  'streamed_immediate_response'?: (_envoy_service_ext_proc_v3_StreamedImmediateResponse | null);
  'request_drain'?: (boolean);
  'typed_dynamic_metadata'?: ({[key: string]: _google_protobuf_Any});
  'server_window_update'?: (_envoy_service_ext_proc_v3_ProcessingResponse_ServerWindowUpdate | null);
  'request_drain_requests'?: (boolean);
  'request_drain_responses'?: (boolean);
  'response'?: "request_headers"|"response_headers"|"request_body"|"response_body"|"request_trailers"|"response_trailers"|"immediate_response"|"streamed_immediate_response";
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
  'streamed_immediate_response'?: (_envoy_service_ext_proc_v3_StreamedImmediateResponse__Output);
  'request_drain'?: (boolean);
  'typed_dynamic_metadata'?: ({[key: string]: _google_protobuf_Any__Output});
  'server_window_update'?: (_envoy_service_ext_proc_v3_ProcessingResponse_ServerWindowUpdate__Output);
  'request_drain_requests'?: (boolean);
  'request_drain_responses'?: (boolean);
}

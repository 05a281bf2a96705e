// Original file: proto/envoy-api/envoy/service/ext_proc/v3/external_processor.proto

import type { HttpHeaders as _envoy_service_ext_proc_v3_HttpHeaders, HttpHeaders__Output as _envoy_service_ext_proc_v3_HttpHeaders__Output } from '../../../../envoy/service/ext_proc/v3/HttpHeaders';
import type { HttpBody as _envoy_service_ext_proc_v3_HttpBody, HttpBody__Output as _envoy_service_ext_proc_v3_HttpBody__Output } from '../../../../envoy/service/ext_proc/v3/HttpBody';
import type { HttpTrailers as _envoy_service_ext_proc_v3_HttpTrailers, HttpTrailers__Output as _envoy_service_ext_proc_v3_HttpTrailers__Output } from '../../../../envoy/service/ext_proc/v3/HttpTrailers';
import type { Metadata as _envoy_config_core_v3_Metadata, Metadata__Output as _envoy_config_core_v3_Metadata__Output } from '../../../../envoy/config/core/v3/Metadata';
import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../../../google/protobuf/Struct';
import type { ProtocolConfiguration as _envoy_service_ext_proc_v3_ProtocolConfiguration, ProtocolConfiguration__Output as _envoy_service_ext_proc_v3_ProtocolConfiguration__Output } from '../../../../envoy/service/ext_proc/v3/ProtocolConfiguration';
import type { Long } from '@grpc/proto-loader';

export interface _envoy_service_ext_proc_v3_ProcessingRequest_ClientWindowUpdate {
  'window_increment_sidestream_to_upstream'?: (number | string | Long);
  'window_increment_sidestream_to_downstream'?: (number | string | Long);
}

export interface _envoy_service_ext_proc_v3_ProcessingRequest_ClientWindowUpdate__Output {
  'window_increment_sidestream_to_upstream'?: (string);
  'window_increment_sidestream_to_downstream'?: (string);
}

export interface _envoy_service_ext_proc_v3_ProcessingRequest_FlowControlInit {
  'initial_window_downstream_to_sidestream'?: (number | string | Long);
  'initial_window_sidestream_to_upstream'?: (number | string | Long);
  'initial_window_upstream_to_sidestream'?: (number | string | Long);
  'initial_window_sidestream_to_downstream'?: (number | string | Long);
}

export interface _envoy_service_ext_proc_v3_ProcessingRequest_FlowControlInit__Output {
  'initial_window_downstream_to_sidestream'?: (string);
  'initial_window_sidestream_to_upstream'?: (string);
  'initial_window_upstream_to_sidestream'?: (string);
  'initial_window_sidestream_to_downstream'?: (string);
}

export interface ProcessingRequest {
  'request_headers'?: (_envoy_service_ext_proc_v3_HttpHeaders | null);
  'response_headers'?: (_envoy_service_ext_proc_v3_HttpHeaders | null);
  'request_body'?: (_envoy_service_ext_proc_v3_HttpBody | null);
  'response_body'?: (_envoy_service_ext_proc_v3_HttpBody | null);
  'request_trailers'?: (_envoy_service_ext_proc_v3_HttpTrailers | null);
  'response_trailers'?: (_envoy_service_ext_proc_v3_HttpTrailers | null);
  'metadata_context'?: (_envoy_config_core_v3_Metadata | null);
  'attributes'?: ({[key: string]: _google_protobuf_Struct});
  'observability_mode'?: (boolean);
  'protocol_config'?: (_envoy_service_ext_proc_v3_ProtocolConfiguration | null);
  'flow_control_init'?: (_envoy_service_ext_proc_v3_ProcessingRequest_FlowControlInit | null);
  'client_window_update'?: (_envoy_service_ext_proc_v3_ProcessingRequest_ClientWindowUpdate | null);
  'request'?: "request_headers"|"response_headers"|"request_body"|"response_body"|"request_trailers"|"response_trailers";
}

export interface ProcessingRequest__Output {
  'request_headers'?: (_envoy_service_ext_proc_v3_HttpHeaders__Output);
  'response_headers'?: (_envoy_service_ext_proc_v3_HttpHeaders__Output);
  'request_body'?: (_envoy_service_ext_proc_v3_HttpBody__Output);
  'response_body'?: (_envoy_service_ext_proc_v3_HttpBody__Output);
  'request_trailers'?: (_envoy_service_ext_proc_v3_HttpTrailers__Output);
  'response_trailers'?: (_envoy_service_ext_proc_v3_HttpTrailers__Output);
  'metadata_context'?: (_envoy_config_core_v3_Metadata__Output);
  'attributes'?: ({[key: string]: _google_protobuf_Struct__Output});
  'observability_mode'?: (boolean);
  'protocol_config'?: (_envoy_service_ext_proc_v3_ProtocolConfiguration__Output);
  'flow_control_init'?: (_envoy_service_ext_proc_v3_ProcessingRequest_FlowControlInit__Output);
  'client_window_update'?: (_envoy_service_ext_proc_v3_ProcessingRequest_ClientWindowUpdate__Output);
}

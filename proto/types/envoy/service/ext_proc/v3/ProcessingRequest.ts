// Original file: node_modules/@grpc/grpc-js-xds/deps/envoy-api/envoy/service/ext_proc/v3/external_processor.proto

import type { HttpHeaders as _envoy_service_ext_proc_v3_HttpHeaders, HttpHeaders__Output as _envoy_service_ext_proc_v3_HttpHeaders__Output } from '../../../../envoy/service/ext_proc/v3/HttpHeaders';
import type { HttpBody as _envoy_service_ext_proc_v3_HttpBody, HttpBody__Output as _envoy_service_ext_proc_v3_HttpBody__Output } from '../../../../envoy/service/ext_proc/v3/HttpBody';
import type { HttpTrailers as _envoy_service_ext_proc_v3_HttpTrailers, HttpTrailers__Output as _envoy_service_ext_proc_v3_HttpTrailers__Output } from '../../../../envoy/service/ext_proc/v3/HttpTrailers';
import type { Metadata as _envoy_config_core_v3_Metadata, Metadata__Output as _envoy_config_core_v3_Metadata__Output } from '../../../../envoy/config/core/v3/Metadata';
import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../../../google/protobuf/Struct';

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
}

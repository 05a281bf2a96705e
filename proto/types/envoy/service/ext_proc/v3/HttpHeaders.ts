// Original file: proto/envoy-api/envoy/service/ext_proc/v3/external_processor.proto

import type { HeaderMap as _envoy_config_core_v3_HeaderMap, HeaderMap__Output as _envoy_config_core_v3_HeaderMap__Output } from '../../../../envoy/config/core/v3/HeaderMap';
import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../../../google/protobuf/Struct';

export interface HttpHeaders {
  'headers'?: (_envoy_config_core_v3_HeaderMap | null);
  'attributes'?: ({[key: string]: _google_protobuf_Struct});
  'end_of_stream'?: (boolean);
}

export interface HttpHeaders__Output {
  'headers'?: (_envoy_config_core_v3_HeaderMap__Output);
  'attributes'?: ({[key: string]: _google_protobuf_Struct__Output});
  'end_of_stream'?: (boolean);
}

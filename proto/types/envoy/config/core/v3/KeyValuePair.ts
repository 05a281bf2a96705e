// Original file: proto/envoy-api/envoy/config/core/v3/base.proto

import type { Value as _google_protobuf_Value, Value__Output as _google_protobuf_Value__Output } from '../../../../google/protobuf/Value';

export interface KeyValuePair {
  'key'?: (string);
  'value'?: (_google_protobuf_Value | null);
}

export interface KeyValuePair__Output {
  'key'?: (string);
  'value'?: (_google_protobuf_Value__Output);
}

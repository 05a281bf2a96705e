// Original file: proto/envoy-api/envoy/config/core/v3/base.proto


export interface QueryParameter {
  'key'?: (string);
  'value'?: (string);
}

export interface QueryParameter__Output {
  'key'?: (string);
  'value'?: (string);
}

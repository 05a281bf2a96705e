// Original file: proto/envoy-api/envoy/config/core/v3/base.proto


export interface RuntimeDouble {
  'default_value'?: (number | string);
  'runtime_key'?: (string);
}

export interface RuntimeDouble__Output {
  'default_value'?: (number);
  'runtime_key'?: (string);
}

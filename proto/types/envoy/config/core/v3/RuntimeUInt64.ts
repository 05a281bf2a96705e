// Original file: proto/envoy-api/envoy/config/core/v3/base.proto

import type { Long } from '@grpc/proto-loader';

export interface RuntimeUInt64 {
  'default_value'?: (number | string | Long);
  'runtime_key'?: (string);
}

export interface RuntimeUInt64__Output {
  'default_value'?: (string);
  'runtime_key'?: (string);
}

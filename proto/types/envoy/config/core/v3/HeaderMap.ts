// Original file: proto/envoy-api/envoy/config/core/v3/base.proto

import type { HeaderValue as _envoy_config_core_v3_HeaderValue, HeaderValue__Output as _envoy_config_core_v3_HeaderValue__Output } from '../../../../envoy/config/core/v3/HeaderValue';

export interface HeaderMap {
  'headers'?: (_envoy_config_core_v3_HeaderValue)[];
}

export interface HeaderMap__Output {
  'headers'?: (_envoy_config_core_v3_HeaderValue__Output)[];
}

// Original file: proto/envoy-api/envoy/service/ext_proc/v3/external_processor.proto

import type { HeaderMap as _envoy_config_core_v3_HeaderMap, HeaderMap__Output as _envoy_config_core_v3_HeaderMap__Output } from '../../../../envoy/config/core/v3/HeaderMap';

export interface HttpTrailers {
  'trailers'?: (_envoy_config_core_v3_HeaderMap | null);
}

export interface HttpTrailers__Output {
  'trailers'?: (_envoy_config_core_v3_HeaderMap__Output);
}

// Original file: proto/envoy-api/envoy/service/ext_proc/v3/external_processor.proto

import type { _envoy_extensions_filters_http_ext_proc_v3_ProcessingMode_BodySendMode, _envoy_extensions_filters_http_ext_proc_v3_ProcessingMode_BodySendMode__Output } from '../../../../envoy/extensions/filters/http/ext_proc/v3/ProcessingMode';

export interface ProtocolConfiguration {
  'request_body_mode'?: (_envoy_extensions_filters_http_ext_proc_v3_ProcessingMode_BodySendMode);
  'response_body_mode'?: (_envoy_extensions_filters_http_ext_proc_v3_ProcessingMode_BodySendMode);
  'send_body_without_waiting_for_header_response'?: (boolean);
}

export interface ProtocolConfiguration__Output {
  'request_body_mode'?: (_envoy_extensions_filters_http_ext_proc_v3_ProcessingMode_BodySendMode__Output);
  'response_body_mode'?: (_envoy_extensions_filters_http_ext_proc_v3_ProcessingMode_BodySendMode__Output);
  'send_body_without_waiting_for_header_response'?: (boolean);
}

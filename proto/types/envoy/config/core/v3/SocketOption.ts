// Original file: proto/envoy-api/envoy/config/core/v3/socket_option.proto

import type { Long } from '@grpc/proto-loader';

export interface _envoy_config_core_v3_SocketOption_SocketType_Datagram {
}

export interface _envoy_config_core_v3_SocketOption_SocketType_Datagram__Output {
}

// Original file: proto/envoy-api/envoy/config/core/v3/socket_option.proto

export const _envoy_config_core_v3_SocketOption_SocketIpVersion = {
  SOCKET_IP_VERSION_UNSPECIFIED: 'SOCKET_IP_VERSION_UNSPECIFIED',
  SOCKET_IP_VERSION_IPV4: 'SOCKET_IP_VERSION_IPV4',
  SOCKET_IP_VERSION_IPV6: 'SOCKET_IP_VERSION_IPV6',
} as const;

export type _envoy_config_core_v3_SocketOption_SocketIpVersion =
  | 'SOCKET_IP_VERSION_UNSPECIFIED'
  | 0
  | 'SOCKET_IP_VERSION_IPV4'
  | 1
  | 'SOCKET_IP_VERSION_IPV6'
  | 2

export type _envoy_config_core_v3_SocketOption_SocketIpVersion__Output = typeof _envoy_config_core_v3_SocketOption_SocketIpVersion[keyof typeof _envoy_config_core_v3_SocketOption_SocketIpVersion]

// Original file: proto/envoy-api/envoy/config/core/v3/socket_option.proto

export const _envoy_config_core_v3_SocketOption_SocketState = {
  STATE_PREBIND: 'STATE_PREBIND',
  STATE_BOUND: 'STATE_BOUND',
  STATE_LISTENING: 'STATE_LISTENING',
} as const;

export type _envoy_config_core_v3_SocketOption_SocketState =
  | 'STATE_PREBIND'
  | 0
  | 'STATE_BOUND'
  | 1
  | 'STATE_LISTENING'
  | 2

export type _envoy_config_core_v3_SocketOption_SocketState__Output = typeof _envoy_config_core_v3_SocketOption_SocketState[keyof typeof _envoy_config_core_v3_SocketOption_SocketState]

export interface _envoy_config_core_v3_SocketOption_SocketType {
  'stream'?: (_envoy_config_core_v3_SocketOption_SocketType_Stream | null);
  'datagram'?: (_envoy_config_core_v3_SocketOption_SocketType_Datagram | null);
}

export interface _envoy_config_core_v3_SocketOption_SocketType__Output {
  'stream'?: (_envoy_config_core_v3_SocketOption_SocketType_Stream__Output);
  'datagram'?: (_envoy_config_core_v3_SocketOption_SocketType_Datagram__Output);
}

export interface _envoy_config_core_v3_SocketOption_SocketType_Stream {
}

export interface _envoy_config_core_v3_SocketOption_SocketType_Stream__Output {
}

export interface SocketOption {
  'description'?: (string);
  'level'?: (number | string | Long);
  'name'?: (number | string | Long);
  'int_value'?: (number | string | Long);
  'buf_value'?: (Buffer | Uint8Array | string);
  'state'?: (_envoy_config_core_v3_SocketOption_SocketState);
  'type'?: (_envoy_config_core_v3_SocketOption_SocketType | null);
  'ip_version'?: (_envoy_config_core_v3_SocketOption_SocketIpVersion);
  'value'?: "int_value"|"buf_value";
}

export interface SocketOption__Output {
  'description'?: (string);
  'level'?: (string);
  'name'?: (string);
  'int_value'?: (string);
  'buf_value'?: (Buffer);
  'state'?: (_envoy_config_core_v3_SocketOption_SocketState__Output);
  'type'?: (_envoy_config_core_v3_SocketOption_SocketType__Output);
  'ip_version'?: (_envoy_config_core_v3_SocketOption_SocketIpVersion__Output);
}

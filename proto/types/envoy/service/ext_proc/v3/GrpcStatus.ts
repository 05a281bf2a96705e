// Original file: proto/envoy-api/envoy/service/ext_proc/v3/external_processor.proto


export interface GrpcStatus {
  'status'?: (number);
}

export interface GrpcStatus__Output {
  'status'?: (number);
}

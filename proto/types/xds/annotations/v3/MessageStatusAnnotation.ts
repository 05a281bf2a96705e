// Original file: node_modules/@grpc/grpc-js-xds/deps/xds/xds/annotations/v3/status.proto


export interface MessageStatusAnnotation {
  'work_in_progress'?: (boolean);
}

export interface MessageStatusAnnotation__Output {
  'work_in_progress'?: (boolean);
}

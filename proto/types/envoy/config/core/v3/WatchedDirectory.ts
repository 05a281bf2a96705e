// Original file: proto/envoy-api/envoy/config/core/v3/base.proto


export interface WatchedDirectory {
  'path'?: (string);
  'watch_modify'?: (boolean);
}

export interface WatchedDirectory__Output {
  'path'?: (string);
  'watch_modify'?: (boolean);
}

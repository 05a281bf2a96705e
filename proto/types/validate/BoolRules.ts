// Original file: node_modules/@grpc/grpc-js-xds/deps/protoc-gen-validate/validate/validate.proto


export interface BoolRules {
  'const'?: (boolean);
}

export interface BoolRules__Output {
  'const'?: (boolean);
}

// Original file: node_modules/@grpc/grpc-js-xds/deps/protoc-gen-validate/validate/validate.proto


export interface EnumRules {
  'const'?: (number);
  'defined_only'?: (boolean);
  'in'?: (number)[];
  'not_in'?: (number)[];
}

export interface EnumRules__Output {
  'const'?: (number);
  'defined_only'?: (boolean);
  'in'?: (number)[];
  'not_in'?: (number)[];
}

/** Include paths for Envoy's API protos of the pinned version (proto/envoy-api/). */
export declare const includeDirs: readonly string[];
/** The proto-loader options the service runs with; proto/types/ is generated to match them. */
export declare const LOADER_OPTIONS: Readonly<{
  keepCase: true;
  longs: StringConstructor;
  enums: StringConstructor;
  includeDirs: string[];
}>;

/** The ext_authz and access-log service protos the vendored files start from. */
export declare const ROOTS: readonly string[];
/** proto/envoy-api/ */
export declare const OUT: string;
/** Differences between proto/envoy-api/ and the pinned Envoy binary's own descriptors ([] when they match). */
export declare function differences(): string[];
/** The version SOURCE.json names, and differences between its checksums and the files ([] when they match). */
export declare function checksumProblems(): { envoy: string; problems: string[] };

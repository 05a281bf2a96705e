/**
 * What makes a request modelgate's, in an Envoy that also serves other routes (the bundle's own
 * or a team's, `modelgate adopt`): every one of modelgate's HTTP filters is off by default
 * (`HttpFilter.disabled: true`) and turned on by each of modelgate's routes in its own
 * `typed_per_filter_config`, so a route of the team's runs none of them, whatever its place in the
 * route table. The first two, on every modelgate route that reaches a cluster:
 *
 * - `modelgate.request` (header_mutation): removes every request header a client sent under
 *   modelgate's prefix (`x-modelgate-*`: modelgate sets its own later, none reaches a provider
 *   from the client), then mints the request's identity, `x-modelgate-request: %UNIQUE_ID%` (a
 *   random UUID per request, Envoy's). The Check reserves by it and the meter settles by it, so a
 *   client-chosen or repeated `x-request-id` is only a tracing id, whatever the connection
 *   manager's `use_remote_address` and `preserve_external_request_id` say.
 * - `modelgate.request_metadata` (header_to_metadata): copies it into the dynamic metadata
 *   `modelgate: {request}`, which every access-log entry carries (the meter reads it there: the
 *   route removes the header before the provider, so the entry's request headers no longer hold
 *   it) and which the local-reply mappers and the meter's access-log filter match on: they act on
 *   modelgate's requests only, never on a team's (a 503 of its own service keeps its body).
 *
 * Seen on Envoy 1.36.2 and 1.40.0 (envoy/README.md): a route-level per-filter config turns on a
 * filter that is off by default, and a `FilterConfig` without `config` is refused ("Empty
 * route/virtual host per filter configuration"), so each filter is turned on by its own per-route
 * message; the decompressor has none and is wrapped in a matcher instead (meter-filters.ts).
 */
import { HEADER, HEADER_PREFIX } from '../contract/headers';

type Obj = Record<string, unknown>;

export const REQUEST_FILTER = 'modelgate.request';
export const REQUEST_METADATA_FILTER = 'modelgate.request_metadata';
/** The dynamic-metadata namespace of the mark (meter/access-log.ts MARK_NAMESPACE reads it). */
export const MARK_NAMESPACE = 'modelgate';
export const MARK_KEY = 'request';

/** The two filters, off by default, for the start of http_filters (before ext_authz). */
export function requestFilters(): Obj[] {
  return [
    {
      name: REQUEST_FILTER,
      disabled: true,
      typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation' },
    },
    {
      name: REQUEST_METADATA_FILTER,
      disabled: true,
      typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config' },
    },
  ];
}

/** Their per-route configs: what turns them on, on a route of modelgate's. */
export function requestPerRoute(): Obj {
  return {
    [REQUEST_FILTER]: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutationPerRoute',
      mutations: {
        request_mutations: [
          { remove_on_match: { key_matcher: { prefix: HEADER_PREFIX } } },
          {
            append: {
              header: { key: HEADER.request, value: '%UNIQUE_ID%' },
              append_action: 'OVERWRITE_IF_EXISTS_OR_ADD',
            },
          },
        ],
      },
    },
    [REQUEST_METADATA_FILTER]: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config',
      request_rules: [
        { header: HEADER.request, on_header_present: { metadata_namespace: MARK_NAMESPACE, key: MARK_KEY } },
      ],
    },
  };
}

/** An access-log filter (local-reply mappers, the meter's log) matching modelgate's requests only. */
export const OURS: Obj = {
  metadata_filter: {
    matcher: { filter: MARK_NAMESPACE, path: [{ key: MARK_KEY }], value: { present_match: true } },
    match_if_key_not_found: false,
  },
};

/**
 * The meter's part of the bundle (docs/metering.md): what Envoy does so that every allowed request
 * is settled, at a few microseconds of Envoy's CPU per request.
 *
 * - `modelgate.meter` (Lua, upstream routes only): keeps the last METER_TAIL_BYTES of each response
 *   body (the usage every provider reports sits at its end) and publishes them as dynamic metadata:
 *   for an event stream `tail` after the first chunk and as the body grows, so a stream cut short
 *   still leaves what it had, and `final` at its end. It never holds a byte: chunks pass as they come.
 * - `envoy.filters.http.decompressor` (upstream routes only): gzip answers are decompressed before the
 *   meter reads them; the routes ask providers for gzip or nothing (accept-encoding: gzip), so an
 *   answer the meter cannot read is one a provider sent unasked (estimated, never free).
 * - the gRPC access log `modelgate_meter`: one entry per request the Check marked `metered`, when
 *   its stream ends for whatever reason, batched on one stream per Envoy worker to modelgate's gRPC
 *   port (AccessLogService). It carries the Check's metadata, the meter's, the status, the body
 *   sizes and the response's content type and encoding.
 */
import { METER_CALL_TYPES } from '../contract/meter-counters';
import { HEADER } from '../contract/headers';
import { CLUSTER, EXT_AUTHZ_FILTER } from './render-routes';
import { OURS } from './request-mark';

type Obj = Record<string, unknown>;

/** The Lua filter's name, and the metadata namespace it writes (meter/access-log.ts reads it). */
export const METER_FILTER = 'modelgate.meter';
export const DECOMPRESSOR_FILTER = 'envoy.filters.http.decompressor';
/** Bytes of a response's end the meter keeps; a usage object is a few hundred. */
export const METER_TAIL_BYTES = 16384;
/** What upstream routes ask providers for: encodings the meter reads (through the decompressor). */
export const UPSTREAM_ACCEPT_ENCODING = 'gzip';
/** Bytes of a chunk's end carried to the next, for a pattern split between them (the longest is 52). */
export const METER_CALL_CARRY = 96;

/**
 * The Lua source. Lua objects of the stream (its metadata) may not be kept across a chunk's yield,
 * so they are fetched again at each publish. Publishing copies the tail (one metadata write): at the
 * end, and for an event stream also on the way (after the first chunk, whenever the bytes seen double
 * up to 64 KiB, then every 64 KiB), so a cut stream leaves the text it carried. Another answer cut
 * short leaves no tail: a Gemini JSON-array stream's output is estimated from its byte count (one
 * token per byte, more than any text), a non-streaming answer's is its maximum. One write instead of two for a JSON
 * answer, which the access log would carry twice;
 * for the same reason a stream's last tail published on the way is replaced by `false` at its end
 * (the access log carries the end's copy alone: up to 32 KiB less per long stream).
 *
 * It also counts, in the whole body, the calls of hosted tools the answer reports where no tail
 * would hold them (a Responses stream's response.completed echoes instructions and tools, far past
 * the tail): per type of Responses output item (contract/meter-counters.ts) the items (`"type":"web_search_call"`)
 * and the events that start a call in a stream (`"type":"response.web_search_call.in_progress"`),
 * and Gemini's `"groundingMetadata"`, published at the end as `calls` (`1=2,2=1`: counter=count, those
 * above 0; `0=0` when none is; meter/tool-calls.ts reads it). Each chunk is searched alone; a pattern
 * split between two chunks is found in the last METER_CALL_CARRY bytes of the one joined to the first
 * METER_CALL_CARRY of the next (counted there only if it starts in the first and ends in the second).
 * JSON strings escape their quotes, so a model's text cannot spell one.
 */
export const METER_LUA = `-- modelgate meter (rendered by modelgate; docs/metering.md)
local KEEP = ${METER_TAIL_BYTES}
local STEP_MAX = 65536
local CARRY = ${METER_CALL_CARRY}
local PATTERNS, GROUPS = {}, {}
for _, t in ipairs({ ${METER_CALL_TYPES.map((t) => `"${t}"`).join(', ')} }) do
  PATTERNS[#PATTERNS + 1] = '"type"%s*:%s*"' .. t .. '"'
  PATTERNS[#PATTERNS + 1] = '"type"%s*:%s*"response%.' .. t .. '%.in_progress"'
  GROUPS[#GROUPS + 1] = { needle = t, patterns = { #PATTERNS - 1, #PATTERNS } }
end
PATTERNS[#PATTERNS + 1] = '"groundingMetadata"%s*:'
GROUPS[#GROUPS + 1] = { needle = "groundingMetadata", patterns = { #PATTERNS } }
-- Counts the matches of each pattern in s that end past \`from\` and start at or before \`upto\` (nil: anywhere),
-- each group's patterns only where a plain search finds its name.
local function count(s, from, upto, counts)
  for _, g in ipairs(GROUPS) do
    if string.find(s, g.needle, 1, true) then
      for _, i in ipairs(g.patterns) do
        local at = 1
        while true do
          local a, b = string.find(s, PATTERNS[i], at)
          if a == nil or (upto ~= nil and a > upto) then break end
          if b > from then counts[i] = (counts[i] or 0) + 1 end
          at = b + 1
        end
      end
    end
  end
end
function envoy_on_response(h)
  local ct = h:headers():get("content-type")
  local sse = ct ~= nil and string.find(string.lower(ct), "text/event-stream", 1, true) ~= nil
  local parts, kept, total, mark = {}, 0, 0, 1
  local counts, carry = {}, ""
  for chunk in h:bodyChunks() do
    local len = chunk:length()
    if len > 0 then
      local bytes = chunk:getBytes(0, len)
      if #carry > 0 then count(carry .. string.sub(bytes, 1, CARRY), #carry, #carry, counts) end
      count(bytes, 0, nil, counts)
      carry = len >= CARRY and string.sub(bytes, -CARRY) or string.sub(carry .. bytes, -CARRY)
      parts[#parts + 1] = bytes
      kept = kept + len
      total = total + len
      if kept > 2 * KEEP then
        parts = { string.sub(table.concat(parts), -KEEP) }
        kept = KEEP
      end
      if sse and total >= mark then
        h:streamInfo():dynamicMetadata():set("${METER_FILTER}", "tail", table.concat(parts))
        mark = total + math.min(math.max(total, 4096), STEP_MAX)
      end
    end
  end
  if kept > KEEP then parts = { string.sub(table.concat(parts), -KEEP) } end
  local md = h:streamInfo():dynamicMetadata()
  if mark > 1 then md:set("${METER_FILTER}", "tail", false) end
  local calls = {}
  for i = 1, #PATTERNS do
    if (counts[i] or 0) > 0 then calls[#calls + 1] = i .. "=" .. counts[i] end
  end
  -- Always published ("0=0": none counted), so a report without it is one of a filter that does not count.
  md:set("${METER_FILTER}", "calls", #calls > 0 and table.concat(calls, ",") or "0=0")
  md:set("${METER_FILTER}", "final", table.concat(parts))
end
`;

/** The Lua source's name in the filter's source_codes, which a route names to turn the filter on. */
const METER_SOURCE = 'meter';

/** Off by default: an upstream route turns it on (meterPerRoute). */
export function meterLuaFilter(): Obj {
  return {
    name: METER_FILTER,
    disabled: true,
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua',
      source_codes: { [METER_SOURCE]: { inline_string: METER_LUA } },
    },
  };
}

/** What turns the meter's Lua filter on, on an upstream route. */
export function meterPerRoute(): Obj {
  return {
    [METER_FILTER]: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute',
      name: METER_SOURCE,
    },
  };
}

/**
 * gzip responses decompressed for the meter (requests are left alone). The decompressor has no
 * per-route config that could turn it on, so it is wrapped in a matcher that skips it unless the
 * request carries modelgate's minted `x-modelgate-request` (request-mark.ts: set on modelgate's
 * routes only, before this filter). On a route of a team's, a client that sends that header itself
 * gets its own answer decompressed, nothing else.
 */
export function decompressorFilter(): Obj {
  const skip = {
    name: 'skip',
    typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.common.matcher.action.v3.SkipFilter' },
  };
  const present = {
    input: {
      name: 'request',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput',
        header_name: HEADER.request,
      },
    },
    value_match: { safe_regex: { google_re2: {}, regex: '.+' } },
  };
  return {
    name: DECOMPRESSOR_FILTER,
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.common.matching.v3.ExtensionWithMatcher',
      xds_matcher: {
        matcher_list: {
          matchers: [{ predicate: { not_matcher: { single_predicate: present } }, on_match: { action: skip } }],
        },
      },
      extension_config: {
        name: DECOMPRESSOR_FILTER,
        typed_config: {
          '@type': 'type.googleapis.com/envoy.extensions.filters.http.decompressor.v3.Decompressor',
          decompressor_library: {
            name: 'gzip',
            typed_config: { '@type': 'type.googleapis.com/envoy.extensions.compression.gzip.decompressor.v3.Gzip' },
          },
          request_direction_config: {
            common_config: { enabled: { default_value: false, runtime_key: 'modelgate.decompress_requests' } },
          },
          response_direction_config: {},
        },
      },
    },
  };
}

/**
 * The access log that reports each metered request's end to the meter. Each entry is sent as it is
 * written (buffer_size_bytes 0: one message on the worker's long-lived stream, no timer), so a
 * request leaves the meter's in-flight table as its response ends: a client sending one request
 * after another is never refused concurrency_limited, nor held to a balance, for a request it has
 * already received. The interval only bounds what a write in progress may hold back.
 */
/** The Check's mark on a request the meter settles (check/write-response.ts). */
const METERED = { filter: EXT_AUTHZ_FILTER, path: [{ key: 'metered' }], value: { bool_match: true } };

/**
 * @param auth what every gRPC call to modelgate carries (render-grpc-auth.ts grpcServiceMetadata: the port's secret, if
 * set)
 */
export function meterAccessLog(auth: Obj = {}): Obj {
  return {
    name: 'envoy.access_loggers.http_grpc',
    filter: {
      or_filter: {
        filters: [
          { metadata_filter: { matcher: METERED, match_if_key_not_found: false } },
          // On a route of modelgate's (request-mark.ts), no Check metadata (every answer carries
          // `metered`) and no response, or the 503 of a Check that failed or timed out: a request
          // whose Check may have allowed it without the answer reaching it (the meter releases it).
          // Not the direct responses of unknown paths, nothing of another route's.
          {
            and_filter: {
              filters: [
                OURS,
                { metadata_filter: { matcher: METERED, match_if_key_not_found: true } },
                {
                  or_filter: {
                    filters: [0, 503].map((code) => ({
                      status_code_filter: {
                        comparison: {
                          op: 'EQ',
                          value: { default_value: code, runtime_key: `modelgate.meter_unanswered_${code}` },
                        },
                      },
                    })),
                  },
                },
              ],
            },
          },
        ],
      },
    },
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.HttpGrpcAccessLogConfig',
      common_config: {
        log_name: 'modelgate_meter',
        transport_api_version: 'V3',
        grpc_service: { envoy_grpc: { cluster_name: CLUSTER.meter }, ...auth },
        buffer_flush_interval: '0.05s',
        buffer_size_bytes: 0,
        grpc_stream_retry_policy: { num_retries: 5, retry_back_off: { base_interval: '0.1s', max_interval: '1s' } },
      },
      additional_response_headers_to_log: ['content-type', 'content-encoding'],
    },
  };
}

/** The filters the meter adds to the chain (after ext_authz, before the router), in order. */
export function meterHttpFilters(): Obj[] {
  return [meterLuaFilter(), decompressorFilter()];
}

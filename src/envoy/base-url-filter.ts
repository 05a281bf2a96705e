/**
 * Hints with the real address when `gateway.publicBaseUrl` is unset: a Lua filter, first in the
 * chain, that writes the address the client used (`:scheme://:authority`, as Envoy sees them) into
 * every answer whose `x-modelgate-hint` holds the placeholder `{base_url}`: Envoy's own 404/405
 * answers (render-routes.ts), its local replies and modelgate's denials alike, header, body and
 * `www-authenticate`. With publicBaseUrl set the hints are rendered with it and this filter is not
 * in the bundle (no per-request work).
 *
 * `:authority` is the client's own text: it is used only when it is a plain host name, IPv4 or
 * bracketed IPv6 address with an optional port (at most 255 characters), and `:scheme` only when
 * it is http or https. Anything else (userinfo `a@b`, spaces, quotes, percent signs; Envoy already
 * refuses most of these) leaves the placeholder as it is: a hint never carries injected text.
 * The request side only stores the address in the stream's dynamic metadata; the response side
 * returns at once unless the answer carries a hint with the placeholder (denials are small,
 * complete bodies; an upstream's answer never carries x-modelgate-hint).
 */
import { HEADER } from '../contract/headers';

type Obj = Record<string, unknown>;

/** The filter's name in http_filters (a contract with render.ts and envoy/README.md). */
export const BASE_URL_FILTER = 'modelgate.base_url_in_hints';

/** The placeholder every hint template writes for this gateway's address. */
export const BASE_URL_PLACEHOLDER = '{base_url}';

/** Longest `:authority` used (a DNS name is at most 253 characters, plus a port). */
export const MAX_AUTHORITY = 255;

/** Off by default: each route of modelgate's turns it on (baseUrlPerRoute), no route of a team's runs it. */
export function baseUrlFilter(): Obj {
  return {
    name: BASE_URL_FILTER,
    disabled: true,
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua',
      source_codes: { base_url: { inline_string: BASE_URL_LUA } },
    },
  };
}

/** What turns it on, on a route. */
export function baseUrlPerRoute(): Obj {
  return {
    [BASE_URL_FILTER]: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute',
      name: 'base_url',
    },
  };
}

const BASE_URL_LUA = `local PLACEHOLDER = "${BASE_URL_PLACEHOLDER}"
local NS = "modelgate.base_url"

local function safe_authority(a)
  if a == nil or #a == 0 or #a > ${MAX_AUTHORITY} then return false end
  return a:match("^[A-Za-z0-9%.%-]+$") ~= nil or a:match("^[A-Za-z0-9%.%-]+:[0-9]+$") ~= nil
    or a:match("^%[[0-9A-Fa-f:%.]+%]$") ~= nil or a:match("^%[[0-9A-Fa-f:%.]+%]:[0-9]+$") ~= nil
end

local function replace_all(s, base)
  local out, i = {}, 1
  while true do
    local a, b = s:find(PLACEHOLDER, i, true)
    if a == nil then break end
    out[#out + 1] = s:sub(i, a - 1)
    out[#out + 1] = base
    i = b + 1
  end
  out[#out + 1] = s:sub(i)
  return table.concat(out)
end

function envoy_on_request(handle)
  local h = handle:headers()
  local scheme, authority = h:get(":scheme"), h:get(":authority")
  if (scheme == "http" or scheme == "https") and safe_authority(authority) then
    handle:streamInfo():dynamicMetadata():set(NS, "base", scheme .. "://" .. authority)
  end
end

function envoy_on_response(handle)
  local h = handle:headers()
  local hint = h:get("${HEADER.hint}")
  if hint == nil or hint:find(PLACEHOLDER, 1, true) == nil then return end
  local md = handle:streamInfo():dynamicMetadata():get(NS)
  if md == nil or md.base == nil then return end
  local base = md.base
  h:replace("${HEADER.hint}", replace_all(hint, base))
  local challenge = h:get("www-authenticate")
  if challenge ~= nil then h:replace("www-authenticate", replace_all(challenge, base)) end
  local body = handle:body()
  if body == nil or body:length() == 0 then return end
  body:setBytes(replace_all(body:getBytes(0, body:length()), base))
end
`;

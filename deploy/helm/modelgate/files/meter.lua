-- modelgate meter (rendered by modelgate; docs/metering.md)
local KEEP = 16384
local STEP_MAX = 65536
local CARRY = 96
local PATTERNS, GROUPS = {}, {}
for _, t in ipairs({ "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call" }) do
  PATTERNS[#PATTERNS + 1] = '"type"%s*:%s*"' .. t .. '"'
  PATTERNS[#PATTERNS + 1] = '"type"%s*:%s*"response%.' .. t .. '%.in_progress"'
  GROUPS[#GROUPS + 1] = { needle = t, patterns = { #PATTERNS - 1, #PATTERNS } }
end
PATTERNS[#PATTERNS + 1] = '"groundingMetadata"%s*:'
GROUPS[#GROUPS + 1] = { needle = "groundingMetadata", patterns = { #PATTERNS } }
-- Counts the matches of each pattern in s that end past `from` and start at or before `upto` (nil: anywhere),
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
        h:streamInfo():dynamicMetadata():set("modelgate.meter", "tail", table.concat(parts))
        mark = total + math.min(math.max(total, 4096), STEP_MAX)
      end
    end
  end
  if kept > KEEP then parts = { string.sub(table.concat(parts), -KEEP) } end
  local md = h:streamInfo():dynamicMetadata()
  if mark > 1 then md:set("modelgate.meter", "tail", false) end
  local calls = {}
  for i = 1, #PATTERNS do
    if (counts[i] or 0) > 0 then calls[#calls + 1] = i .. "=" .. counts[i] end
  end
  -- Always published ("0=0": none counted), so a report without it is one of a filter that does not count.
  md:set("modelgate.meter", "calls", #calls > 0 and table.concat(calls, ",") or "0=0")
  md:set("modelgate.meter", "final", table.concat(parts))
end

-- modelgate meter (rendered by modelgate; docs/metering.md)
local KEEP = 16384
local STEP_MAX = 65536
local CARRY = 96
local PATTERNS, NEEDLES = {}, {}
for _, t in ipairs({ "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call" }) do
  PATTERNS[#PATTERNS + 1] = '"type"%s*:%s*"' .. t .. '"'
  PATTERNS[#PATTERNS + 1] = '"type"%s*:%s*"response%.' .. t .. '%.in_progress"'
  NEEDLES[#NEEDLES + 1] = t
  NEEDLES[#NEEDLES + 1] = t
end
PATTERNS[#PATTERNS + 1] = '"groundingMetadata"%s*:'
NEEDLES[#NEEDLES + 1] = "groundingMetadata"
-- Counts the matches of each pattern that end past `from` (the carried bytes), a plain search first.
local function count(s, from, counts)
  for i, pat in ipairs(PATTERNS) do
    if string.find(s, NEEDLES[i], 1, true) then
      local at = 1
      while true do
        local a, b = string.find(s, pat, at)
        if a == nil then break end
        if b > from then counts[i] = (counts[i] or 0) + 1 end
        at = b + 1
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
      local s = carry .. bytes
      count(s, #carry, counts)
      carry = string.sub(s, -CARRY)
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

-- modelgate meter (rendered by modelgate; docs/metering.md)
local KEEP = 16384
local STEP_MAX = 65536
function envoy_on_response(h)
  local ct = h:headers():get("content-type")
  local sse = ct ~= nil and string.find(string.lower(ct), "text/event-stream", 1, true) ~= nil
  local parts, kept, total, mark = {}, 0, 0, 1
  for chunk in h:bodyChunks() do
    local len = chunk:length()
    if len > 0 then
      parts[#parts + 1] = chunk:getBytes(0, len)
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
  md:set("modelgate.meter", "final", table.concat(parts))
end

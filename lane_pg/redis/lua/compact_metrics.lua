-- lane.compact_metrics for one queue: in each state's per-minute hash `<tag>:metrics:<state>`
-- (field = the minute's start in epoch ms, lane_count_finished), the minutes more than
-- `max_data_points - 1` before the newest fold into the field `folded`, so the all-time
-- count stays and the hash stays bounded. A minute is one field already (HINCRBY is
-- atomic: no per-connection rows to merge, as PostgreSQL's are). Returns how many minute
-- fields went.
-- @include json
-- @include job

local args = lane_args()
local folded = 0
for _, state in ipairs({'completed', 'failed'}) do
  local key = lane_key('metrics:' .. state)
  local raw = redis.call('HGETALL', key)
  local newest = nil
  for i = 1, #raw, 2 do
    if raw[i] ~= 'folded' then
      local minute = tonumber(raw[i])
      if newest == nil or minute > newest then
        newest = minute
      end
    end
  end
  if newest ~= nil then
    local kept_from = newest - (args.max_data_points - 1) * 60000
    local moved, gone = 0, {}
    for i = 1, #raw, 2 do
      if raw[i] ~= 'folded' and tonumber(raw[i]) < kept_from then
        moved = moved + tonumber(raw[i + 1])
        gone[#gone + 1] = raw[i]
      end
    end
    for i = 1, #gone, 1000 do  -- unpack has a stack limit: delete in slices
      redis.call('HDEL', key, unpack(gone, i, math.min(i + 999, #gone)))
    end
    if moved > 0 then
      redis.call('HINCRBY', key, 'folded', moved)
    end
    folded = folded + #gone
  end
end
return lane_result(folded)

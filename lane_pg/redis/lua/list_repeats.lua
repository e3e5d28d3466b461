-- lane.list_repeats, lane.count_repeats and lane.get_repeat (REP-11), one script: the
-- queue's live series (or only `args.key`), each row with its owner's available_at; rows
-- whose owner is gone, finished or not its own are deleted on the way. The client sorts
-- and pages (REP-12).
-- @include json
-- @include owners

local args = lane_args()
local keys
if lane_given(args.key) ~= nil then
  keys = {args.key}
else
  keys = redis.call('SMEMBERS', lane_key('repeats'))
end
local live = {}
for _, series_key in ipairs(keys) do
  local row = lane_series(series_key)
  if row ~= nil then
    local owner = lane_series_owner(series_key, row)
    if owner == nil then
      lane_series_delete(series_key)
    else
      row.template = nil
      row.key = series_key
      row.available_at = owner.available_at
      live[#live + 1] = row
    end
  end
end
return lane_result(live)

-- lane.resign_leadership on the role's key: `holder` gives the role up at once (its lease
-- ends now: the field expires_at goes), so the next candidate need not wait for it to run
-- out. False when `holder` held nothing (or had resigned already).
-- @include json

local args = lane_args()
local current = redis.call('HMGET', KEYS[1], 'holder', 'expires_at')
if current[1] ~= args.holder or not current[2] then
  return lane_result(false)
end
redis.call('HDEL', KEYS[1], 'expires_at')
return lane_result(true)

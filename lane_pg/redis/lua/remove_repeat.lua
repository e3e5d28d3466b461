-- lane.remove_repeat (REP-10): ends the series `args.key` and removes its owner through
-- the removal path; the removed owner's id, or null. A running owner under a lease that
-- has not expired refuses the call ({error = 'locked'}) before anything is written.
-- @include json
-- @include now
-- @include owners

local args = lane_args()
local now = lane_now(args.now)
local row = lane_series(args.key)
if row == nil then
  return lane_result(nil)
end
local owner = lane_series_owner(args.key, row)
if owner ~= nil and owner.state == 'active' and owner.lease_expires_at ~= nil
   and tonumber(owner.lease_expires_at) >= now then
  return lane_result({error = 'locked', message = 'job ' .. owner.id .. ' owns repeat series '
                      .. cjson.encode(args.key) .. ' and is active under a lease until '
                      .. owner.lease_expires_at .. ': it cannot be removed'})
end
lane_series_delete(args.key)
if owner == nil then
  return lane_result(nil)
end
lane_remove_standalone(owner, now)
return lane_result(owner.id)

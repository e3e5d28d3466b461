-- lane.get_deduplication_job_id (DEDUP-15): the id of the job that owns `args.id` now, or
-- null; a row that no longer blocks is deleted on the way. A live reservation names no job
-- yet (TX-10): null, and it stays.
-- @include json
-- @include now
-- @include owners

local args = lane_args()
local now = lane_now(args.now)
local owner = lane_owner(args.id)
if owner == nil or lane_owner_reserved(owner, now) then
  return lane_result(nil)
end
local holder = lane_owner_job(args.id, owner, now)
if holder == nil then
  lane_owner_delete(args.id, now)
  return lane_result(nil)
end
return lane_result(holder.id)

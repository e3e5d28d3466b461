-- Drops the stale members among `members` of `state`'s index (lane_indexed_job: the job's
-- hash gone, or the job in another state). A Redis-only repair with no SQL twin (a row's
-- state is its only index there): the listings call it for the members whose rows did not
-- match, and it checks each again here, atomically, since the job may have moved back.
-- Returns how many went.
-- @include json
-- @include job

local args = lane_args()
local dropped = 0
for _, member in ipairs(args.members) do
  if lane_indexed_job(args.state, member) == nil then
    dropped = dropped + 1
  end
end
return lane_result(dropped)

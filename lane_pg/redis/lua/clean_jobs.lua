-- lane.clean_jobs (MGMT-18..20): removes up to `limit` (0: all) jobs of `state` older than
-- now - grace_ms, in the state's index order (includes/cleanup.lua), and returns their
-- hashes as they were; then `cleaned {count}` (also for 0), which creates the queue as in
-- SQL. The client has checked the state (not waiting-children), the grace and the limit.
-- @include json
-- @include now
-- @include cleanup

local args = lane_args()
local now = lane_now(args.now)
local limit = nil
if args.limit > 0 then
  limit = args.limit
end
local ids = lane_removable(args.state, now - args.grace_ms, limit, now)
local snapshots = {}
for i, id in ipairs(ids) do
  snapshots[i] = lane_job(id)
end
lane_ensure_queue(now)
local count = lane_remove_ids(ids, now)
lane_emit('cleaned', nil, {count = count}, now)
return lane_result(snapshots)
